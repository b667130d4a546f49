"""Stateless steps on Spark: a re-run of a cell reuses the Spark columns its steps were
translated to (each column is built by round trips to the JVM), and only the same step over
the same schemas does: literals that Python calls equal but that compute differently
(1 and 1.0; 0.0 and -0.0) are translated each on their own."""

from __future__ import annotations

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import streamcell as sc
from streamcell.options import RunOptions
from tests.helpers import assert_same_outputs, nested, outputs, run_plan

pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark

from streamcell.backends.spark import backend as B  # noqa: E402

FRAME = pl.DataFrame({"k": [1, -2, 3, None], "v": [-1.5, 0.0, 2.5, -3.0]})
SPARK, REF = RunOptions(engine="spark"), RunOptions(engine="reference")


@pytest.fixture(autouse=True)
def _own_memo(monkeypatch):
    """A memo of this test's own: the kernel-wide one may be emptied (full) mid-test."""
    monkeypatch.setattr(B, "_TRANSLATED", {})


def _plan(factor: object) -> sc.Plan:
    s = sc.source(FRAME).filter(sc.col("v") < 100).with_columns(w=sc.col("v") * factor)
    return sc.Plan.of((s.sink_table(),))


def _entries() -> dict[tuple[str, str, str], object]:
    return {k: v[1] for k, v in B._TRANSLATED.items()}


def test_a_rerun_reuses_the_translated_columns_and_equals_the_reference():
    plan = _plan(2)
    first = run_plan(plan, SPARK)
    got = _entries()
    assert len(got) == 2  # the filter and the projection
    again = run_plan(plan, SPARK)
    assert all(_entries()[k] is v for k, v in got.items())  # the same columns, reused
    want = run_plan(plan, REF).table()
    assert_frame_equal(first.table(), want)
    assert_frame_equal(again.table(), want)


@pytest.mark.parametrize("pair", [(1, 1.0), (0.0, -0.0)], ids=str)
def test_equal_python_literals_that_compute_differently_are_not_shared(pair):
    a, b = pair
    assert a == b  # the reason a key made by == would mix them up
    pa, pb = _plan(a), _plan(b)
    ta = run_plan(pa, SPARK).table()
    ka = set(_entries())
    tb = run_plan(pb, SPARK).table()
    new = set(_entries()) - ka  # pb's projection is translated anew (its filter is pa's)
    assert len(ka) == 2 and [k[0].split(" ")[0] for k in new] == ["with_columns"]
    assert_frame_equal(ta, run_plan(pa, REF).table())
    assert_frame_equal(tb, run_plan(pb, REF).table())
    if (a, b) == (0.0, -0.0):  # the signs of the zeros differ, as in the reference
        sa = [str(x) for x in ta["w"].to_list()]
        sb = [str(x) for x in tb["w"].to_list()]
        assert sa != sb


def _shared_names(t: object) -> list[str]:
    return [n for stage in t.stages for n in stage]  # type: ignore[attr-defined]


def test_a_repeated_subexpression_is_computed_once():
    """Four levels of ``e = f(e, e)``: each level's ``e`` becomes one hidden column that the
    next level reads twice (before, the tree held 15 power UDFs and Spark's Python worker
    crashed on it, leaving the job hanging); the hidden columns do not reach the output."""
    s = sc.source(FRAME).with_columns(h=nested(4), g=nested(2) * 2)
    plan = sc.Plan.of((s.sink_table(),))
    got = run_plan(plan, SPARK)
    (t,) = _entries().values()
    # e1, e2 and e3 (e2 also feeds g) each once, a stage each; each can fail (a power)
    assert [len(stage) for stage in t.stages] == [2, 2, 2]  # type: ignore[attr-defined]
    assert got.table().columns == ["k", "v", "h", "g"]
    assert_frame_equal(got.table(), run_plan(plan, REF).table())


def test_shared_subexpressions_keep_the_reference_dead_letters_and_filter_columns():
    """A failing subexpression used twice (an integer to a negative power) sends its rows to
    the dead letters once each, as the reference does; a filter's hidden columns are dropped."""
    p = (sc.col("k") ** (sc.col("k") - 2)) + 1
    s = (
        sc.source(FRAME)
        .filter((p > 0) | (p < -100))
        .with_columns(w=p * p, z=sc.col("k") + 1.0, y=sc.col("k") + 1)
    )
    plan = sc.Plan.of((s.sink_table(),))
    got = outputs(run_plan(plan, SPARK))
    want = outputs(run_plan(plan, REF))
    assert got["dead"].height == want["dead"].height > 0
    assert_same_outputs(got, want)
    shared = {k[0].split(" ")[0]: _shared_names(t) for k, t in _entries().items()}
    assert len(shared["filter"]) == 2 and len(shared["with_columns"]) == 2
    # 1 and 1.0 are two literals, and k + 1.0, k + 1 two expressions: neither is shared
    assert got["tables"] and list(got["tables"].values())[0].columns == ["k", "v", "w", "z", "y"]


def test_a_filter_that_reuses_its_parts_keeps_them_shared(tmp_path):
    """A filter none of whose expressions can fail, over shared subexpressions: Spark pushes a
    filter below the projections it sits on and inlines each column it passes, so the
    predicate became its 2^k-leaf tree again (16 levels of ``e * 0.5 + e``: the JVM ran out of
    heap planning it). It reads a flag above the step's metrics instead, where no filter is
    pushed through."""
    path = tmp_path / "v.parquet"
    pl.DataFrame({"v": [0.5, 1.0, 2.0, -3.0, None] * 20}).write_parquet(path)
    e = sc.col("v")
    for _ in range(20):
        e = e * 0.5 + e
    plan = sc.source(sc.parquet(str(path))).filter(e > 2000.0).plan("shared_filter")
    got = run_plan(plan, SPARK)
    assert_same_outputs(outputs(got), outputs(run_plan(plan, REF)))
    assert got.table().height == 40
