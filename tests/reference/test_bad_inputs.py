"""Every failure caused by the user's cell, data or arguments is a streamcell error that
says where (issue 18, part 5): the column types a DataFrame may hold, values no column can
hold, batches whose types change mid-stream, source and sink arguments, and cells too deep
to walk. Data problems are compared across engines against the reference."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest
from polars.testing import assert_frame_equal

import streamcell as sc
from streamcell.errors import ArgumentError, DSLSyntaxError, PlanError, StreamcellError
from tests.helpers import assert_same_outputs, check_against_reference, outputs, run_plan

# ------------------------------------------------------------------ the dtype table

SUPPORTED = [  # (Polars column, what every engine reads it as)
    ("Categorical", pl.Series(["a", "b", None, "a"], dtype=pl.Categorical), pl.String),
    ("Enum", pl.Series(["x", "y", "x", None], dtype=pl.Enum(["x", "y"])), pl.String),
    ("Array", pl.Series([[1, 2], [3, 4], None, [5, 6]], dtype=pl.Array(pl.Int64, 2)),
     pl.List(pl.Int64)),
    ("UInt64", pl.Series([0, 1, 2**63 - 1, None], dtype=pl.UInt64), pl.Int64),
    ("UInt32", pl.Series([0, 1, 2**32 - 1, None], dtype=pl.UInt32), pl.Int64),
]  # fmt: skip

REFUSED = [  # (Polars column, words the error names)
    ("Time", pl.Series([dt.time(1), dt.time(2)]), "Polars Time"),
    ("Duration", pl.Series([dt.timedelta(1), dt.timedelta(2)]), "Polars Duration"),
    ("Binary", pl.Series([b"a", b"b"]), "Polars Binary"),
    ("Struct", pl.Series([{"a": 1}, {"a": 2}]), "Polars Struct"),
]


@pytest.mark.parametrize(("name", "col", "as_"), SUPPORTED, ids=[s[0] for s in SUPPORTED])
def test_supported_column_types_read_as_polars_casts_them(engine, name, col, as_):
    df = pl.DataFrame({"i": list(range(len(col))), "c": col})
    out = check_against_reference(sc.source(df).select("i", "c").plan(), engine.options)
    got = next(iter(out["tables"].values()))
    assert_frame_equal(got, df.select("i", pl.col("c").cast(as_)))
    assert out["dead"].height == 0


def test_categorical_works_in_expressions_and_keys(engine):
    df = pl.DataFrame({"c": pl.Series(["a", "b", "a"], dtype=pl.Categorical), "v": [1, 2, 3]})
    plan = (
        sc.source(df)
        .filter(sc.col("c") == "a")
        .with_columns(u=sc.col("c").str.to_uppercase())
        .key_by("c")
        .agg(n=sc.count(), s=sc.col("v").sum())
        .plan()
    )
    out = check_against_reference(plan, engine.options)
    assert next(iter(out["tables"].values())).rows() == [("a", 2, 4)]


@pytest.mark.parametrize(("name", "col", "words"), REFUSED, ids=[r[0] for r in REFUSED])
def test_unsupported_column_types_are_refused_at_start_naming_column_and_type(
    engine, name, col, words
):
    df = pl.DataFrame({"ok": [1, 2], "bad_col": col})
    with pytest.raises(PlanError) as e:
        sc.source(df).start("refused", options=engine.options)
    assert "'bad_col'" in str(e.value) and words in str(e.value)
    with pytest.raises(PlanError) as e:  # in a cell: at the source, with line and column
        sc.start(sc.parse("source df\nselect ok", {"df": df}), name="refused")
    assert (e.value.line, e.value.column) == (1, 8) and words in str(e.value)


# ------------------------------------------------------- values no column can hold


def test_uint64_beyond_int64_is_a_dead_letter_naming_column_and_row(engine):
    t = pa.table(
        {
            "i": pa.array([0, 1, 2, 3, 4], pa.int64()),
            "u": pa.array([5, 2**63, 7, None, 2**64 - 1], pa.uint64()),
        }
    )
    out = check_against_reference(sc.source(t).plan(), engine.options)
    got = next(iter(out["tables"].values()))
    assert got.rows() == [(0, 5), (2, 7), (3, None)]
    dead = out["dead"]
    assert dead["position"].to_list() == ["source#1 row 1", "source#1 row 4"]
    assert dead["reason"].to_list() == [
        f"column u: {2**63} does not fit in int (int64)",
        f"column u: {2**64 - 1} does not fit in int (int64)",
    ]


def _changing_reader() -> pa.RecordBatchReader:
    schema = pa.schema([("a", pa.int64()), ("s", pa.string())])

    def batches():
        yield pa.record_batch([pa.array([1, 2]), pa.array(["x", "y"])], schema=schema)
        # mid-stream: `a` becomes a string column (one value still reads as null), then `s`
        # disappears, then the original types come back
        yield pa.record_batch([pa.array(["3", None]), pa.array(["z", "w"])], names=["a", "s"])
        yield pa.record_batch([pa.array([5], pa.int32())], names=["a"])
        yield pa.record_batch([pa.array([6]), pa.array(["v"])], schema=schema)

    return pa.RecordBatchReader.from_batches(schema, batches())


def test_batch_types_changing_mid_stream_dead_letter_the_rows_that_do_not_fit(engine):
    ref = outputs(run_plan(sc.source(_changing_reader()).plan(), sc.RunOptions()))
    got = outputs(run_plan(sc.source(_changing_reader()).plan(), engine.options))
    assert_same_outputs(got, ref)
    assert next(iter(got["tables"].values())).rows() == [(1, "x"), (2, "y"), (None, "w"), (6, "v")]
    dead = got["dead"]
    assert dead["position"].to_list() == ["source#1 row 2", "source#1 row 4"]
    reasons = dead["reason"].to_list()
    assert reasons[0].startswith("column a: expected int, got str '3'")
    assert "types changed mid-stream" in reasons[0]
    assert reasons[1].startswith("missing field 's'")


# ------------------------------------------------------------ source and sink arguments

BAD_ARGS = [
    ("clickstream", {"seed": -1}, "seed"),
    ("clickstream", {"users": -5}, "users"),
    ("clickstream", {"users": 0}, "users"),
    ("clickstream", {"items": 1.5}, "items"),
    ("clickstream", {"late_fraction": 2}, "late_fraction"),
    ("clickstream", {"late_fraction": -0.1}, "late_fraction"),
    ("clickstream", {"rows": -1}, "rows"),
    ("clickstream", {"rows": True}, "rows"),
    ("store_sales", {"stores": 0}, "stores"),
    ("store_sales", {"customers": -1}, "customers"),
    ("store_sales", {"seed": -3}, "seed"),
]


@pytest.mark.parametrize(("kind", "kw", "param"), BAD_ARGS)
def test_generator_arguments_are_validated_naming_the_parameter(kind, kw, param):
    with pytest.raises(ArgumentError) as e:
        getattr(sc, kind)(**kw)
    assert e.value.parameter == param and param in str(e.value)
    ((k, v),) = kw.items()
    cell = f"source {kind}(rows=10, {k}={v!r})" if k != "rows" else f"source {kind}(rows={v!r})"
    with pytest.raises(ArgumentError) as e:
        sc.parse(cell)
    assert e.value.parameter == param
    assert e.value.line == 1 and e.value.column == cell.index(f"{k}=") + 1


def test_parquet_sink_directory_that_cannot_be_created(tmp_path: Path, engine):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    cell = f'source clickstream(rows=10)\nsink parquet("{blocker}/out/")'
    with pytest.raises(ArgumentError) as e:
        sc.start(sc.parse(cell), name="pq_bad", options=engine.options)
    assert e.value.parameter == "path" and (e.value.line, e.value.column) == (2, 1)
    assert "cannot create the directory" in str(e.value)


@pytest.mark.parametrize(
    ("sink", "col", "says"),
    [('parquet("out/", bogus=1)', 22, "options are mode= and key="),
     ('parquet("out/", mode="completed")', 22, "mode must be one of"),
     ("callback(f, bogus=1)", 18, "takes no options")],
)  # fmt: skip
def test_sink_options_are_refused_with_line_and_column(sink, col, says):
    with pytest.raises(DSLSyntaxError) as e:
        sc.parse(f"source clickstream(rows=1)\nsink {sink}", {"f": print})
    assert (e.value.line, e.value.column) == (2, col)
    assert says in str(e.value)


# ---------------------------------------------------------------- cells too deep to walk


@pytest.mark.parametrize("n", [101, 5000, 100_000])
def test_deep_expressions_are_a_positioned_error(n):
    with pytest.raises(DSLSyntaxError) as e:
        sc.parse("source clickstream(rows=1)\nselect x=" + "-" * n + "1")
    assert e.value.line == 2 and e.value.column >= 8 and "100 levels" in str(e.value)


def test_expressions_up_to_the_limit_run(engine):
    cell = "source clickstream(rows=5)\nselect x=" + "-" * 99 + "price"
    out = check_against_reference(sc.parse(cell), engine.options)
    assert next(iter(out["tables"].values())).height == 5


def test_deep_python_expressions_and_long_chains_are_a_streamcell_error():
    import functools
    import operator

    e = functools.reduce(operator.add, [sc.col("price")] * 300)
    with pytest.raises(PlanError, match="100 levels"):
        sc.source(sc.clickstream(rows=1)).select(x=e).start("deep")
    s = sc.source(sc.clickstream(rows=1))
    for _ in range(3000):
        s = s.filter(sc.col("price") > 0)
    with pytest.raises(PlanError, match="at most 200 steps"):
        s.plan()


def test_reused_subexpressions_are_measured_and_typed_once():
    """``e = e + e`` 60 times is 61 levels deep but 2^60 paths: the depth check and the type
    checker visit each node once (walked as a tree, neither would finish); 120 times is too
    deep, and the error still says so."""
    from streamcell.compiler import compile_plan
    from streamcell.expr import too_deep

    e = sc.col("price")
    for _ in range(60):
        e = e + e
    assert too_deep(e._ir) is None
    plan = sc.source(sc.clickstream(rows=1)).select(x=e).plan()
    assert dict(compile_plan(plan).schemas[plan.steps[-1].step_id])["x"].name == "float"
    for _ in range(60):
        e = e + e
    deep = too_deep(e._ir)
    # the node at depth 101 of a 121-deep expression: 21 levels of its own
    assert deep is not None and too_deep(deep, 20) is not None and too_deep(deep, 21) is None
    with pytest.raises(PlanError, match="100 levels"):
        sc.source(sc.clickstream(rows=1)).select(x=e).start("deep")


def test_long_cells_are_a_positioned_error():
    with pytest.raises(DSLSyntaxError) as e:
        sc.parse("source clickstream(rows=1)\n" + "filter price > 0\n" * 3000)
    assert e.value.line == 202 and "at most 200 stages" in str(e.value)
    assert len(sc.parse("source clickstream(rows=1)\n" + "filter price > 0\n" * 200).steps) == 202


def test_every_error_above_is_a_streamcell_error():
    for cls in (ArgumentError, PlanError, DSLSyntaxError):
        assert issubclass(cls, StreamcellError)
