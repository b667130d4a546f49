"""Arrow out without copies: the runtime's output batches become the chunks of the table's
Polars frame (exported as they are, not joined), the frame owns them after the run is gone,
and the result equals the reference whatever the batch size (small batches are still
coalesced into chunks; large ones pass as chunks of their own)."""

from __future__ import annotations

import gc

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import streamcell as sc
from streamcell.options import RunOptions

pytest.importorskip("streamcell._runtime")

col = sc.col


def _frame(rows: int) -> pl.DataFrame:
    # nulls in an int column and in a string column, strings inline (<= 12 bytes) and not
    return pl.DataFrame(
        {
            "i": [None if r % 11 == 3 else r for r in range(rows)],
            "x": [r * 0.5 for r in range(rows)],
            "s": [None if r % 13 == 5 else ("s" * (r % 20)) for r in range(rows)],
        }
    )


def _stream(df: pl.DataFrame) -> sc.Stream:
    return (
        sc.source(df)
        .filter(col("x") > 10.0)
        .with_columns(y=col("x") * 2.0 + col("i"), short=col("x") < 5000.0)
    )


@pytest.mark.parametrize("batch_size", [1, 7, 1000, 16384])
def test_chunked_output_equals_the_reference(batch_size: int) -> None:
    df = _frame(40_000)
    ref = _stream(df).start("ref", engine="reference").wait()
    run = _stream(df).start("nat", options=RunOptions(workers=2, batch_size=batch_size)).wait()
    assert run.engine == "native"
    assert_frame_equal(run.table(), ref.table())
    assert_frame_equal(run.counts(), ref.counts())


def test_large_batches_are_adopted_as_chunks_and_outlive_the_run() -> None:
    df = _frame(100_000)
    want = _stream(df).start("ref", engine="reference").wait().table()
    run = _stream(df).start("nat", options=RunOptions(workers=2, batch_size=16_384)).wait()
    got = run.table()
    # 16K-row batches each fill more than half their room: they are chunks of their own
    # (a joined copy would be one chunk per ~64K rows, i.e. at most 2 here)
    assert got.n_chunks() >= 5
    del run
    gc.collect()
    assert_frame_equal(got, want)  # the frame's buffers are the runtime's, now owned by Polars


@pytest.mark.parametrize("batch_size", [7, 16384])
def test_both_ways_to_a_frame_equal_the_reference(
    batch_size: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sink of plain columns takes the runtime's batches in C and hands them to Polars as
    one Arrow C stream (OutBatches); other sinks go through pyarrow batches. Forced down the
    pyarrow way, the same pipeline gives the same table."""
    from streamcell.backends.native import sinks

    df = _frame(30_000)
    want = _stream(df).start("ref", engine="reference").wait().table()
    opts = RunOptions(workers=2, batch_size=batch_size)
    taken: list[int] = []
    inner = sinks._SinkOut.write_batches

    def spy(self: sinks._SinkOut, batches: object) -> None:
        taken.append(batches.num_rows)  # type: ignore[attr-defined]
        inner(self, batches)

    monkeypatch.setattr(sinks._SinkOut, "write_batches", spy)
    direct = _stream(df).start("nat", options=opts).wait()
    assert sum(taken) == want.height  # every row came through OutBatches
    assert_frame_equal(direct.table(), want)
    taken.clear()
    monkeypatch.setattr(sinks, "direct_frames", lambda schema: False)
    via_pyarrow = _stream(df).start("nat", options=opts).wait()
    assert taken == []
    assert_frame_equal(via_pyarrow.table(), want)


def test_out_batches_move_into_the_stream_that_reads_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """OutBatches hand their batches on: absorbed by another, or read by Polars through
    __arrow_c_stream__; either way the object is empty after, and reading an empty one gives
    a frame of no rows. An object cannot absorb itself."""
    from streamcell.backends.native import sinks

    seen: list[object] = []
    inner = sinks._SinkOut.write_batches

    def spy(self: sinks._SinkOut, batches: object) -> None:
        if not seen:
            with pytest.raises(ValueError, match="itself"):
                batches.absorb(batches)  # type: ignore[attr-defined]
        seen.append(batches)
        inner(self, batches)

    monkeypatch.setattr(sinks._SinkOut, "write_batches", spy)
    df = _frame(300_000)  # several takes of up to 64K rows
    run = _stream(df).start("nat", options=RunOptions(workers=2, batch_size=1000)).wait()
    assert run.table().height == _stream(df).start("ref", engine="reference").wait().table().height
    assert len(seen) > 1
    assert all(b.num_rows == 0 and b.nbatches == 0 for b in seen)  # type: ignore[attr-defined]
    empty = pl.DataFrame(seen[0])
    assert empty.height == 0 and empty.width == 5  # i, x, s, y, short (positional names)
