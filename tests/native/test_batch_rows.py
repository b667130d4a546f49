"""The batch size the native engine picks when the run's options leave it open
(``RunOptions.batch_size=None``, the default): 65,536 rows for a plan of stateless steps
only whose source is not throttled, 16,384 for any other plan, and the user's own size
whenever one is given. Each choice is checked where it takes effect (the operators'
capacities and the runtime batches the driver pushes), and a run with the engine's choice
equals the reference and Polars."""

from __future__ import annotations

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import streamcell as sc
from streamcell import col
from streamcell.backends.native import program as native_program
from streamcell.backends.native.lowering import (
    BATCH_ROWS,
    STATELESS_BATCH_ROWS,
    batch_rows,
    lower,
    paced_batches,
)
from streamcell.compiler import compile_plan
from streamcell.options import RunOptions
from tests.helpers import check_against_reference

ROWS = 150_000
FRAME = pl.DataFrame(
    {
        "k": [i % 97 for i in range(ROWS)],
        "x": [float(i % 1000) / 7 for i in range(ROWS)],
        "s": [f"s{i % 13}" for i in range(ROWS)],
    }
)
NATIVE = RunOptions(engine="native", workers=2, display=False)


def _stateless(rate: float | None = None) -> sc.Stream:
    src = sc.source(FRAME, rate=rate)
    return src.filter(col("x") > 20.0).with_columns(y=col("x") * 2 + col("k"))


def _keyed() -> sc.Stream:
    return sc.source(FRAME).key_by("k").agg(n=sc.count(), s=col("x").sum())


def _chosen(stream: sc.Stream, options: RunOptions = NATIVE) -> tuple[int, set[int]]:
    c = compile_plan(stream.plan("b"))
    low = lower(c, options)
    return batch_rows(c, options), {a["capacity"] for _, a in low.ops}


@pytest.mark.parametrize(
    ("stream", "rows", "capacity"),
    [
        (_stateless(), STATELESS_BATCH_ROWS, STATELESS_BATCH_ROWS),
        (sc.source(FRAME).select("k", "x"), STATELESS_BATCH_ROWS, STATELESS_BATCH_ROWS),
        (_keyed(), BATCH_ROWS, BATCH_ROWS),
        (sc.source(FRAME).key_by("k").running(n=sc.count()), BATCH_ROWS, BATCH_ROWS),
        # a throttled source: at most BATCH_ROWS a push, cut for the workers (test_paced.py)
        (_stateless(rate=1e9), BATCH_ROWS, paced_batches(1e9, BATCH_ROWS, 2)[0]),
    ],
    ids=["filter-with_columns", "select", "agg", "running", "throttled"],
)
def test_the_engine_picks_by_the_plan(stream: sc.Stream, rows: int, capacity: int) -> None:
    got, caps = _chosen(stream)
    assert got == rows
    assert caps == {capacity}


def test_a_batch_size_given_is_kept() -> None:
    for stream in (_stateless(), _keyed()):
        assert _chosen(stream, NATIVE.with_(batch_size=1_000)) == (1_000, {1_000})
    assert RunOptions().batch_size is None
    with pytest.raises(ValueError, match="batch_size"):
        RunOptions(batch_size=0)


def test_the_driver_pushes_batches_of_the_chosen_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the driver hands push_many or push_columns (a Polars frame read column by
    column), recorded through a wrapped program: the source's chunks cut into batches of the
    engine's choice, by plan."""
    seen: list[int] = []
    real = native_program.build

    def build(*a: object, **k: object) -> object:
        prog = real(*a, **k)

        class Recorded:
            def __getattr__(self, name: str) -> object:
                return getattr(prog, name)

            def push_many(
                self, batch: object, off: int, n: int, seq: int, bs: int, *r: object, **kw: object
            ) -> object:
                seen.append(bs)
                return prog.push_many(batch, off, n, seq, bs, *r, **kw)

            def push_columns(
                self, src: object, n: int, seq: int, bs: int, *r: object, **kw: object
            ) -> object:
                seen.append(bs)
                return prog.push_columns(src, n, seq, bs, *r, **kw)

        return Recorded()

    from streamcell.backends.native import drivers

    monkeypatch.setattr(drivers, "build", build)
    _stateless().start("b1", options=NATIVE).wait()
    assert set(seen) == {STATELESS_BATCH_ROWS}
    seen.clear()
    _keyed().start("b2", options=NATIVE).wait()
    assert set(seen) == {BATCH_ROWS}


@pytest.mark.parametrize("make", [_stateless, _keyed], ids=["stateless", "keyed"])
def test_the_engines_choice_equals_the_reference(make: object) -> None:
    check_against_reference(make().plan("ref"), NATIVE)  # type: ignore[operator]


def test_the_engines_choice_equals_polars() -> None:
    got = _stateless().start("pl", options=NATIVE).wait().table()
    want = FRAME.filter(pl.col("x") > 20.0).with_columns(y=pl.col("x") * 2 + pl.col("k"))
    assert_frame_equal(got, want)
