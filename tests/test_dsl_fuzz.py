"""Property-based fuzzing of the ``%%stream`` language.

Every generated cell either parses (and compiles) to a plan, or raises a streamcell error
that says where: a :class:`~streamcell.errors.DSLSyntaxError` (or its subclass
``PlanError``) with a line inside the cell and a column. No other exception type, and no
hang (each cell has a few seconds). Cells come from three generators: stages built from a
grammar of plausible and implausible arguments, valid pipelines with random edits, and
token soup. ``make test`` tries 1,000 cells; ``make test-long`` (the ``long`` tier) tries
12,000 more.
"""

from __future__ import annotations

import signal
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import streamcell as sc
from streamcell.compiler import compile_plan
from streamcell.dsl import STAGES
from streamcell.errors import DSLSyntaxError, StreamcellError

NS = {
    "df": pl.DataFrame({"k": [1, 2], "v": [0.5, None], "s": ["a", "b"]}),
    "rows": [{"a": 1, "b": "x"}, {"a": 2}],
    "f": lambda df: None,
    "n": 3,
}
COLS = ["price", "item_id", "category", "event", "user_id", "ts", "k", "v", "s", "nope"]
ATOMS = [
    *COLS,
    "0", "1", "-1", "2.5", "1e400", "-0.0", "10**30", "99999999999999999999999", "True",
    "None", '"vi"', "''", '"5m"', '"2024-01-01"', '"x" * 3', "[1, 2]", "[]", "(1,)", "{1: 2}",
    'col("odd name")', "lit(3)", 'datetime("2024-01-01T00:00")', 'date("nope")', "count()",
    "f", "df", "rows", "x[0]", "lambda x: x", "*a", "{**a}", "...", "b'x'", "1j",
]  # fmt: skip
METHODS = [
    "abs()", "round()", "round(2)", "round(-1)", 'cast("int")', 'cast("str")', 'cast("nope")',
    "cast(int)", "is_null()", "fill_null(0)", "is_in([1, 2])", "is_in(x)", 'str.contains("a")',
    "str.len_chars()", "dt.year()", "dt.nope()", "sum()", "n_unique()", "foo()", "mean(1)",
    "round(1, 2, 3)",
]  # fmt: skip
BINOPS = ["+", "-", "*", "/", "//", "%", "**", "==", "!=", "<", ">=", "and", "or", "&", "|",
          "in", "not in", "is", "@", "<<"]  # fmt: skip
STAGE_ARGS = {
    "source": ["clickstream(rows=5)", "store_sales(rows=3, seed=1)", "df", "rows", "nope",
               "clickstream(rows=-1)", "clickstream(users=0)", "clickstream(seed=-1)",
               "clickstream(late_fraction=2)", "store_sales(stores=0)", "clickstream(1)",
               "clickstream(rows=5), rate=0", "parquet(3)", 'csv("nope.csv")', "n"],
    "tumbling": ['"5m", time=ts', '"5m"', '"-5m", time=ts', "5, time=item_id",
                 '"5m", time=ts, lateness="1m"', '"x", time=ts'],
    "sliding": ['"5m", every="1m", time=ts', '"1m", every="5m", time=ts', '"5m", time=ts'],
    "session": ['"30m", time=ts', "0, time=ts"],
    "key_by": ["user_id", "user_id, event", "nope", "price + 1"],
    "top_k": ["3, by=price", "0, by=price", "3", "3, by=price, descending=1"],
    "sink": ["table", "none", 'table("t")', 'table("t", mode="upsert", key=[user_id])',
             'parquet("out-fuzz/", bogus=1)', "callback(f)", "callback(g)", "callback(f, x=1)",
             "nowhere", "table(mode=1)"],
    "join": ['other, on=user_id, within="5m", time=ts', "other"],
    "union": ["other", "other, other"],
    "correlate": ['other, on=user_id, time=ts, over="5m", c=count()'],
    "sketch": ["theta(user_id) as u", "hll(item_id) as h, kll(price) as q", "nope(x) as y"],
}  # fmt: skip


@st.composite
def expr(draw: st.DrawFn, depth: int = 0) -> str:
    if depth >= 3 or draw(st.integers(0, 3)) == 0:
        return draw(st.sampled_from(ATOMS))
    kind = draw(st.sampled_from(["bin", "un", "method", "call", "when", "if", "paren", "deep"]))
    a = draw(expr(depth + 1))
    if kind == "bin":
        return f"{a} {draw(st.sampled_from(BINOPS))} {draw(expr(depth + 1))}"
    if kind == "un":
        return f"{draw(st.sampled_from(['-', 'not ', '~', '+']))}{a}"
    if kind == "method":
        return f"{a}.{draw(st.sampled_from(METHODS))}"
    if kind == "call":
        fn = draw(st.sampled_from(["sum", "count", "when", "col", "lit", "nope", "f", "float"]))
        return f"{fn}({a})"
    if kind == "when":
        return f"when({a}).then({draw(expr(depth + 1))}).otherwise(0)"
    if kind == "if":
        return f"{a} if {draw(expr(depth + 1))} else 1"
    if kind == "paren":
        return f"({a})"
    return draw(st.sampled_from(["-", "not ", "("])) * draw(st.integers(90, 120)) + a


@st.composite
def stage(draw: st.DrawFn) -> str:
    kw = draw(st.sampled_from([*STAGES, "filter", "select", "with_columns", "agg", "bogus"]))
    label = draw(st.sampled_from(["", "", "", "other = ", "x = "]))
    if kw in STAGE_ARGS and draw(st.booleans()):
        return f"{label}{kw} {draw(st.sampled_from(STAGE_ARGS[kw]))}"
    parts = []
    for _ in range(draw(st.integers(0, 3))):
        e = draw(expr())
        name = draw(st.sampled_from(["", "", "c=", "price=", "a_b=", "1=", "**"]))
        parts.append(f"{name}{e}")
    return f"{label}{kw} {', '.join(parts)}"


@st.composite
def grammar_cells(draw: st.DrawFn) -> str:
    source = draw(st.sampled_from(STAGE_ARGS["source"]))
    lines = [] if draw(st.integers(0, 9)) == 0 else [f"source {source}"]
    for _ in range(draw(st.integers(0, 6))):
        s = draw(stage())
        if draw(st.integers(0, 7)) == 0:  # a continuation line or a comment
            cut = draw(st.integers(0, len(s)))
            s = s[:cut] + "\n    " + s[cut:] if draw(st.booleans()) else "# " + s
        lines.append(s)
    return "\n".join(lines)


NUMS = ["price", "item_id", "category", "user_id", "1", "2.5", "-3", "0"]


@st.composite
def num(draw: st.DrawFn, depth: int = 0) -> str:
    """A well-typed number expression over clickstream's columns (sometimes nested deep)."""
    if depth >= 3 or draw(st.booleans()):
        return draw(st.sampled_from(NUMS))
    a, b = draw(num(depth + 1)), draw(num(depth + 1))
    form = draw(st.integers(0, 6))
    if form == 0:
        return f"({a} {draw(st.sampled_from(['+', '-', '*', '/', '//', '%']))} {b})"
    if form == 1:
        return f"{a}.round({draw(st.integers(0, 3))})"
    if form == 2:
        return f"when({a} > {b}).then({a}).otherwise({b})"
    if form == 3:
        return f"{a}.fill_null({b})"
    if form == 4:
        return f"{a}.abs()"
    if form == 5:
        return f'{a}.cast("float")'
    return "-" * draw(st.integers(1, 110)) + a


@st.composite
def cond(draw: st.DrawFn) -> str:
    a, b = draw(num()), draw(num())
    return draw(
        st.sampled_from(
            [
                f"{a} > {b}",
                f"{a} == {b}",
                'event == "view"',
                f"user_id.is_null() or {a} <= {b}",
                'event.str.contains("a")',
                "item_id in [1, 2, 3]",
            ]
        )
    )


AGG = [
    "count()",
    "sum(price)",
    "mean(price)",
    "min(item_id)",
    "count_distinct(user_id)",
    "price.max()",
    "first(event)",
    "last(ts)",
    "sum(event)",
    "count(nope)",
]


@st.composite
def typed_cells(draw: st.DrawFn) -> str:
    """Mostly well-formed pipelines over clickstream: they reach the compiler's checks."""
    lines = [f"source clickstream(rows={draw(st.integers(0, 50))}, seed={draw(st.integers(0, 3))})"]
    for _ in range(draw(st.integers(0, 4))):
        k = draw(st.integers(0, 3))
        if k == 0:
            lines.append(f"filter {draw(cond())}")
        elif k == 1:
            lines.append(f"with_columns x{len(lines)}={draw(num())}")
        elif k == 2:
            lines.append(f"select price, item_id, user_id, event, ts, category, y={draw(num())}")
        else:
            lines.append(
                draw(
                    st.sampled_from(
                        ["dedup user_id", "explode event", "key_by user_id\nrunning n=count()"]
                    )
                )
            )
    end = draw(st.integers(0, 4))
    aggs = ", ".join(
        f"a{i}={a}"
        for i, a in enumerate(draw(st.lists(st.sampled_from(AGG), min_size=1, max_size=3)))
    )
    if end == 1:
        lines += ["key_by category", f"agg {aggs}"]
    elif end == 2:
        w = draw(
            st.sampled_from(
                [
                    'tumbling "5m", time=ts',
                    'session "1m", time=ts',
                    'sliding "5m", every="1m", time=ts, lateness="30s"',
                ]
            )
        )
        lines += ["key_by user_id", w, f"agg {aggs}"]
    elif end == 3:
        lines += ["key_by event", f"top_k {draw(st.integers(-1, 3))}, by=price"]
    elif end == 4:
        lines.append("sketch theta(user_id) as u, kll(price) as q")
    return "\n".join(lines)


VALID = [
    'source clickstream(rows=50, seed=1)\nfilter event == "view"\nkey_by user_id\n'
    'tumbling "5m", time=ts, lateness="1m"\nagg n=count(), s=sum(price)',
    "sales = source store_sales(rows=20)\nsource clickstream(rows=20)\n"
    'with_columns customer_id=user_id\njoin sales, on=customer_id, within="10m", time=ts',
    "source df\nwith_columns w=v.fill_null(0).round(1), t=s.str.to_uppercase()\n"
    'select k, w, t, c=when(k > 1).then("big").otherwise("small")\nsink table("fz")',
    "source clickstream(rows=9)\nkey_by category\ntop_k 2, by=price\nsink callback(f)",
    "source rows\nfilter a.is_in([1, 2]) and b.is_not_null()\ndedup a",
    "source clickstream(rows=30)\nsketch theta(user_id) as users, kll(price) as p",
]
NOISE = list("()[]{}\"'#,.=:+-*/<>!&|~@\\\n\t ") + ["\n    ", "sink ", "source ", "é", "\x00"]


@st.composite
def edited_cells(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(VALID))
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(text)))
        op = draw(st.sampled_from(["insert", "delete", "replace", "duplicate"]))
        if op == "insert":
            text = text[:i] + draw(st.sampled_from(NOISE)) + text[i:]
        elif op == "delete":
            text = text[:i] + text[i + draw(st.integers(1, 5)) :]
        elif op == "replace":
            text = text[:i] + draw(st.sampled_from(NOISE)) + text[i + 1 :]
        else:
            j = draw(st.integers(i, len(text)))
            text = text[:j] + text[i:j] + text[j:]
    return text


TOKENS = [*STAGES, *ATOMS, *BINOPS, ",", "=", "(", ")", "[", "]", ".", "\n", "\n  ", " as ",
          "#", ":", "'", '"', "source", "sink", "table"]  # fmt: skip
soup = st.lists(st.sampled_from(TOKENS), max_size=25).map(" ".join)
cells = st.one_of(typed_cells(), grammar_cells(), edited_cells(), soup, st.text(max_size=60))


class Hang(Exception):
    pass


@contextmanager
def deadline(seconds: int) -> Iterator[None]:
    def on_alarm(signum: int, frame: object) -> None:
        raise Hang(f"no answer within {seconds} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


OUTCOMES: Counter[str] = Counter()


def check_cell(text: str) -> str:
    """'plan' or 'error'; fails the test on any other exception or a missing position."""
    with deadline(10):
        try:
            plan = sc.parse(text, dict(NS))
            compile_plan(plan)
        except StreamcellError as e:
            assert isinstance(e, DSLSyntaxError), f"{type(e).__name__} without a position: {e}"
            n_lines = max(1, len(text.splitlines()))
            assert 1 <= e.line <= n_lines and e.column >= 1, (e.line, e.column, str(e))
            return "error"
    return "plan"


def _run(text: str) -> None:
    OUTCOMES[check_cell(text)] += 1


@settings(
    max_examples=1_000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    database=None,
)
@given(cells)
def test_fuzz_every_cell_is_a_plan_or_a_positioned_error(text: str) -> None:
    _run(text)


@pytest.mark.slow
@pytest.mark.long  # 12,000 cells: a minute and a half on 2 cores
@settings(
    max_examples=12_000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    database=None,
)
@given(cells)
def test_fuzz_many_cells_slow(text: str) -> None:
    _run(text)


def test_fuzz_generators_reach_both_outcomes() -> None:
    """The generators are not all noise: fixed seeds give plans and errors alike."""
    got = Counter(check_cell(t) for t in VALID)
    assert got["plan"] == len(VALID)
    for text in ["source clickstream(rows=1)\nselect x=" + "-" * 5000 + "1",
                 "source clickstream(rows=1)\n" + "filter price > 0\n" * 3000,
                 'source clickstream(rows=1)\nsink parquet("o/", bogus=1)',
                 "source clickstream(rows=1)\nsink callback(f, bogus=1)"]:  # fmt: skip
        assert check_cell(text) == "error"
