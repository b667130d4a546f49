"""Shipping streamcell to executors that do not have it, as on a real cluster: a standalone
cluster whose worker has no streamcell on its path, and the package sent with
``spark.archives`` (extracted into each executor's working directory; compiled modules import
from there, unlike from a zip in ``spark.submit.pyFiles``). Runs in ``make
test-spark-cluster`` only (it starts a cluster of its own)."""

from __future__ import annotations

import os
import tarfile
from pathlib import Path

import pyarrow as pa
import pytest

import streamcell as sc
from streamcell.options import RunOptions
from tests.helpers import check_against_reference

pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark


def _pack(dest: Path) -> Path:
    """streamcell's package folder (compiled modules included) as a .tar.gz."""
    pkg = os.path.dirname(os.path.abspath(sc.__file__))
    archive = dest / "streamcell-pkg.tar.gz"
    with tarfile.open(archive, "w:gz") as t:
        t.add(pkg, arcname="streamcell", filter=lambda i: None if "__pycache__" in i.name else i)
    return archive


def test_streamcell_shipped_with_spark_archives_runs_where_it_is_not_installed(tmp_path) -> None:
    from streamcell.backends.spark import session
    from tests.spark.cluster import StandaloneCluster

    archive = _pack(tmp_path)

    def where(batches):  # type: ignore[no-untyped-def]  # pickled by value: no tests/ there
        import streamcell
        import streamcell._theta  # a compiled module

        for b in batches:
            files = [streamcell.__file__, streamcell._theta.__file__] * b.num_rows
            yield pa.table({"file": files}).to_batches()[0]

    cluster = StandaloneCluster(workers=1, with_streamcell=False).start()
    before = session.settings()
    try:
        conf = {
            **cluster.session_conf(),
            "spark.archives": f"{archive}#scpkg",
            "spark.executorEnv.PYTHONPATH": "scpkg",
        }
        sc.configure_spark(cluster.master_url, conf=conf)
        spark = session.get_session()
        files = {r.file for r in spark.range(0, 4, 1, 2).mapInArrow(where, "file string").collect()}
        assert files and all("/scpkg/streamcell/" in f for f in files), files
        assert not any(f.startswith(os.path.dirname(sc.__file__)) for f in files)
        # a windowed pipeline: the engine's own code runs from the shipped package
        t0 = 1_700_000_000_000_000
        rows = [{"k": i % 3, "v": i, "ts": t0 + i * 7_000_000} for i in range(300)]
        import polars as pl

        df = pl.DataFrame(rows).with_columns(pl.col("ts").cast(pl.Datetime("us")))
        plan = sc.source(df).key_by("k").tumbling("1m", time="ts").agg(n=sc.count()).plan()
        check_against_reference(plan, RunOptions(engine="spark", display=False))
    finally:
        sc.configure_spark(before[0], conf=before[1])
        cluster.stop()
    assert cluster.pids() == []
