"""Keyed, windowed and session steps on Spark run streamcell's native C operators in
``mapInArrow``; final tables of count / min / max / integer sums / count_distinct run as
Spark's own ``groupBy``. Every run is compared with the reference (tables, counts, late rows,
dead letters), and ``run.spark_operators`` (filled from what the executors report) shows
which path each step took."""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa
import pytest
from polars.testing import assert_frame_equal

import streamcell as sc
from streamcell.options import RunOptions
from tests.helpers import assert_same_outputs, float_bits, outputs, run_plan, same_to_the_bit

pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark

SPARK = RunOptions(engine="spark")
NAN = float("nan")


def _both(plan: sc.Plan) -> sc.Run:
    """Run on Spark and on the reference; require identical outputs; the Spark run."""
    run = run_plan(plan, SPARK, timeout=300)
    assert_same_outputs(outputs(run), outputs(run_plan(plan, RunOptions(engine="reference"))))
    return run


def _rows(n: int, seed: int = 7) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    k = rng.integers(0, 6, n)
    keys = [None if x == 0 else f"k{x}" for x in k]
    v = [None if i % 11 == 3 else int(x) for i, x in enumerate(rng.integers(-50, 50, n))]
    f = [
        NAN if i % 13 == 5 else (None if i % 17 == 2 or x is None else x / 4)
        for i, x in enumerate(v)
    ]
    # event time mostly increasing, with some rows far behind (late) and a few nulls (dead)
    t = [None if i % 29 == 7 else (i * 3 - (40 if i % 9 == 4 else 0)) for i in range(n)]
    s = ["x" if i % 23 == 1 else str(i % 7) for i in range(n)]  # "x" fails a cast: dead
    return pl.DataFrame(
        {"k": keys, "v": v, "f": f, "t": t, "s": s},
        schema={"k": pl.String, "v": pl.Int64, "f": pl.Float64, "t": pl.Int64, "s": pl.String},
    )


DATA = _rows(400)


def _changelog(stream: sc.Stream) -> sc.Plan:
    return sc.combine(stream.sink_table("log", mode="append"))


def test_keyed_agg_changelog_runs_native_with_dead_letters():
    agg = (
        sc.source(DATA)
        .key_by("k")
        .agg(
            n=sc.count(),
            sv=sc.col("v").sum(),
            sf=sc.col("f").sum(),
            mx=sc.col("f").max(),
            c=sc.col("s").cast("int").sum(),  # "x" rows are dead letters of the agg step
            fst=sc.col("v").first(),
        )
    )
    run = _both(_changelog(agg))
    assert run.spark_operators == {"aggregate#2": "native"}
    assert run.dead_letters().height > 0


@pytest.mark.parametrize(
    "make",
    [
        # a distinct count keeps a running on the C operator (see test_spark_running.py)
        lambda s: s.key_by("k").running(n=sc.count(), d=sc.col("f").count_distinct()),
        lambda s: s.key_by("k").top_k(2, by="f"),
        lambda s: s.top_k(3, by="v", descending=False),
    ],
    ids=["running", "top_k-keyed", "top_k-global"],
)
def test_keyed_steps_run_native_and_equal_the_reference(make):
    run = _both(_changelog(make(sc.source(DATA))))
    assert set(run.spark_operators.values()) == {"native"}


@pytest.mark.parametrize(
    "make",
    [
        lambda s: s.key_by("k").tumbling(10, time="t"),
        lambda s: s.key_by("k").tumbling(10, time="t", lateness=20),
        lambda s: s.sliding(12, every=4, time="t"),
        lambda s: s.key_by("k").session(5, time="t"),
        lambda s: s.key_by("s").session(8, time="t", lateness=6),
    ],
    ids=["tumbling", "tumbling-lateness", "sliding-global", "session", "session-lateness"],
)
def test_windows_and_sessions_run_native_with_late_rows_and_dead_letters(make):
    stream = make(sc.source(DATA)).agg(
        n=sc.count(), sf=sc.col("f").sum(), c=sc.col("s").cast("int").max()
    )
    run = _both(_changelog(stream))
    assert set(run.spark_operators.values()) == {"native"}
    assert run.late().height > 0 and run.dead_letters().height > 0


def test_windows_over_datetimes_run_native():
    base = pl.datetime(2024, 1, 1)
    df = DATA.with_columns(ts=base + pl.duration(seconds=pl.col("t"))).drop("t")
    # a mean keeps the window on the C operator (count alone is a Catalyst groupBy: below)
    stream = (
        sc.source(df).key_by("k").tumbling("30s", time="ts").agg(n=sc.count(), m=sc.col("v").mean())
    )
    run = _both(_changelog(stream))
    assert run.spark_operators == {"aggregate#2": "native"}


# ------------------------------------------------------------------ final tables


def _final(keys: tuple[str, ...], df: pl.DataFrame, **aggs: sc.Expr) -> sc.Run:
    return _both(sc.source(df).key_by(*keys).agg(**aggs).plan())


def test_final_table_of_exact_aggregates_is_a_spark_group_by():
    run = _final(
        ("k",),
        DATA,
        n=sc.count(),
        nv=sc.count("v"),
        sv=sc.col("v").sum(),
        mn=sc.col("v").min(),
        mx=sc.col("f").max(),
        mnf=sc.col("f").min(),
        smax=sc.col("s").max(),
        nd=sc.col("f").count_distinct(),
        nds=sc.count_distinct("v"),
    )
    assert run.spark_operators == {"aggregate#2": "spark groupBy"}
    assert run.counts().filter(pl.col("step") == "sink#3")["rows_in"].item() == DATA.height


def test_final_table_with_null_int_and_bool_keys_and_nan_values():
    df = pl.DataFrame(
        {
            "g": [1, None, 2, 1, None, 3, 2, 1, 3, 1],
            "b": [True, False, None, True, True, False, None, True, False, True],
            "v": [1, 2, 3, None, 5, 6, 7, 8, None, 10],
            "f": [0.0, NAN, -0.0, 1.5, NAN, None, 0.0, 1.5, None, -2.0],
        }
    )
    run = _final(
        ("g", "b"),
        df,
        n=sc.count(),
        sv=sc.col("v").sum(),
        sb=sc.col("b").sum(),
        nd=sc.col("f").count_distinct(),
        mx=sc.col("f").max(),
        mn=sc.col("f").min(),
    )
    assert run.spark_operators == {"aggregate#2": "spark groupBy"}
    assert run.table().height == df.select("g", "b").unique().height


def test_a_final_table_of_float_keys_is_a_running_window_with_first_key_values():
    """Not a groupBy (which writes every zero key as 0.0): the per-row window, whose upsert
    table keeps the key's first row's value (-0.0 here), and one NaN key."""
    nan = float("nan")
    df = pl.DataFrame({"g": [-0.0, 1.5, None, 0.0, nan, 1.5, nan], "v": [1, 2, 3, 4, 5, 6, 7]})
    run = _final(("g",), df, n=sc.count(), sv=sc.col("v").sum())
    assert run.spark_operators == {"aggregate#2": "spark window"}
    want = run_plan(sc.source(df).key_by("g").agg(n=sc.count(), sv=sc.col("v").sum()).plan())
    assert float_bits(run.table()) == float_bits(want.table())
    assert float_bits(run.table().head(1).select("g")) == float_bits(pl.DataFrame({"g": [-0.0]}))


def test_final_table_integer_sums_wrap_at_64_bits_as_on_the_reference():
    big = 2**62
    df = pl.DataFrame({"k": ["a", "a", "b", "a", "b"], "v": [big, big, -big, big, -big]})
    run = _final(("k",), df, s=sc.col("v").sum())
    assert run.spark_operators == {"aggregate#2": "spark groupBy"}


def test_final_table_integer_sums_of_extreme_values_wrap_as_on_the_reference():
    """Sums are taken in 21-bit parts: values whose parts are all ones or all zeros, both
    ends of the range, sums that wrap either way, a key with only nulls, and bools."""
    lo, hi = -(2**63), 2**63 - 1
    vals = [hi, hi, lo, -1, lo, lo, 2**42 - 1, -(2**42), 2**21, None, 5, None, 3]
    keys = ["a", "a", "b", "b", "c", "c", "d", "d", "d", "e", "f", "e", "f"]
    df = pl.DataFrame(
        {"k": keys, "v": vals, "b": [i % 3 == 0 for i in range(len(vals))]},
        schema={"k": pl.String, "v": pl.Int64, "b": pl.Boolean},
    )
    run = _final(("k",), df, s=sc.col("v").sum(), nb=sc.col("b").sum())
    assert run.spark_operators == {"aggregate#2": "spark groupBy"}
    got = dict(zip(run.table()["k"], run.table()["s"], strict=True))
    assert [got[k] for k in "abcdef"] == [-2, hi, 0, 2**21 - 1, 0, 8]


def test_aggregates_spark_cannot_give_exactly_stay_on_the_native_operator():
    # the mean of an int column divides a 64-bit wrapped sum exactly rounded (a float mean
    # is a running window: test_spark_running.py)
    run = _final(("k",), DATA, m=sc.col("v").mean())
    assert run.spark_operators == {"aggregate#2": "native"}
    appended = _both(_changelog(sc.source(DATA).key_by("k").agg(d=sc.col("v").count_distinct())))
    assert appended.spark_operators == {"aggregate#2": "native"}


# sums whose value depends on the order of the additions (1e16 + 1 rounds back to 1e16),
# signed zeros, NaN, infinities, null-only keys; spread over both of Spark's partitions
SUMS = pl.DataFrame(
    {
        "k": ["a", "b", "z", "c", "a", "n", "i", "a", "c", "z", "i", "a", "x", "b", "e", "a"] * 40,
        "f": [
            1e16,
            0.1,
            -0.0,
            NAN,
            1.0,
            None,
            float("inf"),
            1.0,
            2.5,
            -0.0,
            float("-inf"),
            -1e16,
            0.3,
            0.2,
            -0.0,
            0.7,
        ]
        * 40,  # fmt: skip
        "v": list(range(640)),
    }
)


@pytest.mark.parametrize("sink", ["table", "parquet"])
def test_float_sums_first_and_last_of_a_final_table_are_a_group_by_in_arrival_order(tmp_path, sink):
    from streamcell.options import RunOptions as Opts

    def plan(where: str) -> sc.Plan:
        agg = (
            sc.source(SUMS)
            .key_by("k")
            .agg(s=sc.col("f").sum(), n=sc.count(), fst=sc.col("f").first(), lst=sc.col("v").last())
        )
        if sink == "table":
            return agg.plan()
        return sc.combine(agg.sink_parquet(str(tmp_path / where), mode="complete"))

    got = run_plan(plan("s"), SPARK, timeout=300)
    want = run_plan(plan("r"), Opts(engine="reference"))
    assert got.spark_operators == {"aggregate#2": "spark groupBy"}
    if sink == "table":
        a, b = got.table(), want.table()
    else:
        a = pl.read_parquet(sorted((tmp_path / "s").glob("*.parquet")))
        b = pl.read_parquet(sorted((tmp_path / "r").glob("*.parquet")))
    assert float_bits(a) == float_bits(b)
    import struct

    assert float_bits(a.filter(pl.col("k") == "e").select("s")) == [
        (struct.pack("<d", -0.0).hex(),)
    ]
    # 1e16 + 1.0 rounds back to 1e16: any order other than arrival order gives another sum
    assert a.filter(pl.col("k") == "a")["s"].item() == 0.7
    assert_frame_equal(got.counts(), want.counts())


def test_transfer_runs_native_in_one_partition():
    df = pl.DataFrame(
        {
            "src": ["a", "b", "a", None, "c", "a", "b"],
            "dst": ["b", "a", "b", "a", "a", "c", "c"],
            "amt": [5, 3, 1, 2, -1, 20, 4],
        }
    )
    plan = sc.source(df).key_by_all("src", "dst").transfer("amt", initial=10).plan()
    run = _both(plan)
    assert set(run.spark_operators.values()) == {"native"}
    assert run.dead_letters().height == 3


def test_the_switch_runs_the_reference_operators_saying_why(monkeypatch):
    from streamcell.backends.spark import native_ops

    monkeypatch.setattr(native_ops, "NATIVE_OPERATORS", False)
    run = _both(_changelog(sc.source(DATA).key_by("k").agg(d=sc.col("v").count_distinct())))
    (how,) = run.spark_operators.values()
    assert how.startswith("reference: native operators switched off")


# ------------------------------------------------------------------ order keys


def test_order_keys_of_multi_row_outputs_are_extended_by_their_index():
    from streamcell.backends.spark.native_ops import extend_order, run_index

    keys = pa.array([[9], [1, 2], [3], [3]]).slice(1)
    idx, carry = run_index(np.array([4, 7, 7]), (4, 2))
    assert idx.tolist() == [2, 0, 1] and carry == (7, 2)
    assert extend_order(keys, idx).to_pylist() == [[1, 2, 2], [3, 0], [3, 1]]


# ------------------------------------------------------------------ tumbling windows in Catalyst


def _same_bits(plan: sc.Plan) -> sc.Run:
    return same_to_the_bit(plan, SPARK)


@pytest.mark.parametrize("block", [1 << 16, 7], ids=["one-block", "blocks-of-7"])
@pytest.mark.parametrize("lateness", [0, 20, 50])
def test_tumbling_windows_of_columns_are_a_group_by_with_the_references_late_rows(
    monkeypatch, block, lateness
):
    """Late rows (rows far behind, some across watermark-scan blocks), dead letters (null
    times), float sums to the last bit, the final table and the changelog in close order."""
    from streamcell.backends.spark import groupby

    monkeypatch.setattr(groupby, "BLOCK", block)
    stream = (
        sc.source(DATA)
        .key_by("k")
        .tumbling(10, time="t", lateness=lateness)
        .agg(n=sc.count(), sf=sc.col("f").sum(), mx=sc.col("v").max(), fst=sc.col("s").first())
    )
    for plan in (stream.plan(), _changelog(stream)):
        run = _same_bits(plan)
        assert run.spark_operators == {"aggregate#2": "spark groupBy"}
        assert run.dead_letters().height > 0
        assert (run.late().height > 0) == (lateness < 40)  # some rows are 40 behind


def test_tumbling_windows_over_datetimes_feed_a_global_top_k():
    base = pl.datetime(2024, 1, 1)
    df = DATA.with_columns(ts=base + pl.duration(seconds=pl.col("t"))).drop("t")
    plan = sc.source(df).tumbling("30s", time="ts").agg(n=sc.count()).top_k(3, by="n").plan()
    run = _same_bits(plan)
    assert run.spark_operators == {"aggregate#2": "spark groupBy", "top_k#3": "native"}


def test_a_stateless_chain_from_parquet_files_is_written_in_order_without_a_shuffle(tmp_path):
    """Files of different sizes (Spark packs its scan partitions largest first): each file
    is one partition, sorted within; the part files in name order hold the reference's rows."""
    src = tmp_path / "in"
    src.mkdir()
    for i, n in enumerate([300, 5000, 40, 2000]):
        pl.DataFrame({"v": list(range(i * 10_000, i * 10_000 + n)), "k": [i] * n}).write_parquet(
            src / f"p{i}.parquet", row_group_size=700
        )

    def plan(out: str) -> sc.Plan:
        s = sc.source(sc.parquet(str(src))).filter(sc.col("v") % 3 != 0)
        return sc.combine(s.with_columns(w=sc.col("v") * 2).sink_parquet(out))

    got = run_plan(plan(str(tmp_path / "s")), SPARK, timeout=300)
    want = run_plan(plan(str(tmp_path / "r")), RunOptions(engine="reference"))
    a = pl.read_parquet(sorted((tmp_path / "s").glob("*.parquet")))
    b = pl.read_parquet(sorted((tmp_path / "r").glob("*.parquet")))
    assert_frame_equal(a, b)
    assert a["v"].is_sorted() and a.height == b.height > 4000
    assert_frame_equal(got.counts(), want.counts())


@pytest.mark.parametrize("block", [1 << 16, 7], ids=["one-block", "blocks-of-7"])
@pytest.mark.parametrize(("key", "gap", "lateness"), [("k", 5, 0), ("s", 8, 6), ("k", 6, 50)])
def test_sessions_of_columns_are_a_group_by_closing_where_the_reference_closes(
    monkeypatch, block, key, gap, lateness
):
    """Sessions split where a key's next row (by time) is a gap or more after the one before;
    emitted in the reference's close order (the changelog), late rows and dead letters too.
    A float sum only without a lateness (with one, a bridging row makes the reference add two
    sessions' sums: the step stays on the C operator, see the test below)."""
    from streamcell.backends.spark import groupby

    monkeypatch.setattr(groupby, "BLOCK", block)
    aggs = {"n": sc.count(), "sv": sc.col("v").sum(), "mx": sc.col("v").max()}
    if lateness == 0:
        aggs["sf"] = sc.col("f").sum()
    stream = (
        sc.source(DATA)
        .key_by(key)
        .session(gap, time="t", lateness=lateness)
        .agg(
            **aggs,
            nd=sc.count_distinct("s"),  # strings and ints: a set per session
            nv=sc.count_distinct("v"),  # (nulls counted as a value)
            nf=sc.count_distinct("f"),  # floats: Spark's distinct aggregate (NaN, nulls)
        )
    )
    for plan in (stream.plan(), _changelog(stream)):
        run = _same_bits(plan)
        assert run.spark_operators == {"aggregate#2": "spark groupBy"}
        assert (run.late().height > 0) == (lateness < 40)


@pytest.mark.parametrize("late", [False, True], ids=["on-time", "a-late-row"])
@pytest.mark.parametrize("fused", [True, False], ids=["one-pass", "two-passes"])
def test_sessions_from_parquet_files_close_in_one_pass_where_no_row_is_late(
    monkeypatch, tmp_path, late, fused
):
    """Sessions over rows read file by file: where no row is late, one pass over the rows finds
    that and the sessions' closes (``scan_and_close``); a late row sends the step back to the
    two passes, its sessions found again without it. Both equal the reference, changelog and
    counters, and each other. (Sessions whose order among themselves is all that matters
    need no closes: the switch below keeps them found.)"""
    from streamcell.backends.spark import groupby

    monkeypatch.setattr(groupby, "FUSED_SESSIONS", fused)
    monkeypatch.setattr(groupby, "RELATIVE_ORDER", False)
    found: list[bool] = []
    real = groupby.scan_and_close

    def spy(*a, **k):
        got = real(*a, **k)
        found.append(got[0] is not None)
        assert got[1] is not None  # the pass ran: a fallback's scan goes on from its rows
        return got

    monkeypatch.setattr(groupby, "scan_and_close", spy)
    rng = np.random.default_rng(11)
    src = tmp_path / "in"
    src.mkdir()
    start = 0
    for i, n in enumerate([700, 1500, 90, 1200]):
        t = start + np.arange(n) * 2 + rng.integers(0, 3, n)
        if late and i == 2:
            t[40] -= 60  # behind the watermark: late
        start = int(t.max()) + 1
        k = [None if x == 0 else f"k{x}" for x in rng.integers(0, 5, n)]
        frame = pl.DataFrame({"k": k, "t": t, "v": rng.integers(-9, 9, n), "f": rng.random(n)})
        frame.write_parquet(src / f"p{i}.parquet", row_group_size=300)
    stream = (
        sc.source(sc.parquet(str(src)))
        .key_by("k")
        .session(7, time="t", lateness=4)
        .agg(n=sc.count(), sv=sc.col("v").sum(), mx=sc.col("f").max())
    )
    for plan in (stream.plan(), _changelog(stream)):
        run = _same_bits(plan)
        assert run.spark_operators == {"aggregate#2": "spark groupBy"}
        assert (run.late().height > 0) == late
    assert found == ([not late] * 2 if fused else [])


def test_a_session_float_sum_with_a_lateness_runs_native_where_a_row_bridges_two_sessions():
    """A row admitted behind the watermark joins two sessions: the reference adds the two
    sessions' sums ((1.0 + 1.0) + 1e16), not the merged session's rows in arrival order
    (((1.0 + 1e16) + 1.0) + 0.0 rounds to 1e16), so the step stays on the C operator."""
    df = pl.DataFrame({"k": ["a"] * 4, "t": [0, 20, 1, 10], "f": [1.0, 1e16, 1.0, 0.0]})
    stream = sc.source(df).key_by("k").session(15, time="t", lateness=20)
    run = _both(stream.agg(s=sc.col("f").sum(), n=sc.count()).plan())
    assert run.spark_operators == {"aggregate#2": "native"}
    assert run.table()["s"].to_list() == [2.0 + 1e16]


def test_sessions_over_datetimes_feed_a_global_top_k():
    base = pl.datetime(2024, 1, 1)
    df = DATA.with_columns(ts=base + pl.duration(seconds=pl.col("t"))).drop("t")
    plan = sc.source(df).session("4s", time="ts").agg(n=sc.count()).top_k(3, by="n").plan()
    run = _same_bits(plan)
    assert run.spark_operators == {"aggregate#2": "spark groupBy", "top_k#3": "native"}
