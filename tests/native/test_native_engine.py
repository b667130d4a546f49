"""The native engine as the default engine, its run control, and the ordering ablation mode."""

from __future__ import annotations

import _thread
import os
import threading
import time

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import streamcell as sc
from streamcell.errors import NotSupportedError
from streamcell.options import RunOptions
from tests.helpers import run_plan

pytest.importorskip("streamcell._runtime")

col = sc.col


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


def _clicks(rows: int) -> pl.DataFrame:
    return (
        sc.source(sc.clickstream(rows=rows, seed=5))
        .start("clicks-src", engine="reference")
        .wait()
        .table()
    )


def test_auto_runs_a_supported_plan_on_the_native_engine():
    run = run_plan(sc.source(sc.clickstream(rows=5_000, seed=1)).filter(col("price") > 10).plan())
    assert run.engine == "native"
    assert run.engine_note == ""
    assert run.native_metrics is not None and run.native_metrics["ops"]
    want = run_plan(
        sc.source(sc.clickstream(rows=5_000, seed=1)).filter(col("price") > 10).plan(),
        RunOptions(engine="reference"),
    )
    assert_frame_equal(run.table(), want.table())


def test_auto_falls_back_to_reference_and_says_why():
    def double(x):
        return 2 * x

    f = sc.python_udf(double, returns="int")
    run = run_plan(sc.source(pl.DataFrame({"x": [1, 2]})).select(y=f("x")).plan())
    assert run.engine == "reference"
    assert "select#2" in run.engine_note and "Python function" in run.engine_note
    assert run.table()["y"].to_list() == [2, 4]


def test_auto_runs_unions_natively():
    a, b = pl.DataFrame({"x": [1, 2]}), pl.DataFrame({"x": [10]})
    run = run_plan(sc.source(a).union(sc.source(b)).plan())
    assert run.engine == "native"
    assert run.table()["x"].to_list() == [1, 10, 2]


def test_explicit_native_on_an_unsupported_plan_raises_naming_the_step():
    f = sc.python_udf(abs, returns="int", name="absolute")
    with pytest.raises(NotSupportedError, match="not supported on native: step select#2"):
        sc.source(pl.DataFrame({"x": [1]})).select(y=f("x")).start("x", engine="native")


def test_list_columns_and_explode_run_natively():
    frame = pl.DataFrame(
        {
            "id": [1, 2, 3, 4],
            "tags": [["a", "b"], [], None, ["c", None]],
            "xs": [[1.5, None], [], [2.0], [3.0, 4.0]],
        }
    )
    stream = sc.source(frame).filter(col("id") != 3).explode("tags")
    run = run_plan(stream.plan())
    assert run.engine == "native"
    want = run_plan(stream.plan(), RunOptions(engine="reference"))
    assert_frame_equal(run.table(), want.table())
    assert run.table()["xs"].to_list() == [[1.5, None], [1.5, None], [], [3.0, 4.0], [3.0, 4.0]]


def test_expressions_over_list_columns_run_natively():
    frame = pl.DataFrame({"xs": [[1], [2, 3], None]})
    stream = sc.source(frame).filter(col("xs").is_null() | (col("xs") > [1, 5]))
    run = run_plan(stream.plan())
    assert run.engine == "native" and run.engine_note == ""
    assert run.table()["xs"].to_list() == [[2, 3], None]


def test_lists_of_lists_run_natively():
    frame = pl.DataFrame({"xs": [[[1]], [[2, 3], [], None], None]})
    run = run_plan(sc.source(frame).filter(col("xs") != [[1]]).explode("xs").plan())
    assert run.engine == "native" and run.engine_note == ""
    assert run.table()["xs"].to_list() == [[2, 3], [], None]


@pytest.mark.parametrize("workers", [1, 2, 4])
def test_unordered_ablation_keeps_every_row_but_not_the_order_guarantee(workers):
    frame = _clicks(20_000)
    stream = sc.source(frame).filter(col("price") > 20.0).with_columns(t=col("price") * 2)
    want = run_plan(stream.plan(), RunOptions(engine="reference")).table()
    got = run_plan(
        stream.plan(), RunOptions(engine="native", workers=workers, batch_size=64, reorder="none")
    ).table()
    # the same rows (a multiset), whatever order the workers finished in
    assert_frame_equal(got.sort(pl.all()), want.sort(pl.all()))


def test_unordered_ablation_rejects_keyed_plans():
    stream = sc.source(sc.clickstream(rows=100)).key_by("user_id").agg(n=sc.count())
    with pytest.raises(NotSupportedError, match="reorder='none'"):
        stream.start("x", engine="native", reorder="none")


def test_kernel_interrupt_in_wait_stops_a_native_run_and_its_threads():
    before = _threads()
    stream = sc.source(sc.clickstream(rows=10**9, seed=2)).filter(col("price") > 1.0)
    run = stream.start("endless", engine="native", workers=4)
    while run.progress()["rows_in"] < 10_000:  # running on the worker threads
        time.sleep(0.01)
    assert _threads() >= before + 4
    timer = threading.Timer(0.2, _thread.interrupt_main)
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        run.wait()
    # stop() has joined the driver, which stops and joins the C workers before returning
    assert run.status == "stopped"
    assert run.done()
    rows = run.progress()["rows_in"]
    assert 0 < rows < 10**9
    deadline = time.monotonic() + 10
    while _threads() > before and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _threads() <= before, "a runtime thread outlived its run"


def test_rerunning_a_name_replaces_a_live_native_run():
    first = sc.source(sc.clickstream(rows=10**9)).start("same", engine="native", workers=2)
    second = sc.source(sc.clickstream(rows=1_000)).start("same", engine="native", workers=2)
    assert first.done() and first.status == "stopped"
    assert second.wait().status == "finished"
    assert second.table().height == 1_000
