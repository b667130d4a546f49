"""The interval join on Spark (issue 19, part 7): one Spark equi-join over the admitted rows
of the merged inputs, equal to the reference (table in arrival order, late rows, dead
letters, counts) on random inputs with null and NaN keys, null times and out-of-order rows,
and to a Polars interval join where nothing is late."""

from __future__ import annotations

import datetime as dt
import random

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import streamcell as sc
from streamcell.options import RunOptions
from tests.helpers import check_against_reference

pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark

SPARK = RunOptions(engine="spark")


def counts(out: dict) -> dict[str, dict]:
    return {r["step"]: r for r in out["counts"].to_dicts()}


def _side(rnd: random.Random, n: int, tag: str, float_key: bool) -> pl.DataFrame:
    keys: list[object] = []
    times: list[int | None] = []
    t = 0
    for _ in range(n):
        t += rnd.choice((0, 1, 2, 3))
        jitter = rnd.choice((0, 0, 0, -4, -9, -30))  # out of order: some late, some admitted
        times.append(None if rnd.random() < 0.03 else t + jitter)
        k = rnd.randrange(6)
        if rnd.random() < 0.05:
            keys.append(None)
        elif float_key and rnd.random() < 0.05:
            keys.append(float("nan"))
        else:
            keys.append(float(k) if float_key else k)
    return pl.DataFrame(
        {"k": keys, "t": times, tag: [f"{tag}{i}" for i in range(n)]},
        schema={"k": pl.Float64 if float_key else pl.Int64, "t": pl.Int64, tag: pl.String},
    )


@pytest.mark.parametrize("float_key", [False, True])
@pytest.mark.parametrize("seed,lateness", [(1, 5), (2, 10_000)])
def test_join_on_spark_equals_the_reference_on_random_inputs(seed, lateness, float_key):
    rnd = random.Random(seed)
    left, right = _side(rnd, 400, "lv", float_key), _side(rnd, 300, "rv", float_key)
    plan = (
        sc.source(left).join(sc.source(right), on="k", within=4, time="t", lateness=lateness).plan()
    )
    out = check_against_reference(plan, SPARK)  # tables, late rows, dead letters, counts
    c = counts(out)["join#3"]
    assert c["rows_in"] == 700 and c["dead"] > 0
    got = next(iter(out["tables"].values()))
    if lateness == 5:  # the right input arrives after the left one: most of it is late
        assert c["late"] > 100 and got.height > 0
    else:
        assert c["late"] == 0 and got.height > 150
        if float_key:  # NaN keys are one value (as in Polars): they match each other
            assert got.filter(pl.col("k").is_nan()).height > 0


def test_join_on_spark_equals_a_polars_interval_join_when_nothing_is_late():
    rnd = random.Random(5)
    t0 = dt.datetime(2024, 1, 1)
    rows = []
    for i in range(600):  # times never decrease in arrival order: nothing is late
        rows.append((rnd.randrange(20), t0 + dt.timedelta(seconds=i // 2), i))
    left = pl.DataFrame(
        [(k, ts, f"l{i}") for k, ts, i in rows[0::2]],
        schema={"k": pl.Int64, "ts": pl.Datetime("us"), "lv": pl.String},
        orient="row",
    )
    right = pl.DataFrame(
        [(k, ts, float(i)) for k, ts, i in rows[1::2]],
        schema={"k": pl.Int64, "ts": pl.Datetime("us"), "amount": pl.Float64},
        orient="row",
    )
    plan = sc.source(left).join(sc.source(right), on="k", within="10s", time="ts").plan()
    out = check_against_reference(plan, SPARK)
    got = next(iter(out["tables"].values()))
    want = left.join(right, on="k", suffix="_right").filter(
        (pl.col("ts") - pl.col("ts_right")).abs() <= pl.duration(seconds=10)
    )
    assert want.height > 100 and out["late"].height == 0
    assert_frame_equal(got.sort("lv", "amount"), want.sort("lv", "amount"))
