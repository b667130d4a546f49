"""Expression semantics (evaluate.py's contract), checked on every engine.

Expected values are hand-computed or computed by Polars in batch on the same input; they
never come from streamcell itself.
"""

from __future__ import annotations

import datetime as dt
import math

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import streamcell as sc
from tests.helpers import check_against_reference, table

I64_MAX = 2**63 - 1
I64_MIN = -(2**63)


def select(engine, df: pl.DataFrame, **exprs) -> pl.DataFrame:
    return table(sc.source(df).select(**exprs).plan(), engine.options)


def frame(**cols) -> pl.DataFrame:
    """Columns given as (values, dtype) pairs."""
    return pl.DataFrame({n: pl.Series(n, v, dtype=t) for n, (v, t) in cols.items()})


# ------------------------------------------------------------------------ arithmetic


def test_int_arithmetic_matches_polars(engine):
    df = frame(a=([7, -7, 7, -7, 0, None, 5], pl.Int64), b=([2, 2, -2, -2, 3, 1, None], pl.Int64))
    a, b = sc.col("a"), sc.col("b")
    got = select(engine, df, add=a + b, sub=a - b, mul=a * b, fdiv=a // b, mod=a % b, neg=-a)
    pa_, pb = pl.col("a"), pl.col("b")
    want = df.select(
        add=pa_ + pb, sub=pa_ - pb, mul=pa_ * pb, fdiv=pa_ // pb, mod=pa_ % pb, neg=-pa_
    )
    assert_frame_equal(got, want)


def test_int_division_by_zero_gives_null(engine):
    df = frame(a=([7, -7, 0], pl.Int64))
    got = select(engine, df, q=sc.col("a") // 0, m=sc.col("a") % 0)
    assert got["q"].to_list() == [None, None, None]
    assert got["m"].to_list() == [None, None, None]
    assert got.schema == {"q": pl.Int64, "m": pl.Int64}


def test_true_division_is_float_and_by_zero_gives_inf_or_nan(engine):
    df = frame(a=([7, -7, 0, 1], pl.Int64), b=([2, 0, 0, 4], pl.Int64))
    got = select(engine, df, q=sc.col("a") / sc.col("b"))
    assert got.schema == {"q": pl.Float64}
    q = got["q"].to_list()
    assert q[0] == 3.5
    assert q[1] == -math.inf
    assert math.isnan(q[2])
    assert q[3] == 0.25


def test_float_division_by_zero(engine):
    df = frame(a=([1.5, -1.5, 0.0], pl.Float64))
    q = select(engine, df, q=sc.col("a") / 0.0)["q"].to_list()
    assert q[0] == math.inf and q[1] == -math.inf and math.isnan(q[2])


def test_float_floor_division_and_modulo(engine):
    df = frame(a=([7.5, -7.5, 7.5, 1.0], pl.Float64), b=([2.0, 2.0, -2.0, 4.0], pl.Float64))
    a, b = sc.col("a"), sc.col("b")
    got = select(engine, df, q=a // b, m=a % b)
    assert got.schema == {"q": pl.Float64, "m": pl.Float64}
    assert got["q"].to_list() == [3.0, -4.0, -4.0, 0.0]
    assert got["m"].to_list() == [1.5, 0.5, -0.5, 1.0]


def test_float_floor_division_result_stays_float_downstream(engine):
    # 7.5 // 2 must be the float 3.0 (not the int 3) all the way down the pipeline
    df = frame(a=([7.5], pl.Float64))
    got = select(engine, df, s=(sc.col("a") // 2).cast(str))
    assert got["s"].to_list() == ["3.0"]


def test_floor_division_by_nan_is_nan_not_a_crash(engine):
    df = frame(a=([1.0, 2.0], pl.Float64), b=([math.nan, 1.0], pl.Float64))
    q = select(engine, df, q=sc.col("a") // sc.col("b"))["q"].to_list()
    assert math.isnan(q[0]) and q[1] == 2.0


def test_int_overflow_wraps_at_64_bits(engine):
    df = frame(a=([I64_MAX, I64_MIN, 2**62], pl.Int64))
    a = sc.col("a")
    got = select(engine, df, plus=a + 1, minus=a - 1, times=a * 4, neg=-a)
    assert got["plus"].to_list() == [I64_MIN, I64_MIN + 1, 2**62 + 1]
    assert got["minus"].to_list() == [I64_MAX - 1, I64_MAX, 2**62 - 1]
    # 2**62 * 4 = 2**64 -> 0; I64_MAX * 4 = 2**65 - 4 -> -4; I64_MIN * 4 = -2**65 -> 0
    assert got["times"].to_list() == [-4, 0, 0]
    assert got["neg"].to_list() == [-I64_MAX, I64_MIN, -(2**62)]


def test_power(engine):
    df = frame(a=([2, 3, -2], pl.Int64), f=([4.0, 2.25, 0.25], pl.Float64))
    got = select(engine, df, p=sc.col("a") ** 3, r=sc.col("f") ** 0.5, w=sc.col("a") ** 64)
    assert got.schema == {"p": pl.Int64, "r": pl.Float64, "w": pl.Int64}
    assert got["p"].to_list() == [8, 27, -8]
    assert got["r"].to_list() == [2.0, 1.5, 0.5]
    # wrapping: 2**64 and (-2)**64 are 0 mod 2**64; 3**64 is reduced to a signed 64-bit value
    r = 3**64 % 2**64
    assert got["w"].to_list() == [0, r - 2**64 if r >= 2**63 else r, 0]


def test_int_to_negative_int_power_is_a_dead_letter(engine):
    df = frame(a=([2, 3], pl.Int64), b=([3, -1], pl.Int64))
    out = check_against_reference(
        sc.source(df).select(p=sc.col("a") ** sc.col("b")).plan(), engine.options
    )
    got = next(iter(out["tables"].values()))
    assert got["p"].to_list() == [8]
    dead = out["dead"]
    assert dead.height == 1
    assert dead["step"].to_list() == ["select#2"]
    assert "negative exponent" in dead["reason"][0]


def test_string_concatenation(engine):
    df = frame(s=(["ab", None, ""], pl.String))
    got = select(engine, df, t=sc.col("s") + "x")
    assert got["t"].to_list() == ["abx", None, "x"]


def test_mixed_int_float_arithmetic_widens_to_float(engine):
    df = frame(i=([3, None], pl.Int64), f=([0.5, 1.0], pl.Float64))
    got = select(engine, df, s=sc.col("i") + sc.col("f"), m=sc.col("i") * 2.0)
    assert got.schema == {"s": pl.Float64, "m": pl.Float64}
    assert got.rows() == [(3.5, 6.0), (None, None)]


def test_abs_round_and_negation(engine):
    df = frame(x=([2.5, -2.5, 0.125, -1.4, 3.0], pl.Float64), i=([-3, 4, 0, None, 1], pl.Int64))
    got = select(
        engine,
        df,
        a=sc.col("x").abs(),
        r=sc.col("x").round(),
        r2=sc.col("x").round(2),
        ai=sc.col("i").abs(),
        ri=sc.col("i").round(),
    )
    assert got["a"].to_list() == [2.5, 2.5, 0.125, 1.4, 3.0]
    # the documented rule: Polars' half to even (see test_round_and_str_polars.py)
    assert got["r"].to_list() == [2.0, -2.0, 0.0, -1.0, 3.0]
    assert got["r2"].to_list() == [2.5, -2.5, 0.12, -1.4, 3.0]
    assert got["ai"].to_list() == [3, 4, 0, None, 1]
    assert got["ri"].to_list() == [-3, 4, 0, None, 1]
    assert got.schema["ri"] == pl.Int64


# ------------------------------------------------------------------------ comparisons


def test_comparisons_match_polars_including_nulls(engine):
    df = frame(a=([1, 2, 3, None, 2], pl.Int64), b=([2, 2, 1, 1, None], pl.Int64))
    a, b = sc.col("a"), sc.col("b")
    got = select(engine, df, eq=a == b, ne=a != b, lt=a < b, le=a <= b, gt=a > b, ge=a >= b)
    pa_, pb = pl.col("a"), pl.col("b")
    want = df.select(
        eq=pa_ == pb, ne=pa_ != pb, lt=pa_ < pb, le=pa_ <= pb, gt=pa_ > pb, ge=pa_ >= pb
    )
    assert_frame_equal(got, want)
    assert got.row(3) == (None,) * 6 and got.row(4) == (None,) * 6


def test_comparison_with_null_literal_is_null(engine):
    df = frame(a=([1, None], pl.Int64))
    got = select(engine, df, eq=sc.col("a") == None)  # noqa: E711 - a null comparison on purpose
    assert got["eq"].to_list() == [None, None]


def test_nan_compares_above_every_number_and_equal_to_itself(engine):
    df = frame(x=([math.nan, 1.0, math.inf], pl.Float64))
    x = sc.col("x")
    got = select(engine, df, gt=x > 1e300, eq=x == math.nan, lt=x < math.inf)
    assert got["gt"].to_list() == [True, False, True]
    assert got["eq"].to_list() == [True, False, False]
    assert got["lt"].to_list() == [False, True, False]


def test_string_and_datetime_comparisons(engine):
    t0 = dt.datetime(2024, 1, 1, 12)
    df = frame(
        s=(["apple", "banana", None], pl.String),
        t=([t0, t0 + dt.timedelta(hours=1), None], pl.Datetime("us")),
    )
    got = select(
        engine,
        df,
        s_lt=sc.col("s") < "b",
        t_ge=sc.col("t") >= sc.lit(t0 + dt.timedelta(minutes=30)),
    )
    assert got["s_lt"].to_list() == [True, False, None]
    assert got["t_ge"].to_list() == [False, True, None]


def test_filter_treats_null_as_false(engine):
    df = frame(a=([1, 5, None, 7, 3], pl.Int64))
    out = check_against_reference(sc.source(df).filter(sc.col("a") > 2).plan(), engine.options)
    got = next(iter(out["tables"].values()))
    assert_frame_equal(got, df.filter(pl.col("a") > 2))
    counts = {r["step"]: r for r in out["counts"].to_dicts()}
    assert counts["filter#2"]["filtered"] == 2  # 1 and null
    assert counts["filter#2"]["rows_out"] == 3


# ---------------------------------------------------------------------- Kleene logic

_T, _F, _N = True, False, None
_PAIRS = [(x, y) for x in (_T, _F, _N) for y in (_T, _F, _N)]
_AND = {
    (_T, _T): _T,
    (_T, _F): _F,
    (_T, _N): _N,
    (_F, _T): _F,
    (_F, _F): _F,
    (_F, _N): _F,
    (_N, _T): _N,
    (_N, _F): _F,
    (_N, _N): _N,
}
_OR = {
    (_T, _T): _T,
    (_T, _F): _T,
    (_T, _N): _T,
    (_F, _T): _T,
    (_F, _F): _F,
    (_F, _N): _N,
    (_N, _T): _T,
    (_N, _F): _N,
    (_N, _N): _N,
}


def test_kleene_and_or_not(engine):
    df = frame(p=([x for x, _ in _PAIRS], pl.Boolean), q=([y for _, y in _PAIRS], pl.Boolean))
    p, q = sc.col("p"), sc.col("q")
    got = select(engine, df, and_=p & q, or_=p | q, not_=~p)
    assert got["and_"].to_list() == [_AND[k] for k in _PAIRS]
    assert got["or_"].to_list() == [_OR[k] for k in _PAIRS]
    assert got["not_"].to_list() == [{_T: _F, _F: _T, _N: _N}[x] for x, _ in _PAIRS]


def test_kleene_in_filter_keeps_only_true(engine):
    df = frame(
        p=([x for x, _ in _PAIRS], pl.Boolean),
        q=([y for _, y in _PAIRS], pl.Boolean),
        i=(list(range(9)), pl.Int64),
    )
    got = table(sc.source(df).filter(sc.col("p") | sc.col("q")).plan(), engine.options)
    assert got["i"].to_list() == [i for i, k in enumerate(_PAIRS) if _OR[k] is True]


def test_comparison_chain_with_null_operand(engine):
    # null > 0 is null, and null & null is null; false & <anything> is false
    df = frame(a=([0, 1, None], pl.Int64))
    got = select(engine, df, r=(sc.col("a") > 0) & (sc.col("a") < 5))
    assert got["r"].to_list() == [False, True, None]


# ------------------------------------------------------------------------ null helpers


def test_is_null_is_not_null_fill_null(engine):
    df = frame(
        a=([1, None, 3], pl.Int64),
        s=([None, "x", None], pl.String),
        f=([None, 1.5, None], pl.Float64),
    )
    a = sc.col("a")
    got = select(
        engine,
        df,
        n=a.is_null(),
        nn=a.is_not_null(),
        fa=a.fill_null(0),
        fs=sc.col("s").fill_null("?"),
        ff=sc.col("f").fill_null(sc.col("a")),
    )
    want = df.select(
        n=pl.col("a").is_null(),
        nn=pl.col("a").is_not_null(),
        fa=pl.col("a").fill_null(0),
        fs=pl.col("s").fill_null("?"),
        ff=pl.col("f").fill_null(pl.col("a").cast(pl.Float64)),
    )
    assert_frame_equal(got, want)


def test_null_propagates_through_functions(engine):
    df = frame(s=([None], pl.String), t=([None], pl.Datetime("us")), x=([None], pl.Float64))
    got = select(
        engine,
        df,
        up=sc.col("s").str.to_uppercase(),
        c=sc.col("s").str.contains("a"),
        y=sc.col("t").dt.year(),
        r=sc.col("x").round(),
        ab=sc.col("x").abs(),
        cs=sc.col("x").cast(str),
    )
    assert got.row(0) == (None,) * 6


# ------------------------------------------------------------------------------ casts


def test_cast_successes(engine):
    df = frame(
        i=([42, 0, -3], pl.Int64),
        f=([2.7, -2.7, 0.0], pl.Float64),
        s=(["17", "-5", "0"], pl.String),
        b=([True, False, None], pl.Boolean),
        sb=(["true", "false", "TRUE"], pl.String),
        sd=(["2024-03-01 12:30:00", "2024-02-29 00:00:01", "1970-01-01 00:00:00"], pl.String),
    )
    got = select(
        engine,
        df,
        i_f=sc.col("i").cast(float),
        i_s=sc.col("i").cast(str),
        i_b=sc.col("i").cast(bool),
        f_i=sc.col("f").cast(int),
        f_s=sc.col("f").cast("str"),
        s_i=sc.col("s").cast(int),
        s_f=sc.col("s").cast(float),
        b_i=sc.col("b").cast(int),
        b_s=sc.col("b").cast(str),
        sb_b=sc.col("sb").cast(bool),
        sd_t=sc.col("sd").cast("datetime"),
        sd_d=sc.col("sd").cast("datetime").cast("date"),
        t_i=sc.col("sd").cast("datetime").cast(int),
        i_t=sc.col("i").cast("datetime"),
    )
    assert got["i_f"].to_list() == [42.0, 0.0, -3.0]
    assert got["i_s"].to_list() == ["42", "0", "-3"]
    assert got["i_b"].to_list() == [True, False, True]
    assert got["f_i"].to_list() == [2, -2, 0]  # truncation toward zero
    assert got["f_s"].to_list() == ["2.7", "-2.7", "0.0"]
    assert got["s_i"].to_list() == [17, -5, 0]
    assert got["s_f"].to_list() == [17.0, -5.0, 0.0]
    assert got["b_i"].to_list() == [1, 0, None]
    assert got["b_s"].to_list() == ["true", "false", None]
    assert got["sb_b"].to_list() == [True, False, True]
    assert got["sd_t"].to_list() == [
        dt.datetime(2024, 3, 1, 12, 30),
        dt.datetime(2024, 2, 29, 0, 0, 1),
        dt.datetime(1970, 1, 1),
    ]
    assert got["sd_d"].to_list() == [dt.date(2024, 3, 1), dt.date(2024, 2, 29), dt.date(1970, 1, 1)]
    # datetime <-> int is microseconds since the epoch
    assert got["t_i"].to_list() == [1_709_296_200_000_000, 1_709_164_801_000_000, 0]
    assert got["i_t"].to_list() == [
        dt.datetime(1970, 1, 1, 0, 0, 0, 42),
        dt.datetime(1970, 1, 1),
        dt.datetime(1969, 12, 31, 23, 59, 59, 999_997),
    ]
    assert got.schema["sd_t"] == pl.Datetime("us") and got.schema["sd_d"] == pl.Date


def test_cast_datetime_to_str_matches_polars(engine):
    df = frame(t=([dt.datetime(2024, 5, 6, 7, 8, 9, 123)], pl.Datetime("us")))
    got = select(engine, df, s=sc.col("t").cast(str))
    assert_frame_equal(got, df.select(s=pl.col("t").cast(pl.String)))


@pytest.mark.parametrize(
    ("values", "dtype", "target", "bad"),
    [
        (["1", "abc", "3"], pl.String, int, "'abc'"),
        (["1.5", "x1", "3"], pl.String, float, "'x1'"),
        (["true", "yes", "false"], pl.String, bool, "'yes'"),
        (["2024-01-01", "not a date", "2024-01-03"], pl.String, "datetime", "'not a date'"),
        ([1.0, math.nan, 3.0], pl.Float64, int, "nan"),
        ([1.0, 1e300, 3.0], pl.Float64, int, "1e+300"),
    ],
)
def test_cast_failure_goes_to_dead_letters_with_reason(engine, values, dtype, target, bad):
    df = pl.DataFrame({"v": pl.Series(values, dtype=dtype), "i": [0, 1, 2]})
    plan = sc.source(df).select("i", c=sc.col("v").cast(target)).plan()
    out = check_against_reference(plan, engine.options)
    got = next(iter(out["tables"].values()))
    assert got["i"].to_list() == [0, 2]  # the bad row is not in the output...
    dead = out["dead"]  # ...but in the dead letters, with a reason that names the value
    assert dead.height == 1
    row = dead.row(0, named=True)
    assert row["step"] == "select#2"
    assert row["reason"].startswith("cannot cast") and bad in row["reason"]
    assert row["position"] == "source#1 row 1"
    counts = {r["step"]: r for r in out["counts"].to_dicts()}
    assert counts["select#2"]["dead"] == 1 and counts["select#2"]["rows_out"] == 2


def test_cast_in_filter_failure_is_a_dead_letter(engine):
    df = frame(v=(["5", "?", "1"], pl.String))
    out = check_against_reference(
        sc.source(df).filter(sc.col("v").cast(int) > 2).plan(), engine.options
    )
    got = next(iter(out["tables"].values()))
    assert got["v"].to_list() == ["5"]
    counts = {r["step"]: r for r in out["counts"].to_dicts()}
    assert (counts["filter#2"]["filtered"], counts["filter#2"]["dead"]) == (1, 1)


# ------------------------------------------------------------------- when/then/otherwise


def test_when_then_otherwise_matches_polars(engine):
    df = frame(x=([-5, 0, 5, 50, None], pl.Int64))
    x = sc.col("x")
    e = (
        sc.when(x < 0)
        .then(sc.lit("neg"))
        .when(x < 10)
        .then(sc.lit("small"))
        .otherwise(sc.lit("big"))
    )
    px = pl.col("x")
    want = df.select(
        c=pl.when(px < 0)
        .then(pl.lit("neg"))
        .when(px < 10)
        .then(pl.lit("small"))
        .otherwise(pl.lit("big"))
    )
    assert_frame_equal(select(engine, df, c=e), want)
    # a null condition is not true: falls through to the next branch / otherwise
    assert want["c"].to_list()[-1] == "big"


def test_when_unifies_int_and_float_and_null(engine):
    df = frame(x=([1, 2, 3], pl.Int64))
    x = sc.col("x")
    got = select(
        engine, df, c=sc.when(x == 1).then(x).when(x == 2).then(sc.lit(None)).otherwise(x * 0.5)
    )
    assert got.schema == {"c": pl.Float64}
    assert got["c"].to_list() == [1.0, None, 1.5]


def test_when_via_dsl_conditional_expression(engine):
    df = frame(x=([1, 20], pl.Int64))
    plan = sc.parse("source df\nselect c = 'lo' if x < 10 else 'hi'", {"df": df})
    assert table(plan, engine.options)["c"].to_list() == ["lo", "hi"]


# ------------------------------------------------------------------------- strings


def test_string_functions_match_polars(engine):
    df = frame(s=(["Hello World", "héllo", "", "a.b", None, "WORLD"], pl.String))
    s = sc.col("s")
    got = select(
        engine,
        df,
        c=s.str.contains("o W"),
        dot=s.str.contains("."),
        sw=s.str.starts_with("h"),
        ew=s.str.ends_with("LD"),
        lo=s.str.to_lowercase(),
        up=s.str.to_uppercase(),
        n=s.str.len_chars(),
    )
    ps = pl.col("s").str
    want = df.select(
        c=ps.contains("o W", literal=True),
        dot=ps.contains(".", literal=True),
        sw=ps.starts_with("h"),
        ew=ps.ends_with("LD"),
        lo=ps.to_lowercase(),
        up=ps.to_uppercase(),
        n=ps.len_chars().cast(pl.Int64),
    )
    assert_frame_equal(got, want)


def test_string_function_aliases_in_dsl(engine):
    df = frame(s=(["Abc", "xyz"], pl.String))
    plan = sc.parse(
        "source df\nselect u = s.str.upper(), l = s.str.lower(), n = s.str.len(), "
        "b = s.str.startswith('A')",
        {"df": df},
    )
    got = table(plan, engine.options)
    assert got.rows() == [("ABC", "abc", 3, True), ("XYZ", "xyz", 3, False)]


# ---------------------------------------------------------------------------- dates


def test_datetime_extraction_matches_polars(engine):
    ts = [
        dt.datetime(2024, 2, 29, 23, 59, 58, 7),
        dt.datetime(1999, 12, 31, 0, 0, 0),
        dt.datetime(2024, 1, 7, 13, 5, 1),
        dt.datetime(1969, 7, 20, 20, 17, 40),
        None,
    ]
    df = frame(t=(ts, pl.Datetime("us")))
    t = sc.col("t").dt
    got = select(
        engine,
        df,
        y=t.year(),
        mo=t.month(),
        d=t.day(),
        h=t.hour(),
        mi=t.minute(),
        s=t.second(),
        wd=t.weekday(),
        date=t.date(),
        us=t.epoch_us(),
    )
    p = pl.col("t").dt
    want = df.select(
        y=p.year(),
        mo=p.month(),
        d=p.day(),
        h=p.hour(),
        mi=p.minute(),
        s=p.second(),
        wd=p.weekday(),
        date=p.date(),
        us=p.epoch("us"),
    )
    want = want.with_columns(pl.exclude("date").cast(pl.Int64))
    assert_frame_equal(got, want)
    assert got["wd"].to_list()[:3] == [4, 5, 7]  # Thursday, Friday, Sunday (ISO: Monday = 1)


def test_date_column_extraction(engine):
    df = frame(d=([dt.date(2023, 3, 15), dt.date(2000, 1, 1)], pl.Date))
    got = select(
        engine, df, y=sc.col("d").dt.year(), wd=sc.col("d").dt.weekday(), same=sc.col("d").dt.date()
    )
    assert got.rows() == [(2023, 3, dt.date(2023, 3, 15)), (2000, 6, dt.date(2000, 1, 1))]


# ----------------------------------------------------------------------------- is_in


def test_is_in(engine):
    df = frame(x=([1, 2, 3, None], pl.Int64), s=(["a", "b", "c", "d"], pl.String))
    got = select(engine, df, i=sc.col("x").is_in([1, 3]), j=sc.col("s").is_in(["b", "d"]))
    assert got["i"].to_list() == [True, False, True, None]
    assert got["j"].to_list() == [False, True, False, True]


def test_in_and_not_in_via_dsl(engine):
    df = frame(x=([1, 2, 3], pl.Int64))
    got = table(
        sc.parse("source df\nselect a = x in [1, 3], b = x not in [1, 3]", {"df": df}),
        engine.options,
    )
    assert got.rows() == [(True, False), (False, True), (True, False)]


# -------------------------------------------------------------------- with_columns


def test_with_columns_matches_polars(engine):
    df = frame(
        p=([1.5, 2.0, None], pl.Float64), q=([2, 3, 4], pl.Int64), name=(["a", "b", "c"], pl.String)
    )
    plan = sc.source(df).with_columns(total=sc.col("p") * sc.col("q"), q=sc.col("q") + 1).plan()
    want = df.with_columns(total=pl.col("p") * pl.col("q"), q=pl.col("q") + 1)
    assert_frame_equal(table(plan, engine.options), want)
