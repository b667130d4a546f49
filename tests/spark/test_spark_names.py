"""Column names the Spark engine gives its own columns (the order key ``_o``, error flags,
window bounds, partition hashes, shared subexpressions ...): a user column named like one of
them, in any case (Spark resolves names without case), would be taken for it, so a plan with
one is refused with the step and the column (before: a raw Arrow error from a schema with
``_o`` twice). Other names that begin with ``_`` run and equal the reference."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import streamcell as sc
from streamcell.backends import get_backend
from streamcell.compiler import compile_plan
from streamcell.errors import NotSupportedError
from streamcell.options import RunOptions
from tests.helpers import run_plan

pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark

from streamcell.backends.spark import expr as SX  # noqa: E402

SPARK, REF = RunOptions(engine="spark", display=False), RunOptions(engine="reference")


@pytest.mark.parametrize(
    "name", ["_o", "_O", "_e", "_we", "_h3", "__sc_shared0", "__SC_run1", "_metadata"]
)
def test_a_source_column_named_like_an_engine_column_is_refused(name):
    df = pl.DataFrame({name: [1, 2], "v": [1.0, 2.0]})
    plan = sc.source(df).filter(sc.col("v") > 0).plan("names")
    with pytest.raises(NotSupportedError, match=rf"source#1 \(column '{re.escape(name)}'"):
        run_plan(plan, SPARK)


def test_a_computed_column_named_like_an_engine_column_is_refused_at_its_step():
    plan = sc.source(pl.DataFrame({"v": [1.0]})).with_columns(_p=sc.col("v") * 2).plan("names2")
    with pytest.raises(NotSupportedError, match=r"with_columns#2 \(column '_p'"):
        run_plan(plan, SPARK)


def test_a_parquet_column_named_metadata_is_refused(tmp_path):
    path = tmp_path / "m.parquet"
    pl.DataFrame({"_metadata": [1, 2, 3], "v": [1.0, 2.0, 3.0]}).write_parquet(path)
    plan = sc.source(sc.parquet(str(path))).filter(sc.col("v") > 1).plan("names_meta")
    with pytest.raises(NotSupportedError, match=r"source#1 \(column '_metadata'"):
        run_plan(plan, SPARK)


def test_a_streaming_run_takes_any_name(tmp_path):
    (tmp_path / "a.csv").write_text("_o,_e\n1,2\n")
    src = sc.source(sc.watch(str(tmp_path), format="csv"))
    get_backend("spark").check(compile_plan(src.with_columns(_p=sc.col("_o") + 1).plan()), SPARK)


def test_other_names_with_underscores_run_and_equal_the_reference():
    """Among them the text scan's own column names, which never sit beside user columns."""
    df = pl.DataFrame(
        {"_id": [3, 1, 2], "_oo": [1.0, -2.0, 3.0], "o_": [True, False, True], "_f": [1, 2, 3]}
    )
    p = sc.col("_id") * 2
    s = sc.source(df).filter((p > 1) & sc.col("o_")).with_columns(w=p + p, _m=sc.col("_oo") * 2)
    plan = s.plan("names3")
    assert_frame_equal(run_plan(plan, SPARK).table(), run_plan(plan, REF).table())


def test_every_internal_name_the_engine_writes_is_reserved():
    """The engine's sources name its columns as string literals (``"_o"``, ``f"_h{i}"``):
    each must be one :func:`internal_name` refuses, so a new one cannot be forgotten."""
    root = Path(SX.__file__).parent
    found = set()
    for f in root.glob("*.py"):
        text = f.read_text()
        found |= set(re.findall(r"""["'](_{1,2}[A-Za-z][A-Za-z0-9_]*)[."']""", text))
        found |= {m + "7" for m in re.findall(r"""f["'](_{1,2}[A-Za-z][A-Za-z0-9_]*)\{""", text)}
    not_columns = {
        "__self__",  # an attribute
        "_stop",  # an attribute
        "_g",  # only in a streaming run's row, where user rows travel pickled
        *("_f", "_bs", "_m", "_nb"),  # only in the text scan's frame of lines
    }
    assert {"_o", "_metadata", "__sc_shared7", "_h7"} <= found
    assert sorted(n for n in found - not_columns if not SX.internal_name(n)) == []


@pytest.mark.parametrize(
    "make",
    [
        lambda s: s.key_by("k.1").top_k(2, by="v`w"),
        lambda s: s.key_by("k.1").running(d=sc.col("x.y").count_distinct()),
        lambda s: s.key_by("k.1").tumbling(4, time="t.t").agg(n=sc.count(), m=sc.col("x.y").mean()),
        lambda s: s.sketch(u=sc.hll("x.y")),
    ],
    ids=["top_k", "running-native", "window", "sketch"],
)
def test_names_spark_reads_as_paths_pass_through_the_native_operators(make):
    """PySpark hands ``mapInArrow`` each column by its bare name, and ``a.b`` is then field
    ``b`` of a column ``a``: such names (and backticks) used to fail with Spark's
    unresolved-column error on every step that runs on the C operator."""
    from tests.helpers import assert_same_outputs, outputs

    df = pl.DataFrame(
        {
            "k.1": ["a", "b", "a", "c", "b", "a"],
            "x.y": [1.5, 2.0, None, 4.0, 2.0, 7.0],
            "v`w": [3, 1, 2, 5, 4, 0],
            "t.t": [1, 2, 3, 9, 10, 11],
        }
    )
    plan = sc.combine(make(sc.source(df)).sink_table("out", mode="append"))
    got = run_plan(plan, SPARK, timeout=300)
    assert_same_outputs(outputs(got), outputs(run_plan(plan, REF)))
    assert "native" in got.spark_operators.values() or not got.spark_operators


@pytest.mark.parametrize(
    ("make", "how"),
    [
        (lambda s: s.key_by("k").tumbling(10, time="t"), "spark groupBy"),
        (lambda s: s.key_by("k").session(3, time="t"), "spark groupBy"),
        (lambda s: s.key_by("k").session(3, time="t", lateness=2), "spark groupBy"),
    ],
    ids=["tumbling", "sessions", "sessions-late"],
)
def test_window_aggregates_may_be_named_like_a_candle(make, how):
    """Open / high / low / close: a window's aggregate named ``close`` used to meet the
    engine's own column of each window's close in the join that places the windows (Spark's
    ambiguous-reference error); the engine's column has a reserved name now."""
    from tests.helpers import assert_same_outputs, outputs

    n = 200
    df = pl.DataFrame(
        {
            "k": ["a", "b", "c", "a", "b"] * (n // 5),
            "t": [i - (7 if i % 17 == 3 else 0) for i in range(n)],  # some rows late
            "v": [float(i % 13) for i in range(n)],
        }
    )
    v = sc.col("v")
    aggs = {"open": v.first(), "high": v.max(), "low": v.min(), "close": v.last()}
    for stream, want in (
        (make(sc.source(df)).agg(**aggs), how),
        (make(sc.source(df)).agg(**aggs, avg=v.mean()), "native"),  # a float mean: C
    ):
        plan = sc.combine(stream.sink_table("out", mode="append"))
        got = run_plan(plan, SPARK, timeout=300)
        assert_same_outputs(outputs(got), outputs(run_plan(plan, REF)))
        assert set(got.spark_operators.values()) == {want}
