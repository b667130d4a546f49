"""``make bench-spark`` compares like with like: on a small input, each workload's hand-written
PySpark query gives the table streamcell gives on Spark, and streamcell on Spark equals the
native engine exactly (``bench_spark.check``; the bench runs the same check before timing)."""

from __future__ import annotations

import pytest

from bench import bench_spark

pytest.importorskip("pyspark")
pytestmark = [pytest.mark.spark, pytest.mark.native]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    return bench_spark.write_inputs(str(tmp_path_factory.mktemp("bench") / "in"), 2500, 3)


@pytest.mark.parametrize("w", bench_spark.WORKLOADS, ids=lambda w: w.name)
def test_hand_written_pyspark_computes_what_the_plan_computes(inputs, w) -> None:
    from streamcell.backends.spark.session import get_session

    bench_spark.check(w, get_session(), inputs[w.data])
