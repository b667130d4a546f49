"""The %%stream language: parsing, printing, errors with positions, DSL == fluent API."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import streamcell as sc
from streamcell import plan as P
from streamcell.dsl import parse
from streamcell.errors import DSLSyntaxError, PlanError, StreamcellError
from streamcell.expr import AggCall, Binary, Call, Col, Lit, When

FLAGSHIP = """\
source clickstream(rows=1000, users=100, seed=1)
filter event == "view"
key_by user_id
session gap="30m", time=ts
agg pages=count(), last_item=last(item_id), spent=sum(price)
sink table
"""


def flagship_fluent() -> sc.Plan:
    return (
        sc.source(sc.clickstream(rows=1000, users=100, seed=1))
        .filter(sc.col("event") == "view")
        .key_by("user_id")
        .session("30m", time="ts")
        .agg(pages=sc.count(), last_item=sc.col("item_id").last(), spent=sc.col("price").sum())
        .plan()
    )


def test_flagship_dsl_equals_fluent():
    assert sc.parse(FLAGSHIP) == flagship_fluent()


def test_step_ids_are_stable_and_ordered():
    p = sc.parse(FLAGSHIP)
    assert [s.step_id for s in p.steps] == ["source#1", "filter#2", "aggregate#3", "sink#4"]
    assert sc.parse(FLAGSHIP).steps[2].step_id == "aggregate#3"


def test_plan_is_frozen():
    p = sc.parse(FLAGSHIP)
    with pytest.raises(AttributeError):
        p.sinks[0].name = "x"  # type: ignore[misc]


def test_print_parse_identity_flagship():
    p = sc.parse(FLAGSHIP)
    assert sc.parse(p.to_dsl()) == p
    assert p.to_dsl() == sc.parse(p.to_dsl()).to_dsl()


def test_comments_blank_lines_and_continuations():
    text = """
    # a comment
source clickstream(rows=10, seed=1)   # trailing comment

with_columns total=price * 2,
    cheap=price < 5
sink table("out")
"""
    p = sc.parse(text)
    wc = p.steps[1]
    assert isinstance(wc, P.WithColumns)
    assert [n for n, _ in wc.exprs] == ["total", "cheap"]
    assert p.sinks[0].name == "out"


def test_python_syntax_alternatives_build_the_same_ir():
    a = sc.parse(
        "source clickstream(rows=10)\nfilter price > 1 and not (event == 'x') or item_id in [1, 2]\n"
    )
    b = sc.parse(
        "source clickstream(rows=10)\nfilter (price > 1) & ~(event == 'x') | item_id.is_in([1, 2])\n"
    )
    assert a == b
    c = sc.parse("source clickstream(rows=10)\nwith_columns y=1 if price > 5 else 0\n")
    d = sc.parse(
        "source clickstream(rows=10)\nwith_columns y=when(price > 5).then(1).otherwise(0)\n"
    )
    assert c == d


def test_union_and_join_named_streams_round_trip():
    text = """\
sales = source store_sales(rows=100, seed=2)
filter quantity > 1
clicks = source clickstream(rows=100, seed=1)
with_columns customer_id=user_id
join sales, on=customer_id, within="1h", time=ts
sink table("joined")
"""
    p = sc.parse(text)
    j = [s for s in p.steps if isinstance(s, P.Join)][0]
    assert j.on == ("customer_id",) and j.within == "1h"
    assert sc.parse(p.to_dsl()) == p


def _err(text: str, ns: dict | None = None) -> DSLSyntaxError:
    with pytest.raises(DSLSyntaxError) as ei:
        sc.compile_plan(sc.parse(text, ns))
    return ei.value


def test_syntax_error_has_line_column_and_caret():
    e = _err("source clickstream(rows=10)\nfilter price >\n")
    assert e.line == 2
    assert "invalid syntax" in str(e)
    assert "filter price >" in str(e) and "^" in str(e)


def test_unknown_stage_points_at_keyword():
    e = _err("source clickstream(rows=10)\n  fliter price > 1\n".replace("  fliter", "fliter"))
    assert (e.line, e.column) == (2, 1)
    assert "unknown stage 'fliter'" in str(e)


def test_unknown_column_lists_available_columns():
    e = _err("source clickstream(rows=10)\nfilter prize > 1\n")
    assert isinstance(e, PlanError)
    assert (e.line, e.column) == (2, 8)
    assert "unknown column 'prize'" in str(e)
    assert "price" in str(e) and "user_id" in str(e)


def test_type_error_sum_of_string_at_compile_time():
    e = _err("source clickstream(rows=10)\nkey_by user_id\nagg s=sum(event)\n")
    assert e.line == 3 and e.column == 7
    assert "sum() needs a numeric column; event is str" in str(e)


def test_type_error_filter_needs_bool():
    e = _err("source clickstream(rows=10)\nfilter price + 1\n")
    assert "filter needs a bool expression" in str(e)


def test_string_duration_on_int_time_column_is_rejected():
    df = pl.DataFrame({"t": [1, 2], "v": [1.0, 2.0]})
    e = _err('source df\ntumbling size="1m", time=t\nagg n=count()\n', {"df": df})
    assert "time column is int" in str(e)


def test_window_without_agg_is_an_error():
    e = _err('source clickstream(rows=10)\ntumbling size="1m", time=ts\nfilter price > 1\n')
    assert "must be followed by 'agg'" in str(e)


def test_source_must_come_first_and_names_must_exist():
    assert "must start with a 'source'" in str(_err("filter x > 1\n"))
    assert "not defined in the notebook namespace" in str(_err("source nope\n"))
    assert "unknown stream 'other'" in str(_err("source clickstream(rows=1)\nunion other\n"))


def test_aggregate_outside_agg_is_rejected():
    assert "only allowed in 'agg'" in str(
        _err("source clickstream(rows=1)\nwith_columns s=sum(price)\n")
    )


def test_unknown_function_is_named():
    e = _err("source clickstream(rows=1)\nfilter price.sqrt() > 1\n")
    assert "unknown function 'sqrt'" in str(e)


# ----------------------------------------------------------------- hypothesis: DSL == fluent

NUM = ["price", "item_id", "category"]


@st.composite
def num_expr(draw, depth=0):
    if depth > 2 or draw(st.booleans()):
        if draw(st.booleans()):
            c = draw(st.sampled_from(NUM))
            return (c, sc.col(c))
        v = draw(
            st.integers(-50, 50)
            | st.floats(-100, 100, allow_nan=False, allow_infinity=False).map(lambda x: round(x, 2))
        )
        return (repr(v), sc.lit(v))
    (ta, ea), (tb, eb) = draw(num_expr(depth + 1)), draw(num_expr(depth + 1))
    op = draw(st.sampled_from(["+", "-", "*", "/"]))
    fn = {
        "+": lambda a, b: a + b,
        "-": lambda a, b: a - b,
        "*": lambda a, b: a * b,
        "/": lambda a, b: a / b,
    }[op]
    return (f"({ta} {op} {tb})", fn(ea, eb))


@st.composite
def bool_expr(draw, depth=0):
    kind = draw(
        st.sampled_from(["cmp", "str", "null"] + (["and", "or", "not"] if depth < 2 else []))
    )
    if kind == "cmp":
        (ta, ea), (tb, eb) = draw(num_expr(1)), draw(num_expr(1))
        op = draw(st.sampled_from(["<", "<=", ">", ">=", "==", "!="]))
        fns = {
            "<": "__lt__",
            "<=": "__le__",
            ">": "__gt__",
            ">=": "__ge__",
            "==": "__eq__",
            "!=": "__ne__",
        }
        return (f"({ta} {op} {tb})", getattr(ea, fns[op])(eb))
    if kind == "str":
        s = draw(st.sampled_from(["vi", "ca", "purchase"]))
        fn = draw(st.sampled_from(["contains", "starts_with"]))
        return (f"event.str.{fn}({s!r})", getattr(sc.col("event").str, fn)(s))
    if kind == "null":
        return ("user_id.is_null()", sc.col("user_id").is_null())
    if kind == "not":
        t, e = draw(bool_expr(depth + 1))
        return (f"(not {t})", ~e)
    (ta, ea), (tb, eb) = draw(bool_expr(depth + 1)), draw(bool_expr(depth + 1))
    return (f"({ta} {kind} {tb})", (ea & eb) if kind == "and" else (ea | eb))


AGGS = ["count", "sum", "min", "max", "mean", "first", "last", "count_distinct"]


@st.composite
def pipelines(draw):
    rows = draw(st.integers(0, 500))
    seed = draw(st.integers(0, 5))
    lines = [f"source clickstream(rows={rows}, seed={seed})"]
    s = sc.source(sc.clickstream(rows=rows, seed=seed))
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["filter", "with_columns", "dedup"]))
        if kind == "filter":
            t, e = draw(bool_expr())
            lines.append(f"filter {t}")
            s = s.filter(e)
        elif kind == "with_columns":
            t, e = draw(num_expr())
            lines.append(f"with_columns extra={t}")
            s = s.with_columns(extra=e)
        else:
            lines.append("dedup user_id, item_id")
            s = s.dedup("user_id", "item_id")
    end = draw(st.sampled_from(["none", "agg", "window", "top_k", "running", "select"]))
    keys = draw(st.sampled_from([(), ("user_id",), ("category", "event")]))
    keyed = s.key_by(*keys) if keys else s
    if keys and end in ("agg", "window", "top_k", "running"):
        lines.append("key_by " + ", ".join(keys))
    if end in ("agg", "window", "running"):
        fns = draw(st.lists(st.sampled_from(AGGS), min_size=1, max_size=3, unique=True))
        # the test writes method syntax (price.sum()); the printer writes sum(price)
        parts = [f"a_{f}=price.{'n_unique' if f == 'count_distinct' else f}()" for f in fns]
        aggs = {f"a_{f}": getattr(sc.col("price"), f)() for f in fns}
        if end == "window":
            w = draw(st.sampled_from(["tumbling", "session"]))
            size = draw(st.sampled_from(["1m", "30m", "1h"]))
            lines.append(f"{w} {size!r}, time=ts")
            keyed = getattr(keyed, w)(size, time="ts")
        lines.append(("running " if end == "running" else "agg ") + ", ".join(parts))
        s = keyed.running(**aggs) if end == "running" else keyed.agg(**aggs)
    elif end == "top_k":
        k = draw(st.integers(1, 5))
        lines.append(f"top_k {k}, by=price")
        s = keyed.top_k(k, by="price")
    elif end == "select":
        lines.append("select user_id, double=price * 2")
        s = s.select("user_id", double=sc.col("price") * 2)
    return "\n".join(lines) + "\n", s.plan()


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pipelines())
def test_dsl_and_fluent_build_equal_plans(case):
    text, fluent = case
    assert sc.parse(text) == fluent


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pipelines())
def test_parse_print_parse_is_identity(case):
    text, _ = case
    p = sc.parse(text)
    printed = p.to_dsl()
    assert sc.parse(printed) == p
    assert sc.parse(printed).to_dsl() == printed


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pipelines())
def test_random_pipelines_compile_and_conserve_rows(case):
    """Every generated pipeline type-checks, runs, and accounts for every row."""
    text, _ = case
    run = sc.parse(text).start("hyp")
    run.wait(60)
    assert run.status == "finished", run.error
    for r in run.counts().iter_rows(named=True):
        assert r["rows_in"] == r["consumed"] + r["filtered"] + r["late"] + r["dead"]


def test_expression_printer_respects_precedence():
    e = sc.parse("source clickstream(rows=1)\nwith_columns y=(price + 1) * 2 - -3 ** 2\n").steps[1]
    assert isinstance(e, P.WithColumns)
    ir = e.exprs[0][1]
    assert isinstance(ir, Binary) and ir.op == "-"
    from streamcell.expr import to_text

    assert to_text(ir) == "(price + 1) * 2 - -3 ** 2"


def test_ir_node_types():
    p = sc.parse(
        "source clickstream(rows=1)\nwith_columns a=price.cast(int), b=when(price > 1).then('x').otherwise(None)\nkey_by user_id\nagg n=count()\n"
    )
    wc = p.steps[1]
    assert isinstance(wc, P.WithColumns)
    a, b = wc.exprs[0][1], wc.exprs[1][1]
    assert isinstance(a, Call) and a.fn == "cast" and a.args[1] == Lit("int")
    assert isinstance(b, When) and b.otherwise == Lit(None)
    agg = p.steps[2]
    assert isinstance(agg, P.Aggregate) and agg.aggs == (("n", AggCall("count", None)),)
    assert agg.keys == ("user_id",) and isinstance(Col("x"), Col)


def test_explain_and_html():
    p = sc.parse(FLAGSHIP, name="sessions")
    text = p.explain()
    assert "aggregate#3" in text and "hash(user_id)" in text and "window_start: datetime" in text
    html = p._repr_html_()
    assert "<svg" in html and "aggregate#3" in html and "hash(user_id)" in html


@pytest.mark.parametrize(
    "cell, suggestion",
    [
        ("source clickstream(rows=5)\nfilterr price > 1\nsink table", "'filter'"),
        ("source clickstream(rows=5)\nwith_column x = 1\nsink table", "'with_columns'"),
        ("source clickstrem(rows=5)\nsink table", "'clickstream'"),
        ("source clickstream(rows=5)\nfilter prise > 1\nsink table", "'price'"),
        (
            "source clickstream(rows=5)\nfilter event.str.startswit('a')\nsink table",
            "'str.starts_with'",
        ),
        ("source clickstream(rows=5)\nkey_by user_id\nagg n = cont()\nsink table", "'count'"),
    ],
)
def test_unknown_names_suggest_the_closest_known_one(cell, suggestion):
    with pytest.raises(StreamcellError) as e:
        sc.compile_plan(parse(cell))
    assert f"(did you mean {suggestion}?)" in str(e.value)


def test_no_suggestion_when_nothing_is_close():
    with pytest.raises(StreamcellError) as e:
        parse("source clickstream(rows=5)\nzzzzqqq price > 1\nsink table")
    assert "did you mean" not in str(e.value) and "unknown stage 'zzzzqqq'" in str(e.value)


def test_first_line_numbers_errors_as_the_cell_shows_them():
    text = "source clickstream(rows=5)\n\nfilterr price > 1\nsink table"
    for first, line in ((1, 3), (2, 4)):
        with pytest.raises(DSLSyntaxError) as e:
            parse(text, first_line=first)
        assert (e.value.line, e.value.column) == (line, 1)


def test_float_of_a_string_that_is_no_number_is_a_positioned_error():
    # found by test_fuzz_many_cells_slow: float("") escaped as a raw ValueError
    with pytest.raises(DSLSyntaxError) as e:
        parse('source clickstream(rows=5)\nfilter float("")')
    assert (e.value.line, e.value.column) == (2, 14)


@pytest.mark.parametrize("arg", ['within=-"10m"', "within=-True", "within=-None"])
def test_a_minus_before_a_constant_that_is_not_a_number_is_a_syntax_error(arg):
    # found by test_fuzz_many_cells_slow: it raised Python's TypeError from the parser
    text = (
        "sales = source store_sales(rows=20)\nsource clickstream(rows=20)\n"
        f"with_columns customer_id=user_id\njoin sales, on=customer_id, {arg}, time=ts"
    )
    with pytest.raises(DSLSyntaxError) as e:
        parse(text)
    assert "'-' goes before a number only" in str(e.value)
    assert e.value.line == 4
