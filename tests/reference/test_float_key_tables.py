"""An upsert table keyed by a float column groups its keys as Polars' ``group_by`` does: every
NaN is one key (the reference's table used to tell NaN objects apart by identity, so rows
built separately each made a row of their own), and 0.0 / -0.0 are one key shown as the key's
first row has it (the reference used to show the latest row's sign). Compared with Polars and
with the native engine, to the bit."""

from __future__ import annotations

import polars as pl
import pytest

import streamcell as sc
from streamcell.options import RunOptions
from tests.helpers import float_bits, run_plan

NAN = float("nan")
DATA = pl.DataFrame(
    {
        "f": [NAN, -0.0, NAN, 1.0, 0.0, -0.0, NAN, 2.5, 0.0, None],
        "v": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
    }
)


@pytest.mark.parametrize("engine", ["reference", "native"])
def test_a_float_keyed_table_groups_as_polars(engine):
    plan = (
        sc.source(DATA)
        .key_by("f")
        .agg(n=sc.count(), s=sc.col("v").sum(), lst=sc.col("v").last())
        .plan()
    )
    got = run_plan(plan, RunOptions(engine=engine)).table()
    want = DATA.group_by("f", maintain_order=True).agg(
        n=pl.len().cast(pl.Int64), s=pl.col("v").sum(), lst=pl.col("v").last()
    )
    assert float_bits(got) == float_bits(want)
    assert got.height == 5  # NaN, -0.0 (first as -0.0), 1.0, 2.5, null


def test_a_table_sink_of_rows_keeps_each_keys_first_value_and_latest_row():
    """A table sink keyed on a float column of the rows themselves (no aggregate)."""
    plan = sc.combine(sc.source(DATA).sink_table("t", key="f"))
    runs = {e: run_plan(plan, RunOptions(engine=e)).table("t") for e in ("reference", "native")}
    want = DATA.group_by("f", maintain_order=True).agg(pl.col("v").last())
    for got in runs.values():
        assert float_bits(got) == float_bits(want)
