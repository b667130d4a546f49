"""A throttled source on the native engine. A paced chain's operators size their batches for
the rows the pacer pushes (lowering.paced_rows, at least 1,024), and the fused stage gives a
gathered output its rows would fill less than half of exactly their room (checked in C by
native/tests/test_select.c, also under ASan), so such outputs reach the sink without a copy.
Here: every shape of pipeline stays equal to the reference, at a rate whose batches are
smaller than 1,024 rows and at one whose batches are a few thousand, and lowering gives the
capacities it should."""

from __future__ import annotations

import polars as pl
import pytest

import streamcell as sc
from streamcell import col
from streamcell.backends.native.lowering import PACED_MIN_ROWS, lower, paced_rows
from streamcell.compiler import compile_plan
from streamcell.options import RunOptions
from tests.helpers import check_against_reference

ROWS = 30_000


SHAPES = {
    # about 1 row in 10 kept: outputs fill a tenth of their batch, so they get exact room
    "selective filter": lambda s: s.filter(col("price") > 90.0).with_columns(
        total=col("price") * 1.1, tag=col("event") + "!"
    ),
    # most rows kept: the output takes the scratch batches' columns as they are
    "wide filter": lambda s: s.filter(col("price") > 5.0).with_columns(
        total=col("price") * 1.1 + (col("item_id") % 7), cheap=col("price") < 50.0
    ),
    "every row": lambda s: s.with_columns(total=col("price") * 2.0),
    "keyed agg": lambda s: s.key_by("user_id").agg(n=sc.count(), s=col("price").sum()),
    "tumbling": lambda s: s.key_by("user_id")
    .tumbling("1m", time="ts")
    .agg(n=sc.count(), s=col("price").sum()),
    "filter then keyed": lambda s: s.filter(col("event") == "view")
    .key_by("item_id")
    .agg(n=sc.count(), top=col("price").max()),
}


@pytest.mark.parametrize("rate", [2_000_000, 20_000_000], ids=["rate-2M", "rate-20M"])
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_paced_run_equals_the_reference(shape, rate):
    src = sc.source(sc.clickstream(rows=ROWS, users=500, seed=11), rate=rate)
    plan = SHAPES[shape](src).plan(f"paced_{shape.replace(' ', '_')}")
    got = check_against_reference(plan, RunOptions(engine="native", workers=2, display=False))
    assert next(iter(got["tables"].values())).height > 0


@pytest.mark.parametrize(
    ("rate", "expected"),
    [(2_000_000, PACED_MIN_ROWS), (20_000_000, 4_000), (500_000_000, 16_384), (None, 16_384)],
)
def test_operators_size_their_batches_for_what_a_paced_source_pushes(rate, expected):
    s = sc.source(pl.DataFrame({"x": [1.0, 2.0]}), rate=rate).filter(col("x") > 1.0)
    low = lower(compile_plan(s.plan("sized")), RunOptions(engine="native", batch_size=16_384))
    assert {a["capacity"] for _, a in low.ops} == {expected}


def test_a_paced_source_of_a_dag_keeps_the_batch_size():
    # the DAG driver pushes a paced source's rows in phases of its own size
    a = sc.source(pl.DataFrame({"x": [1.0, 2.0]}), rate=2_000_000, name="a")
    b = sc.source(pl.DataFrame({"x": [3.0]}), name="b")
    plan = a.union(b).filter(col("x") > 1.0).plan("dag")
    assert not plan.is_chain()
    low = lower(compile_plan(plan), RunOptions(engine="native", batch_size=16_384))
    assert {a["capacity"] for _, a in low.ops} == {16_384}
    assert paced_rows(2_000_000, 16_384) == 400 < PACED_MIN_ROWS
