"""Randomized contract tests: native output == reference output, exactly.

Hypothesis draws an input frame (ints, floats with NaN/inf/nulls, strings with nulls and
non-ASCII text, bools, datetimes, an unordered event-time column, lists of ints, floats and
strings) and a random linear pipeline over it (filters, computed columns with every
expression family, list comparisons / when / fill_null / is_in, explode of list columns with
nulls, empty lists and unequal lengths, dedup (over lists too), first / last /
count_distinct of lists, running
and keyed aggregates, tumbling / sliding / session windows with lateness, top-k, select),
then requires every table, the conservation counts, the late rows and the dead letters of
the native run at 1, 2 and 4 workers and several batch sizes (1 included) to equal the
reference's.
"""

from __future__ import annotations

import datetime as dt
import os

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import streamcell as sc
from streamcell.options import RunOptions
from tests.helpers import assert_same_outputs, outputs, run_plan

pytestmark = pytest.mark.native

R = pytest.importorskip("streamcell._runtime")

T0 = dt.datetime(2024, 1, 1)
STRS = ["a", "b", "ab", "", "Zß", "vi", "ca", None, "12", " 7 ", "x_1", "é"]


@st.composite
def frames(draw):
    n = draw(st.integers(0, 120))
    ints = st.one_of(st.none(), st.integers(-20, 20), st.sampled_from([2**63 - 1, -(2**63), 0]))
    floats = st.one_of(
        st.none(),
        st.floats(-50, 50, allow_nan=False).map(lambda x: round(x, 1)),
        st.sampled_from([float("nan"), float("inf"), -0.0, 0.5, 2.5]),
    )
    return pl.DataFrame(
        {
            "k": draw(st.lists(st.one_of(st.none(), st.integers(0, 4)), min_size=n, max_size=n)),
            "i": draw(st.lists(ints, min_size=n, max_size=n)),
            "f": draw(st.lists(floats, min_size=n, max_size=n)),
            "s": draw(st.lists(st.sampled_from(STRS), min_size=n, max_size=n)),
            "b": draw(st.lists(st.one_of(st.none(), st.booleans()), min_size=n, max_size=n)),
            "t": [
                T0 + dt.timedelta(seconds=x)
                for x in draw(st.lists(st.integers(0, 600), min_size=n, max_size=n))
            ],
            "n": draw(st.lists(st.one_of(st.none(), st.integers(0, 600)), min_size=n, max_size=n)),
            "li": draw(
                st.lists(st.one_of(st.none(), st.lists(ints, max_size=3)), min_size=n, max_size=n)
            ),
            "ll": draw(
                st.lists(
                    st.one_of(
                        st.none(),
                        st.lists(
                            st.one_of(
                                st.none(),
                                st.lists(st.one_of(st.none(), st.integers(-2, 2)), max_size=2),
                            ),
                            max_size=2,
                        ),
                    ),
                    min_size=n,
                    max_size=n,
                )
            ),
            "lf": draw(
                st.lists(st.one_of(st.none(), st.lists(floats, max_size=2)), min_size=n, max_size=n)
            ),
            "ls": draw(
                st.lists(
                    st.one_of(st.none(), st.lists(st.sampled_from(STRS), max_size=3)),
                    min_size=n,
                    max_size=n,
                )
            ),
        },
        schema={
            "k": pl.Int64,
            "i": pl.Int64,
            "f": pl.Float64,
            "s": pl.String,
            "b": pl.Boolean,
            "t": pl.Datetime("us"),
            "n": pl.Int64,
            "li": pl.List(pl.Int64),
            "lf": pl.List(pl.Float64),
            "ls": pl.List(pl.String),
            "ll": pl.List(pl.List(pl.Int64)),
        },
    )


col = sc.col


@st.composite
def num(draw, depth=0):
    """A numeric expression (int or float)."""
    if depth >= 2 or draw(st.integers(0, 2)) == 0:
        return draw(
            st.sampled_from(
                [col("i"), col("f"), col("k"), sc.lit(3), sc.lit(-2), sc.lit(0), sc.lit(1.5)]
            )
        )
    kind = draw(
        st.sampled_from(["bin", "bin", "abs", "round", "fill", "when", "cast", "dt", "len"])
    )
    a = draw(num(depth + 1))
    if kind == "bin":
        b = draw(num(depth + 1))
        op = draw(st.sampled_from(["+", "-", "*", "/", "//", "%", "**"]))
        return {
            "+": a + b,
            "-": a - b,
            "*": a * b,
            "/": a / b,
            "//": a // b,
            "%": a % b,
            "**": a**b,
        }[op]
    if kind == "abs":
        return a.abs()
    if kind == "round":
        return col("f").round(draw(st.integers(0, 2)))
    if kind == "fill":
        return col("i").fill_null(draw(st.integers(-3, 3)))
    if kind == "when":
        return sc.when(draw(pred(depth + 1))).then(a).otherwise(draw(num(depth + 1)))
    if kind == "cast":
        return draw(
            st.sampled_from(
                [
                    col("s").cast("int"),
                    col("s").cast("float"),
                    col("f").cast("int"),
                    col("b").cast("int"),
                    col("i").cast("float"),
                ]
            )
        )
    if kind == "dt":
        return draw(
            st.sampled_from(
                [col("t").dt.hour(), col("t").dt.minute(), col("t").dt.weekday(), col("t").dt.day()]
            )
        )
    return col("s").str.len_chars()


@st.composite
def pred(draw, depth=0):
    kind = draw(
        st.sampled_from(
            ["cmp", "cmp", "str", "null", "in", "bool"]
            + (["and", "or", "not"] if depth < 2 else [])
        )
    )
    if kind == "cmp":
        a, b = draw(num(depth + 1)), draw(num(depth + 1))
        op = draw(st.sampled_from(["<", "<=", ">", ">=", "==", "!="]))
        return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b, "!=": a != b}[op]
    if kind == "str":
        fn = draw(st.sampled_from(["contains", "starts_with", "ends_with"]))
        return getattr(col("s").str, fn)(draw(st.sampled_from(["a", "b", "", "ß"])))
    if kind == "null":
        return draw(st.sampled_from([col("i").is_null(), col("s").is_not_null()]))
    if kind == "in":
        return draw(
            st.sampled_from(
                [col("k").is_in([1, 2]), col("s").is_in(["a", "ab", None]), col("f").is_in([0.5])]
            )
        )
    if kind == "bool":
        return col("b")
    if kind == "not":
        return ~draw(pred(depth + 1))
    a, b = draw(pred(depth + 1)), draw(pred(depth + 1))
    return (a & b) if kind == "and" else (a | b)


STR_EXPRS = [
    col("s").str.to_uppercase(),
    col("s").str.to_lowercase(),
    col("s") + sc.lit("!"),
    col("i").cast("str"),
    col("f").cast("str"),
    col("t").cast("str"),
    col("b").cast("str"),
]
AGGS = ["count", "sum", "min", "max", "mean", "first", "last", "count_distinct"]


def list_preds(lists: set[str]) -> list[sc.Expr]:  # noqa: C901
    """Predicates over the list columns still unexploded (Python list semantics; ordering
    lists that differ at a null element is a dead letter)."""
    out: list[sc.Expr] = []
    if "li" in lists:
        li = col("li")
        out += [
            li == sc.lit([1, 2]),
            li != sc.lit([]),
            li.is_null(),
            li < sc.lit([0, 5]),
            li >= li.fill_null([3]),
            li.is_in([[1], [], [2**63 - 1], None]),
            sc.when(col("b")).then(li).otherwise(sc.lit([-1, None])) == li,
        ]
    if "ls" in lists:
        ls = col("ls")
        out += [ls.is_not_null(), ls >= sc.lit(["a"]), ls == sc.lit(["ab", None])]
    if "ll" in lists:  # a list of lists (exploded once: "ll1", a list of ints)
        ll = col("ll")
        out += [
            ll == sc.lit([[1], []]),
            ll < sc.lit([[0, 5]]),
            ll.is_null(),
            ll.is_in([[[1]], [], [None]]),
        ]
    if "ll1" in lists:
        out += [col("ll") == sc.lit([1]), col("ll") >= sc.lit([0])]
    if "lf" in lists:  # never against itself: the reference's NaN would then equal itself
        lf = col("lf")
        out += [lf <= sc.lit([0.5, 2.5]), lf == sc.lit([float("nan")])]
        if "li" in lists:
            out.append(lf > col("li"))
    return out


def list_values(lists: set[str]) -> list[tuple[str, sc.Expr]]:
    out: list[tuple[str, sc.Expr]] = []
    if "li" in lists:
        out += [
            ("li", sc.when(col("k") > 2).then(col("li")).otherwise(sc.lit([7, None]))),
            ("li", col("li").fill_null([])),
        ]
    if "ls" in lists:
        out += [("ls", sc.when(col("b")).then(sc.lit(["é"])).otherwise(col("ls")))]
    if "lf" in lists:
        out += [("lf", col("lf").fill_null([float("nan"), -0.0]))]
    if "ll" in lists:
        out += [("ll", col("ll").fill_null([[None], []]))]
    if "ll1" in lists:
        out += [("ll", col("ll").fill_null([7]))]
    return out


@st.composite
def pipelines(draw):
    df = draw(frames())
    s = sc.source(df)
    lists = {"li", "ls", "lf", "ll"}
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(
            st.sampled_from(["filter", "with", "with_str", "dedup", "explode", "list_f", "list_w"])
        )
        if kind == "explode":
            options = [
                c
                for c in (("li",), ("ls",), ("lf",), ("li", "ls"), ("li", "lf"), ("ll",), ("ll1",))
                if lists >= set(c)
            ]
            if not options:
                continue
            cols = draw(st.sampled_from(options))
            # "ll1" names column ll once exploded (list[list[int]] -> list[int] -> int)
            s = s.explode(*["ll" if c == "ll1" else c for c in cols])
            lists -= set(cols)  # lists of different lengths in lockstep: dead letters
            if "ll" in cols:
                lists.add("ll1")
        elif kind == "list_f":
            if lists:
                s = s.filter(draw(st.sampled_from(list_preds(lists))))
        elif kind == "list_w":
            if lists:
                name, e = draw(st.sampled_from(list_values(lists)))
                s = s.with_columns(**{name: e})
        elif kind == "filter":
            s = s.filter(draw(pred()))
        elif kind == "with":
            s = s.with_columns(x=draw(num()))
        elif kind == "with_str":
            s = s.with_columns(s=draw(st.sampled_from(STR_EXPRS)))
        else:
            s = s.dedup(*draw(st.sampled_from([("k",), ("k", "s"), ()])))
    end = draw(st.sampled_from(["none", "agg", "running", "window", "top_k", "select"]))
    keys = draw(st.sampled_from([(), ("k",), ("s",), ("k", "b")]))
    keyed = s.key_by(*keys) if keys else s
    if end in ("agg", "running", "window"):
        fns = draw(st.lists(st.sampled_from(AGGS), min_size=1, max_size=3, unique=True))
        arg_name = draw(st.sampled_from(["i", "f", "s", "i*2", "int(s)", "li", "ls", "lf", "ll"]))
        arg = {
            "i": col("i"),
            "f": col("f"),
            "s": col("s"),
            "i*2": col("i") * 2,
            "int(s)": col("s").cast("int"),
            "li": col("li"),
            "ls": col("ls"),
            "lf": col("lf"),
            "ll": col("ll"),
        }[arg_name]
        aggs = {}
        for f in fns:
            if f in ("sum", "mean") and arg_name in ("s", "ls"):
                continue
            if f in ("sum", "mean", "min", "max") and (
                arg_name in lists or (arg_name == "ll" and "ll1" in lists)
            ):
                continue  # a list column still unexploded: first / last / count_distinct only
            aggs[f"a_{f}"] = getattr(arg, "n_unique" if f == "count_distinct" else f)()
        aggs["c"] = sc.count()
        if end == "window":
            w = draw(st.sampled_from(["tumbling", "sliding", "session"]))
            time = draw(st.sampled_from(["t", "n"]))
            size = draw(st.sampled_from([30, 60, 120]))
            late = draw(st.sampled_from([0, 20, 100]))
            dur = (lambda x: f"{x}s") if time == "t" else (lambda x: x)
            if w == "sliding":
                keyed = keyed.sliding(
                    dur(size), every=dur(size // 3), time=time, lateness=dur(late)
                )
            else:
                keyed = getattr(keyed, w)(dur(size), time=time, lateness=dur(late))
        s = keyed.running(**aggs) if end == "running" else keyed.agg(**aggs)
    elif end == "top_k":
        by = draw(st.sampled_from(["i", "f", "s"]))
        s = keyed.top_k(draw(st.integers(1, 4)), by=by, descending=draw(st.booleans()))
    elif end == "select":
        s = s.select("k", y=draw(num()), z=draw(pred()))
    return s.plan()


CONFIGS = st.sampled_from(
    [
        RunOptions(engine="native", workers=1, batch_size=1024),
        RunOptions(engine="native", workers=2, batch_size=1),
        RunOptions(engine="native", workers=2, batch_size=7),
        RunOptions(engine="native", workers=4, batch_size=3, scheduler="LP"),
        RunOptions(engine="native", workers=4, batch_size=64, scheduler="QST"),
        RunOptions(engine="native", workers=3, batch_size=16, scheduler="ET"),
    ]
)


@settings(
    max_examples=int(os.environ.get("STREAMCELL_HYPOTHESIS_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
@given(pipelines(), CONFIGS)
def test_native_equals_reference_on_random_pipelines(plan, options):
    want = outputs(run_plan(plan, RunOptions(engine="reference")))
    got = outputs(run_plan(plan, options))
    assert_same_outputs(got, want)


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    seed=st.integers(0, 2**32 - 1),
    kind=st.sampled_from(["tumbling", "sliding"]),
    keyed=st.sampled_from(["int", "int-and-str", "none"]),
    late=st.sampled_from([0, 50, 3000]),  # 3000: thousands of windows open at once
    options=CONFIGS,
)
def test_windows_over_many_int_keys_equal_the_reference(seed, kind, keyed, late, options):
    """Thousands of windows open at once (the window map grows, and closing removes from
    long probe runs), int keys with nulls, times mostly in order with stragglers (late rows,
    windows closing out of creation order), extreme times near the int64 limits."""
    import numpy as np

    rng = np.random.default_rng(seed)
    n = 6_000
    t = np.cumsum(rng.integers(0, 3, n)) + rng.integers(-40, 5, n)
    t[-3:] = 2**62 + rng.integers(0, 100, 3)  # far ahead at the end: every window closes
    keys = rng.integers(-(2**40), 2**40, 900)[rng.integers(0, 900, n)]
    df = pl.DataFrame(
        {
            "k": pl.Series(keys, dtype=pl.Int64).scatter(
                np.flatnonzero(rng.random(n) < 0.05), None
            ),
            "s": rng.choice(["x", "y"], n),
            "t": t,
            "v": rng.normal(size=n),
        }
    )
    s = sc.source(df)
    s = s.key_by("k") if keyed == "int" else s.key_by("k", "s") if keyed != "none" else s
    w = (
        s.tumbling(20, time="t", lateness=late)
        if kind == "tumbling"
        else s.sliding(30, every=10, time="t", lateness=late)
    )
    plan = w.agg(n=sc.count(), x=sc.sum("v"), lo=sc.min("v")).plan()
    want = outputs(run_plan(plan, RunOptions(engine="reference")))
    assert_same_outputs(outputs(run_plan(plan, options)), want)
    assert next(iter(want["tables"].values())).height > (500 if keyed != "none" else 100)
