"""Sketches on Spark: streamcell's native sketches built per partition (``mapInArrow``) and
merged on the driver, and their bytes merged with Spark 4's own DataSketches-backed SQL
functions (``theta_*``, ``hll_*``, ``kll_*`` in ``pyspark.sql.functions``) on the same data.

Formats: Spark's Θ functions write DataSketches' compressed compact format (serial version 4),
which streamcell's ``CompactThetaSketch.from_bytes`` does not read yet (it reads versions 1-3);
Spark reads ours, so the Θ tests merge on Spark's side. HLL (HLL_8) and KLL bytes go both ways.
Spark has no DataSketches frequent-items function, so frequent items are checked against exact
counts only.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from streamcell import sketches as S
from streamcell.errors import NativeError

pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark

N = 60_000  # > 4096: Θ with lg_k=12 is in estimation mode, KLL compacts


@pytest.fixture(scope="module")
def data() -> Iterator[tuple[Any, Any, Any, Any]]:
    from pyspark.sql import functions as F

    from streamcell.backends.spark.session import get_session

    spark = get_session()
    df = (
        spark.range(N, numPartitions=4)
        .select(F.col("id").alias("v"))
        .withColumn("s", F.concat(F.lit("user-"), (F.col("v") % 20_000).cast("string")))
        .withColumn("x", (F.col("v") * 7919 % 10_007).cast("double") / 3.0)
        .withColumn("f", F.when(F.col("v") % 10 == 0, None).otherwise(F.col("v") % 37))
    )
    df = df.cache()
    yield spark, df, df.where("v % 2 = 0"), df.where("v % 2 = 1")
    df.unpersist()


def _row(spark: Any, *cols: Any, **blobs: bytes) -> Any:
    """Evaluate Spark SQL expressions over one row holding the given binary columns."""
    names = list(blobs)
    frame = spark.createDataFrame([tuple(blobs.values())], ", ".join(f"{n} binary" for n in names))
    return frame.select(*cols).first()


def test_theta_partials_merge_with_spark_theta_functions(data):
    from pyspark.sql import functions as F

    from streamcell.backends.spark.sketch import sketch_column

    spark, df, a, b = data
    ours_a = sketch_column(a, "v", "theta", lg_k=12)
    assert isinstance(ours_a, S.CompactThetaSketch) and ours_a.is_estimation_mode
    spark_a = a.agg(F.theta_sketch_agg("v", 12)).first()[0]
    spark_b = b.agg(F.theta_sketch_agg("v", 12)).first()[0]
    whole = df.agg(F.theta_sketch_estimate(F.theta_sketch_agg("v", 12))).first()[0]
    r = _row(
        spark,
        F.theta_sketch_estimate("ours").alias("ours"),
        F.theta_sketch_estimate("sa").alias("sa"),
        F.theta_sketch_estimate(F.theta_union("ours", "sb", 12)).alias("ab"),
        F.theta_sketch_estimate(F.theta_union("ours", "sa", 12)).alias("aa"),
        ours=ours_a.to_bytes(),
        sa=spark_a,
        sb=spark_b,
    )
    # same hashes: Spark's estimate of our sketch is its own sketch's, and A ∪ A is A
    assert r["ours"] == r["sa"] == r["aa"] == round(ours_a.estimate())
    # our half ∪ Spark's other half estimates exactly what Spark's sketch of the whole does
    assert r["ab"] == whole
    assert abs(whole - N) <= 0.05 * N
    with pytest.raises(NativeError, match="not supported"):  # Spark writes serial version 4
        S.CompactThetaSketch.from_bytes(spark_b)


def test_theta_of_strings_hashes_like_spark(data):
    from pyspark.sql import functions as F

    from streamcell.backends.spark.sketch import sketch_column

    spark, _, a, b = data
    ours = sketch_column(a, "s", "theta")
    spark_b = b.agg(F.theta_sketch_agg("s")).first()[0]
    whole = data[1].agg(F.theta_sketch_estimate(F.theta_sketch_agg("s"))).first()[0]
    r = _row(
        spark,
        F.theta_sketch_estimate("ours").alias("ours"),
        F.theta_sketch_estimate(F.theta_union("ours", "sb")).alias("ab"),
        ours=ours.to_bytes(),
        sb=spark_b,
    )
    assert r["ours"] == round(ours.estimate())
    assert r["ab"] == whole  # v and v+1 share s for half the keys: the union is not a sum


def test_hll_bytes_go_both_ways(data):
    from pyspark.sql import functions as F

    from streamcell.backends.spark.sketch import sketch_column

    spark, df, a, b = data
    ours_a = sketch_column(a, "v", "hll", lg_k=12)
    spark_a = a.agg(F.hll_sketch_agg("v", 12)).first()[0]
    spark_b = b.agg(F.hll_sketch_agg("v", 12)).first()[0]
    whole = df.agg(F.hll_sketch_estimate(F.hll_sketch_agg("v", 12))).first()[0]
    r = _row(
        spark,
        F.hll_sketch_estimate("ours").alias("ours"),
        F.hll_sketch_estimate("sa").alias("sa"),
        F.hll_sketch_estimate(F.hll_union("ours", "sb")).alias("ab"),
        ours=ours_a.to_bytes(),
        sa=spark_a,
        sb=spark_b,
    )
    assert r["ours"] == r["sa"]  # the same registers
    assert r["ab"] == whole
    back = S.HllSketch.from_bytes(spark_a)  # and Spark's bytes read by streamcell
    assert back.registers() == ours_a.registers()
    merged = S.hll_union([ours_a, S.HllSketch.from_bytes(spark_b)], lg_k=12)
    assert (
        merged.registers()
        == S.HllSketch.from_bytes(df.agg(F.hll_sketch_agg("v", 12)).first()[0]).registers()
    )


def test_kll_bytes_go_both_ways(data):
    from pyspark.sql import functions as F

    from streamcell.backends.spark.sketch import sketch_column

    spark, df, a, b = data
    ours_a = sketch_column(a, "x", "kll", k=200)
    assert isinstance(ours_a, S.KllDoublesSketch) and ours_a.is_estimation_mode
    assert ours_a.n == a.count()
    spark_b = b.agg(F.kll_sketch_agg_double("x", 200)).first()[0]
    r = _row(
        spark,
        F.kll_sketch_get_n_double("ours").alias("n_a"),
        F.kll_sketch_get_quantile_double("ours", F.lit(0.0)).alias("min_a"),
        F.kll_sketch_get_quantile_double("ours", F.lit(1.0)).alias("max_a"),
        F.kll_sketch_get_n_double(F.kll_sketch_merge_double("ours", "sb")).alias("n"),
        F.kll_sketch_get_quantile_double(F.kll_sketch_merge_double("ours", "sb"), F.lit(0.5)).alias(
            "median"
        ),
        ours=ours_a.to_bytes(),
        sb=spark_b,
    )
    assert r["n_a"] == ours_a.n
    assert (r["min_a"], r["max_a"]) == (ours_a.min_value, ours_a.max_value)
    assert r["n"] == N
    xs = sorted(row[0] for row in df.select("x").collect())
    eps = ours_a.normalized_rank_error()
    true_rank = sum(1 for v in xs if v <= r["median"]) / N
    assert abs(true_rank - 0.5) <= 2 * eps
    ours_b = S.KllDoublesSketch.from_bytes(spark_b)  # Spark's bytes read by streamcell
    assert ours_b.n == N - ours_a.n
    ours_b.merge(ours_a)
    assert ours_b.n == N
    assert abs(sum(1 for v in xs if v <= ours_b.get_quantile(0.5)) / N - 0.5) <= 2 * eps


def test_frequent_items_and_partials_merge_on_the_driver(data):
    from streamcell.backends.spark.sketch import sketch_column

    _, df, _, _ = data
    sk = sketch_column(df, "f", "frequent", lg_max_map_size=8)
    assert isinstance(sk, S.FrequentItemsSketch)
    exact: dict[int, int] = {}
    for (v,) in df.select("f").collect():
        if v is not None:
            exact[v] = exact.get(v, 0) + 1
    assert sk.total_weight == sum(exact.values())  # nulls skipped
    for item, _est, lo, hi in sk.get_frequent_items("no_false_negatives"):
        assert lo <= exact[item] <= hi
    assert {i for i, *_ in sk.get_frequent_items("no_false_negatives")} == set(exact)


def test_bad_arguments_are_named(data):
    from streamcell.backends.spark.sketch import sketch_column

    _, df, _, _ = data
    with pytest.raises(ValueError, match="kind must be one of"):
        sketch_column(df, "v", "bloom")
    with pytest.raises(ValueError, match="no column 'nope'"):
        sketch_column(df, "nope", "theta")
    with pytest.raises(ValueError, match="not numeric"):
        sketch_column(df, "s", "kll")
    with pytest.raises(ValueError, match=r"unknown parameter\(s\) \['k'\]"):
        sketch_column(df, "v", "theta", k=3)
