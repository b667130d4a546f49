"""What the Spark engine refuses, at compile time, with the step named (no Spark job runs)."""

from __future__ import annotations

import polars as pl
import pytest

import streamcell as sc
from streamcell.backends import get_backend
from streamcell.compiler import compile_plan
from streamcell.errors import NotSupportedError
from streamcell.options import RunOptions

pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark

SPARK = RunOptions(engine="spark")


def _refusal(stream: sc.Stream) -> str:
    with pytest.raises(NotSupportedError) as e:
        get_backend("spark").check(compile_plan(stream.plan()), SPARK)
    return str(e.value)


def test_union_and_fan_out_of_finite_sources_are_accepted():
    a, b = pl.DataFrame({"x": [1]}), pl.DataFrame({"x": [2]})
    u = sc.source(a).union(sc.source(b))
    plan = sc.combine(u.sink_table("all"), u.filter(sc.col("x") > 1).sink_table("big"))
    get_backend("spark").check(compile_plan(plan), SPARK)


def test_join_runs_on_finite_sources_and_is_refused_on_streaming_ones():
    a = pl.DataFrame({"k": [1], "t": [1]})
    j = sc.source(a).join(sc.source(a), on="k", within=1, time="t")
    get_backend("spark").check(compile_plan(j.plan()), SPARK)
    live = sc.source(sc.clickstream(rows=None, seed=1))
    j = live.join(
        sc.source(sc.clickstream(rows=None, seed=2)), on="user_id", within="1s", time="ts"
    )
    assert "step join#3 (fan-in (join) on a streaming source" in _refusal(j)


def test_dags_over_streaming_sources_are_refused():
    a = sc.source(sc.clickstream(rows=None, seed=1))
    b = sc.source(sc.clickstream(rows=None, seed=2))
    assert "fan-in (union) on a streaming source" in _refusal(a.union(b))
    fan = sc.combine(a.sink_table("x"), a.filter(sc.col("price") > 1).sink_table("y"))
    with pytest.raises(NotSupportedError, match="fan-out on a streaming source"):
        get_backend("spark").check(compile_plan(fan), SPARK)


def test_correlate_is_refused_naming_the_step():
    a = pl.DataFrame({"k": [1], "t": [0], "x": [1.0]})
    b, c = sc.source(a), sc.source(a.clone())
    msg = _refusal(b.correlate(c, on="k", time="t", over=5, m=c.col("x").mean()))
    assert "not supported on spark: step correlate#3" in msg


def test_explode_and_list_columns_are_refused():
    frame = pl.DataFrame({"xs": [[1, 2]]})
    msg = _refusal(sc.source(frame).explode("xs"))
    assert "not supported on spark" in msg and "#" in msg


def test_stateless_steps_on_streaming_sources_are_accepted(tmp_path):
    get_backend("spark").check(
        compile_plan(sc.source(sc.clickstream(rows=None)).filter(sc.col("price") > 1).plan()),
        SPARK,
    )
    (tmp_path / "a.csv").write_text("x\n1\n")
    get_backend("spark").check(
        compile_plan(sc.source(sc.watch(str(tmp_path), format="csv")).select("x").plan()), SPARK
    )


def test_keyed_steps_on_streaming_sources_are_accepted():
    src = sc.source(sc.clickstream(rows=None))
    for stream in (
        src.key_by("user_id").agg(n=sc.count()),
        src.key_by("user_id").running(n=sc.count()),
        src.top_k(3, by="price"),
        src.dedup("user_id"),
    ):
        get_backend("spark").check(compile_plan(stream.plan()), SPARK)


def test_windows_on_streaming_sources_are_accepted():
    stream = sc.source(sc.clickstream(rows=None)).key_by("user_id").tumbling("1m", time="ts")
    get_backend("spark").check(compile_plan(stream.agg(n=sc.count()).plan()), SPARK)


def test_rate_on_a_watched_folder_is_refused(tmp_path):
    (tmp_path / "a.csv").write_text("x\n1\n")
    msg = _refusal(sc.source(sc.watch(str(tmp_path), format="csv"), rate=10))
    assert "not supported on spark: step source#1 (rate= on a watched folder" in msg


def test_a_variable_holding_a_watch_spec_is_a_streaming_source(tmp_path):
    from streamcell.backends.spark import is_streaming

    (tmp_path / "a.csv").write_text("x\n1\n")
    spec = sc.watch(str(tmp_path), format="csv")
    assert is_streaming(sc.source(spec).plan().steps[0])
    # a %%stream cell's `source w`, where the notebook variable w holds the spec
    wrapped = sc.plan.SourceSpec("object", (), sc.plan.ObjRef(spec, "w"))
    assert is_streaming(sc.plan.Source(spec=wrapped))
