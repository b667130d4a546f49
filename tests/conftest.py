"""Shared test fixtures.

The ``engine`` fixture runs a test once per backend configuration. Today that is the
reference backend; the native backend (several worker counts, schedulers, batch sizes)
and Spark join by adding entries to ``ENGINE_CONFIGS`` — every operator test then runs on
them and is compared against the reference, the oracle.

``spark_cluster`` (session-scoped) starts a real Spark standalone cluster on 127.0.0.1 (a
master and two workers, separate JVMs: ``tests/spark/cluster.py``) and stops it at the end.
With ``STREAMCELL_TEST_SPARK_CLUSTER=1`` (``make test-spark-cluster``) every Spark test of
the session runs on that cluster instead of ``local[2]``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from streamcell.options import RunOptions


@dataclass(frozen=True)
class EngineConfig:
    id: str
    options: RunOptions


ENGINE_CONFIGS: list[EngineConfig] = [EngineConfig("reference", RunOptions(engine="reference"))]

try:
    import streamcell._runtime  # noqa: F401

    ENGINE_CONFIGS += [
        EngineConfig("native-w1", RunOptions(engine="native", workers=1)),
        EngineConfig("native-w2-b7", RunOptions(engine="native", workers=2, batch_size=7)),
        EngineConfig(
            "native-w4-b1-lp", RunOptions(engine="native", workers=4, batch_size=1, scheduler="LP")
        ),
        EngineConfig(
            "native-w2-b3-qst",
            RunOptions(engine="native", workers=2, batch_size=3, scheduler="QST"),
        ),
        EngineConfig(
            "native-w4-b64-et",
            RunOptions(engine="native", workers=4, batch_size=64, scheduler="ET"),
        ),
    ]
except ImportError:  # a build without the native runtime
    pass


try:
    import pyspark  # noqa: F401

    from streamcell.backends.spark import environment_problem

    if environment_problem() is None:  # PySpark 4 and Java 17: one local[2] session
        ENGINE_CONFIGS.append(EngineConfig("spark", RunOptions(engine="spark")))
except ImportError:  # no PySpark in this environment
    pass


def _selected() -> list[EngineConfig]:
    wanted = os.environ.get("STREAMCELL_TEST_ENGINES")
    if not wanted:
        return ENGINE_CONFIGS
    names = set(wanted.split(","))
    return [c for c in ENGINE_CONFIGS if c.id in names or c.options.engine in names]


def _param(c: EngineConfig) -> object:
    marks = [pytest.mark.spark] if c.options.engine == "spark" else []
    return pytest.param(c, id=c.id, marks=marks)


@pytest.fixture(params=[_param(c) for c in _selected()])
def engine(request: pytest.FixtureRequest) -> EngineConfig:
    return request.param


@pytest.fixture(scope="session")
def spark_cluster():
    """A Spark standalone master and two 1-core workers on 127.0.0.1, stopped (and checked
    gone) at the end of the test session; the Spark engine is pointed back at its default
    master first."""
    from tests.spark.cluster import StandaloneCluster

    cluster = StandaloneCluster(workers=2, cores=1, memory="1g").start()
    try:
        yield cluster
    finally:
        from streamcell.backends.spark import session

        session.configure()  # stops a session that was on the cluster
        cluster.stop()


def _warm_up_spark(timeout: float) -> None:
    """One small keyed run, so the session, the executors and their Python workers are up
    before the first test (whose run would otherwise pay their start-up in its own timeout)."""
    import polars as pl

    import streamcell as sc

    df = pl.DataFrame({"k": [1, 2, 1, 3], "v": [1, 2, 3, 4]})
    run = (
        sc.source(df)
        .key_by("k")
        .agg(n=sc.count())
        .start("_warm_up", options=RunOptions(engine="spark", display=False))
    )
    run.wait(timeout)
    assert run.status == "finished", (run.status, run.error)


@pytest.fixture(scope="session", autouse=True)
def _spark_master(request: pytest.FixtureRequest):
    """``STREAMCELL_TEST_SPARK_CLUSTER=1``: the whole session's Spark runs go to the cluster."""
    if os.environ.get("STREAMCELL_TEST_SPARK_CLUSTER"):
        import streamcell as sc

        cluster = request.getfixturevalue("spark_cluster")
        sc.configure_spark(cluster.master_url, conf=cluster.session_conf())
        _warm_up_spark(timeout=600)
        yield
        st = cluster.status()  # the runs did go to the cluster
        apps = [a["name"] for a in st["activeapps"] + st["completedapps"]]
        assert "streamcell" in apps, f"no streamcell application ran on the cluster: {apps}"
    else:
        yield


@pytest.fixture(autouse=True)
def _stop_runs():
    yield
    from streamcell.run import stop_all

    stop_all()


@pytest.fixture(scope="session")
def s3() -> Iterator[tuple[str, object]]:
    """moto's S3 server on a free port; yields the URI query that points pyarrow at it and a
    pyarrow filesystem to write through."""
    pytest.importorskip("moto")
    import pyarrow.fs as pafs
    from moto.server import ThreadedMotoServer

    keys = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}
    keys["AWS_DEFAULT_REGION"] = "us-east-1"
    saved = {k: os.environ.get(k) for k in keys}
    os.environ.update(keys)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    fs = pafs.S3FileSystem(
        endpoint_override=f"{host}:{port}", scheme="http", allow_bucket_creation=True
    )
    fs.create_dir("streamcell-test")
    try:
        yield f"endpoint_override={host}:{port}&scheme=http", fs
    finally:
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
