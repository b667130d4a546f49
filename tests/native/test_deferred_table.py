"""A throttled native run's table keeps its output batches in C until it is read
(``sinks.DeferredBatches``): the driver builds no frame while the run goes, consecutive
chunks join into one Arrow C stream, the reader builds the frame, and a read interrupted on
the main thread (the user's interrupt) leaves the table whole. An unthrottled run builds its
frames as it goes."""

from __future__ import annotations

import os
import signal
import threading
import time

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import streamcell as sc
from streamcell import col
from streamcell.backends.native import sinks
from streamcell.options import RunOptions
from streamcell.stores import TableStore
from tests.helpers import until

NATIVE = RunOptions(engine="native", workers=2, display=False)


def _frame(n: int) -> pl.DataFrame:
    return pl.DataFrame(
        {"i": range(n), "x": [float(i % 97) for i in range(n)], "s": ["ab", "c"] * (n // 2)}
    )


def _plan(df: pl.DataFrame, name: str, rate: float | None = 20e6):
    return (
        sc.source(df, rate=rate)
        .filter(col("x") > 10.0)
        .with_columns(y=col("x") * 2.0 + 1.0)
        .plan(name)
    )


def _expected(df: pl.DataFrame) -> pl.DataFrame:
    return df.filter(pl.col("x") > 10.0).with_columns(y=pl.col("x") * 2.0 + 1.0)



def _store(run: sc.Run) -> TableStore:
    (store,) = run._tables.values()
    return store


def _finished(df: pl.DataFrame, name: str) -> tuple[sc.Run, sinks.DeferredBatches]:
    """A finished throttled run of ``df`` and its table's one chunk, unbuilt."""
    run = sc.start(_plan(df, name), options=NATIVE)
    run.wait()
    frames = _store(run)._frames
    assert len(frames) == 1
    pending = frames[0]
    assert isinstance(pending, sinks.DeferredBatches)
    return run, pending


def test_a_finished_runs_table_holds_one_unbuilt_chunk_until_it_is_read() -> None:
    df = _frame(600_000)  # several sink flushes (256K rows each), one deferred chunk
    run, pending = _finished(df, "deferred_one")
    store = _store(run)
    want = _expected(df)
    # counts come from the batches, not from a frame
    assert len(store) == want.height
    assert run.sink_rows() == want.height
    assert store._frames[0] is pending  # len() built nothing
    assert_frame_equal(run.table(), want)
    assert isinstance(store._frames[0], pl.DataFrame)
    assert_frame_equal(run.table(), want)  # built once, read again


def test_an_unthrottled_run_builds_its_frames_as_it_goes() -> None:
    df = _frame(600_000)
    run = sc.start(_plan(df, "deferred_none", rate=None), options=NATIVE)
    run.wait()
    frames = _store(run)._frames
    assert frames and all(isinstance(f, pl.DataFrame) for f in frames)
    assert_frame_equal(run.table(), _expected(df))


def test_reads_while_the_run_goes_see_a_growing_prefix() -> None:
    df = _frame(400_000)
    run = sc.start(_plan(df, "deferred_live", rate=800_000), options=NATIVE)
    want = _expected(df)
    seen = []
    while run.status in ("starting", "running"):
        t = run.table()
        seen.append(t.height)
        assert_frame_equal(t, want.head(t.height))  # a prefix, in order
        time.sleep(0.05)
    run.wait()
    assert seen == sorted(seen)
    assert_frame_equal(run.table(), want)


def test_an_interrupted_read_on_the_main_thread_leaves_the_table_whole(monkeypatch) -> None:
    assert threading.current_thread() is threading.main_thread()
    df = _frame(200_000)
    run = sc.start(_plan(df, "deferred_interrupt"), options=NATIVE)
    run.wait()
    real = sinks.stream_frame
    building = threading.Event()

    def slow(batches, schema):  # the user's interrupt comes while the frame is being built
        building.set()
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.3)
        return real(batches, schema)

    monkeypatch.setattr(sinks, "stream_frame", slow)
    with pytest.raises(KeyboardInterrupt):
        run.table()
    assert building.is_set()
    assert_frame_equal(run.table(), _expected(df))


def test_a_builder_that_never_started_is_replaced_by_the_next_read() -> None:
    # an interrupt while the main thread starts the builder leaves one that never ran: the
    # next read finds it stalled and starts another (the batches are still there)
    df = _frame(50_000)
    run, pending = _finished(df, "deferred_stalled")
    pending._thread = threading.Thread(target=lambda: None)  # made, never started
    pending._state = pending.BUILDING
    got: list[pl.DataFrame] = []
    reader = threading.Thread(target=lambda: got.append(run.table()))  # bounded: no hang
    reader.start()
    reader.join(30)
    assert got, "the read waited on a builder that never started"
    assert_frame_equal(got[0], _expected(df))


class _Unreadable:
    """Batches whose export fails, as an import that runs out of memory would."""

    def __arrow_c_stream__(self, requested_schema=None):
        raise MemoryError("no room for the frame")


def test_a_build_error_is_a_streamcell_error_for_every_reader_and_sql_skips_it() -> None:
    from streamcell.errors import NativeError
    from streamcell.sql import live_tables

    df = _frame(50_000)
    run, pending = _finished(df, "deferred_error")
    pending.batches = _Unreadable()  # this chunk only: other runs' tables stay readable
    try:
        for _ in range(2):
            with pytest.raises(NativeError, match="could not be read"):
                run.table()
        assert len(_store(run)._frames) == 1
        assert "deferred_error" not in live_tables()  # an unreadable table is left out
    finally:  # the next run of the name replaces the broken table for the tests after this
        sc.start(_plan(df.head(10), "deferred_error"), options=NATIVE).wait()


def test_deferred_chunks_join_only_while_unbuilt() -> None:
    # a read in the middle of a run builds what the table held; what the sink hands over
    # afterwards (a flush every 20 ms) joins into one new chunk, not the built one
    df = _frame(400_000)
    run = sc.start(_plan(df, "deferred_join", rate=800_000), options=NATIVE)
    assert until(lambda: run.sink_rows() > 0)
    seen = run.table().height
    run.wait()
    frames = _store(run)._frames
    assert 0 < seen < _expected(df).height
    assert len(frames) == 2
    assert isinstance(frames[0], pl.DataFrame) and frames[0].height == seen
    assert isinstance(frames[1], sinks.DeferredBatches)
    assert_frame_equal(run.table(), _expected(df))


def test_a_throttled_dag_defers_its_tables_too() -> None:
    a = _frame(60_000)
    b = _frame(30_000).with_columns(pl.col("i") + 1_000_000)
    plan = (
        sc.source(a, rate=20e6, name="a")
        .union(sc.source(b, name="b"))
        .filter(col("x") > 10.0)
        .with_columns(y=col("x") * 2.0 + 1.0)
        .plan("deferred_dag")
    )
    assert not plan.is_chain()
    run = sc.start(plan, options=NATIVE)
    run.wait()
    frames = _store(run)._frames
    assert frames and not any(isinstance(f, pl.DataFrame) for f in frames)
    got = run.table()
    want = pl.concat([_expected(a), _expected(b)])
    assert_frame_equal(got.sort("i"), want.sort("i"))


def test_a_throttled_runs_callback_and_parquet_sinks_get_frames(tmp_path) -> None:
    df = _frame(300_000)
    stream = sc.source(df, rate=20e6).filter(col("x") > 10.0).with_columns(y=col("x") * 2.0 + 1.0)
    got: list[pl.DataFrame] = []
    sink = stream.sink_callback(lambda rows: got.append(pl.DataFrame(rows)))
    sc.start(sc.Plan.of((sink,), "deferred_cb"), options=NATIVE).wait()
    assert_frame_equal(pl.concat(got), _expected(df))
    path = tmp_path / "out"
    sc.start(sc.Plan.of((stream.sink_parquet(str(path)),), "deferred_pq"), options=NATIVE).wait()
    assert_frame_equal(pl.read_parquet(path), _expected(df))
