"""Common subexpressions on the native engine: lowering gives a subexpression that occurs
more than once one node that every parent reads (lowering.lower_expr, expr.Shapes), so
``e = f(e, e)`` written k times costs k levels, not 2^k. Results, dead letters and counts
stay exactly the reference's: a failing shared subexpression used where the reference does
not evaluate it (an untaken ``when`` branch, the right of a decided ``or``, after a null
left operand) must not fail the row there."""

from __future__ import annotations

import polars as pl
import pytest

import streamcell as sc
from streamcell import col
from streamcell.backends.native.lowering import E, lower
from streamcell.compiler import compile_plan
from streamcell.options import RunOptions
from tests.helpers import check_against_reference, nested, nested_in_python

NATIVE = RunOptions(engine="native", workers=2, batch_size=7, display=False)
FRAME = pl.DataFrame(
    {
        "k": [1, -2, 3, None, 0, 2, -1, 5, 4, -3] * 3,
        "v": [-1.5, 0.0, 2.5, -3.0, None, 7.25, -0.0, 1e300, 4.0, 9.5] * 3,
    }
)


def _ops(stream: sc.Stream) -> dict[str, dict]:
    low = lower(compile_plan(stream.plan("cse")), RunOptions(engine="native"))
    return dict(low.ops)


def _shared_nodes(nodes: list[dict]) -> list[dict]:
    """Nodes that more than one parent reads."""
    reads: dict[int, int] = {}
    for n in nodes:
        for c in [n.get("a", -1), n.get("b", -1), n.get("c", -1)]:
            if c is not None and c >= 0 and n["op"] != E["col"]:  # its `a` is a column
                reads[c] = reads.get(c, 0) + 1
    return [nodes[i] for i, r in reads.items() if r > 1]


def test_a_repeated_subexpression_is_one_node():
    """Each level's ``e`` is one node read twice: 3 levels lower to 35 nodes instead of the
    tree's 85 (11 new nodes per level, 4 of them literals, plus the leaf)."""
    ops = _ops(sc.source(FRAME).with_columns(h=nested(3)))
    (nodes,) = ops["project"]["exprs"]
    assert len(nodes) == 1 + 3 * 11
    assert len(_shared_nodes(nodes)) == 3  # v, e1 and e2, each read by two parents
    assert all(n["op"] != E["lit"] for n in _shared_nodes(nodes))  # literals never are


def test_literals_that_python_calls_equal_are_not_one_node():
    """``k + 1`` and ``k + 1.0`` compute different types; ``v * 0.0`` and ``v * -0.0``
    zeros of different signs: four expressions, nothing shared but the columns."""
    e = (col("k") + 1) + (col("k") + 1.0) + (col("v") * 0.0 - col("v") * -0.0)
    ops = _ops(sc.source(FRAME).with_columns(w=e))
    (nodes,) = ops["project"]["exprs"]
    assert [n["op"] for n in _shared_nodes(nodes)] == [E["col"], E["col"]]  # k and v
    s = sc.source(FRAME).with_columns(a=col("v") * 0.0, b=col("v") * -0.0, c=col("k") + 1.0)
    got = check_against_reference(s.plan("zeros"), NATIVE)
    t = next(iter(got["tables"].values()))
    assert [str(x) for x in t["a"]] != [str(x) for x in t["b"]]


def test_deep_reuse_starts_at_once_and_computes_what_python_does():
    """20 levels are a million-leaf tree: before sharing, its lowering and evaluation walked
    every path (16 levels took 5 s to start); now they lower to 221 nodes. The reference
    interpreter walks the tree, so here the values are Python's own, level by level."""
    e = nested(20)
    ops = _ops(sc.source(FRAME).with_columns(h=e))
    assert len(ops["project"]["exprs"][0]) == 1 + 20 * 11
    v = [0.0, 2.5, 7.25, 1e300, 4.0, 9.5, 123.0]
    run = sc.source(pl.DataFrame({"v": v})).with_columns(h=e).start("deep", options=NATIVE)
    run.wait(60)
    assert run.status == "finished", run.error
    assert run.table()["h"].to_list() == nested_in_python(v, 20)


def test_reuse_with_nulls_and_failures_equals_the_reference():
    s = sc.source(FRAME).with_columns(h=nested(8), g=nested(2) * 2)
    check_against_reference(s.plan("nested"), NATIVE)


@pytest.mark.parametrize(
    "shape",
    [
        # an integer to a negative power fails; the same subexpression is reused below
        "filter and project",
        "untaken when branch",
        "decided or",
        "null left operand",
    ],
)
def test_a_failing_shared_subexpression_fails_a_row_where_the_reference_does(shape):
    p = col("k") ** (col("k") - 2)  # fails where k - 2 < 0 (k = 1, 0, -1, ...)
    s = sc.source(FRAME)
    if shape == "filter and project":
        s = s.filter((p + 1 > 0) | (p + 1 < -100)).with_columns(w=(p + 1) * (p + 1))
    elif shape == "untaken when branch":  # p counts only where k > 2 (where it cannot fail)
        s = s.with_columns(
            w=sc.when(col("k") > 2).then(p).otherwise(0)
            + sc.when(col("k") > 2).then(p + 1).otherwise(-1)
        )
    elif shape == "decided or":  # p counts only where k >= 3, on both sides
        s = s.with_columns(w=((col("k") < 3) | (p > 0)) == ((col("k") >= 3) & (p > 1)))
    else:  # where k is null, p does not count after the null left operand
        s = s.filter(col("k").is_null() | (col("k") > 2)).with_columns(w=(col("k") + p) - p)
    if shape != "filter and project":  # p is one node, read by two parents
        (nodes,) = _ops(s)["project"]["exprs"]
        assert E["pow"] in [n["op"] for n in _shared_nodes(nodes)]
    got = check_against_reference(s.plan(f"fail_{shape.replace(' ', '_')}"), NATIVE)
    if shape == "filter and project":
        assert got["dead"].height > 0
