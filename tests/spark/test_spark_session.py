"""Which SparkSession the engine uses: one already active in the process (as in a Databricks
notebook) is used as it is and never stopped by streamcell; an explicit master that differs
from the active session's is refused, naming both."""

from __future__ import annotations

import sys

import polars as pl
import pytest

import streamcell as sc
from streamcell.errors import StreamcellError
from streamcell.options import RunOptions
from tests.helpers import check_against_reference

pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark


def test_an_active_session_is_used_as_it_is_and_left_running(monkeypatch) -> None:
    from pyspark.sql import SparkSession

    from streamcell.backends.spark import session

    monkeypatch.delenv("STREAMCELL_SPARK_MASTER", raising=False)
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)  # the session is built here, not by us
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
