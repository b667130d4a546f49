"""String columns no operator reads pass from the source frame to the table as Polars' string
views, without being copied into offsets and data (``sc_column.views``). Which columns qualify
is decided when the program is built (``carried_strings``); each batch keeps the views only
when its slice's strings are all inline (at most 12 bytes), otherwise it is copied as before.
Whatever the representation, outputs, counts and dead letters equal the reference's at every
batch size and worker count: small batches are joined into chunks (views turned into strings
there), dead letters copy rows out of views batches, and a filter that keeps a quarter of the
rows or fewer gathers the views before the next step."""

from __future__ import annotations

from typing import Any

import polars as pl
import pytest

import streamcell as sc
from streamcell.backends.native import program
from streamcell.options import RunOptions
from tests.helpers import check_against_reference

pytest.importorskip("streamcell._runtime")

col = sc.col


def _frame(rows: int) -> pl.DataFrame:
    """``tag``: short strings (inline) with nulls; ``mixed``: inline except one long string
    every 700 rows, so some slices keep views and others are copied; ``num``: digits, or
    letters on every 97th row (a cast of it fails there: dead letters)."""
    return pl.DataFrame(
        {
            "i": list(range(rows)),
            "x": [(r * 37 % 101) / 2.0 for r in range(rows)],
            "tag": [None if r % 17 == 4 else f"t{r % 23}" for r in range(rows)],
            "mixed": [
                "a much longer string than twelve bytes" if r % 700 == 9 else f"m{r % 7}"
                for r in range(rows)
            ],
            "num": ["x1" if r % 97 == 13 else str(r % 1000) for r in range(rows)],
        }
    )


@pytest.fixture()
def carried(monkeypatch: pytest.MonkeyPatch) -> list[bytes | None]:
    """What carried_strings decided for each program built during the test."""
    seen: list[bytes | None] = []
    inner = program.carried_strings

    def spy(*a: Any) -> bytes | None:
        seen.append(inner(*a))
        return seen[-1]

    monkeypatch.setattr(program, "carried_strings", spy)
    return seen


def _flags(df: pl.DataFrame, names: set[str]) -> bytes:
    return bytes([0, 0] + [int(n in names) for n in df.columns])


@pytest.mark.parametrize("batch_size", [7, 1000, 16384])
@pytest.mark.parametrize("workers", [1, 2])
def test_carried_strings_equal_the_reference(
    batch_size: int, workers: int, carried: list[bytes | None]
) -> None:
    df = _frame(5000)
    stream = (
        sc.source(df)
        .filter(col("x") > 12.0)
        .with_columns(n=col("num").cast("int"), y=col("x") * 2.0)  # dead letters on "x1"
        .filter(col("i") % 5 != 0)
    )
    opts = RunOptions(engine="native", workers=workers, batch_size=batch_size, display=False)
    out = check_against_reference(stream.plan(), opts)
    assert carried[0] == _flags(df, {"tag", "mixed"})  # num is read by the cast
    assert out["dead"].height == sum(1 for r in range(5000) if r % 97 == 13 and r * 37 % 101 > 24)


def test_a_narrow_filter_gathers_views_before_the_next_step(carried: list[bytes | None]) -> None:
    """A filter that keeps under a quarter of the rows: the fused stage compacts the batch
    (views gathered into its scratch batch) before the projection that follows."""
    df = _frame(20000)
    stream = sc.source(df).filter(col("i") % 9 == 0).with_columns(z=col("x") + 1.0)
    for bs in (64, 4096):
        opts = RunOptions(engine="native", workers=2, batch_size=bs, display=False)
        check_against_reference(stream.plan(), opts)
    assert carried[0] == _flags(df, {"tag", "mixed", "num"})


def test_strings_that_are_read_or_renamed_are_not_carried(carried: list[bytes | None]) -> None:
    df = _frame(3000)
    read = sc.source(df).filter(col("tag") != "t3").with_columns(y=col("x") * 2.0)
    renamed = sc.source(df).select(col("i"), kind=col("tag"), m=col("mixed"), x=col("x"))
    computed = sc.source(df).with_columns(tag=col("tag") + "!", y=col("x") + 1.0)
    opts = RunOptions(engine="native", workers=2, batch_size=512, display=False)
    for stream in (read, renamed, computed):
        check_against_reference(stream.plan(), opts)
    assert carried[0] == _flags(df, {"mixed", "num"})
    assert carried[1] == _flags(df, {"num"})  # renamed columns are not carried (not followed)
    assert carried[2] == _flags(df, {"mixed", "num"})


def test_the_table_holds_polars_strings() -> None:
    df = _frame(40000)
    run = sc.start(
        sc.source(df).filter(col("x") > 1.0).plan(),
        name="views_table",
        options=RunOptions(engine="native", workers=2, display=False),
    )
    run.wait()
    t = run.table()
    assert t.schema["tag"] == pl.String and t.schema["mixed"] == pl.String
    want = df.filter(pl.col("x") > 1.0)
    assert t["tag"].to_list() == want["tag"].to_list()
    assert t["mixed"].to_list() == want["mixed"].to_list()
    assert t.filter(pl.col("tag") == "t5").height == want.filter(pl.col("tag") == "t5").height
