"""The Spark engine on a real multi-process cluster: a standalone master and two workers,
each a separate JVM (``spark_cluster`` in ``tests/conftest.py``), executors and their Python
workers separate processes again. A few pipelines of every kind run there and equal the
reference engine; the session follows the configured master. The whole Spark tier runs on
the cluster with ``make test-spark-cluster``."""

from __future__ import annotations

import datetime as dt
import os
import time
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import streamcell as sc
from streamcell.errors import StreamcellError
from streamcell.options import RunOptions
from tests.helpers import check_against_reference, run_plan

pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark

SPARK = RunOptions(engine="spark", display=False)


@pytest.fixture(scope="module")
def on_cluster(spark_cluster):
    """The Spark engine pointed at the cluster for this module; the previous settings after."""
    from streamcell.backends.spark import session

    before = session.settings()
    sc.configure_spark(spark_cluster.master_url, conf=spark_cluster.session_conf())
    yield spark_cluster
    sc.configure_spark(before[0], conf=before[1])


def _cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def test_the_cluster_is_a_master_and_two_workers_in_separate_jvms(spark_cluster) -> None:
    st = spark_cluster.status()
    workers = spark_cluster.alive_workers(st)
    assert st["status"] == "ALIVE" and len(workers) == 2
    assert [w["cores"] for w in workers] == [1, 1]
    pids = [p.pid for p in spark_cluster.procs]
    assert len(set(pids)) == 3 and os.getpid() not in pids
    kinds = sorted(_cmdline(p).split("org.apache.spark.deploy.")[1].split()[0] for p in pids)
    assert kinds == ["master.Master", "worker.Worker", "worker.Worker"]
    assert all("java" in _cmdline(p).split()[0] for p in pids)


def test_runs_go_to_the_cluster_and_executors_import_this_streamcell(on_cluster) -> None:
    from streamcell.backends.spark.session import get_session

    spark = get_session()
    assert spark.sparkContext.master == on_cluster.master_url
    deadline = time.monotonic() + 120  # executors register shortly after the session starts
    while spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() < 3:  # + the driver
        assert time.monotonic() < deadline, "the executors did not register"
        time.sleep(0.2)
    apps = on_cluster.status()["activeapps"]
    assert [a["name"] for a in apps] == ["streamcell"] and apps[0]["cores"] == 2

    import pyarrow as pa

    def where(batches):  # type: ignore[no-untyped-def]
        import os
        import time

        time.sleep(0.3)  # a task long enough that both executors take some

        import streamcell

        for b in batches:
            yield pa.table(
                {
                    "pid": [os.getpid()] * b.num_rows,
                    "file": [streamcell.__file__] * b.num_rows,
                }
            ).to_batches()[0]

    got = spark.range(0, 64, 1, 8).mapInArrow(where, "pid long, file string").distinct().toPandas()
    assert set(got["file"]) == {sc.__file__}  # this checkout, imported on the executors
    assert os.getpid() not in set(got["pid"])
    from tests.spark.cluster import ancestors

    workers = {p.pid for p in on_cluster.procs[1:]}
    under = [set(ancestors(int(pid))) & workers for pid in set(got["pid"])]
    assert all(len(w) == 1 for w in under)  # each Python worker runs under one worker's executor
    assert set().union(*under) == workers  # and both workers' executors ran tasks
    assert set(got["pid"]) <= set(on_cluster.pids())


def _events(n: int = 400) -> pl.DataFrame:
    t0 = dt.datetime(2024, 1, 1)
    return pl.DataFrame(
        {
            "k": [i % 7 for i in range(n)],
            "v": [(i * 37) % 101 - 20 for i in range(n)],
            "x": [float((i * 13) % 17) / 4 for i in range(n)],
            # mostly increasing with a few rows behind the watermark (late)
            "ts": [t0 + dt.timedelta(minutes=i - (30 if i % 53 == 0 else 0)) for i in range(n)],
            "s": [str(i) if i % 41 else "bad" for i in range(n)],
        }
    )


# a few pipelines of different kinds (the whole shared suite runs on the cluster in
# ``make test-spark-cluster``); kept small so this module fits the default run
PIPELINES = {
    "dead_letters_then_tumbling_with_late_rows": lambda d: (
        sc.source(d)
        .with_columns(i=sc.col("s").cast("int"))  # "bad" does not parse: a dead letter
        .key_by("k")
        .tumbling("15m", time="ts")
        .agg(n=sc.count(), total=sc.col("v").sum(), top=sc.col("i").max())
    ),
    "union_of_two_sources": lambda d: (
        sc.source(d.head(150))
        .select("k", "v")
        .union(sc.source(d.tail(120)).select("k", "v").filter(sc.col("v") < 50))
        .key_by("k")
        .agg(n=sc.count(), total=sc.col("v").sum())
    ),
}


def keyed_agg(d: pl.DataFrame) -> sc.Stream:
    return sc.source(d).key_by("k").agg(n=sc.count(), total=sc.col("v").sum(), hi=sc.col("x").max())


@pytest.mark.parametrize("name", list(PIPELINES))
def test_pipelines_on_the_cluster_equal_the_reference(on_cluster, name: str) -> None:
    check_against_reference(PIPELINES[name](_events()).plan(), SPARK)


def test_keyed_agg_on_the_cluster_equals_polars(on_cluster) -> None:
    d = _events()
    got = run_plan(keyed_agg(d).plan(), SPARK).table()
    want = d.group_by("k").agg(
        n=pl.len().cast(pl.Int64), total=pl.col("v").sum(), hi=pl.col("x").max()
    )
    assert_frame_equal(got.sort("k"), want.sort("k"), check_column_order=False)


def test_configure_is_refused_while_a_spark_run_is_in_progress(on_cluster, tmp_path) -> None:
    opts = SPARK.with_(trigger_interval=0.2, checkpoint_dir=str(tmp_path / "cp"))
    stream = sc.source(sc.clickstream(rows=None, seed=3), rate=200)
    run = stream.filter(sc.col("event") == "view").start("cluster_stream", options=opts)
    try:
        deadline = time.monotonic() + 120
        while run.status != "running" and time.monotonic() < deadline:
            time.sleep(0.1)
        with pytest.raises(StreamcellError, match="cluster_stream"):
            sc.configure_spark("local[2]")
    finally:
        run.stop()
    assert run.status == "stopped"


def test_configure_checks_its_arguments() -> None:
    with pytest.raises(StreamcellError, match="master"):
        sc.configure_spark("  ")
    with pytest.raises(StreamcellError, match="'executor.memory'"):
        sc.configure_spark("local[2]", conf={"executor.memory": "1g"})


def test_the_session_follows_the_master(on_cluster) -> None:
    from streamcell.backends.spark import session

    assert session.get_session().sparkContext.master == on_cluster.master_url
    sc.configure_spark("local[1]")
    assert not session.session_started()  # the cluster's session was stopped
    assert session.get_session().sparkContext.master == "local[1]"
    assert on_cluster.status()["activeapps"] == []  # the application left the cluster
    out = run_plan(keyed_agg(_events(50)).plan(), SPARK).table()
    assert out.height == 7
