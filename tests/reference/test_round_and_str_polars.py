"""``round`` and ``cast("str")`` of floats follow Polars itself, on every engine.

Polars rounds half to even (``round(2.5) == 2.0``) by ``round_ties_even(x * 10**d) / 10**d``
and writes NaN as ``NaN``, small numbers in decimals down to 1e-5 and exponents unpadded
(``1e-7``). Each test computes the expected frame with Polars, not by hand.
"""

from __future__ import annotations

import math
import random
import struct

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import streamcell as sc
from streamcell.backends.evaluate import float_text, round_float
from tests.helpers import table

EDGES = [
    0.5, 1.5, 2.5, -2.5, -0.5, -1.5, 0.125, -0.125, 0.25, 0.35, 0.15, 2.675, 1.005, -0.4,
    0.0, -0.0, 1e15 + 0.5, 4503599627370497.0, 2.0**52 + 0.5, 1e300, -1e300,
    1.7976931348623157e308, 5e-324, 123456.789, 1e16, 1e-5, 1.5e-5, 9.9e-6, 1e-7,
    math.nan, math.inf, -math.inf,
]  # fmt: skip


def _frame() -> pl.DataFrame:
    return pl.DataFrame({"i": list(range(len(EDGES))), "x": pl.Series(EDGES, dtype=pl.Float64)})


@pytest.mark.parametrize("digits", [0, 1, 2, 3, 17])
def test_round_matches_polars_on_edge_values(engine, digits):
    df = _frame()
    got = table(sc.source(df).select("i", r=sc.col("x").round(digits)).plan(), engine.options)
    want = df.select("i", r=pl.col("x").round(digits))
    assert_frame_equal(got, want, check_exact=True)
    # the sign of zero too (round(-0.4) is -0.0 in Polars)
    signs = [math.copysign(1, v) for v in got["r"].to_list() if v == 0]
    assert signs == [math.copysign(1, v) for v in want["r"].to_list() if v == 0]


def test_round_half_to_even_examples(engine):
    df = pl.DataFrame({"x": [2.5, 0.25, 0.125, 3.5, -2.5]})
    got = table(
        sc.source(df).select(a=sc.col("x").round(), b=sc.col("x").round(1)).plan(),
        engine.options,
    )
    assert got["a"].to_list() == [2.0, 0.0, 0.0, 4.0, -2.0]
    assert got["b"].to_list() == [2.5, 0.2, 0.1, 3.5, -2.5]


def test_cast_float_to_str_matches_polars(engine):
    df = _frame()
    got = table(sc.source(df).select("i", s=sc.col("x").cast("str")).plan(), engine.options)
    assert_frame_equal(got, df.select("i", s=pl.col("x").cast(pl.String)))
    assert got["s"][EDGES.index(2.5)] == "2.5"
    assert got.filter(pl.col("i") == len(EDGES) - 3)["s"].item() == "NaN"


def _random_doubles(n: int, seed: int) -> list[float]:
    r = random.Random(seed)
    out = [struct.unpack("d", struct.pack("Q", r.getrandbits(64)))[0] for _ in range(n)]
    out += [round(r.uniform(-1000, 1000), r.randint(0, 6)) for _ in range(n)]
    out += [float(f"{r.choice((1, 1.5, -2.25, 9.999))}e{r.randint(-330, 308)}") for _ in range(n)]
    return out


def test_reference_round_and_text_equal_polars_bit_for_bit():
    """The reference's rules (which every engine is compared with) against Polars on many
    doubles: random bit patterns, short decimals (the ties), powers of ten; every digit
    count that Polars treats differently (0, 1-299, the 2**d * 5**d split, 326 and up)."""
    vals = _random_doubles(3000, 7) + EDGES
    s = pl.Series(vals, dtype=pl.Float64)
    for d in [*range(0, 25), 299, 300, 310, 325, 326, 400]:
        want = s.round(d).to_list()
        got = [round_float(v, d) for v in vals]
        bad = [
            (v, d, w, g)
            for v, w, g in zip(vals, want, got)
            if struct.pack("d", w) != struct.pack("d", g) and not (w != w and g != g)
        ]
        assert not bad, bad[:5]
    want_s = s.cast(pl.String).to_list()
    bad_s = [(v, w, float_text(v)) for v, w in zip(vals, want_s) if float_text(v) != w]
    assert not bad_s, bad_s[:5]


def test_engines_round_and_text_random_doubles(engine):
    """Every engine against Polars on a few hundred random doubles (not only the edges)."""
    vals = _random_doubles(100, 11)
    df = pl.DataFrame({"i": list(range(len(vals))), "x": pl.Series(vals, dtype=pl.Float64)})
    plan = (
        sc.source(df)
        .select("i", r0=sc.col("x").round(), r2=sc.col("x").round(2), s=sc.col("x").cast("str"))
        .plan()
    )
    got = table(plan, engine.options)
    want = df.select(
        "i",
        r0=pl.col("x").round(0),
        r2=pl.col("x").round(2),
        s=pl.col("x").cast(pl.String),
    )
    assert_frame_equal(got, want, check_exact=True)
