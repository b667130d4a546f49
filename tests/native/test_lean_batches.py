"""Lean batches: a plan that runs as one fused stateless stage straight into a sink that does
not publish never reads the runtime's hidden columns (a row's serial and the keyed split's
position), so its batches carry them unwritten (``program.lean_chain``, exec/exec.h). The
fused stage then works out a dead row's serial from the selections it made: from the batch's
first serial when nothing was compacted yet, through each compaction's mask after one or
several. Dead letters, positions, counts and tables equal the reference's at every batch size
and worker count, to every kind of sink; plans with anything else keep full batches."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest

import streamcell as sc
from streamcell.backends.native import program
from streamcell.options import RunOptions
from tests.helpers import check_against_reference, run_plan

pytest.importorskip("streamcell._runtime")

col = sc.col


def _frame(rows: int) -> pl.DataFrame:
    """``e``: an exponent, negative on every 37th row (``a ** e`` fails there: integer to a
    negative power); ``num``: digits, letters on every 53rd row (a cast of it fails there)."""
    return pl.DataFrame(
        {
            "a": [r % 1000 for r in range(rows)],
            "e": [-1 if r % 37 == 5 else r % 3 for r in range(rows)],
            "num": ["n7" if r % 53 == 11 else str(r % 500) for r in range(rows)],
            "x": [(r * 31 % 97) / 4.0 for r in range(rows)],
        }
    )


@pytest.fixture()
def lean(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """What lean_chain decided for each program built during the test."""
    seen: list[bool] = []
    inner = program.lean_chain

    def spy(*a: Any) -> bool:
        seen.append(inner(*a))
        return seen[-1]

    monkeypatch.setattr(program, "lean_chain", spy)
    return seen


def _opts(workers: int, batch_size: int) -> RunOptions:
    return RunOptions(engine="native", workers=workers, batch_size=batch_size, display=False)


def _dead_rows(out: dict[str, Any]) -> list[int]:
    """The source rows of the dead letters (positions read ``<step> row <n>``)."""
    return [int(p.rsplit(" ", 1)[1]) for p in out["dead"]["position"].to_list()]


@pytest.mark.parametrize("batch_size", [7, 500, 16384])
@pytest.mark.parametrize("workers", [1, 2])
def test_dead_rows_before_and_after_compactions(
    batch_size: int, workers: int, lean: list[bool]
) -> None:
    df = _frame(6000)
    power = (df["e"] < 0).to_list()
    plans = {
        # no compaction before the failing step: serial = first serial + row
        "none": sc.source(df).with_columns(p=col("a") ** col("e"), y=col("x") * 2.0),
        # a filter keeping a third, then the last projection: compacted once before it
        "one": sc.source(df).filter(col("a") % 3 == 0).with_columns(p=col("a") ** col("e")),
        # compacted before the first projection (a fifth kept) and again before the last;
        # the middle filter's predicate fails too (a cast), between the two compactions
        "two": (
            sc.source(df)
            .filter(col("a") % 5 == 0)
            .with_columns(b=col("a") + 1)
            .filter((col("num").cast("int") > 3) & (col("a") % 2 == 0))
            .with_columns(p=col("a") ** col("e"), z=col("x") - 1.0)
        ),
    }
    want = {
        "none": [r for r in range(6000) if power[r]],
        "one": [r for r in range(6000) if r % 1000 % 3 == 0 and power[r]],
        "two": sorted(
            [r for r in range(6000) if r % 1000 % 5 == 0 and r % 53 == 11]
            + [
                r
                for r in range(6000)
                if r % 1000 % 10 == 0 and r % 53 != 11 and r % 500 > 3 and power[r]
            ]
        ),
    }
    for name, stream in plans.items():
        out = check_against_reference(stream.plan(), _opts(workers, batch_size))
        assert sorted(_dead_rows(out)) == want[name], name
        assert out["dead"].height > 0
    assert lean == [True, True, True]


def test_every_row_dead_after_a_compaction(lean: list[bool]) -> None:
    """A batch whose rows all fail after a filter: the masks are composed once per batch."""
    df = pl.DataFrame({"a": list(range(20000)), "e": [-1] * 20000})
    stream = sc.source(df).filter(col("a") % 7 == 0).with_columns(p=col("a") ** col("e"))
    out = check_against_reference(stream.plan(), _opts(2, 4096))
    assert _dead_rows(out) == [r for r in range(20000) if r % 7 == 0]
    assert out["tables"] and next(iter(out["tables"].values())).height == 0
    assert lean == [True]


def test_parquet_and_callback_sinks(tmp_path: Path, lean: list[bool]) -> None:
    df = _frame(5000)
    stream = sc.source(df).filter(col("x") > 3.0).with_columns(p=col("a") ** col("e"))
    ref = run_plan(stream.plan(), RunOptions(engine="reference", display=False)).table()
    got: list[pl.DataFrame] = []
    sink = stream.sink_callback(lambda rows: got.append(pl.DataFrame(rows, schema=ref.schema)))
    run = run_plan(sc.Plan.of((sink,), "lean_cb"), _opts(2, 256))
    assert pl.concat(got).equals(ref)
    failing = (df["e"] < 0) & (df["x"] > 3.0)
    assert run.dead_letters().height == int(failing.sum())
    path = tmp_path / "out"
    run_plan(sc.Plan.of((stream.sink_parquet(str(path)),), "lean_pq"), _opts(2, 256))
    assert pl.read_parquet(path).equals(ref)
    assert lean == [True, True]


def test_plans_that_read_hidden_columns_are_not_lean(lean: list[bool]) -> None:
    df = _frame(3000)
    keyed = sc.source(df).filter(col("x") > 1.0).key_by("e").agg(n=sc.count())
    two_stages = sc.source(df).filter(col("x") > 1.0).dedup("a").with_columns(y=col("x") + 1.0)
    for stream in (keyed, two_stages):
        check_against_reference(stream.plan(), _opts(2, 512))
    assert lean == [False, False]
