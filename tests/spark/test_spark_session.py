"""Which SparkSession the engine uses: one already active in the process (as in a Databricks
notebook) is used as it is and never stopped by streamcell; an explicit master that differs
from the active session's is refused, naming both.

The scenario runs in a process of its own: the active session is process-wide state (one
SparkContext per process) that the rest of the suite's Spark runs must not see."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]

SCENARIO = r"""
import os
import sys

import polars as pl
import pytest

import streamcell as sc
from streamcell.errors import StreamcellError
from streamcell.options import RunOptions
from tests.helpers import check_against_reference

from pyspark.sql import SparkSession

from streamcell.backends.spark import session

os.environ.pop("STREAMCELL_SPARK_MASTER", None)
os.environ["PYSPARK_PYTHON"] = sys.executable  # the session is built here, not by us
before = session.settings()
sc.configure_spark()  # the default: stops streamcell's own session
mine = SparkSession.builder.master("local[1]").appName("mine").getOrCreate()
try:
    assert session.get_session() is mine
    assert mine.conf.get("spark.sql.session.timeZone") == "UTC"
    df = pl.DataFrame({"k": [1, 2, 1, 3, 2, 1], "v": [5, 1, 2, 8, 3, 4]})
    plan = sc.source(df).key_by("k").agg(n=sc.count(), total=sc.col("v").sum()).plan()
    check_against_reference(plan, RunOptions(engine="spark", display=False))
    with pytest.raises(StreamcellError, match=r"local\[1\].*local\[3\]"):
        sc.configure_spark("local[3]")
        session.get_session()
    sc.configure_spark()
    assert mine.sparkContext._jsc is not None  # forgotten, not stopped
    assert session.get_session() is mine
finally:
    sc.configure_spark()
    mine.stop()
    sc.configure_spark(before[0], conf=before[1])
assert not session.session_started()
print("ok")
"""


def test_an_active_session_is_used_as_it_is_and_left_running(tmp_path: Path) -> None:
    script = tmp_path / "active_session.py"
    script.write_text(SCENARIO)
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    out = subprocess.run(
        [sys.executable, str(script)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-4000:]
