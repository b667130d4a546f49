"""A window step whose rows only need their order among themselves skips finding the row that
closes each window: its windows are ordered by (end, start, opening row), which is the order the
reference closes them in (the closing row's serial grows with the window's end). Where its rows
are set among other rows (a union, a join, a dead letter of a later step, a later window), it
still finds the closing rows. Every run equals the reference: tables, changelogs in order,
counters, late rows and dead letters; the tables' floats to the last bit."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import polars as pl
import pytest

import streamcell as sc
from streamcell.options import RunOptions
from tests.helpers import same_to_the_bit

pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark

SPARK = RunOptions(engine="spark")
NAN = float("nan")


def _rows(n: int) -> pl.DataFrame:
    """Key "a" on every other row (its sessions run long, opened before and closed after
    other keys' short ones), other keys sparse; rows 40 behind (late), null times (dead), NaN
    and null floats, and "x" strings that fail a cast."""
    rng = np.random.default_rng(5)
    k = [
        "a" if i % 2 == 0 else (None if r == 0 else f"k{r}")
        for i, r in enumerate(rng.integers(0, 6, n))
    ]
    v = [None if i % 11 == 3 else int(x) for i, x in enumerate(rng.integers(-50, 50, n))]
    f = [
        NAN if i % 13 == 5 else (None if i % 17 == 2 or x is None else x / 4)
        for i, x in enumerate(v)
    ]
    t = [None if i % 29 == 7 else (i * 3 - (40 if i % 9 == 4 else 0)) for i in range(n)]
    s = ["x" if i % 23 == 1 else str(i % 7) for i in range(n)]
    return pl.DataFrame(
        {"k": k, "v": v, "f": f, "t": t, "s": s},
        schema={"k": pl.String, "v": pl.Int64, "f": pl.Float64, "t": pl.Int64, "s": pl.String},
    )


DATA = _rows(400)

WINDOWS: dict[str, Callable[[sc.Stream], sc.Stream]] = {
    "tumbling-late": lambda s: (
        s.key_by("k")
        .tumbling(10, time="t", lateness=20)
        .agg(n=sc.count(), sf=sc.col("f").sum(), fst=sc.col("s").first())
    ),
    "tumbling": lambda s: (
        s.key_by("s").tumbling(25, time="t").agg(n=sc.count(), sv=sc.col("v").sum())
    ),
    "sessions": lambda s: (
        s.key_by("k").session(7, time="t").agg(n=sc.count(), sf=sc.col("f").sum())
    ),
    "sessions-late": lambda s: (
        s.key_by("s").session(8, time="t", lateness=6).agg(n=sc.count(), mx=sc.col("v").max())
    ),
}

AFTER: dict[str, Callable[[sc.Stream], sc.Stream]] = {
    "sink": lambda w: w,
    "filter-top-k": lambda w: w.filter(sc.col("n") > 1).top_k(4, by="n"),
    "projection-dedup": lambda w: w.with_columns(m=sc.col("n") % 3).key_by("m").dedup(),
    "keyed-agg": lambda w: w.key_by("n").agg(
        c=sc.count(), a=sc.col("window_end").first(), z=sc.col("window_end").last()
    ),
    "running": lambda w: w.key_by("window_start").running(c=sc.count()),
}


def _decisions(monkeypatch) -> dict[str, bool]:
    """What ``Lowering.relative_order`` answered for each window step, by step id."""
    from streamcell.backends.spark.backend import Lowering

    seen: dict[str, bool] = {}
    real = Lowering.relative_order

    def spy(self, s):
        seen[s.step_id] = got = real(self, s)
        return got

    monkeypatch.setattr(Lowering, "relative_order", spy)
    return seen


def _same(plan: sc.Plan) -> sc.Run:
    return same_to_the_bit(plan, SPARK)


def _plans(stream: sc.Stream) -> list[sc.Plan]:
    """The final table and the whole changelog in order."""
    return [stream.plan(), sc.combine(stream.sink_table("log", mode="append"))]


@pytest.mark.parametrize("relative", [True, False], ids=["relative", "closes"])
@pytest.mark.parametrize("after", list(AFTER))
@pytest.mark.parametrize("window", list(WINDOWS))
def test_windows_ordered_among_themselves_equal_the_reference(monkeypatch, window, after, relative):
    """With the switch on, every window step here is ordered among itself only (no pass
    finds the closing rows); off, the closing rows are found. Both equal the reference."""
    from streamcell.backends.spark import groupby

    monkeypatch.setattr(groupby, "RELATIVE_ORDER", relative)
    closes: list[int] = []
    real = groupby.record_closes

    def spy(*a, **k):
        closes.append(1)
        return real(*a, **k)

    monkeypatch.setattr(groupby, "record_closes", spy)
    seen = _decisions(monkeypatch)
    for plan in _plans(AFTER[after](WINDOWS[window](sc.source(DATA)))):
        run = _same(plan)
        assert run.spark_operators["aggregate#2"] == "spark groupBy"
        assert seen == {"aggregate#2": relative}
    if window.startswith("sessions"):
        assert bool(closes) != relative


SET_AMONG: dict[str, Callable[[sc.Stream], sc.Stream]] = {
    # a union interleaves the windows with another stream's rows by order key
    "union": lambda w: w.union(WINDOWS["tumbling-late"](sc.source(DATA.head(60)))),
    # a failing cast: its dead letters are filed among the source's (null times) by order key
    "failing-projection": lambda w: w.with_columns(x=sc.col("fst").cast("int")),
    # a later window's watermark runs over the windows' order
    "second-window": lambda w: w.tumbling(30, time="window_end").agg(c=sc.count()),
}


@pytest.mark.parametrize("after", list(SET_AMONG))
def test_windows_set_among_other_rows_find_their_closing_rows(monkeypatch, after):
    seen = _decisions(monkeypatch)
    stream = SET_AMONG[after](WINDOWS["tumbling-late"](sc.source(DATA)))
    for plan in _plans(stream):
        run = _same(plan)
        if after == "failing-projection":
            assert run.dead_letters()["step"].to_list().count("with_columns#3") > 0
    assert seen.get("aggregate#2") is False


def test_a_join_after_sessions_finds_their_closing_rows(monkeypatch):
    seen = _decisions(monkeypatch)
    right = DATA.select("k", "t", w=pl.col("v")).drop_nulls("t").head(150)
    wins = WINDOWS["sessions"](sc.source(DATA)).with_columns(t=sc.col("window_end"))
    plan = wins.join(sc.source(right), on="k", within=6, time="t").plan()
    _same(plan)
    assert seen.get("aggregate#2") is False
