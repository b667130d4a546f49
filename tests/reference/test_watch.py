"""The watched-folder source (``sc.watch``): files that appear while the run is going are
read, in name order, and the source ends after ``idle_timeout`` (every engine; Spark as a
Structured Streaming query over the folder)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import streamcell as sc
from streamcell.errors import PlanError
from streamcell.options import RunOptions
from streamcell.sources import SourceError
from tests.helpers import outputs, run_plan

REF = RunOptions(engine="reference", display=False)


def put_parquet(folder: Path, name: str, start: int, n: int) -> None:
    """Write elsewhere, then rename in, so a watcher never sees a half-written file."""
    df = pl.DataFrame({"x": list(range(start, start + n)), "s": [f"v{i}" for i in range(n)]})
    tmp = folder.parent / f".{name}.tmp"
    df.write_parquet(tmp)
    os.rename(tmp, folder / name)


def test_files_added_while_running_are_read_in_name_order(tmp_path: Path, engine) -> None:
    d = tmp_path / "in"
    d.mkdir()
    put_parquet(d, "a0.parquet", 0, 30)
    stream = sc.source(sc.watch(str(d), idle_timeout=1.0, poll=0.05)).filter(sc.col("x") % 2 == 0)
    opts = engine.options.with_(display=False)
    if opts.engine == "spark":
        opts = opts.with_(checkpoint_dir=str(tmp_path / "checkpoint"), trigger_interval=0.2)
    run = stream.start("watch_ref", options=opts)

    def later() -> None:
        time.sleep(0.2)
        put_parquet(d, "a1.parquet", 100, 20)
        put_parquet(d, "a2.parquet", 200, 10)

    t = threading.Thread(target=later)
    t.start()
    run.wait(120)
    t.join()
    assert run.status == "finished", run.error
    static = run_plan(sc.source(sc.parquet(str(d))).filter(sc.col("x") % 2 == 0).plan(), REF)
    assert_frame_equal(run.table(), static.table())
    assert run.table().height == 15 + 10 + 5
    assert outputs(run)["counts"]["rows_in"][0] == 60


def test_csv_folder_bad_rows_are_dead_letters(tmp_path: Path) -> None:
    d = tmp_path / "in"
    d.mkdir()
    (d / "a.csv").write_text("x,s\n1,a\n2,b\n")
    (d / "b.csv").write_text("x,s\n3,c\noops\n4,d\n")
    run = run_plan(sc.source(sc.watch(str(d), format="csv", idle_timeout=0.2)).plan(), REF)
    assert run.table()["x"].to_list() == [1, 2, 3, 4]
    dead = run.dead_letters()
    assert dead["position"].to_list() == ["source#1 b.csv:3"]


def test_watch_arguments_are_checked(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="not a directory"):
        sc.watch(str(tmp_path / "nope"))
    with pytest.raises(SourceError, match="format must be one of"):
        sc.watch(str(tmp_path), format="xml")
    with pytest.raises(PlanError, match="no files yet; pass schema="):
        sc.source(sc.watch(str(tmp_path))).plan().start("empty", options=REF)
