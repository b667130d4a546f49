"""The correlate stage (conditions over several streams; README "correlate"): hand-computed
cases on the reference definition and, through ``engine``, every other backend against it
(an engine that refuses the step at compile time is a skip naming it). Plus the language:
plan errors with their position, the DSL round trip, the fluent API and explain()."""

from __future__ import annotations

import datetime as dt
import math

import polars as pl
import pytest

import streamcell as sc
from streamcell.errors import DSLSyntaxError, PlanError
from tests.helpers import check_against_reference, table

SENSORS = """b = source bdf
source adf
correlate b, on=region, time=ts, over=60, a_avg=mean(temp), b_avg=mean(b.temp), b_std=std(b.temp), nb=count(b)
"""


def _ab(a: dict, b: dict) -> dict[str, pl.DataFrame]:
    return {"adf": pl.DataFrame(a), "bdf": pl.DataFrame(b)}


def _sensors() -> dict[str, pl.DataFrame]:
    # arrival (round robin, a first): a(0) b(1) a(10) b(20) a(70)
    return _ab(
        {"region": [1, 1, 1], "ts": [0, 10, 70], "temp": [20.0, 22.0, 30.0]},
        {"region": [1, 1], "ts": [1, 20], "temp": [18.0, 19.0]},
    )


def test_moving_averages_of_two_streams_by_hand(engine):
    got = table(sc.parse(SENSORS, _sensors()), engine.options)
    assert got.columns == ["region", "ts", "a_avg", "b_avg", "b_std", "nb"]
    assert got.rows() == [
        (1, 0, 20.0, None, None, 0),
        (1, 1, 20.0, 18.0, None, 1),
        (1, 10, 21.0, 18.0, None, 1),
        (1, 20, 21.0, 18.5, math.sqrt(0.5), 2),
        # t = 70 drops every row with time <= 70 - 60 = 10 (a(0), b(1), a(10))
        (1, 70, 30.0, 19.0, None, 1),
    ]


def test_the_readme_condition_keeps_rows_above_two_deviations(engine):
    text = SENSORS + "filter a_avg > b_avg + 2 * b_std\n"
    got = table(sc.parse(text, _sensors()), engine.options)
    assert got.select("ts").to_series().to_list() == [20]  # 21 > 18.5 + 2 * 0.707...


def test_the_key_clock_drops_out_of_order_rows_on_arrival(engine):
    # over 5, lateness 10; arrival a(10) b(2) a(3) b(12): T_k stays 10 until b(12)
    dfs = _ab(
        {"k": [1, 1], "t": [10, 3], "x": [1.0, 2.0]}, {"k": [1, 1], "t": [2, 12], "y": [5, 7]}
    )
    text = (
        "b = source bdf\nsource adf\n"
        "correlate b, on=k, time=t, over=5, lateness=10, na=count(), nb=count(b), "
        "la=last(x), lb=last(b.y)\n"
    )
    got = table(sc.parse(text, dfs), engine.options)
    assert got.rows() == [
        (1, 10, 1, 0, 1.0, None),
        (1, 2, 1, 0, 1.0, None),  # b(2) <= 10 - 5: dropped as it arrives
        (1, 3, 1, 0, 1.0, None),  # a(3) too: last(x) is the last *kept* row's
        (1, 12, 1, 1, 1.0, 7),  # T_k = 12 keeps a(10) (> 7)
    ]


def test_null_times_are_dead_letters_and_late_rows_go_to_the_side_output(engine):
    dfs = _ab({"k": [1, 1, 1], "t": [10, None, 2]}, {"k": [1], "t": [11]})
    text = (
        "b = source bdf\nsource adf\ncorrelate b, on=k, time=t, over=100, n=count(), nb=count(b)\n"
    )
    out = check_against_reference(sc.parse(text, dfs), engine.options)
    got = next(iter(out["tables"].values()))
    assert got.rows() == [(1, 10, 1, 0), (1, 11, 1, 1)]
    dead = out["dead"]
    assert dead.select("step", "reason").rows() == [
        ("correlate#3", "null event time in column 't'")
    ]
    late = out["late"]
    assert late.select("k", "t", "_step").rows() == [(1, 2, "correlate#3")]
    c = {r["step"]: r for r in out["counts"].to_dicts()}["correlate#3"]
    assert (c["rows_in"], c["rows_out"], c["dead"], c["late"]) == (4, 2, 1, 1)


def _stdev(xs: list[float]) -> float:
    mean = sum(xs) / len(xs)
    return math.sqrt(sum((x - mean) ** 2 for x in xs) / (len(xs) - 1))


def test_every_aggregate_skips_nulls_except_last(engine):
    a = {
        "k": [1, 1, 1, 1],
        "t": [1, 2, 3, 4],
        "x": [1.5, None, 2.5, 4.0],
        "i": [3, None, -1, 10],
        "s": ["b", None, "a", "c"],
    }
    b = {"k": [9], "t": [5], "x": [0.0], "i": [0], "s": ["z"]}
    text = (
        "b = source bdf\nsource adf\n"
        "correlate b, on=k, time=t, over=100, lateness=100, n=count(), nx=count(x), "
        "sx=sum(x), mx=mean(x), dx=std(x), lox=min(x), hix=max(x), lx=last(x), "
        "si=sum(i), mi=mean(i), di=std(i), loi=min(i), hii=max(i), li=last(i), "
        "los=min(s), his=max(s), ls=last(s), nb=count(b), sb=sum(b.i)\n"
    )
    got = table(sc.parse(text, _ab(a, b)), engine.options)
    assert got.schema["si"] == pl.Int64 and got.schema["mi"] == pl.Float64
    assert got.schema["loi"] == pl.Int64 and got.schema["los"] == pl.String
    rows = got.filter(pl.col("k") == 1).to_dicts()
    assert [r["lx"] for r in rows] == [1.5, None, 2.5, 4.0]  # last: nulls included
    assert [r["dx"] for r in rows][:2] == [None, None]  # std needs two values
    last = rows[-1]
    assert last == {
        "k": 1,
        "t": 4,
        "n": 4,
        "nx": 3,
        "sx": 8.0,
        "mx": 8.0 / 3,
        "dx": _stdev([1.5, 2.5, 4.0]),
        "lox": 1.5,
        "hix": 4.0,
        "lx": 4.0,
        "si": 12,
        "mi": 4.0,
        "di": _stdev([3, -1, 10]),
        "loi": -1,
        "hii": 10,
        "li": 10,
        "los": "a",
        "his": "c",
        "ls": "c",
        "nb": 0,  # b's only row has another key
        "sb": None,  # empty: null (count: 0)
    }
    assert last["dx"] == pytest.approx(1.2583057392117916)


def test_several_keys_and_a_null_key_is_a_key_value(engine):
    a = {"k1": [1, 1, 2, 1], "k2": ["x", None, "x", None], "t": [1, 2, 3, 4]}
    b = {"k1": [1, 1], "k2": [None, "x"], "t": [2, 5]}
    text = (
        "b = source bdf\nsource adf\n"
        "correlate b, on=[k1, k2], time=t, over=10, lateness=10, n=count(), nb=count(b)\n"
    )
    got = table(sc.parse(text, _ab(a, b)), engine.options)
    # arrival a(1,x) b(1,null) a(1,null) b(1,x) a(2,x) a(1,null)
    assert got.rows() == [
        (1, "x", 1, 1, 0),
        (1, None, 2, 0, 1),
        (1, None, 2, 1, 1),
        (1, "x", 5, 1, 1),
        (2, "x", 3, 1, 0),
        (1, None, 4, 2, 1),
    ]


def test_three_streams_and_datetime_time(engine):
    t0 = dt.datetime(2024, 1, 1)
    mins = [t0 + dt.timedelta(minutes=m) for m in range(3)]
    dfs = {
        "adf": pl.DataFrame({"r": ["n", "n"], "ts": mins[:2], "v": [1.0, 3.0]}),
        "bdf": pl.DataFrame({"r": ["n"], "ts": [mins[1]], "v": [10.0]}),
        "cdf": pl.DataFrame({"r": ["n"], "ts": [mins[2]], "w": [7]}),
    }
    text = (
        "b = source bdf\nc = source cdf\nsource adf\n"
        'correlate b, c, on=r, time=ts, over="90s", lateness="1m", av=mean(v), bv=max(b.v), cw=sum(c.w)\n'
    )
    got = table(sc.parse(text, dfs), engine.options)
    # arrival a(0m) b(1m) c(2m) a(1m); at 2m the 90s horizon (t <= 30s) drops a(0m)
    assert got.rows() == [
        ("n", mins[0], 1.0, None, None),
        ("n", mins[1], 1.0, 10.0, None),
        ("n", mins[2], None, 10.0, 7),
        ("n", mins[1], 3.0, 10.0, 7),
    ]


# ----------------------------------------------------------------- language and plans


def _err(text: str, ns: dict) -> DSLSyntaxError:
    with pytest.raises(DSLSyntaxError) as ei:
        sc.compile_plan(sc.parse(text, ns))
    return ei.value


HEAD = "b = source bdf\nsource adf\n"


@pytest.mark.parametrize(
    ("stage", "column", "message"),
    [
        ("correlate b, on=region, time=ts, over=60, m=mean(b.tmp)", 45, "unknown column 'tmp'"),
        (
            "correlate b, on=region, time=ts, over=60, m=sum(name)",
            45,
            "sum() needs an int or float column; 'name' is str",
        ),
        ("correlate b, on=region, time=ts, over=60, m=mean(c.temp)", 50, "unknown stream 'c'"),
        (
            "correlate b, on=region, time=ts, over=60, m=median(temp)",
            45,
            "unknown correlate aggregate 'median'",
        ),
        ("correlate b, on=region, time=ts, over=0, m=count()", 1, "over= must be > 0"),
        ('correlate b, on=region, time=ts, over="1h", m=count()', 1, "time column is int"),
        ("correlate b, on=name, time=ts, over=5, m=count()", 1, "unknown column 'name'"),
        ("correlate b, on=region, time=ts, over=5", 1, "at least one aggregate"),
        ("correlate b, on=region, over=5, m=count()", 1, "correlate needs time="),
    ],
)
def test_plan_errors_point_at_the_stage_or_the_aggregate(stage, column, message):
    dfs = {
        "adf": pl.DataFrame({"region": [1], "ts": [0], "temp": [1.0], "name": ["x"]}),
        "bdf": pl.DataFrame({"region": [1], "ts": [0], "temp": [1.0]}),
    }
    e = _err(HEAD + stage + "\n", dfs)
    assert message in str(e)
    assert (e.line, e.column) == (3, column)


def test_inputs_must_agree_on_key_and_time_types():
    a = pl.DataFrame({"k": [1], "t": [0]})
    for b, what in (
        (pl.DataFrame({"k": ["1"], "t": [0]}), "correlate key 'k' is int in source#1 but str"),
        (
            pl.DataFrame({"k": [1], "t": [dt.datetime(2024, 1, 1)]}),
            "correlate time column 't' is int in source#1 but datetime",
        ),
    ):
        e = _err(HEAD + "correlate b, on=k, time=t, over=5, n=count()\n", {"adf": a, "bdf": b})
        assert isinstance(e, PlanError) and what in str(e) and (e.line, e.column) == (3, 1)


def test_dsl_round_trip_and_the_fluent_api_give_equal_plans():
    dfs = _sensors()
    p = sc.parse(SENSORS, dfs)
    assert sc.parse(p.to_dsl(), dfs) == p
    assert "correlate b, on=region, time=ts, over=60, a_avg=mean(temp)" in p.to_dsl()
    b = sc.source(dfs["bdf"], name="b")
    a = sc.source(dfs["adf"])
    fluent = a.correlate(
        b,
        on="region",
        time="ts",
        over=60,
        a_avg=sc.col("temp").mean(),
        b_avg=b.col("temp").mean(),
        b_std=b.col("temp").std(),
        nb=b.col().count(),
    ).plan()
    assert fluent == p
    with pytest.raises(ValueError, match="not an input of this correlate"):
        a.correlate(b, on="region", time="ts", over=60, m=sc.source(dfs["bdf"]).col("x").mean())
    with pytest.raises(TypeError, match="std\\(\\) needs a column"):
        b.col().std()


def test_explain_names_the_inputs_and_the_aggregates():
    text = sc.parse(SENSORS, _sensors()).explain()
    line = next(x for x in text.splitlines() if "correlate#3" in x)
    assert "source#1 ~ source#2 on region over 60 (ts)" in line
    assert "b_std=std(source#2.temp)" in line and "hash(region)" in line
    assert "region: int, ts: int, a_avg: float, b_avg: float, b_std: float, nb: int" in text


def test_the_sensor_example_flags_only_the_region_that_runs_hot():
    from examples.correlate_sensors import alerts

    found = alerts(minutes=420)  # A runs 3 degrees hot in the north from minute 300
    assert found.height > 0
    assert set(found["region"]) == {"north"}
    assert found["ts"].min() >= dt.datetime(2024, 6, 1, 5, 0)
