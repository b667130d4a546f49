"""List values in expressions, aggregates and dedup, checked on every engine.

Expected values are hand-computed or computed with Python's own list operators on the
input; they never come from streamcell itself. Every engine's whole output (tables,
counts, dead letters) must also equal the reference's (``table`` / ``check_against_reference``).
"""

from __future__ import annotations

import operator

import polars as pl
import pytest

import streamcell as sc
from tests.helpers import check_against_reference, table

col = sc.col


def counts(out: dict) -> dict[str, dict]:
    return {r["step"]: r for r in out["counts"].to_dicts()}


NAN = float("nan")

LI = [[1, 2], [1, None], None, [], [3], [1, 2, 0], [None]]
LJ = [[1, 2], [1, None], [1], [], [2], [1, 2], [None, 1]]


def ints() -> pl.DataFrame:
    return pl.DataFrame(
        {"id": list(range(len(LI))), "a": LI, "b": LJ},
        schema={"id": pl.Int64, "a": pl.List(pl.Int64), "b": pl.List(pl.Int64)},
    )


def test_list_columns_pass_through_when_fill_null_and_literals(engine):
    df = ints()
    got = table(
        sc.source(df)
        .select(
            "id",
            pick=sc.when(col("id") % 2 == 0).then(col("a")).otherwise(col("b")),
            filled=col("a").fill_null([7, None]),
            empty=sc.when(col("a").is_null()).then(sc.lit([])).otherwise(col("a")),
            lit=sc.lit([1, 2]),
            none=sc.when(col("id") > 100).then(col("a")).otherwise(None),
        )
        .plan(),
        engine.options,
    )
    assert got.schema["pick"] == pl.List(pl.Int64)
    assert got["pick"].to_list() == [LI[i] if i % 2 == 0 else LJ[i] for i in range(len(LI))]
    assert got["filled"].to_list() == [x if x is not None else [7, None] for x in LI]
    assert got["empty"].to_list() == [x if x is not None else [] for x in LI]
    assert got["lit"].to_list() == [[1, 2]] * len(LI)
    assert got["none"].to_list() == [None] * len(LI)


def test_is_null_and_is_not_null_of_lists(engine):
    got = table(
        sc.source(ints()).select(n=col("a").is_null(), nn=col("a").is_not_null()).plan(),
        engine.options,
    )
    assert got["n"].to_list() == [x is None for x in LI]
    assert got["nn"].to_list() == [x is not None for x in LI]


def test_list_equality_is_python_list_equality(engine):
    got = table(
        sc.source(ints())
        .select(eq=col("a") == col("b"), ne=col("a") != col("b"), lit=col("a") == [1, 2])
        .plan(),
        engine.options,
    )
    want = [None if x is None else x == y for x, y in zip(LI, LJ)]
    assert got["eq"].to_list() == want
    assert got["ne"].to_list() == [None if w is None else not w for w in want]
    assert got["lit"].to_list() == [None if x is None else x == [1, 2] for x in LI]


@pytest.mark.parametrize("op", ["<", "<=", ">", ">="])
def test_list_ordering_is_python_list_ordering(engine, op):
    # no null element where the two lists first differ: Python orders them
    a = [[1, 2], [1], [], [2], [1, None, 3], [5, 0], [0, 9]]
    b = [[1, 3], [1, 0], [], [1, 9], [1, None, 2], [5], [0, 9]]
    df = pl.DataFrame({"a": a, "b": b}, schema={"a": pl.List(pl.Int64), "b": pl.List(pl.Int64)})
    fn = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}[op]
    e = {"<": col("a") < col("b"), "<=": col("a") <= col("b")}.get(op)
    if e is None:
        e = col("a") > col("b") if op == ">" else col("a") >= col("b")
    got = table(sc.source(df).select(r=e).plan(), engine.options)
    assert got["r"].to_list() == [fn(x, y) for x, y in zip(a, b)]


def test_ordering_lists_that_differ_at_a_null_is_a_dead_letter(engine):
    df = pl.DataFrame(
        {"a": [[1, None], [None], [1, 2]], "b": [[1, 2], [1], [1, 2]]},
        schema={"a": pl.List(pl.Int64), "b": pl.List(pl.Int64)},
    )
    out = check_against_reference(
        sc.source(df).select(r=col("a") < col("b")).plan(), engine.options
    )
    got = next(iter(out["tables"].values()))
    assert got["r"].to_list() == [False]  # [1, 2] < [1, 2]
    assert out["dead"]["step"].to_list() == ["select#2", "select#2"]
    assert (
        out["dead"]["reason"].to_list()
        == ["lists with a null element where they differ cannot be ordered"] * 2
    )
    assert counts(out)["select#2"]["dead"] == 2


def test_float_and_string_lists_compare_by_value(engine):
    df = pl.DataFrame(
        {
            "f": [[1.0, NAN], [-0.0], [1.5], [2.0], None],
            "i": [[1, 0], [0], [1], [2], [1]],
            "s": [["b"], ["a", "é"], [], ["ab"], ["a"]],
        },
        schema={"f": pl.List(pl.Float64), "i": pl.List(pl.Int64), "s": pl.List(pl.String)},
    )
    got = table(
        sc.source(df)
        .select(
            fi=col("f") == col("i"),  # int and float elements compare exactly; NaN equals nothing
            fl=col("f") > col("i"),
            sg=col("s") >= ["a", "z"],
            ss=col("s") == ["ab"],
        )
        .plan(),
        engine.options,
    )
    assert got["fi"].to_list() == [False, True, False, True, None]
    assert got["fl"].to_list() == [False, False, True, False, None]  # 1.0 == 1, then NaN > 0
    assert got["sg"].to_list() == [True, True, False, True, False]
    assert got["ss"].to_list() == [False, False, False, True, False]


def test_when_unifies_int_and_float_lists(engine):
    df = pl.DataFrame(
        {"c": [True, False, None], "i": [[1, None], [2], [3]], "f": [[0.5], [NAN], None]},
        schema={"c": pl.Boolean, "i": pl.List(pl.Int64), "f": pl.List(pl.Float64)},
    )
    got = table(
        sc.source(df).select(w=sc.when(col("c")).then(col("i")).otherwise(col("f"))).plan(),
        engine.options,
    )
    assert got.schema["w"] == pl.List(pl.Float64)
    w = got["w"].to_list()
    assert w[0] == [1.0, None] and w[2] is None
    assert len(w[1]) == 1 and w[1][0] != w[1][0]  # [NaN]


def test_is_in_with_a_list_subject(engine):
    got = table(
        sc.source(ints())
        .select(r=col("a").is_in([[1, 2], [], [3.0], "x", None]), s=col("a").is_in([[9]]))
        .plan(),
        engine.options,
    )
    values = [[1, 2], [], [3.0], "x", None]
    assert got["r"].to_list() == [True if x is None else x in values for x in LI]
    assert got["s"].to_list() == [None if x is None else False for x in LI]


def test_nested_literals_are_lists_whether_written_as_lists_or_tuples(engine):
    # the DSL reads [[1, 2]] as nested tuples; either way the literal is a list of lists
    got = table(
        sc.source(ints())
        .select(t=col("a").is_in([(1, 2), ()]), u=col("a") == sc.lit((1, 2)))
        .plan(),
        engine.options,
    )
    assert got["t"].to_list() == [True, False, None, True, False, False, False]
    assert got["u"].to_list() == [True, False, None, False, False, False, False]


def test_filter_on_a_list_predicate(engine):
    got = table(
        sc.source(ints()).filter((col("a") == col("b")) | col("a").is_null()).plan(),
        engine.options,
    )
    assert got["id"].to_list() == [0, 1, 2, 3]


# ------------------------------------------------------------------ aggregates and dedup

FL = [[1.0, NAN], [-0.0], [0.0], [0.0], [1.0, NAN], [1.0, NAN], None, None]
SL = [["x"], ["y", "z"], None, [], ["x"], ["y", "z"], [], ["x"]]
KS = [1, 1, 2, 1, 2, 1, 1, 2]


def lists_frame() -> pl.DataFrame:
    return pl.DataFrame(
        {"k": KS, "f": FL, "s": SL},
        schema={"k": pl.Int64, "f": pl.List(pl.Float64), "s": pl.List(pl.String)},
    )


def test_first_last_and_count_distinct_of_lists(engine):
    got = table(
        sc.source(lists_frame())
        .key_by("k")
        .agg(
            fi=col("s").first(), la=col("s").last(), cf=col("f").n_unique(), cs=col("s").n_unique()
        )
        .plan(),
        engine.options,
    )
    final = got.unique("k", keep="last", maintain_order=True).sort("k")
    # NaN elements are one value and -0.0 equals 0.0, as for keys; null is one value
    assert final.rows() == [(1, ["x"], [], 3, 3), (2, None, ["x"], 3, 2)]


def test_running_and_windowed_aggregates_carry_lists(engine):
    df = lists_frame().with_columns(t=pl.Series(list(range(8)), dtype=pl.Int64))
    running = table(sc.source(df).key_by("k").running(la=col("f").last()).plan(), engine.options)
    assert [repr(x) for x in running["la"].to_list()] == [repr(x) for x in FL]  # NaN, -0.0 kept
    windowed = table(
        sc.source(df)
        .key_by("k")
        .tumbling(4, time="t")
        .agg(fi=col("s").first(), n=col("f").n_unique())
        .plan(),
        engine.options,
    )
    assert windowed.sort("k", "window_start").select("k", "fi", "n").rows() == [
        (1, ["x"], 2),
        (1, ["y", "z"], 2),
        (2, None, 1),
        (2, ["x"], 2),
    ]


def test_dedup_over_list_columns(engine):
    f = [[1.0, NAN], [-0.0], [0.0], [1.0, NAN], [0.0, 1.0], None, None, [1.0]]
    s_ = [["x"], ["y"], ["y"], ["x"], ["y"], [], [], ["x", None]]
    df = pl.DataFrame({"f": f, "s": s_}, schema={"f": pl.List(pl.Float64), "s": pl.List(pl.String)})
    out = check_against_reference(sc.source(df).dedup().plan(), engine.options)
    got = next(iter(out["tables"].values()))
    # NaN elements are one value and -0.0 equals 0.0 (as for keys): rows 2, 3 and 6 repeat
    # rows 1, 0 and 5
    want = [0, 1, 4, 5, 7]
    assert [repr(r) for r in got.rows()] == [repr((f[i], s_[i])) for i in want]
    assert counts(out)["dedup#2"]["filtered"] == 3


# ------------------------------------------------------------------------ lists of lists

LL = [[[1, 2], None, []], None, [[3]], [[1, 2], None, []], [[None], [4, 5]]]
LLF = [[[1.0, NAN]], [[-0.0]], [[0.0]], None, [[1.0, NAN], []]]


def nested() -> pl.DataFrame:
    return pl.DataFrame(
        {"k": [1, 1, 2, 1, 2], "ll": LL, "lf": LLF},
        schema={
            "k": pl.Int64,
            "ll": pl.List(pl.List(pl.Int64)),
            "lf": pl.List(pl.List(pl.Float64)),
        },
    )


def test_lists_of_lists_pass_through_and_explode_twice(engine):
    got = table(sc.source(nested()).explode("ll").explode("ll").plan(), engine.options)
    # Polars: each explode turns a null or empty list into one null row
    want = nested().explode("ll", empty_as_null=True, keep_nulls=True)
    want = want.explode("ll", empty_as_null=True, keep_nulls=True)
    assert got["ll"].to_list() == want["ll"].to_list()
    assert [repr(x) for x in got["lf"].to_list()] == [repr(x) for x in want["lf"].to_list()]


def test_lists_of_lists_in_expressions(engine):
    got = table(
        sc.source(nested())
        .select(
            eq=col("ll") == [[1, 2], None, []],
            lt=col("ll") < [[1, 3]],
            w=sc.when(col("k") == 1).then(col("ll")).otherwise(col("lf")),
            isin=col("ll").is_in([[[3]], [[1, 2], None, []]]),
        )
        .plan(),
        engine.options,
    )
    # row 4: [[None], [4, 5]] < [[1, 3]] orders None against 1: a dead letter
    keep = [0, 1, 2, 3]
    assert got["eq"].to_list() == [
        None if LL[i] is None else LL[i] == [[1, 2], None, []] for i in keep
    ]
    assert got["lt"].to_list() == [None if LL[i] is None else LL[i] < [[1, 3]] for i in keep]
    assert got.schema["w"] == pl.List(pl.List(pl.Float64))
    assert got["w"].to_list()[:2] == [[[1.0, 2.0], None, []], None]
    assert got["w"].to_list()[2] == [[0.0]]
    assert got["isin"].to_list() == [True, None, True, True]


def test_dedup_and_aggregates_over_lists_of_lists(engine):
    out = check_against_reference(sc.source(nested()).select("ll").dedup().plan(), engine.options)
    got = next(iter(out["tables"].values()))
    assert got["ll"].to_list() == [LL[0], None, LL[2], LL[4]]  # row 3 repeats row 0
    agg = table(
        sc.source(nested()).key_by("k").agg(f=col("ll").first(), n=col("lf").n_unique()).plan(),
        engine.options,
    )
    final = agg.unique("k", keep="last", maintain_order=True).sort("k")
    # k=1: [[1.0, NaN]], [[-0.0]], null -> 3; k=2: [[0.0]], [[1.0, NaN], []] -> 2
    assert final.rows() == [(1, LL[0], 3), (2, LL[2], 2)]
