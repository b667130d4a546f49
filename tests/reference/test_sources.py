"""Sources: files (Parquet, CSV, NDJSON; single files and directories), in-memory frames,
Arrow streams, iterables of dicts, the deterministic generators, and dead letters for rows
that cannot be read (with their source position)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest
from polars.testing import assert_frame_equal

import streamcell as sc
from streamcell import plan as P
from streamcell import sources
from streamcell.errors import PlanError
from streamcell.sources import ArrowReader, _polars_batches, _polars_schema
from tests.helpers import check_against_reference, run_plan, table

TYPED = pl.DataFrame(
    {
        "i": [1, None, -3],
        "f": [1.5, 2.0, None],
        "s": ["a", None, "ccc"],
        "b": [True, False, None],
        "ts": [dt.datetime(2024, 1, 1, 12), None, dt.datetime(1999, 12, 31, 23, 59, 59, 999_999)],
        "d": [dt.date(2024, 2, 29), dt.date(1970, 1, 1), None],
        "xs": [[1, 2], [], None],
    },
    schema={
        "i": pl.Int64,
        "f": pl.Float64,
        "s": pl.String,
        "b": pl.Boolean,
        "ts": pl.Datetime("us"),
        "d": pl.Date,
        "xs": pl.List(pl.Int64),
    },
)


def out_of(plan: sc.Plan, engine) -> dict:
    return check_against_reference(plan, engine.options)


def first_table(out: dict) -> pl.DataFrame:
    return next(iter(out["tables"].values()))


def source_counts(out: dict) -> dict:
    return out["counts"].row(0, named=True)


# ---------------------------------------------------------------------------- Parquet


def test_parquet_file_round_trips_every_type(engine, tmp_path):
    path = tmp_path / "data.parquet"
    TYPED.write_parquet(path)
    assert_frame_equal(table(sc.source(sc.parquet(str(path))).plan(), engine.options), TYPED)


def test_parquet_directory_reads_files_in_name_order(engine, tmp_path):
    pl.DataFrame({"v": [3, 4]}).write_parquet(tmp_path / "part-b.parquet")
    pl.DataFrame({"v": [1, 2]}).write_parquet(tmp_path / "part-a.parquet")
    (tmp_path / "notes.txt").write_text("not data")
    got = table(sc.source(sc.parquet(str(tmp_path))).plan(), engine.options)
    assert got["v"].to_list() == [1, 2, 3, 4]


def test_parquet_file_with_a_different_schema_is_a_dead_letter(engine, tmp_path):
    pl.DataFrame({"v": [1, 2]}).write_parquet(tmp_path / "a.parquet")
    pl.DataFrame({"v": ["x"]}).write_parquet(tmp_path / "b.parquet")
    pl.DataFrame({"v": [5]}).write_parquet(tmp_path / "c.parquet")
    out = out_of(sc.source(sc.parquet(str(tmp_path))).plan(), engine)
    assert first_table(out)["v"].to_list() == [1, 2, 5]
    dead = out["dead"]
    assert dead.height == 1
    assert "b.parquet" in dead["position"][0] and "schema differs" in dead["reason"][0]


def test_a_path_string_picks_the_reader_by_extension(engine, tmp_path):
    path = tmp_path / "x.parquet"
    pl.DataFrame({"v": [7]}).write_parquet(path)
    assert table(sc.source(str(path)).plan(), engine.options)["v"].to_list() == [7]


def test_missing_file_is_a_plan_error_at_start(tmp_path):
    with pytest.raises(PlanError, match="no such file"):
        sc.start(sc.source(sc.parquet(str(tmp_path / "nope.parquet"))).plan(), name="missing")


# -------------------------------------------------------------------------------- CSV


def test_csv_infers_types_and_reads_empty_fields_as_null(engine, tmp_path):
    path = tmp_path / "data.csv"
    path.write_text(
        "id,name,score,ok,when\n"
        "1,ann,1.5,true,2024-01-01T10:00:00\n"
        "2,,,false,2024-01-02 11:30:00\n"
        "3,cy,2,TRUE,\n"
    )
    got = table(sc.source(sc.csv(str(path))).plan(), engine.options)
    want = pl.DataFrame(
        {
            "id": [1, 2, 3],
            "name": ["ann", None, "cy"],
            "score": [1.5, None, 2.0],
            "ok": [True, False, True],
            "when": [dt.datetime(2024, 1, 1, 10), dt.datetime(2024, 1, 2, 11, 30), None],
        }
    )
    assert_frame_equal(got, want)


def test_csv_with_a_schema(engine, tmp_path):
    path = tmp_path / "data.csv"
    path.write_text("a,b\n1,2\n3,4\n")
    got = table(sc.source(sc.csv(str(path), schema={"a": "float"})).plan(), engine.options)
    # columns not named in the schema are read as text
    assert_frame_equal(got, pl.DataFrame({"a": [1.0, 3.0], "b": ["2", "4"]}))


def test_csv_without_header(engine, tmp_path):
    path = tmp_path / "data.csv"
    path.write_text("1,x\n2,y\n")
    got = table(sc.source(sc.csv(str(path), header=False)).plan(), engine.options)
    assert_frame_equal(got, pl.DataFrame({"column_1": [1, 2], "column_2": ["x", "y"]}))


def test_csv_malformed_lines_and_bad_values_are_dead_letters_with_positions(engine, tmp_path):
    path = tmp_path / "data.csv"
    path.write_text(
        "id,v,s\n"  # line 1
        "1,10,a\n"  # line 2
        "2,20\n"  # line 3: too few fields
        "3,x,c\n"  # line 4: x is not an int
        "4,40,d,extra\n"  # line 5: too many fields
        "\n"  # line 6: blank, skipped
        "5,50,e\n"
    )  # line 7
    out = out_of(
        sc.source(sc.csv(str(path), schema={"id": "int", "v": "int", "s": "str"})).plan(), engine
    )
    assert first_table(out)["id"].to_list() == [1, 5]
    dead = out["dead"]
    assert dead["position"].to_list() == [
        "source#1 data.csv:3",
        "source#1 data.csv:4",
        "source#1 data.csv:5",
    ]
    assert dead["step"].to_list() == ["source#1"] * 3
    assert dead["reason"].to_list() == [
        "expected 3 fields, got 2",
        "column v: cannot parse 'x' as int",
        "expected 3 fields, got 4",
    ]
    assert dead["row"].to_list() == ["2,20", "3,x,c", "4,40,d,extra"]
    c = source_counts(out)
    assert (c["rows_in"], c["dead"], c["rows_out"]) == (5, 3, 2)


def test_csv_directory(engine, tmp_path):
    (tmp_path / "2.csv").write_text("v\n3\n")
    (tmp_path / "1.csv").write_text("v\n1\n2\n")
    got = table(sc.source(sc.csv(str(tmp_path))).plan(), engine.options)
    assert got["v"].to_list() == [1, 2, 3]


def test_csv_dead_letter_positions_name_the_file_in_a_directory(engine, tmp_path):
    (tmp_path / "a.csv").write_text("v\n1\n")
    (tmp_path / "b.csv").write_text("v\n2\nnope\n")
    out = out_of(sc.source(sc.csv(str(tmp_path), schema={"v": "int"})).plan(), engine)
    assert first_table(out)["v"].to_list() == [1, 2]
    assert out["dead"]["position"].to_list() == ["source#1 b.csv:3"]


def test_csv_schema_naming_a_missing_column_is_a_plan_error(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("a\n1\n")
    with pytest.raises(PlanError, match="not in the header"):
        sc.start(sc.source(sc.csv(str(path), schema={"zzz": "int"})).plan(), name="bad_csv")


# ----------------------------------------------------------------------------- NDJSON


def test_ndjson_infers_types_and_missing_fields_are_null(engine, tmp_path):
    path = tmp_path / "events.ndjson"
    lines = [
        {"id": 1, "name": "a", "tags": ["x", "y"], "score": 1},
        {"id": 2, "tags": [], "score": 2.5},
        {"id": 3, "name": "c", "tags": None, "score": None},
    ]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n")
    got = table(sc.source(sc.ndjson(str(path))).plan(), engine.options)
    want = pl.DataFrame(
        {
            "id": [1, 2, 3],
            "name": ["a", None, "c"],
            "tags": [["x", "y"], [], None],
            "score": [1.0, 2.5, None],
        }
    )
    assert_frame_equal(got, want)


def test_ndjson_bad_lines_are_dead_letters_with_positions(engine, tmp_path):
    path = tmp_path / "e.jsonl"
    path.write_text(
        '{"a": 1, "t": "2024-01-01T00:00:00"}\n'  # 1
        '{"a": 2, "t": "2024-01-02T00:00:00"\n'  # 2: invalid JSON
        "[1, 2]\n"  # 3: not an object
        '{"a": "x", "t": "2024-01-03T00:00:00"}\n'  # 4: wrong type
        "\n"  # 5: blank, skipped
        '{"a": 5, "t": "yesterday"}\n'  # 6: bad datetime
        '{"a": 6}\n'
    )  # 7: missing t -> null
    out = out_of(
        sc.source(sc.ndjson(str(path), schema={"a": "int", "t": "datetime"})).plan(), engine
    )
    got = first_table(out)
    assert got.rows() == [(1, dt.datetime(2024, 1, 1)), (6, None)]
    dead = out["dead"]
    assert dead["position"].to_list() == [
        "source#1 e.jsonl:2",
        "source#1 e.jsonl:3",
        "source#1 e.jsonl:4",
        "source#1 e.jsonl:6",
    ]
    reasons = dead["reason"].to_list()
    assert reasons[0].startswith("invalid JSON")
    assert reasons[1] == "expected a JSON object"
    assert reasons[2].startswith("column a:") and "'x'" in reasons[2]
    assert reasons[3].startswith("column t:") and "'yesterday'" in reasons[3]
    assert dead["row"][2] == '{"a": "x", "t": "2024-01-03T00:00:00"}'
    c = source_counts(out)
    assert (c["rows_in"], c["dead"]) == (6, 4)


# ---------------------------------------------------------------- frames and streams


def test_polars_frame(engine):
    assert_frame_equal(table(sc.source(TYPED).plan(), engine.options), TYPED)


def test_a_polars_frame_of_several_chunks_is_read_chunk_by_chunk(engine):
    """A frame built by concatenation keeps its chunks: the source reads them as they are
    (no rechunk, which would copy every row before the run starts), and the user's frame is
    left as it was."""
    parts = [TYPED.drop("xs").with_columns(pl.col("i") + 10 * k) for k in range(3)]
    df = pl.concat(parts, rechunk=False)
    assert df.n_chunks() == 3
    batches = list(ArrowReader(df, "src").arrow_batches())
    assert [b.num_rows for b in batches] == [3, 3, 3]
    assert batches[0].schema.field("s").type == pa.string_view()  # Polars' own layout
    assert df.n_chunks() == 3
    assert_frame_equal(table(sc.source(df).plan(), engine.options), df)
    assert df.n_chunks() == 3


def _chunked(k: int) -> pl.DataFrame:
    """TYPED (every column type, nulls in each) ``k`` times over, one chunk per copy."""
    parts = [TYPED.with_columns(pl.col("i") + 10 * j) for j in range(k)]
    return pl.concat(parts, rechunk=False)


def _frame_batches(df: pl.DataFrame) -> list[pa.RecordBatch]:
    return list(_polars_batches(df, _polars_schema(df)))


def test_a_frame_whose_columns_share_chunks_is_read_column_by_column(monkeypatch):
    """Each column is exported on its own, zero-copy, over windows of whole chunks (the
    first of at least POLARS_SLICE_ROWS rows, then POLARS_WINDOW_ROWS): a batch per chunk,
    whose buffers are the frame's own, equal to what DataFrame.to_arrow gives."""
    monkeypatch.setattr(sources, "POLARS_SLICE_ROWS", 4)
    monkeypatch.setattr(sources, "POLARS_WINDOW_ROWS", 7)
    windows: list[int] = []  # the column path's batches per window (None: it was not taken)
    column_batches = sources._column_batches

    def spy(window: pl.DataFrame, schema: pa.Schema) -> list[pa.RecordBatch] | None:
        got = column_batches(window, schema)
        windows.append(-1 if got is None else len(got))
        return got

    monkeypatch.setattr(sources, "_column_batches", spy)
    df = _chunked(5)
    assert df.n_chunks() == 5
    got = _frame_batches(df)
    assert windows == [2, 3]  # 6 rows, then 9 (7 asked: whole chunks of 3)
    assert [b.num_rows for b in got] == [3] * 5
    want = df.to_arrow(compat_level=pl.CompatLevel.newest()).to_batches()
    assert [g.equals(w) for g, w in zip(got, want)] == [True] * 5
    assert got[0].schema.field("s").type == pa.string_view()
    for k in (0, 4):  # the frame's buffers, not copies
        ours = got[k].column("f").buffers()[1]
        theirs = pa.chunked_array(df.get_column("f")).chunk(k).buffers()[1]
        assert ours.address == theirs.address
    assert df.n_chunks() == 5


def test_a_frame_whose_columns_have_other_chunks_is_aligned_slice_by_slice(engine):
    """A column of other chunks than the rest (a column added to a concatenated frame) sends
    the frame through DataFrame.to_arrow, a slice of whole chunks at a time, which aligns
    them: every row read once, in order, and the frame left as it was."""
    df = _chunked(3).with_columns(pl.Series("extra", range(9)))
    lengths = {tuple(c.chunk_lengths()) for c in df.get_columns()}
    assert lengths == {(3, 3, 3), (9,)}
    got = pa.Table.from_batches(_frame_batches(df))
    out = table(sc.source(df).plan(), engine.options)
    assert {tuple(c.chunk_lengths()) for c in df.get_columns()} == lengths
    # (DataFrame.to_arrow aligns the chunks of the frame it is called on: a clone here)
    assert got.equals(df.clone().to_arrow(compat_level=pl.CompatLevel.newest()))
    assert_frame_equal(out, df)


def test_an_export_of_other_types_falls_back_to_to_arrow():
    """A column whose own export is not of the frame's schema (asked here with another type)
    is not trusted: the window goes through DataFrame.to_arrow."""
    df = _chunked(2)
    schema = _polars_schema(df)
    other = schema.set(schema.get_field_index("i"), pa.field("i", pa.int32()))
    assert sources._column_batches(df, other) is None
    got = list(_polars_batches(df, other))
    assert pa.Table.from_batches(got).equals(df.to_arrow(compat_level=pl.CompatLevel.newest()))


def test_a_polars_frame_changed_in_place_after_the_source_opened_is_read_as_it_was():
    """The source reads the frame as it was when it opened (the start of a run), whatever the
    notebook does to it in place meanwhile (a rename, an extend): the frame is exported as it
    is read, from a clone taken at open, which shares its buffers."""
    df = pl.DataFrame({"a": [1, 2, 3]})
    reader = ArrowReader(df, "src")
    df.columns = ["b"]
    df.extend(pl.DataFrame({"b": [4]}))
    batches = list(reader.arrow_batches())
    assert [type(b).__name__ for b in batches] == ["RecordBatch"]
    assert batches[0].column_names == ["a"] and batches[0].column(0).to_pylist() == [1, 2, 3]


def test_arrow_table(engine):
    got = table(sc.source(TYPED.to_arrow()).plan(), engine.options)
    assert_frame_equal(got, TYPED)


def test_arrow_table_with_narrow_types_widens_to_streamcell_types(engine):
    t = pa.table(
        {
            "i8": pa.array([1, -2], pa.int8()),
            "u32": pa.array([3, 4], pa.uint32()),
            "f32": pa.array([0.5, 1.5], pa.float32()),
            "s": pa.array(["a", "b"], pa.string()),
            "ms": pa.array([0, 1500], pa.timestamp("ms")),
        }
    )
    got = table(sc.source(t).plan(), engine.options)
    assert got.schema == {
        "i8": pl.Int64,
        "u32": pl.Int64,
        "f32": pl.Float64,
        "s": pl.String,
        "ms": pl.Datetime("us"),
    }
    assert got.row(1) == (-2, 4, 1.5, "b", dt.datetime(1970, 1, 1, 0, 0, 1, 500_000))


def test_record_batch_reader_several_batches(engine):
    batches = [
        pa.record_batch({"v": [1, 2]}),
        pa.record_batch({"v": [3]}),
        pa.record_batch({"v": [4, 5]}),
    ]
    reader = pa.RecordBatchReader.from_batches(batches[0].schema, batches)
    # a RecordBatchReader can be read once, so this runs the plan once (no reference re-run)
    run = run_plan(sc.source(reader).plan(), engine.options)
    assert run.table()["v"].to_list() == [1, 2, 3, 4, 5]


class CStream:
    """Only the Arrow PyCapsule stream protocol, nothing else."""

    def __init__(self, t: pa.Table):
        self._t = t

    def __arrow_c_stream__(self, requested_schema=None):
        return self._t.__arrow_c_stream__(requested_schema)


def test_arrow_c_stream_object(engine):
    got = table(
        sc.source(CStream(pa.table({"v": [1, 2], "s": ["a", None]}))).plan(), engine.options
    )
    assert_frame_equal(got, pl.DataFrame({"v": [1, 2], "s": ["a", None]}))


# ------------------------------------------------------------------------- iterables


def test_list_of_dicts_infers_a_schema(engine):
    rows = [
        {"a": 1, "b": None, "c": [1]},
        {"a": 2, "b": 2.5, "c": []},
        {"a": None, "b": 3, "c": None},
    ]
    got = table(sc.source(rows).plan(), engine.options)
    want = pl.DataFrame({"a": [1, 2, None], "b": [None, 2.5, 3.0], "c": [[1], [], None]})
    assert_frame_equal(got, want)


def test_list_type_is_inferred_past_an_empty_first_list(engine):
    rows = [{"xs": []}, {"xs": None}, {"xs": ["a", "b"]}]
    out = out_of(sc.source(rows).plan(), engine)
    assert out["dead"].height == 0
    assert_frame_equal(first_table(out), pl.DataFrame({"xs": [[], None, ["a", "b"]]}))


def test_iterable_bad_rows_are_dead_letters(engine):
    rows = [
        {"a": 1, "s": "x"},
        {"a": 2},
        "not a dict",
        {"a": "3", "s": "z"},
        {"a": True, "s": "b"},
        {"a": 4, "s": "y"},
    ]
    out = out_of(sc.source(rows).plan(), engine)
    # the inferred schema's fields are nullable: a missing key is a null, not a dead letter
    assert first_table(out).rows() == [(1, "x"), (2, None), (4, "y")]
    dead = out["dead"]
    assert dead["position"].to_list() == ["source#1 row 2", "source#1 row 3", "source#1 row 4"]
    reasons = dead["reason"].to_list()
    assert reasons[0] == "expected a dict, got str"
    assert reasons[1].startswith("column a:") and "'3'" in reasons[1]
    assert reasons[2].startswith("column a:")  # a bool is not an int
    assert source_counts(out)["dead"] == 3


def test_iterable_missing_key_is_null_unless_the_schema_is_given(engine):
    """One early dict with an extra key adds a nullable column; the other rows keep flowing.
    With a given schema a missing key still dead-letters the row."""
    rows = [{"a": 0, "extra": "e"}] + [{"a": i} for i in range(1, 6)]
    out = out_of(sc.source(rows).plan(), engine)
    t = first_table(out)
    assert t.columns == ["a", "extra"]
    assert t.rows() == [(0, "e")] + [(i, None) for i in range(1, 6)]
    assert out["dead"].height == 0
    given = P.SourceSpec(
        "object", (("schema", (("a", "int"), ("extra", "str"))),), P.ObjRef(rows, "rows")
    )
    out = out_of(sc.source(given).plan(), engine)
    assert first_table(out).rows() == [(0, "e")]
    assert out["dead"]["reason"].to_list() == ["missing field 'extra'"] * 5


def test_generator_of_dicts(engine):
    def gen():
        for i in range(5):
            yield {"i": i, "sq": i * i}

    # a generator can be consumed once: run the plan once
    run = run_plan(sc.source(gen()).filter(sc.col("i") % 2 == 0).plan(), engine.options)
    assert run.table().rows() == [(0, 0), (2, 4), (4, 16)]


def test_non_stream_objects_are_plan_errors():
    with pytest.raises(PlanError, match="not a stream"):
        sc.start(sc.source({"a": [1]}).plan(), name="bad_dict")
    with pytest.raises(PlanError, match="cannot read"):
        sc.start(sc.source(42).plan(), name="bad_int")


# ------------------------------------------------------------------------- generators


@pytest.mark.parametrize("kind", ["clickstream", "store_sales"])
def test_generators_are_deterministic(engine, kind):
    make = getattr(sc, kind)
    a = table(sc.source(make(rows=300, seed=3)).plan(), engine.options)
    b = table(sc.source(make(rows=300, seed=3)).plan(), engine.options)
    c = table(sc.source(make(rows=300, seed=4)).plan(), engine.options)
    assert a.height == 300
    assert_frame_equal(a, b)
    assert not a.equals(c)


@pytest.mark.parametrize("kind", ["clickstream", "store_sales"])
def test_generator_rows_are_a_prefix_of_a_longer_run(engine, kind):
    make = getattr(sc, kind)
    short = table(sc.source(make(rows=50, seed=9)).plan(), engine.options)
    longer = table(sc.source(make(rows=120, seed=9)).plan(), engine.options)
    assert_frame_equal(short, longer.head(50))


def test_clickstream_shape(engine):
    got = table(
        sc.source(sc.clickstream(rows=2000, users=50, items=30, seed=1)).plan(), engine.options
    )
    assert got.schema == {
        "ts": pl.Datetime("us"),
        "user_id": pl.Int64,
        "item_id": pl.Int64,
        "category": pl.Int64,
        "event": pl.String,
        "price": pl.Float64,
    }
    assert set(got["event"].unique()) <= {"view", "cart", "purchase"}
    assert got["user_id"].drop_nulls().is_between(0, 49).all()
    assert got["item_id"].is_between(0, 29).all()
    assert (got["category"] == got["item_id"] % 20).all()
    assert 0 < got["user_id"].null_count() < 100  # about 1% null


def test_store_sales_shape(engine):
    got = table(sc.source(sc.store_sales(rows=500, stores=5, seed=2)).plan(), engine.options)
    assert got.columns == [
        "ts",
        "ticket",
        "store_id",
        "item_id",
        "customer_id",
        "category",
        "quantity",
        "price",
        "net_paid",
    ]
    assert got["store_id"].is_between(0, 4).all() and got["quantity"].is_between(1, 10).all()
    assert (got["net_paid"] <= (got["quantity"] * got["price"]).round(2) + 1e-9).all()
    assert got["ts"].is_sorted()  # no late rows in store_sales


def test_generator_with_zero_rows(engine):
    got = table(sc.source(sc.clickstream(rows=0)).plan(), engine.options)
    assert got.height == 0 and got.width == 6


def test_generator_rows_must_be_non_negative():
    with pytest.raises(PlanError, match="rows must be"):
        sc.start(sc.source(sc.clickstream(rows=-1)).plan(), name="bad_gen")


def test_file_sources_from_dsl(engine, tmp_path):
    path = Path(tmp_path) / "d.csv"
    path.write_text("k,v\na,1\nb,2\na,3\n")
    plan = sc.parse(f"source csv({str(path)!r})\nkey_by k\nagg total = sum(v)")
    assert table(plan, engine.options).rows() == [("a", 4), ("b", 2)]
