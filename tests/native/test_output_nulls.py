"""The null counts an output chunk exports: a batch that becomes a chunk of its own has its
columns' nulls counted from their bitmaps on the worker (``sc_batch.nulls_counted``), and
the frame Polars imports carries them as its null counts (Polars reports them without
counting again). Checked against Polars' own query, nulls in every column type, on
unthrottled runs (chunks exported as the run goes) and throttled ones (joined and built when
read), at several worker counts."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

import streamcell as sc
from streamcell import col
from streamcell.options import RunOptions

ROWS = 300_000


def _frame() -> pl.DataFrame:
    rng = np.random.default_rng(11)
    n = ROWS
    df = pl.DataFrame(
        {
            "i": rng.integers(0, 1000, n),
            "x": rng.random(n) * 100,
            "s": rng.choice(["view", "cart", "purchase-and-more-than-twelve"], n),
            "b": rng.random(n) < 0.5,
        }
    )
    # nulls in every column, at different rates, one column with none in some chunks
    return df.with_columns(
        pl.when(pl.int_range(n) % 7 == 3).then(None).otherwise(pl.col("i")).alias("i"),
        pl.when(pl.int_range(n) % 11 == 5).then(None).otherwise(pl.col("x")).alias("x"),
        pl.when(pl.int_range(n) % 13 == 0).then(None).otherwise(pl.col("s")).alias("s"),
        pl.when(pl.int_range(n) > n // 2).then(None).otherwise(pl.col("b")).alias("b"),
    )


def _expected(df: pl.DataFrame) -> pl.DataFrame:
    return df.filter(pl.col("x").is_null() | (pl.col("x") > 5.0)).with_columns(
        y=pl.col("x") * 2.0 + pl.col("i") % 7, big=pl.col("i") > 500
    )


@pytest.mark.parametrize("workers", [1, 2, 4])
@pytest.mark.parametrize("rate", [None, 50e6])
def test_output_chunks_carry_exact_null_counts(workers: int, rate: float | None) -> None:
    df = _frame()
    plan = (
        sc.source(df, rate=rate)
        .filter(col("x").is_null() | (col("x") > 5.0))
        .with_columns(y=col("x") * 2.0 + col("i") % 7, big=col("i") > 500)
        .plan(f"nulls_{workers}_{bool(rate)}")
    )
    run = sc.start(plan, options=RunOptions(engine="native", workers=workers, display=False))
    got = run.wait().table()
    want = _expected(df)
    assert got.n_chunks() > 1  # several exported chunks, not one built frame
    assert_frame_equal(got, want)
    # the counts Polars was handed (it reports them as they are), each against a count of
    # the values themselves
    assert got.null_count().row(0) == want.null_count().row(0)
    for name in got.columns:
        assert got[name].null_count() == int(got[name].is_null().sum()), name
