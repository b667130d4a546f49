"""``running``, the per-row changelog of an unwindowed ``agg``, and ``dedup`` on Spark: Spark's own
window functions over each key's rows in arrival order, where they give the reference's value
at every row (counts, min / max, first / last, integer and float sums, float means over
columns; a dedup's first row per key); the other aggregates stay on the native C operator. Every run is compared with the reference
(tables to the last bit, counts, late rows, dead letters), and with Polars itself where it has
the same running aggregate."""

from __future__ import annotations

import datetime as dt

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

import streamcell as sc
from streamcell.options import RunOptions
from tests.helpers import assert_same_outputs, float_bits, outputs, run_plan

pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark

SPARK, REF = RunOptions(engine="spark"), RunOptions(engine="reference")
NAN, INF = float("nan"), float("inf")
LO, HI = -(2**63), 2**63 - 1


def _frame(n: int, seed: int = 3) -> pl.DataFrame:
    """Null keys; ints near both ends of the range (sums wrap); floats whose sum depends on
    the order of the additions (1e16 + 1.0 is 1e16), runs of -0.0, NaN, infinities, nulls;
    bools, strings and datetimes."""
    rng = np.random.default_rng(seed)
    keys = [None if x == 0 else f"k{x}" for x in rng.integers(0, 5, n)]
    ints = [HI, LO, HI, 7, None, -3, 2**62, 2**62]
    floats = [1e16, 1.0, -1e16, 0.1, -0.0, NAN, None, 0.7, INF, -INF, -0.0, 2.5, 0.0]
    return pl.DataFrame(
        {
            "k": keys,
            "v": [ints[int(i)] for i in rng.integers(0, len(ints), n)],
            "f": [floats[int(i)] for i in rng.integers(0, len(floats), n)],
            "b": [None if i % 7 == 3 else bool(x) for i, x in enumerate(rng.integers(0, 2, n))],
            "s": [None if i % 11 == 4 else f"s{x}" for i, x in enumerate(rng.integers(0, 9, n))],
            "ts": [dt.datetime(2024, 1, 1) + dt.timedelta(seconds=int(x)) for x in rng.integers(0, 10**6, n)],
        },
        schema={"k": pl.String, "v": pl.Int64, "f": pl.Float64, "b": pl.Boolean, "s": pl.String, "ts": pl.Datetime("us")},
    )  # fmt: skip


DATA = _frame(600)

ALL = dict(
    n=sc.count(),
    nv=sc.count("v"),
    nf=sc.col("f").count(),
    sv=sc.col("v").sum(),
    sb=sc.col("b").sum(),
    sf=sc.col("f").sum(),
    mf=sc.col("f").mean(),
    mn=sc.col("f").min(),
    mx=sc.col("f").max(),
    mns=sc.col("s").min(),
    mxb=sc.col("b").max(),
    mxt=sc.col("ts").max(),
    fst=sc.col("f").first(),
    fsts=sc.col("s").first(),
    lst=sc.col("v").last(),
)


def _log(stream: sc.Stream) -> sc.Plan:
    return sc.combine(stream.sink_table("log", mode="append"))


def _same(plan: sc.Plan) -> sc.Run:
    """Run on Spark and on the reference: every output equal, tables to the last bit."""
    got = run_plan(plan, SPARK, timeout=300)
    want = run_plan(plan, REF)
    a, b = outputs(got), outputs(want)
    for x, y in zip(a["tables"].values(), b["tables"].values(), strict=True):
        assert x.height > 0
        assert float_bits(x) == float_bits(y)
    assert_same_outputs(a, b)
    return got


def test_running_aggregates_are_spark_window_functions_equal_to_the_reference():
    run = _same(_log(sc.source(DATA).key_by("k").running(**ALL)))
    assert run.spark_operators == {"running#2": "spark window"}
    table = run.table("log")
    assert table.height == DATA.height
    assert table.columns == [*DATA.columns, *ALL]


def test_float_keys_group_nan_as_one_key_and_signed_zeros_together():
    stream = sc.source(DATA).key_by("f").running(n=sc.count(), sv=sc.col("v").sum())
    run = _same(_log(stream))
    assert run.spark_operators == {"running#2": "spark window"}
    agg = _same(_log(sc.source(DATA).key_by("f", "k").agg(n=sc.count(), lo=sc.col("v").min())))
    assert agg.spark_operators == {"aggregate#2": "spark window"}


def test_an_aggregate_changelog_is_spark_window_functions_equal_to_the_reference():
    run = _same(_log(sc.source(DATA).key_by("k", "b").agg(**ALL)))
    assert run.spark_operators == {"aggregate#2": "spark window"}
    assert run.table("log").columns == ["k", "b", *ALL]


def test_a_final_table_of_float_means_is_the_last_row_of_the_window():
    run = _same(sc.source(DATA).key_by("k").agg(m=sc.col("f").mean(), n=sc.count()).plan())
    assert run.spark_operators == {"aggregate#2": "spark window"}
    assert run.table().height == DATA["k"].n_unique()


def test_float_sums_follow_arrival_order_across_parquet_files(tmp_path):
    """Each key's rows spread over three files; a sum in any other order than arrival order
    differs (1e16 + 1.0 + -1e16 is 0.0 in order, 1.0 otherwise); a key of only -0.0 keeps it."""
    k = ["a", "b", "z", "a", "b", "a", "z", "b", "a"] * 30
    f = [1e16, 0.1, -0.0, 1.0, 0.2, -1e16, -0.0, 0.3, 0.7] * 30
    df = pl.DataFrame({"k": k, "f": f, "i": list(range(len(k)))})
    for p in range(3):
        df.slice(p * 90, 90).write_parquet(tmp_path / f"part-{p}.parquet")
    stream = (
        sc.source(sc.parquet(str(tmp_path)))
        .key_by("k")
        .running(s=sc.col("f").sum(), m=sc.col("f").mean())
    )
    run = _same(_log(stream))
    assert run.spark_operators == {"running#2": "spark window"}
    t = run.table("log")
    assert t.filter(pl.col("i") == 8)["s"].item() == 0.7  # 1e16 + 1.0 - 1e16 + 0.7
    assert float_bits(t.filter(pl.col("k") == "z").select("s").unique()) == float_bits(
        pl.DataFrame({"s": [-0.0]})
    )


def test_integer_sums_wrap_at_64_bits():
    vals = [HI, 1, HI, LO, LO, -1, 2**62, 2**62, 2**62, None]
    df = pl.DataFrame({"k": ["a"] * 6 + ["b"] * 4, "v": vals})
    run = _same(_log(sc.source(df).key_by("k").running(s=sc.col("v").sum())))
    assert run.spark_operators == {"running#2": "spark window"}
    assert run.table("log")["s"].to_list() == [
        HI,
        LO,
        -1,
        HI,
        -1,
        -2,
        2**62,
        LO,
        -(2**62),
        -(2**62),
    ]


def test_running_counts_sums_and_maxima_equal_polars():
    """Polars' own cumulative aggregates over each key (no nulls: Polars leaves a null where
    the value is null, the running aggregate keeps its value so far)."""
    rng = np.random.default_rng(11)
    df = pl.DataFrame({"k": rng.integers(0, 20, 3000), "v": rng.integers(-1000, 1000, 3000)})
    run = run_plan(
        _log(sc.source(df).key_by("k").running(n=sc.count(), s=sc.col("v").sum(), hi=sc.col("v").max(), lo=sc.col("v").min(), fst=sc.col("v").first())),
        SPARK,
        timeout=300,
    )  # fmt: skip
    assert run.spark_operators == {"running#2": "spark window"}
    want = df.with_columns(
        n=pl.int_range(1, pl.len() + 1).over("k"),
        s=pl.col("v").cum_sum().over("k"),
        hi=pl.col("v").cum_max().over("k"),
        lo=pl.col("v").cum_min().over("k"),
        fst=pl.col("v").first().over("k"),
    )
    assert_frame_equal(run.table("log"), want, check_dtypes=False)


def test_order_keys_of_merged_inputs_are_followed():
    """A union's rows carry merged order keys (arrays of more than one serial): the window
    orders each key's rows by them."""
    a = sc.source(DATA.head(300))
    b = sc.source(DATA.tail(300).with_columns(f=pl.col("f") * 3))
    run = _same(_log(a.union(b).key_by("k").running(sf=sc.col("f").sum(), lst=sc.col("s").last())))
    assert "spark window" in run.spark_operators.values()


def test_a_tpcx_q3_shape_runs_in_spark_with_the_references_counts():
    """Filter, a running last value per key, filter on it, and a final table by that value:
    a window then a groupBy, no Python on the executors."""
    stream = (
        sc.source(DATA)
        .filter(sc.col("b").is_not_null())
        .key_by("k")
        .running(last_s=sc.col("s").last(), seen=sc.count())
        .filter(sc.col("b"))
        .key_by("last_s")
        .agg(n=sc.count(), hi=sc.col("seen").max())
    )
    run = _same(stream.plan())
    assert sorted(run.spark_operators.values()) == ["spark groupBy", "spark window"]


def test_rows_counted_after_a_native_step():
    """After a step on the C operator (whose rows out Spark does not know up front) the
    window step counts its rows itself."""
    stream = (
        sc.source(DATA)
        .key_by("k")
        .top_k(3, by="v")
        .key_by("k")
        .running(n=sc.count(), sf=sc.col("f").sum())
    )
    run = _same(_log(stream))
    assert run.spark_operators == {"top_k#2": "native", "running#3": "spark window"}


@pytest.mark.parametrize(
    "make",
    [
        lambda s: s.key_by("k").running(d=sc.col("v").count_distinct()),
        lambda s: s.key_by("k").running(m=sc.col("v").mean()),  # an int mean: exact division
        lambda s: s.key_by("k").running(x=(sc.col("v") + 1).sum()),  # an argument that computes
        lambda s: s.running(n=sc.count()),  # no key
    ],
    ids=["count_distinct", "int-mean", "computed", "global"],
)
def test_other_running_aggregates_stay_on_the_native_operator(make):
    run = _same(_log(make(sc.source(DATA))))
    assert set(run.spark_operators.values()) == {"native"}


@pytest.mark.parametrize(
    "make",
    [
        lambda s: s.dedup("k", "b"),
        lambda s: s.key_by("v").dedup(),
        lambda s: s.dedup("f"),  # NaN one key, 0.0 and -0.0 one key, each row's own value kept
        lambda s: s.dedup(),  # every column, floats included
        lambda s: s.filter(sc.col("b").is_not_null()).dedup("s").key_by("k").running(n=sc.count()),
    ],
    ids=["keys", "key_by", "float-key", "all-columns", "then-running"],
)
def test_dedup_is_the_first_row_per_key_by_row_number(make):
    run = _same(_log(make(sc.source(DATA))))
    assert set(run.spark_operators.values()) == {"spark window"}


def test_dedup_after_a_union_follows_merged_order_keys():
    a = sc.source(DATA.head(300))
    b = sc.source(DATA.tail(350))  # 50 rows in both inputs: each key's first is in order
    run = _same(_log(a.union(b).dedup("k", "s")))
    assert "spark window" in run.spark_operators.values()
