"""Columns that no step changes reach the table as the source's own Arrow buffers: a
``with_columns`` or ``select`` that keeps every row moves the source frame's borrowed columns
into its output (the output holds a reference to the imported array), a filter that keeps
every row of a batch forwards the batch, and the sink queues such a batch as a chunk of its
own (exec/program.c, ``sink_passes``), so the table shares the frame's memory as Polars' own
``with_columns`` does. Results equal the reference and Polars; the arrays are released once
the table is dropped (at the next run, or when ``buffer_cache_trim`` reclaims them). Only a
Polars frame's buffers are shared (the user cannot change them, and holds them anyway), and
only when the output keeps every column of the source (one shared column would keep the
whole array alive)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa
import pytest
from polars.testing import assert_frame_equal

import streamcell as sc
from streamcell.options import RunOptions
from tests.helpers import check_against_reference

R = pytest.importorskip("streamcell._runtime")

col = sc.col
CHUNK = 65_536
NATIVE = RunOptions(engine="native", workers=2, display=False)


def _frame(chunks: int = 3) -> pl.DataFrame:
    parts = [
        pl.DataFrame(
            {
                "i": range(k * CHUNK, (k + 1) * CHUNK),
                "x": [float(r % 1000) / 8 for r in range(CHUNK)],
                "s": [("ab", "cde", "purchase")[r % 3] for r in range(CHUNK)],
            }
        )
        for k in range(chunks)
    ]
    return pl.concat(parts, rechunk=False)


def _addresses(df: pl.DataFrame, name: str) -> set[int]:
    """The value buffers' addresses of a column's chunks."""
    return {c.buffers()[1].address for c in pa.chunked_array(df.get_column(name)).chunks}


@pytest.mark.parametrize(
    "make",
    [
        lambda s: s.with_columns(y=col("x") * 2 + col("i")),
        lambda s: s.select("s", "i", "x", y=col("x") - 1),
        lambda s: s.filter(col("i") >= 0),
    ],
    ids=["with_columns", "select", "filter-keeps-all"],
)
def test_untouched_columns_are_the_sources_buffers(make: object) -> None:
    df = _frame()
    out = make(sc.source(df)).start("shared", options=NATIVE).wait().table()  # type: ignore[operator]
    want = make(sc.source(df)).start("ref", options=RunOptions(engine="reference")).wait().table()  # type: ignore[operator]
    assert_frame_equal(out, want)
    for name in ("i", "x", "s"):
        assert _addresses(out, name) == _addresses(df, name), name


def test_a_filter_that_drops_rows_gathers_them() -> None:
    df = _frame(1)
    out = sc.source(df).filter(col("i") % 2 == 0).start("g", options=NATIVE).wait().table()
    assert_frame_equal(out, df.filter(pl.col("i") % 2 == 0))
    assert not _addresses(out, "x") & _addresses(df, "x")


def test_an_arrow_table_over_numpy_memory_is_copied() -> None:
    """Only a Polars frame's buffers are shared: a pyarrow table over a numpy array the user
    may still change is copied, so changing the array after the run leaves the table as it
    was."""
    values = np.arange(4 * CHUNK, dtype=np.int64)
    src = pa.table({"i": pa.array(values)})
    out = sc.source(src).with_columns(y=col("i") * 2).start("np", options=NATIVE).wait().table()
    assert not _addresses(out, "i") & {values.ctypes.data + 8 * CHUNK * k for k in range(4)}
    values[:] = -1
    assert out.get_column("i").to_list() == list(range(4 * CHUNK))


def test_a_select_of_some_columns_copies_them() -> None:
    """A chunk sharing one column would keep the whole source array alive (every column of
    it): a step that drops a source column copies the ones it keeps."""
    df = _frame(2)
    out = sc.source(df).select("i", y=col("x") * 2).start("sel", options=NATIVE).wait().table()
    assert_frame_equal(out, df.select("i", y=pl.col("x") * 2))
    assert not _addresses(out, "i") & _addresses(df, "i")


@pytest.mark.parametrize("batch_size", [None, 1000, 65_536])
def test_shared_columns_equal_the_reference(batch_size: int | None) -> None:
    df = _frame(2)
    plan = sc.source(df).with_columns(y=col("x") * 2, z=col("s").str.len_chars()).plan("eq")
    check_against_reference(plan, NATIVE.with_(batch_size=batch_size))
