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


def test_union_is_refused_naming_the_step():
    a, b = pl.DataFrame({"x": [1]}), pl.DataFrame({"x": [2]})
    assert "not supported on spark: step union#3" in _refusal(sc.source(a).union(sc.source(b)))


def test_explode_and_list_columns_are_refused():
    frame = pl.DataFrame({"xs": [[1, 2]]})
    msg = _refusal(sc.source(frame).explode("xs"))
    assert "not supported on spark" in msg and "#" in msg


def test_streaming_sources_are_refused_with_what_to_do():
    msg = _refusal(sc.source(sc.clickstream(rows=None)).filter(sc.col("price") > 1))
    assert "not supported on spark: step source#1" in msg
    assert "engine='native'" in msg
