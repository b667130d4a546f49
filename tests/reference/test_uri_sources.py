"""File sources named by URI (issue 19, part 1): ``file://`` everywhere, and an object store
read through pyarrow's filesystems (the ``s3`` fixture: moto's S3 server on 127.0.0.1, which
pyarrow's own S3 client talks to over HTTP). Every engine's answer equals the same files read
from a local folder by the reference engine."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import streamcell as sc
from streamcell.errors import ArgumentError, NotSupportedError, PlanError
from streamcell.options import RunOptions
from tests.helpers import check_against_reference, outputs, run_plan, upload

REF = RunOptions(engine="reference", display=False)


def write_parquet_folder(d: Path) -> None:
    """Names whose order differs from the write order, one a URI must encode, several row
    groups, and a file of another schema (a dead letter)."""
    d.mkdir(parents=True)
    pl.DataFrame({"v": list(range(20, 30)), "s": ["x"] * 10}).write_parquet(
        d / "c.parquet", row_group_size=3
    )
    pl.DataFrame({"v": list(range(10)), "s": list("abcdefghij")}).write_parquet(
        d / "a a.parquet", row_group_size=4
    )
    pl.DataFrame({"v": ["not", "int"]}).write_parquet(d / "b.parquet")


CSV = "k,v\na,1\nb,2\nc,oops\nd,4\n"


def pipeline(path: str, kind: str = "parquet") -> sc.Plan:
    src = sc.parquet(path) if kind == "parquet" else sc.csv(path, schema={"k": "str", "v": "int"})
    return sc.source(src).with_columns(w=sc.col("v") * 2).filter(sc.col("v") != 3).plan()


def same_as_local(got: dict, local: str, kind: str = "parquet") -> None:
    """Tables, counts and dead-letter reasons equal the local folder's on the reference (the
    positions name the same files; the Parquet one by its URI)."""
    want = outputs(run_plan(pipeline(local, kind), REF))
    assert_frame_equal(next(iter(got["tables"].values())), next(iter(want["tables"].values())))
    assert_frame_equal(got["counts"], want["counts"])
    assert got["dead"]["reason"].to_list() == want["dead"]["reason"].to_list()


# ---------------------------------------------------------------------------- file://


def test_a_file_uri_reads_as_its_path(engine, tmp_path):
    write_parquet_folder(tmp_path / "in dir")
    uri = (tmp_path / "in dir").as_uri()  # file:///.../in%20dir
    assert "%20" in uri
    got = check_against_reference(pipeline(uri), engine.options)
    same_as_local(got, str(tmp_path / "in dir"))
    assert got["dead"]["position"].to_list() == [f"source#1 {tmp_path / 'in dir' / 'b.parquet'}"]


def test_a_csv_file_uri_names_file_and_line_in_dead_letters(engine, tmp_path):
    (tmp_path / "x.csv").write_text(CSV)
    got = check_against_reference(pipeline((tmp_path / "x.csv").as_uri(), "csv"), engine.options)
    same_as_local(got, str(tmp_path / "x.csv"), "csv")
    assert got["dead"]["position"].to_list() == ["source#1 x.csv:4"]


def test_a_file_uri_naming_a_host_is_refused(tmp_path):
    with pytest.raises(PlanError, match="names a host"):
        sc.start(pipeline("file://server/share/x.parquet"), name="host", options=REF)


# ---------------------------------------------------------------------------- S3


def test_an_s3_folder_reads_like_the_local_folder(engine, tmp_path, s3, recwarn):
    query, fs = s3
    write_parquet_folder(tmp_path / "in")
    upload(fs, tmp_path / "in", "pq")
    (tmp_path / "in" / "other.txt").write_text("not data")  # listed, not read
    uri = f"s3://streamcell-test/pq?{query}"
    got = check_against_reference(pipeline(uri), engine.options)
    same_as_local(got, str(tmp_path / "in"))
    # positions and messages never show the URI's query (it may hold credentials)
    assert got["dead"]["position"].to_list() == ["source#1 s3://streamcell-test/pq/b.parquet"]


def test_s3a_names_s3_and_csv_lines_are_positions(engine, tmp_path, s3):
    query, fs = s3
    (tmp_path / "csv").mkdir()
    (tmp_path / "csv" / "x.csv").write_text(CSV)
    (tmp_path / "csv" / "y.csv").write_text("k,v\ne,5\n")
    upload(fs, tmp_path / "csv", "csv")
    got = check_against_reference(
        pipeline(f"s3a://streamcell-test/csv?{query}", "csv"), engine.options
    )
    same_as_local(got, str(tmp_path / "csv"), "csv")
    assert got["dead"]["position"].to_list() == ["source#1 x.csv:4"]


def test_a_watched_s3_folder_reads_files_as_they_appear(tmp_path, s3, engine):
    query, fs = s3
    put = tmp_path / "put"
    put.mkdir()
    # names a URI must escape: the source reopens the first file by its URI for the schema
    pl.DataFrame({"v": [1, 2, 3]}).write_parquet(put / "a 1%41.parquet")
    upload(fs, put, "watch")
    plan = sc.source(sc.watch(f"s3://streamcell-test/watch?{query}", idle_timeout=1.5, poll=0.05))
    opts = engine.options.with_(display=False, checkpoint_dir=str(tmp_path / "ck"))
    if opts.engine == "spark":  # Spark lists the folder itself, and has no S3 filesystem here
        with pytest.raises(NotSupportedError, match="has no filesystem for this URI's scheme"):
            plan.start("watch_s3", options=opts)
        return
    run = plan.filter(sc.col("v") != 2).start("watch_s3", options=opts)

    def later() -> None:
        time.sleep(0.3)
        with fs.open_output_stream("streamcell-test/watch/b #2.parquet") as out:
            pl.DataFrame({"v": [4, 5]}).write_parquet(out)

    t = threading.Thread(target=later)
    t.start()
    run.wait(60)
    t.join()
    assert run.status == "finished", run.error
    assert run.table()["v"].to_list() == [1, 3, 4, 5]
    assert outputs(run)["counts"]["rows_in"][0] == 5


def test_s3_errors_name_the_uri(tmp_path, s3):
    query, _ = s3
    missing = f"s3://streamcell-test/nothing-here?{query}"
    with pytest.raises(PlanError, match="no such file or directory: s3://streamcell-test/nothing"):
        sc.start(pipeline(missing), name="missing", options=REF)
    with pytest.raises(PlanError, match="cannot open this filesystem"):
        sc.start(pipeline("nosuchfs://bucket/x.parquet"), name="nofs", options=REF)
    secret = "s3://key:hush@streamcell-test/nothing-here?secret_key=hush&" + query
    with pytest.raises(PlanError) as e:
        sc.start(pipeline(secret), name="secret", options=REF)
    assert "hush" not in str(e.value) and "streamcell-test/nothing-here" in str(e.value)


# ---------------------------------------------------------------------------- Parquet sinks


def read_folder(fs, folder: str) -> pl.DataFrame:
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq

    infos = fs.get_file_info(pafs.FileSelector(folder))
    names = sorted(i.path for i in infos if i.base_name.endswith(".parquet"))
    assert names
    return pl.concat([pl.from_arrow(pq.read_table(n, filesystem=fs)) for n in names])


@pytest.mark.parametrize("mode", ["append", "complete"])
def test_parquet_sinks_write_file_and_s3_uris(engine, tmp_path, s3, mode, recwarn):
    import pyarrow.fs as pafs

    query, fs = s3
    src = sc.source(sc.clickstream(rows=3_000, seed=7)).key_by("category")
    agg = src.agg(n=sc.count(), spent=sc.sum("price"))
    prefix = f"sink-{engine.id}-{mode}"
    targets = {
        "local": (str(tmp_path / "local"), pafs.LocalFileSystem(), str(tmp_path / "local")),
        "file": ((tmp_path / "f u").as_uri(), pafs.LocalFileSystem(), str(tmp_path / "f u")),
        "s3": (f"s3://streamcell-test/{prefix}?{query}", fs, f"streamcell-test/{prefix}"),
    }
    plan = sc.combine(*[agg.sink_parquet(uri, mode=mode) for uri, _, _ in targets.values()])
    run_plan(plan, engine.options.with_(display=False))
    want = read_folder(pafs.LocalFileSystem(), str(tmp_path / "local"))
    assert want.height == (3_000 if mode == "append" else 20)
    for name in ("file", "s3"):
        _, where, folder = targets[name]
        assert_frame_equal(read_folder(where, folder), want)
    ref = tmp_path / "ref"
    run_plan(sc.combine(agg.sink_parquet(str(ref), mode=mode)), REF)
    assert_frame_equal(want, read_folder(pafs.LocalFileSystem(), str(ref)))


def test_a_sink_uri_that_cannot_be_opened_is_refused_at_start(engine):
    plan = sc.combine(sc.source(sc.clickstream(rows=10)).sink_parquet("nosuchfs://b/out"))
    with pytest.raises(ArgumentError, match="cannot open this filesystem"):
        sc.start(plan, name="nofs_sink", options=engine.options.with_(display=False))
