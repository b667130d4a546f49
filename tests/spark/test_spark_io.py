"""Spark reads sources and writes sinks on its executors (issue 19, parts 1 and 2): each test
checks both where the work happens (the physical plan, the files Spark wrote, the table
kept in Spark) and that the answers equal the reference engine's."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest
from polars.testing import assert_frame_equal

import streamcell as sc
from streamcell.compiler import compile_plan
from streamcell.options import RunOptions
from streamcell.sources import GeneratorReader
from tests.helpers import check_against_reference, run_plan, upload

pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark

SPARK = RunOptions(engine="spark")
REF = RunOptions(engine="reference")


def spark_source_of(plan: sc.Plan):
    from streamcell.backends.spark.backend import source_spec
    from streamcell.backends.spark.io import spark_source
    from streamcell.backends.spark.session import get_session

    c = compile_plan(plan)
    src = c.plan.sources[0]
    return spark_source(get_session(), c, src, source_spec(src))


def physical_plan(df) -> str:
    return str(df._jdf.queryExecution().executedPlan().toString())


def write_files(d: Path) -> None:
    """Files whose name order differs from their write order, several row groups, names
    Spark URL-encodes, Int32 and Int64 files (one streamcell type, two physical ones) and a
    file of another schema (a dead letter on every engine)."""
    d.mkdir()
    pl.DataFrame({"v": list(range(20, 30)), "s": ["x"] * 10}).write_parquet(
        d / "c+c.parquet", row_group_size=3
    )
    pl.DataFrame({"v": list(range(10)), "s": list("abcdefghij")}).write_parquet(
        d / "a a.parquet", row_group_size=4
    )
    pl.DataFrame(
        {"v": [100, 101], "s": ["y", None]}, schema={"v": pl.Int32, "s": pl.String}
    ).write_parquet(d / "b.parquet")
    pl.DataFrame({"v": ["not", "int"]}).write_parquet(d / "bb.parquet")
    pl.DataFrame({"v": [7], "s": ["z"]}).write_parquet(d / "d.parquet")


def test_parquet_files_are_read_by_the_executors_in_name_order(tmp_path):
    write_files(tmp_path / "in")
    plan = sc.source(sc.parquet(str(tmp_path / "in"))).with_columns(w=sc.col("v") * 2).plan()
    got = spark_source_of(plan)
    assert got is not None and "FileScan parquet" in physical_plan(got.df)
    assert got.count == 10 + 2 + 1 + 10 + 1  # a, b, bb (one dead letter), c+c, d
    out = check_against_reference(plan, SPARK)
    want = pl.concat(
        [pl.read_parquet(tmp_path / "in" / f) for f in ("a a.parquet", "b.parquet")]
        + [pl.read_parquet(tmp_path / "in" / f) for f in ("c+c.parquet", "d.parquet")],
        how="vertical_relaxed",
    ).with_columns(w=pl.col("v") * 2)
    assert_frame_equal(next(iter(out["tables"].values())), want)
    assert out["dead"]["position"].to_list() == [f"source#1 {tmp_path / 'in' / 'bb.parquet'}"]


def test_a_file_uri_is_read_by_the_executors(tmp_path):
    write_files(tmp_path / "in")
    plan = sc.source(sc.parquet((tmp_path / "in").as_uri())).plan()
    got = spark_source_of(plan)
    assert got is not None and "FileScan parquet" in physical_plan(got.df)
    out = check_against_reference(plan, SPARK)
    assert next(iter(out["tables"].values())).height == 23


def test_a_uri_spark_has_no_filesystem_for_is_read_by_the_driver_with_a_warning(tmp_path, s3):
    query, fs = s3
    write_files(tmp_path / "in")
    upload(fs, tmp_path / "in", "spark-io")
    plan = sc.source(sc.parquet(f"s3://streamcell-test/spark-io?{query}")).plan()
    with pytest.warns(UserWarning, match="Spark has no filesystem for s3://"):
        assert spark_source_of(plan) is None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = check_against_reference(plan, SPARK)
    assert next(iter(out["tables"].values())).height == 23


def test_row_positions_of_downstream_dead_letters_follow_the_files(tmp_path):
    write_files(tmp_path / "in")
    plan = sc.source(sc.parquet(str(tmp_path / "in"))).select(x=sc.col("s").cast("int")).plan()
    out = check_against_reference(plan, SPARK)
    assert out["dead"].height > 5  # letters do not cast: each names its row


def test_generators_build_their_rows_on_the_executors():
    plan = sc.source(sc.store_sales(rows=150_000, seed=3)).plan()
    got = spark_source_of(plan)
    assert got is not None and "MapInArrow" in physical_plan(got.df)
    rows = got.df.orderBy("_o").toArrow()
    reader = GeneratorReader(sc.store_sales(rows=150_000, seed=3))
    want = pa.Table.from_batches(list(reader.arrow_batches()))
    assert rows.column("_o").to_pylist() == [[i] for i in range(150_000)]
    assert_frame_equal(
        pl.from_arrow(rows.drop(["_o"])),  # type: ignore[arg-type]
        pl.from_arrow(want),  # type: ignore[arg-type]
        check_dtypes=False,
    )


def test_two_sources_merge_round_robin_on_spark(tmp_path):
    write_files(tmp_path / "in")
    a = sc.source(sc.parquet(str(tmp_path / "in"))).select("v")
    b = sc.source(pl.DataFrame({"v": [-1, -2, -3]}))
    gen = sc.source(sc.clickstream(rows=5)).select(v=sc.col("item_id"))
    check_against_reference(a.union(b).union(gen).plan(), SPARK)


def test_a_table_stays_in_spark_until_asked_for(tmp_path):
    plan = sc.source(sc.clickstream(rows=50_000)).key_by("user_id").agg(n=sc.count()).plan()
    run = run_plan(plan, SPARK)
    ref = run_plan(plan, REF)
    from streamcell.backends.spark.io import SparkTable

    store = run._tables[run.table_names()[0]]
    assert isinstance(store._remote, SparkTable)
    assert len(store) == len(ref._tables[ref.table_names()[0]])
    assert_frame_equal(run.table(limit=7), ref.table().head(7))
    assert_frame_equal(ref.table(limit=7), ref.table().head(7))
    assert_frame_equal(run.table(), ref.table())
    assert run.table(limit=0).height == 0
    with pytest.raises(sc.errors.ArgumentError) as e:
        run.table(limit=-1)
    assert e.value.parameter == "limit"


def test_taking_a_large_table_whole_warns(monkeypatch):
    from streamcell.backends.spark import io

    monkeypatch.setattr(io, "LARGE_TABLE_ROWS", 100)
    run = run_plan(sc.source(sc.clickstream(rows=500)).plan(), SPARK)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert run.table(limit=100).height == 100  # a limit: no warning
    with pytest.warns(ResourceWarning, match="holds 500 rows in Spark"):
        assert run.table().height == 500


@pytest.mark.parametrize("mode", ["append", "complete", "update"])
def test_parquet_sinks_are_written_by_spark_in_order(tmp_path, mode):
    src = sc.source(sc.clickstream(rows=30_000, seed=5)).key_by("category")
    plan = sc.combine(
        src.agg(n=sc.count(), spent=sc.sum("price")).sink_parquet(str(tmp_path / "s"), mode=mode)
    )
    ref = sc.combine(
        src.agg(n=sc.count(), spent=sc.sum("price")).sink_parquet(str(tmp_path / "r"), mode=mode)
    )
    run_plan(plan, SPARK)
    run_plan(ref, REF)
    files = sorted((tmp_path / "s").glob("*.parquet"))
    assert files and all(f.name.endswith(".snappy.parquet") for f in files)  # Spark's writer
    got = pl.read_parquet(files)
    assert_frame_equal(got, pl.read_parquet(sorted((tmp_path / "r").glob("*.parquet"))))
    assert got.height == (30_000 if mode == "append" else 20)


@pytest.fixture
def small_splits():
    """Spark splits every file into ~2 KB blocks and packs several blocks per task: line
    numbers must come out right across blocks, files and partitions."""
    from streamcell.backends.spark.session import get_session

    conf = get_session().conf
    old = conf.get("spark.sql.files.maxPartitionBytes")
    conf.set("spark.sql.files.maxPartitionBytes", "2048")
    yield
    conf.set("spark.sql.files.maxPartitionBytes", old)


def test_csv_lines_are_numbered_across_blocks_on_the_executors(tmp_path, small_splits):
    d = tmp_path / "csv"
    d.mkdir()
    for k, name in enumerate(["b.csv", "a.csv", "c c.csv"]):
        lines = ["id,v,s"]
        for i in range(700):
            if i % 97 == 5:
                lines.append("")  # blank: skipped, but counted in line numbers
            elif i % 131 == 7:
                lines.append(f"{i},oops,{k}")  # a bad value
            elif i % 151 == 9:
                lines.append(f"{i},{i}")  # too few fields
            else:
                lines.append(f"{i},{i * k},s{i}")
        (d / name).write_text("\n".join(lines) + "\n")
    spec = sc.csv(str(d), schema={"id": "int", "v": "int", "s": "str"})
    plan = sc.source(spec).filter(sc.col("v") % 3 != 1).plan()
    got = spark_source_of(plan)
    assert got is not None and "FileScan text" in physical_plan(got.df)
    out = check_against_reference(plan, SPARK)
    assert out["dead"].height > 10 and "c c.csv:" in out["dead"]["position"][-1]


def test_ndjson_lines_are_parsed_on_the_executors(tmp_path, small_splits):
    d = tmp_path / "js"
    d.mkdir()
    for name in ("2.ndjson", "1.jsonl"):
        rows = []
        for i in range(400):
            if i % 89 == 3:
                rows.append("{not json")
            elif i % 113 == 4:
                rows.append("[1, 2]")
            elif i % 71 == 5:
                rows.append("   ")
            else:
                rows.append(json.dumps({"a": i, "b": f"x{i}"} if i % 5 else {"a": i}))
        (d / name).write_text("\n".join(rows) + "\n")
    plan = sc.source(sc.ndjson(str(d), schema={"a": "int", "b": "str"})).plan()
    got = spark_source_of(plan)
    assert got is not None and "FileScan text" in physical_plan(got.df)
    out = check_against_reference(plan, SPARK)
    assert out["dead"].height >= 8


@pytest.mark.parametrize("sink", ["parquet", "table"])
def test_a_stateless_chain_keeps_file_and_split_order_without_a_sort(tmp_path, small_splits, sink):
    """Parquet files read unshuffled (filters and projections only): the partitions are the
    files' ~2 KB splits in file order, then offset order, and reach the sink as they are: no
    sort, no exchange, and exactly the reference's rows in the reference's order."""
    d = tmp_path / "in"
    d.mkdir()
    for k, name in enumerate(["b.parquet", "a.parquet", "c.parquet"]):
        n = 3000 + 700 * k
        pl.DataFrame(
            {"i": range(n), "f": [k] * n, "x": [(i * 7919) % 1000 for i in range(n)]}
        ).write_parquet(d / name, row_group_size=97)
    s = sc.source(sc.parquet(str(d))).filter(sc.col("x") % 3 != 0).with_columns(y=sc.col("x") * 2)
    got_src = spark_source_of(s.plan())
    assert got_src is not None and got_src.df.rdd.getNumPartitions() > 9  # several splits per file
    if sink == "table":
        plan = s.plan()
        assert "Sort" not in physical_plan(got_src.df)
        check_against_reference(plan, SPARK)  # the table, row for row and in order
        run = run_plan(plan, SPARK)
        kept = run.table()
        assert kept["f"].to_list() == sorted(kept["f"].to_list(), key=[1, 0, 2].index)
        return
    run_plan(sc.combine(s.sink_parquet(str(tmp_path / "s"))), SPARK)
    run_plan(sc.combine(s.sink_parquet(str(tmp_path / "r"))), REF)
    files = sorted((tmp_path / "s").glob("*.parquet"))
    assert len(files) > 9 and all(f.name.endswith(".snappy.parquet") for f in files)
    got = pl.read_parquet(files)
    assert_frame_equal(got, pl.read_parquet(sorted((tmp_path / "r").glob("*.parquet"))))
    assert got["f"].unique(maintain_order=True).to_list() == [1, 0, 2]  # a, b, c by name


@pytest.mark.parametrize("rows", [0, 5])
def test_a_global_aggregate_to_a_complete_sink_with_or_without_rows(tmp_path, rows):
    def plan(p: str) -> sc.Plan:
        s = sc.source(sc.clickstream(rows=100)).filter(sc.col("item_id") < rows)
        return sc.combine(s.agg(n=sc.count()).sink_parquet(p, mode="complete"))

    run_plan(plan(str(tmp_path / "s")), SPARK)
    run_plan(plan(str(tmp_path / "r")), REF)
    got = pl.read_parquet(sorted((tmp_path / "s").glob("*.parquet")))
    assert_frame_equal(got, pl.read_parquet(sorted((tmp_path / "r").glob("*.parquet"))))
    assert got.height == (1 if rows else 0)


def test_a_table_whose_spark_session_stopped_is_a_streamcell_error_and_sql_skips_it():
    from streamcell.backends.spark import session
    from streamcell.errors import StreamcellError
    from streamcell.sql import live_tables

    df = pl.DataFrame({"k": [1, 2, 1], "v": [1, 2, 3]})
    run = sc.source(df).key_by("k").agg(n=sc.count()).start("stale_spark", engine="spark")
    run.wait(300)
    assert run.status == "finished"
    session.stop()  # the session holding the table goes away
    try:
        with pytest.raises(StreamcellError, match="Spark session that has since stopped"):
            run.table()
        assert "stale_spark" not in live_tables()
    finally:
        from streamcell.run import registry

        registry().pop("stale_spark", None)


def _scan_files(d: Path, files: int, rows: int) -> None:
    """``files`` Parquet files of ``rows`` rows in row groups of 500, named out of order."""
    d.mkdir()
    for k in range(files):
        pl.DataFrame(
            {"i": range(k * rows, (k + 1) * rows), "x": [(i * 7919) % 1000 for i in range(rows)]}
        ).write_parquet(d / f"f{(k * 7) % files}.parquet", row_group_size=500)


@pytest.fixture
def cheap_opens():
    """Spark's cost of opening a file made small (1 KB, from 4 MB), so that it cuts even these
    small files into one split per core when it reads each alone."""
    from streamcell.backends.spark.session import get_session

    conf = get_session().conf
    old = conf.get("spark.sql.files.openCostInBytes")
    conf.set("spark.sql.files.openCostInBytes", "1024")
    yield conf
    conf.set("spark.sql.files.openCostInBytes", old)


@pytest.mark.parametrize("own_setting", [False, True])
def test_files_read_one_scan_each_are_one_split_each_when_they_outnumber_the_cores(
    tmp_path, cheap_opens, own_setting
):
    """A stateless chain over more files than cores: each file's scan is one task (Spark alone
    would cut each file into one split per core, files x cores tasks), the part files written
    are one per input file, in order, and equal the reference's; the setting is put back after
    the run, and a user's own setting of it is left as it was."""
    from streamcell.backends.spark.io import MIN_SPLITS
    from streamcell.backends.spark.session import get_session

    d = tmp_path / "in"
    _scan_files(d, 4, 5000)
    cores = get_session().sparkContext.defaultParallelism
    if cores >= 4:
        pytest.skip(f"{cores} cores: 4 files do not outnumber them")
    if own_setting:
        cheap_opens.set(MIN_SPLITS, str(cores))
    try:
        s = (
            sc.source(sc.parquet(str(d)))
            .filter(sc.col("x") % 3 != 0)
            .with_columns(y=sc.col("x") + 1)
        )
        run_plan(sc.combine(s.sink_parquet(str(tmp_path / "s"))), SPARK)
        run_plan(sc.combine(s.sink_parquet(str(tmp_path / "r"))), REF)
        files = sorted((tmp_path / "s").glob("*.parquet"))
        assert len(files) == (4 * cores if own_setting else 4)
        got = pl.read_parquet(files)
        assert_frame_equal(got, pl.read_parquet(sorted((tmp_path / "r").glob("*.parquet"))))
        assert cheap_opens.get(MIN_SPLITS, None) == (str(cores) if own_setting else None)
    finally:
        cheap_opens.unset(MIN_SPLITS)


@pytest.fixture
def observed(monkeypatch) -> list[int]:
    """The steps (their index in the plan) given a Spark metric (``Lowering.observe``)."""
    from streamcell.backends.spark import backend as B

    steps: list[int] = []
    observe = B.Lowering.observe

    def spy(self, df, j, *metrics):
        steps.append(j)
        return observe(self, df, j, *metrics)

    monkeypatch.setattr(B.Lowering, "observe", spy)
    return steps


@pytest.mark.parametrize("sink", ["parquet", "table", "none"])
def test_the_last_filter_of_a_file_by_file_chain_is_counted_by_its_sink(tmp_path, observed, sink):
    """Into a table or a local Parquet folder, the last filter's rows out are the rows its
    sink counts (a table's count, the written files' footers): that filter carries no Spark
    metric, an earlier one does, and every counter equals the reference's. Into a sink that
    counts nothing (``none``) the last filter keeps its metric."""
    d = tmp_path / "in"
    _scan_files(d, 3, 2000)
    s = (
        sc.source(sc.parquet(str(d)))
        .filter(sc.col("x") % 3 != 0)  # step 1
        .with_columns(y=sc.col("x") * 2)
        .filter(sc.col("y") > 700)  # step 3
    )
    if sink == "parquet":
        got = run_plan(sc.combine(s.sink_parquet(str(tmp_path / "s"))), SPARK).counts()
        assert_frame_equal(
            got, run_plan(sc.combine(s.sink_parquet(str(tmp_path / "r"))), REF).counts()
        )
        rows = pl.read_parquet(sorted((tmp_path / "s").glob("*.parquet")))
        assert_frame_equal(rows, pl.read_parquet(sorted((tmp_path / "r").glob("*.parquet"))))
        assert rows.height == got.filter(pl.col("step").str.starts_with("sink"))["rows_in"][0]
    elif sink == "table":
        check_against_reference(s.plan(), SPARK)
    else:
        plan = sc.combine(s.sink_none())
        assert_frame_equal(run_plan(plan, SPARK).counts(), run_plan(plan, REF).counts())
    from streamcell.backends.spark.session import get_session

    local = get_session().sparkContext.master.startswith("local")
    counts_itself = sink == "none" or (sink == "parquet" and not local)  # no footers to read
    assert 1 in observed and (3 in observed) == counts_itself


@pytest.mark.parametrize("sink", ["parquet", "table"])
def test_a_filter_followed_by_a_step_that_can_fail_keeps_its_metric(tmp_path, observed, sink):
    """A cast after the last filter sends some rows to dead letters: the sink's rows are then
    not the filter's, so the filter keeps its own metric, and the counters and dead letters
    equal the reference's."""
    d = tmp_path / "in"
    d.mkdir()
    for k in range(3):
        pl.DataFrame(
            {
                "x": range(k * 900, (k + 1) * 900),
                "s": [str(i) if i % 7 else "no" for i in range(900)],
            }
        ).write_parquet(d / f"f{k}.parquet", row_group_size=300)
    s = (
        sc.source(sc.parquet(str(d)))
        .filter(sc.col("x") % 3 != 0)
        .with_columns(n=sc.col("s").cast(int))
    )
    if sink == "table":
        out = check_against_reference(s.plan(), SPARK)
    else:
        got = run_plan(sc.combine(s.sink_parquet(str(tmp_path / "s"))), SPARK)
        want = run_plan(sc.combine(s.sink_parquet(str(tmp_path / "r"))), REF)
        assert_frame_equal(got.counts(), want.counts())
        out = {"dead": got.dead_letters()}
        assert_frame_equal(out["dead"], want.dead_letters())
    assert out["dead"].height > 100 and 1 in observed


def test_spark_infers_a_physical_schema_once_per_kernel(tmp_path, monkeypatch):
    """Each file is read with the Spark schema known for its physical schema: Spark infers it
    (a job reading a footer) for the first file of each physical schema the kernel meets, not
    for every file of every run; the answers are the reference's either way."""
    from pyspark.sql.readwriter import DataFrameReader

    from streamcell.backends.spark import io

    write_files(tmp_path / "in")  # Int64 and Int32 files of one streamcell schema, a bad one
    monkeypatch.setattr(io, "_SPARK_SCHEMAS", {})
    monkeypatch.setattr(io, "_SOURCE_FRAMES", {})
    given: list[object] = []
    schema = DataFrameReader.schema

    def spy(self, s):
        given.append(s)
        return schema(self, s)

    monkeypatch.setattr(DataFrameReader, "schema", spy)
    plan = sc.source(sc.parquet(str(tmp_path / "in"))).filter(sc.col("v") != 3).plan()
    check_against_reference(plan, SPARK)
    assert len(io._SPARK_SCHEMAS) == 2 and len(given) == 4 - 2  # 4 good files, 2 inferred
    given.clear()
    io._SOURCE_FRAMES.clear()  # the files read again (else the run reuses the source's frame)
    check_against_reference(plan, SPARK)
    assert len(io._SPARK_SCHEMAS) == 2 and len(given) == 4


def test_a_rerun_over_the_same_files_reuses_the_source_frame_until_a_file_changes(
    tmp_path, monkeypatch
):
    """Re-running a cell over unchanged files reuses the source's Spark DataFrame (no
    ``spark.read`` at all); a file rewritten meanwhile (another size or time) is read anew, and
    every run's answer is the reference's for the files as they are then."""
    import os

    from pyspark.sql.readwriter import DataFrameReader

    from streamcell.backends.spark import io

    write_files(tmp_path / "in")
    monkeypatch.setattr(io, "_SOURCE_FRAMES", {})
    reads: list[str] = []
    parquet = DataFrameReader.parquet

    def spy(self, *paths, **kw):
        reads.extend(paths)
        return parquet(self, *paths, **kw)

    monkeypatch.setattr(DataFrameReader, "parquet", spy)
    plan = sc.source(sc.parquet(str(tmp_path / "in"))).filter(sc.col("v") != 3).plan()
    first = check_against_reference(plan, SPARK)
    assert len(reads) == 4 and len(io._SOURCE_FRAMES) == 1  # the four good files
    reads.clear()
    again = check_against_reference(plan, SPARK)
    assert reads == [] and len(io._SOURCE_FRAMES) == 1
    assert_frame_equal(next(iter(again["tables"].values())), next(iter(first["tables"].values())))

    d = tmp_path / "in" / "d.parquet"
    before = os.stat(d).st_mtime_ns
    pl.DataFrame({"v": [8, 9, 3], "s": ["p", "q", "r"]}).write_parquet(d)
    os.utime(d, ns=(before + 10**9, before + 10**9))  # a coarse clock may not have moved
    changed = check_against_reference(plan, SPARK)
    assert len(reads) == 4 and len(io._SOURCE_FRAMES) == 2
    table = next(iter(changed["tables"].values()))
    assert table["v"].to_list()[-2:] == [8, 9]
    assert table.height == 9 + 2 + 10 + 2  # v != 3 drops a row of "a a.parquet" and of d's


NAN = float("nan")


@pytest.mark.parametrize(
    "pred",
    [
        lambda f, lit: f > 0.5,
        lambda f, lit: f >= 0.5,
        lambda f, lit: f != 0.1,
        lambda f, lit: lit(0.5) < f,
        lambda f, lit: f == NAN,
        lambda f, lit: f < 0.5,
    ],
    ids=["gt", "ge", "ne", "lit-lt", "eq-nan", "lt"],
)
def test_a_filter_on_a_parquet_float_column_keeps_nan_rows(tmp_path, pred):
    """Parquet row-group statistics leave NaN out: a group [NaN, 0.1, 0.2] has max 0.2, so a
    comparison Spark pushed into the scan skipped it and lost the NaN rows, which compare
    above every number (and equal to NaN) as in Polars."""
    df = pl.DataFrame({"f": [NAN, 0.1, 0.2, NAN], "i": [0, 1, 2, 3]})
    df.write_parquet(tmp_path / "part-0.parquet")
    stream = sc.source(sc.parquet(str(tmp_path))).filter(pred(sc.col("f"), sc.lit))
    got = check_against_reference(stream.plan(), SPARK)["tables"]
    (table,) = got.values()
    polars = pl.read_parquet(tmp_path / "part-0.parquet").filter(pred(pl.col("f"), pl.lit))
    assert table["i"].to_list() == polars["i"].to_list()
