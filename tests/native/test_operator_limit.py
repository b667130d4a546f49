"""A Program holds at most 64 runtime operators: a longer pipeline is refused at start with
the line and column of the step that crosses the limit, and ``engine="auto"`` runs it on the
reference engine instead (equal results). Up to the limit it runs natively."""

from __future__ import annotations

import polars as pl
import pytest

import streamcell as sc
from streamcell.backends.native.program import MAX_OPERATORS
from streamcell.dsl import parse
from streamcell.errors import NotSupportedError

DF = pl.DataFrame({"x": list(range(200)), "k": [i % 7 for i in range(200)]})


def _cell(n: int) -> str:
    """``n`` stateless steps (one operator each, or fewer where the runtime fuses them)."""
    return (
        "source df\n" + "".join(f"with_columns y{i} = x + {i}\n" for i in range(n)) + "sink table\n"
    )


def _keyed_cell(n: int) -> str:
    """``n`` keyed ``running`` steps: three operators each (split, the partitions, merge)."""
    body = "".join(f"key_by k\nrunning n{i} = count()\n" for i in range(n))
    return "source df\n" + body + "sink table\n"


def _run(cell: str, engine: str) -> sc.Run:
    return sc.start(parse(cell, namespace={"df": DF}), name="limit", engine=engine).wait()


def test_a_pipeline_at_the_limit_runs_natively_and_equals_the_reference():
    cell = _cell(MAX_OPERATORS)
    native = _run(cell, "native")
    assert native.status == "finished" and native.options.engine == "native"
    assert native.table().equals(_run(cell, "reference").table())


def test_one_operator_past_the_limit_is_refused_at_start_with_line_and_column():
    fits = MAX_OPERATORS // 3
    with pytest.raises(NotSupportedError) as e:
        sc.start(parse(_keyed_cell(fits + 1), namespace={"df": DF}), name="limit", engine="native")
    line = 1 + 2 * (fits + 1)  # source on line 1, then key_by and running per step
    assert (e.value.line, e.value.column) == (line, 1)
    assert f"line {line}, column 1" in str(e.value) and "at most 64 operators" in str(e.value)
    native = _run(_keyed_cell(fits), "native")  # one step fewer fits
    assert native.status == "finished" and native.options.engine == "native"
    assert native.table().equals(_run(_keyed_cell(fits), "reference").table())


def test_auto_runs_a_too_long_pipeline_on_the_reference_engine():
    n = MAX_OPERATORS // 3 + 2
    auto = _run(_keyed_cell(n), "auto")
    assert auto.status == "finished" and auto.options.engine == "reference"
    assert "64 operators" in auto.engine_note
    counts = pl.int_range(1, pl.len() + 1, dtype=pl.Int64).over("k")  # Polars: count so far
    expected = DF.with_columns([counts.alias(f"n{i}") for i in range(n)])
    assert auto.table().equals(expected)
