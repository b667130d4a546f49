"""Event-time windows: tumbling, sliding, session; watermark, lateness, late side output.

Rules under test (reference.py): a row is late when its time is below the watermark
(max time seen - lateness); a window closes when the watermark reaches its end; windows
closing together are emitted by (end, start, creation order); windows cover
``[start, end)``; sessions ``[first, last + gap)``; end of stream flushes the open windows.
Expected results are hand-computed or computed by Polars in batch on the same input.
"""

from __future__ import annotations

import datetime as dt

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import streamcell as sc
from streamcell.errors import PlanError
from tests.helpers import check_against_reference, table


def frame(**cols) -> pl.DataFrame:
    return pl.DataFrame({n: pl.Series(n, v, dtype=t) for n, (v, t) in cols.items()})


def run(plan: sc.Plan, engine) -> dict:
    return check_against_reference(plan, engine.options)


def windows(got: pl.DataFrame) -> list[tuple]:
    return got.rows()


# ------------------------------------------------------------------------- tumbling

IN_ORDER = frame(
    k=(["a", "b", "a", "a", "c", "b", "a", "b", "c", "a", "b", "c"], pl.String),
    t=([0, 0, 3, 9, 9, 10, 10, 10, 19, 20, 29, 41], pl.Int64),  # ties and exact boundaries
    v=([1, 2, 3, None, 5, 6, 7, 8, 9, 10, 11, 12], pl.Int64),
    s=(["x", "y", "x", "z", "x", None, "y", "y", "x", "z", "z", "x"], pl.String),
)


def _polars_aggs() -> list[pl.Expr]:
    v, s = pl.col("v"), pl.col("s")
    return [
        pl.len().cast(pl.Int64).alias("n"),
        v.sum().alias("sv"),
        v.mean().alias("avg"),
        v.min().alias("lo"),
        v.max().alias("hi"),
        v.first().alias("fst"),
        s.last().alias("lst"),
        s.n_unique().cast(pl.Int64).alias("nd"),
        v.count().cast(pl.Int64).alias("nv"),
    ]


AGGS = dict(
    n=sc.count(),
    sv=sc.col("v").sum(),
    avg=sc.col("v").mean(),
    lo=sc.col("v").min(),
    hi=sc.col("v").max(),
    fst=sc.col("v").first(),
    lst=sc.col("s").last(),
    nd=sc.col("s").count_distinct(),
    nv=sc.count("v"),
)


def expected_tumbling(df: pl.DataFrame, size: int, keys: list[str]) -> pl.DataFrame:
    """Batch tumbling windows by floor division, in emission order (end, start, first seen)."""
    w = df.with_columns(window_start=pl.col("t") // size * size)
    g = w.group_by([*keys, "window_start"], maintain_order=True).agg(_polars_aggs())
    g = g.with_columns(window_end=pl.col("window_start") + size).sort(
        "window_end", maintain_order=True
    )
    return g.select(
        *keys, "window_start", "window_end", *[e.meta.output_name() for e in _polars_aggs()]
    )


def test_tumbling_keyed_matches_polars_floor_division(engine):
    got = table(
        sc.source(IN_ORDER).key_by("k").tumbling(10, time="t").agg(**AGGS).plan(), engine.options
    )
    assert_frame_equal(got, expected_tumbling(IN_ORDER, 10, ["k"]))


def test_tumbling_global_matches_polars(engine):
    got = table(sc.source(IN_ORDER).tumbling(10, time="t").agg(**AGGS).plan(), engine.options)
    want = expected_tumbling(IN_ORDER, 10, [])
    assert_frame_equal(got, want)
    assert got.select("window_start", "n").rows() == [(0, 5), (10, 4), (20, 2), (40, 1)]


def test_tumbling_rows_exactly_at_the_boundary_open_the_next_window(engine):
    df = frame(t=([0, 9, 10, 19, 20], pl.Int64))
    got = table(
        sc.source(df).tumbling(10, time="t").agg(n=sc.count(), lo=sc.col("t").min()).plan(),
        engine.options,
    )
    assert windows(got) == [(0, 10, 2, 0), (10, 20, 2, 10), (20, 30, 1, 20)]


def test_tumbling_ties_on_timestamps(engine):
    df = frame(
        k=(["a", "b", "a", "b", "a"], pl.String),
        t=([5, 5, 5, 5, 5], pl.Int64),
        v=([1, 2, 3, 4, 5], pl.Int64),
    )
    got = table(
        sc.source(df)
        .key_by("k")
        .tumbling(10, time="t")
        .agg(s=sc.col("v").sum(), n=sc.count())
        .plan(),
        engine.options,
    )
    assert windows(got) == [("a", 0, 10, 9, 3), ("b", 0, 10, 6, 2)]


def test_tumbling_on_empty_input(engine):
    df = frame(k=([], pl.String), t=([], pl.Int64))
    got = table(
        sc.source(df).key_by("k").tumbling(10, time="t").agg(n=sc.count()).plan(), engine.options
    )
    assert got.height == 0
    assert got.schema == {
        "k": pl.String,
        "window_start": pl.Int64,
        "window_end": pl.Int64,
        "n": pl.Int64,
    }


def test_tumbling_negative_times(engine):
    df = frame(t=([-15, -10, -1, 0], pl.Int64))
    got = table(sc.source(df).tumbling(10, time="t").agg(n=sc.count()).plan(), engine.options)
    assert windows(got) == [(-20, -10, 1), (-10, 0, 2), (0, 10, 1)]


def test_tumbling_datetime_matches_polars_truncate(engine):
    t0 = dt.datetime(2024, 3, 10, 8, 0, 0)
    offsets = [0, 4, 9.999999, 10, 15, 31, 31, 59, 60, 61]
    df = pl.DataFrame(
        {
            "user": [1, 2, 1, 1, 2, 2, 1, 2, 1, 1],
            "ts": [t0 + dt.timedelta(seconds=s) for s in offsets],
            "price": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0],
        }
    )
    got = table(
        sc.source(df)
        .key_by("user")
        .tumbling("10s", time="ts")
        .agg(n=sc.count(), total=sc.col("price").sum())
        .plan(),
        engine.options,
    )
    w = df.with_columns(window_start=pl.col("ts").dt.truncate("10s"))
    want = (
        w.group_by("user", "window_start", maintain_order=True)
        .agg(n=pl.len().cast(pl.Int64), total=pl.col("price").sum())
        .with_columns(window_end=pl.col("window_start") + pl.duration(seconds=10))
        .sort("window_end", maintain_order=True)
        .select("user", "window_start", "window_end", "n", "total")
    )
    assert_frame_equal(got, want)


def test_tumbling_on_a_date_column_gives_datetime_bounds(engine):
    df = frame(d=([dt.date(2024, 1, 1), dt.date(2024, 1, 2), dt.date(2024, 1, 8)], pl.Date))
    got = table(sc.source(df).tumbling("1w", time="d").agg(n=sc.count()).plan(), engine.options)
    assert got.schema["window_start"] == pl.Datetime("us")
    # weeks are aligned to the epoch (a Thursday), as in integer floor division
    assert windows(got) == [
        (dt.datetime(2023, 12, 28), dt.datetime(2024, 1, 4), 2),
        (dt.datetime(2024, 1, 4), dt.datetime(2024, 1, 11), 1),
    ]


# ---------------------------------------------------------------- late and lateness

LATE = frame(
    t=([1, 12, 5, 15, 25, 11], pl.Int64), id=(["r0", "r1", "r2", "r3", "r4", "r5"], pl.String)
)


def test_rows_behind_the_watermark_go_to_the_late_side_output(engine):
    out = run(
        sc.source(LATE).tumbling(10, time="t").agg(n=sc.count(), ids=sc.col("id").last()).plan(),
        engine,
    )
    got = next(iter(out["tables"].values()))
    # 1 -> [0,10); 12 closes [0,10); 5 is late (< 12); 15 -> [10,20); 25 closes [10,20); 11 late
    assert windows(got) == [(0, 10, 1, "r0"), (10, 20, 2, "r3"), (20, 30, 1, "r4")]
    late = out["late"]
    assert late.select("t", "id", "_step", "_position").rows() == [
        (5, "r2", "aggregate#2", "source#1 row 2"),
        (11, "r5", "aggregate#2", "source#1 row 5"),
    ]
    c = {r["step"]: r for r in out["counts"].to_dicts()}["aggregate#2"]
    assert (c["rows_in"], c["late"], c["rows_out"]) == (6, 2, 3)


def test_late_side_output_keeps_the_input_columns_and_types(engine):
    out = run(sc.source(LATE).tumbling(10, time="t").agg(n=sc.count()).plan(), engine)
    late = out["late"]
    assert late.schema == {
        "t": pl.Int64,
        "id": pl.String,
        "_step": pl.String,
        "_position": pl.String,
    }


def test_allowed_lateness_admits_out_of_order_rows(engine):
    plan = (
        sc.source(LATE)
        .tumbling(10, time="t", lateness=8)
        .agg(n=sc.count(), lo=sc.col("t").min())
        .plan()
    )
    out = run(plan, engine)
    # watermark = max - 8: 5 arrives with watermark 4 (admitted); 11 arrives with 17 (late)
    assert windows(next(iter(out["tables"].values()))) == [
        (0, 10, 2, 1),
        (10, 20, 2, 12),
        (20, 30, 1, 25),
    ]
    assert out["late"]["t"].to_list() == [11]


def test_enough_lateness_admits_every_row(engine):
    plan = sc.source(LATE).tumbling(10, time="t", lateness=14).agg(n=sc.count()).plan()
    out = run(plan, engine)
    assert windows(next(iter(out["tables"].values()))) == [(0, 10, 2), (10, 20, 3), (20, 30, 1)]
    assert out["late"].height == 0


def test_keyed_windows_share_one_watermark(engine):
    # key b's rows advance the watermark that closes key a's window
    df = frame(k=(["a", "b", "a", "b"], pl.String), t=([1, 3, 12, 25], pl.Int64))
    out = run(sc.source(df).key_by("k").tumbling(10, time="t").agg(n=sc.count()).plan(), engine)
    assert windows(next(iter(out["tables"].values()))) == [
        ("a", 0, 10, 1),
        ("b", 0, 10, 1),
        ("a", 10, 20, 1),
        ("b", 20, 30, 1),
    ]
    df2 = frame(k=(["a", "b", "a"], pl.String), t=([1, 30, 2], pl.Int64))
    out = run(sc.source(df2).key_by("k").tumbling(10, time="t").agg(n=sc.count()).plan(), engine)
    assert out["late"]["k"].to_list() == ["a"]  # late for key a, though a itself never went past 2


@pytest.mark.parametrize("lateness", [0, 5])
def test_a_window_is_emitted_when_the_watermark_reaches_its_end(engine, lateness):
    # a union with a marker stream shows *when* each window row is emitted: arrival is
    # round-robin A0 B0 A1 B1 A2 B2 (A: the windowed source, B: the markers)
    a = frame(t=([1, 10, 20], pl.Int64))
    markers = frame(
        window_start=([-1, -2, -3], pl.Int64),
        window_end=([-1, -2, -3], pl.Int64),
        n=([-1, -2, -3], pl.Int64),
    )
    plan = (
        sc.source(a)
        .tumbling(10, time="t", lateness=lateness)
        .agg(n=sc.count())
        .union(sc.source(markers))
        .plan()
    )
    got = table(plan, engine.options)["window_start"].to_list()
    # without lateness: t=10 closes [0,10) (watermark 10 == end), t=20 closes [10,20);
    # with lateness 5 the watermark is 5 then 15: [0,10) closes at t=20, [10,20) at the end
    want = {0: [-1, 0, -2, 10, -3, 20], 5: [-1, -2, 0, -3, 10, 20]}[lateness]
    assert got == want


def test_null_event_time_is_a_dead_letter(engine):
    df = frame(t=([1, None, 2], pl.Int64))
    out = run(sc.source(df).tumbling(10, time="t").agg(n=sc.count()).plan(), engine)
    assert windows(next(iter(out["tables"].values()))) == [(0, 10, 2)]
    assert out["dead"].select("step", "position").rows() == [("aggregate#2", "source#1 row 1")]
    assert "null event time" in out["dead"]["reason"][0]


def test_end_of_stream_flush_order_is_end_then_start_then_creation(engine):
    df = frame(k=(["b", "a", "c", "a"], pl.String), t=([15, 5, 15, 15], pl.Int64))
    plan = sc.source(df).key_by("k").tumbling(10, time="t", lateness=100).agg(n=sc.count()).plan()
    # nothing closes before the end; then: a[0,10), then the [10,20) windows as created: b, c, a
    assert windows(table(plan, engine.options)) == [
        ("a", 0, 10, 1),
        ("b", 10, 20, 1),
        ("c", 10, 20, 1),
        ("a", 10, 20, 1),
    ]


def test_windowed_agg_upsert_sink_keys_by_window(engine):
    df = frame(k=(["a", "a", "b"], pl.String), t=([1, 11, 2], pl.Int64))
    plan = sc.combine(
        sc.source(df)
        .key_by("k")
        .tumbling(10, time="t", lateness=20)
        .agg(n=sc.count())
        .sink_table("w", mode="upsert")
    )
    assert windows(table(plan, engine.options)) == [
        ("a", 0, 10, 1),
        ("b", 0, 10, 1),
        ("a", 10, 20, 1),
    ]


# -------------------------------------------------------------------------- sliding


def brute_force_sliding(ts: list[int], size: int, every: int) -> list[tuple[int, int, int]]:
    """(start, end, count) of every non-empty window, by trying every aligned start."""
    lo, hi = min(ts) - size, max(ts) + every
    out = []
    for start in range(lo - lo % every, hi + 1, every):
        n = sum(1 for t in ts if start <= t < start + size)
        if n:
            out.append((start, start + size, n))
    return out


@pytest.mark.parametrize(("size", "every"), [(10, 5), (10, 4), (10, 10), (6, 1)])
def test_sliding_matches_brute_force(engine, size, every):
    ts = [0, 4, 5, 9, 10, 14, 14, 27, 33]
    df = frame(t=(ts, pl.Int64))
    got = table(
        sc.source(df).sliding(size, every=every, time="t").agg(n=sc.count()).plan(), engine.options
    )
    assert windows(got) == brute_force_sliding(ts, size, every)


def test_sliding_hand_computed(engine):
    df = frame(t=([0, 4, 5, 9, 10, 14, 27], pl.Int64), v=([1, 2, 3, 4, 5, 6, 7], pl.Int64))
    got = table(
        sc.source(df).sliding(10, every=5, time="t").agg(s=sc.col("v").sum()).plan(), engine.options
    )
    # each row is in the two windows starting at the multiples of 5 in (t - 10, t];
    # [15,25) holds no row and is not emitted
    assert windows(got) == [
        (-5, 5, 3),
        (0, 10, 10),
        (5, 15, 18),
        (10, 20, 11),
        (20, 30, 7),
        (25, 35, 7),
    ]


def test_sliding_datetime_keyed(engine):
    t0 = dt.datetime(2024, 1, 1)
    m = dt.timedelta(minutes=1)
    df = pl.DataFrame({"k": ["x", "y", "x"], "ts": [t0 + 2 * m, t0 + 3 * m, t0 + 7 * m]})
    got = table(
        sc.source(df).key_by("k").sliding("10m", every="5m", time="ts").agg(n=sc.count()).plan(),
        engine.options,
    )
    assert windows(got) == [
        ("x", t0 - 5 * m, t0 + 5 * m, 1),
        ("y", t0 - 5 * m, t0 + 5 * m, 1),
        ("x", t0, t0 + 10 * m, 2),
        ("y", t0, t0 + 10 * m, 1),
        ("x", t0 + 5 * m, t0 + 15 * m, 1),
    ]


# -------------------------------------------------------------------------- session


def test_sessions_basic(engine):
    df = frame(t=([1, 3, 10, 12, 20], pl.Int64), v=([1, 2, 3, 4, 5], pl.Int64))
    got = table(
        sc.source(df).session(5, time="t").agg(n=sc.count(), s=sc.col("v").sum()).plan(),
        engine.options,
    )
    # [first, last + gap): 10 is not < 3 + 5, so it starts a new session
    assert windows(got) == [(1, 8, 2, 3), (10, 17, 2, 7), (20, 25, 1, 5)]


def test_sessions_rows_exactly_gap_apart_are_separate(engine):
    df = frame(t=([0, 5, 9], pl.Int64))
    got = table(sc.source(df).session(5, time="t").agg(n=sc.count()).plan(), engine.options)
    assert windows(got) == [(0, 5, 1), (5, 14, 2)]


def test_sessions_merge_when_a_row_bridges_two(engine):
    df = frame(t=([0, 10, 5], pl.Int64), v=(["first", "second", "bridge"], pl.String))
    plan = (
        sc.source(df)
        .session(6, time="t", lateness=10)
        .agg(
            n=sc.count(),
            f=sc.col("v").first(),
            l=sc.col("v").last(),
            lo=sc.col("t").min(),
            hi=sc.col("t").max(),
        )
    )
    got = table(plan.plan(), engine.options)
    # sessions {0} and {10} are 10 apart (>= gap 6); 5 is within 6 of both and joins them.
    # first/last follow arrival order, not event time
    assert windows(got) == [(0, 16, 3, "first", "bridge", 0, 10)]


def test_session_extends_backwards_with_an_out_of_order_row(engine):
    df = frame(t=([10, 7, 20], pl.Int64))
    got = table(
        sc.source(df).session(5, time="t", lateness=5).agg(n=sc.count()).plan(), engine.options
    )
    assert windows(got) == [(7, 15, 2), (20, 25, 1)]


def test_sessions_per_key_and_flush_order(engine):
    df = frame(k=(["x", "y", "z", "x"], pl.String), t=([0, 3, 5, 5], pl.Int64))
    plan = sc.source(df).key_by("k").session(10, time="t", lateness=100).agg(n=sc.count()).plan()
    # all flushed at the end by (end, start, creation): y [3,13), x [0,15), z [5,15)
    assert windows(table(plan, engine.options)) == [
        ("y", 3, 13, 1),
        ("x", 0, 15, 2),
        ("z", 5, 15, 1),
    ]


def test_sessions_late_row(engine):
    df = frame(t=([0, 30, 2], pl.Int64))
    out = run(sc.source(df).session(5, time="t").agg(n=sc.count()).plan(), engine)
    assert windows(next(iter(out["tables"].values()))) == [(0, 5, 1), (30, 35, 1)]
    assert out["late"]["t"].to_list() == [2]


def test_session_matches_polars_gap_grouping(engine):
    # in-order input: a session starts where the gap to the key's previous row is >= gap
    ts = [0, 2, 3, 9, 15, 16, 30, 31, 33, 40]
    ks = ["a", "b", "a", "a", "b", "a", "a", "b", "a", "b"]
    df = frame(k=(ks, pl.String), t=(ts, pl.Int64))
    gap = 6
    got = table(
        sc.source(df).key_by("k").session(gap, time="t").agg(n=sc.count()).plan(), engine.options
    )
    s = (
        df.with_columns(new=(pl.col("t").diff().over("k").fill_null(gap) >= gap).cast(pl.Int64))
        .with_columns(sid=pl.col("new").cum_sum().over("k"))
        .group_by("k", "sid", maintain_order=True)
        .agg(
            window_start=pl.col("t").min(),
            window_end=pl.col("t").max() + gap,
            n=pl.len().cast(pl.Int64),
        )
        .sort("window_end", "window_start", maintain_order=True)
        .select("k", "window_start", "window_end", "n")
    )
    assert_frame_equal(got, s)


# --------------------------------------------------------------------- plan errors


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda s: s.tumbling("10s", time="t"), "time span"),
        (lambda s: s.tumbling(0, time="t"), "must be > 0"),
        (lambda s: s.sliding(10, every=20, time="t"), "every <= size"),
        (lambda s: s.tumbling(10, time="name"), "must be datetime, date or int"),
        (lambda s: s.tumbling(10, time="nope"), "unknown column 'nope'"),
        (lambda s: s.session(10, time="ts"), "must be a time span"),
    ],
)
def test_window_plan_errors(build, match):
    df = pl.DataFrame({"t": [1], "name": ["x"], "ts": [dt.datetime(2024, 1, 1)]})
    with pytest.raises(PlanError, match=match):
        sc.start(build(sc.source(df)).agg(n=sc.count()).plan(), name="bad_window")
