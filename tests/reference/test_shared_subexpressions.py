"""The reference evaluates a subexpression that occurs more than once at most once per row
(evaluate.compile_row_expr, expr.Shapes): where it is first needed, and reads it back where it
is needed again. Checked against the reference with sharing turned off (each node numbered by
identity, on trees built without reusing a node): the same tables, counts and dead letters,
also where the shared part fails on rows where one of its uses is not evaluated (an untaken
``when`` branch, the right of a decided ``or`` / ``and``, after a null left operand). A user
function is called once per row for a call object used twice, and once per call written."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import polars as pl
import pytest

import streamcell as sc
from streamcell import col
from streamcell.expr import Shapes
from streamcell.options import RunOptions
from tests.helpers import assert_same_outputs, nested, nested_in_python, outputs, run_plan

REF = RunOptions(engine="reference", display=False)
FRAME = pl.DataFrame(
    {
        "k": [1, -2, 3, None, 0, 2, -1, 5, 4, -3],
        "v": [-1.5, 0.0, 2.5, -3.0, None, 7.25, -0.0, 1e300, 4.0, 9.5],
    }
)


def p() -> sc.Expr:
    """A fresh ``k ** (k - 2)``: fails where k - 2 < 0 (k = 1, 0, -1, ...)."""
    return col("k") ** (col("k") - 2)


def nested_tree(depth: int) -> sc.Expr:
    """:func:`~tests.helpers.nested`, every node its own object."""
    if depth == 0:
        return col("v")
    k = depth - 1
    return (nested_tree(k) * 1.0001 + k) % 97.3 + (nested_tree(k) / (k + 1.5)) ** 0.5


SHAPES: dict[str, Callable[[sc.Stream, Callable[[], sc.Expr]], sc.Stream]] = {
    "filter and project": lambda s, q: s.filter((q() + 1 > 0) | (q() + 1 < -100)).with_columns(
        w=(q() + 1) * (q() + 1)
    ),
    "untaken when branch": lambda s, q: s.with_columns(
        w=sc.when(col("k") > 2).then(q()).otherwise(0)
        + sc.when(col("k") > 2).then(q() + 1).otherwise(-1)
    ),
    "decided or and": lambda s, q: s.with_columns(
        w=((col("k") < 3) | (q() > 0)) == ((col("k") >= 3) & (q() > 1))
    ),
    "null left operand": lambda s, q: s.filter(col("k").is_null() | (col("k") > 2)).with_columns(
        w=(col("k") + q()) - q()
    ),
    "fails where both uses count": lambda s, q: s.with_columns(w=q() * 2 + q()),
}


@pytest.fixture
def unshared(monkeypatch):
    """Sharing off: every node object its own number."""
    fresh = itertools.count()

    def of(self: Shapes, e: object) -> int:
        got = self._of.get(id(e))
        if got is None:
            got = self._of[id(e)] = (e, next(fresh))  # type: ignore[assignment]
        return got[1]

    def run(plan: sc.Plan) -> dict:
        with monkeypatch.context() as m:
            m.setattr(Shapes, "of", of)
            return outputs(run_plan(plan, REF))

    return run


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_sharing_changes_no_output(shape, unshared):
    shared_p = p()
    shared = SHAPES[shape](sc.source(FRAME), lambda: shared_p).plan(f"shared_{len(shape)}")
    tree = SHAPES[shape](sc.source(FRAME), p).plan(f"tree_{len(shape)}")
    got = outputs(run_plan(shared, REF))
    assert_same_outputs(got, unshared(tree))
    if shape in ("filter and project", "fails where both uses count"):
        assert got["dead"].height > 0


def test_nested_reuse_equals_the_tree():
    s = sc.source(FRAME)
    assert_same_outputs(
        outputs(run_plan(s.with_columns(h=nested(6)).plan("nested"), REF)),
        outputs(run_plan(s.with_columns(h=nested_tree(6)).plan("nested_tree"), REF)),
    )


def test_twenty_levels_run_at_once():
    """2^20 paths: before, the reference built a closure per path and walked each per row."""
    v = [0.0, 2.5, 7.25, 1e300, 4.0]
    run = run_plan(sc.source(pl.DataFrame({"v": v})).with_columns(h=nested(20)).plan(), REF, 60)
    assert run.table()["h"].to_list() == nested_in_python(v, 20)


def test_a_user_function_is_called_once_per_call_object():
    calls: list[float] = []

    def counted(x: float) -> float:
        calls.append(x)
        return x * 2

    f = sc.python_udf(counted, returns="float")
    df = pl.DataFrame({"v": [1.0, 2.0, 3.0]})
    y = f(col("v"))
    t = run_plan(sc.source(df).with_columns(w=y + y).plan(), REF).table()
    assert t["w"].to_list() == [4.0, 8.0, 12.0] and len(calls) == 3
    calls.clear()
    t = run_plan(sc.source(df).with_columns(w=f(col("v")) + f(col("v"))).plan(), REF).table()
    assert t["w"].to_list() == [4.0, 8.0, 12.0] and len(calls) == 6
