"""A Polars frame source is read in C, one Arrow C stream per column (``Program.column_streams``
over ``Series.__arrow_c_stream__``), the columns' chunks taken in step into deferred batches:
no Python object per chunk. Only where the batch path would push the frame's chunks as they
are: columns that share their chunks, types read without a cast. Otherwise the run takes the
batch path. Either way results equal Polars' own query and the reference, at several worker
counts and batch sizes; a stop counts exactly the rows that went in."""

from __future__ import annotations

import datetime as dt
import itertools
import threading

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

import streamcell as sc
from streamcell import col
from streamcell.backends.native import drivers
from streamcell.options import RunOptions
from tests.helpers import check_against_reference, until

CHUNK = 40_000


def _frame(chunks: int = 5) -> pl.DataFrame:
    rng = np.random.default_rng(3)
    parts = []
    for k in range(chunks):
        n = CHUNK + 1_000 * k  # chunks of different lengths
        parts.append(
            pl.DataFrame(
                {
                    "ts": [
                        dt.datetime(2026, 1, 1) + dt.timedelta(seconds=int(s)) for s in range(n)
                    ],
                    "user": rng.integers(0, 500, n),
                    "price": rng.random(n) * 100,
                    "event": rng.choice(["view", "cart", "a purchase longer than twelve"], n),
                    "ok": rng.random(n) < 0.5,
                }
            ).with_columns(
                pl.when(pl.int_range(n) % 17 == 4)
                .then(None)
                .otherwise(pl.col("price"))
                .alias("price")
            )
        )
    return pl.concat(parts, rechunk=False)


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Calls of the column-stream feed (each run's driver records one when it takes it)."""
    calls: list[int] = []
    feed = drivers.Driver._feed_columns

    def spy(self: drivers.Driver, prog: object, src: object) -> bool:
        calls.append(1)
        return feed(self, prog, src)

    monkeypatch.setattr(drivers.Driver, "_feed_columns", spy)
    return calls


@pytest.mark.parametrize("workers", [1, 2, 4])
@pytest.mark.parametrize("batch_size", [None, 7_919])
def test_a_frame_read_column_by_column_equals_polars(
    monkeypatch: pytest.MonkeyPatch, workers: int, batch_size: int | None
) -> None:
    calls = _spy(monkeypatch)
    df = _frame()
    assert df.n_chunks() == 5
    plan = (
        sc.source(df)
        .filter(col("price").is_null() | (col("price") > 20.0))
        .with_columns(total=col("price") * 1.1 + col("user") % 7, hour=col("ts").dt.hour())
        .plan("colstreams")
    )
    opts = RunOptions(engine="native", workers=workers, batch_size=batch_size, display=False)
    got = sc.start(plan, options=opts).wait().table()
    want = df.filter(pl.col("price").is_null() | (pl.col("price") > 20.0)).with_columns(
        total=pl.col("price") * 1.1 + pl.col("user") % 7,
        hour=pl.col("ts").dt.hour().cast(pl.Int64),
    )
    assert calls == [1]
    assert_frame_equal(got, want)


def test_a_keyed_run_over_column_streams_equals_the_reference(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = _spy(monkeypatch)
    df = _frame(3)
    plan = (
        sc.source(df)
        .key_by("user")
        .agg(n=sc.count(), s=col("price").sum(), e=col("event").last())
        .plan("colkeyed")
    )
    check_against_reference(plan, RunOptions(engine="native", workers=2, display=False))
    assert calls  # the native run took the column streams


def test_columns_chunked_apart_take_the_batch_path(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _spy(monkeypatch)
    df = _frame(2)
    # one column in one chunk, the others in two: their chunks do not line up
    apart = df.with_columns(pl.Series("user", df["user"].to_list()))
    assert apart["user"].n_chunks() != apart["price"].n_chunks()
    run = sc.start(
        sc.source(apart).with_columns(u2=col("user") * 2).plan("apart"),
        options=RunOptions(engine="native", workers=2, display=False),
    )
    assert_frame_equal(run.wait().table(), apart.with_columns(u2=pl.col("user") * 2))
    assert calls == []


def test_a_frame_that_needs_a_cast_takes_the_batch_path(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _spy(monkeypatch)
    df = _frame(2).with_columns(pl.col("user").cast(pl.Int32), pl.col("ts").dt.cast_time_unit("ns"))
    run = sc.start(
        sc.source(df).filter(col("user") > 100).plan("cast"),
        options=RunOptions(engine="native", workers=2, display=False),
    )
    got = run.wait().table()
    want = df.filter(pl.col("user") > 100).with_columns(
        pl.col("user").cast(pl.Int64), pl.col("ts").dt.cast_time_unit("us")
    )
    assert_frame_equal(got, want)
    assert calls == []


def test_a_stop_counts_exactly_the_rows_that_went_in(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _spy(monkeypatch)
    df = pl.concat([_frame(5)] * 200, rechunk=False)  # 42M rows in 1,000 chunks (shared)
    release = threading.Event()

    def slow(rows: object) -> None:  # holds the sink until the stop: the input backs up
        release.wait(30)

    sink = sc.source(df).with_columns(v=col("price") * 2.0).sink_callback(slow)
    plan = sc.Plan.of((sink,), "colstop")
    run = sc.start(plan, options=RunOptions(engine="native", workers=2, display=False))
    assert until(lambda: run.progress()["rows_in"] >= 100_000)
    stopper = threading.Thread(target=run.stop)
    stopper.start()
    release.set()
    stopper.join()
    assert run.status == "stopped"
    assert calls == [1]
    counts = {r["step"]: r for r in run.counts().iter_rows(named=True)}
    steps = [s.step_id for s in plan.steps]
    source, last = counts[steps[0]], counts[steps[-1]]
    assert 100_000 <= source["rows_in"] == source["rows_out"] < df.height
    for step in steps[1:]:  # every row that went in is in a step's books, none twice
        c = counts[step]
        assert (
            c["rows_in"] == c["consumed"] + c["filtered"] + c["late"] + c["dead"] + c["unprocessed"]
        )
    assert counts[steps[1]]["rows_in"] == source["rows_out"]
    assert last["unprocessed"] > 0  # the stop found rows on their way


def test_a_throttled_run_hands_the_pacer_held_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pacer takes the column streams' chunks (``HeldChunk``) as it takes record batches:
    a pause inside a chunk queues the rest of it again on resume, and nothing is lost or
    repeated."""
    taken: list[bool] = []
    streams = drivers.Driver._column_streams

    def spy(self: drivers.Driver, prog: object) -> object:
        got = streams(self, prog)
        taken.append(got is not None)
        return got

    monkeypatch.setattr(drivers.Driver, "_column_streams", spy)
    df = _frame(4)  # chunks of 40-43K rows, each pushed over a tenth of a second
    plan = sc.source(df, rate=400_000).with_columns(y=col("price") * 2.0).plan("colpaced")
    run = sc.start(plan, options=RunOptions(engine="native", workers=2, display=False))
    assert until(lambda: run.progress()["rows_in"] >= 20_000)
    run.pause()
    assert until(lambda: run.status == "paused")
    n = run.progress()["rows_in"]
    ends = {0, *itertools.accumulate(df.get_column("user").chunk_lengths())}
    assert n not in ends  # the pause fell inside a chunk: the rest of it is queued again
    run.resume()
    run.wait(60)
    assert run.status == "finished"
    assert taken == [True]
    assert run.progress()["rows_in"] == df.height
    assert_frame_equal(run.table(), df.with_columns(y=pl.col("price") * 2.0))


def test_a_stop_during_the_last_flush_into_a_callback_is_a_stop() -> None:
    """The callback stops the run from its first call, which comes (for a run this short)
    when the end of the stream flushes every row at once: the rows not handed over are
    unprocessed and the run is stopped, not finished."""
    df = _frame(2)
    calls: list[int] = []

    def first_stops(rows: list[dict[str, object]]) -> None:
        calls.append(len(rows))
        run.stop()  # from the callback: the request stands, the callback returns

    sink = sc.source(df).with_columns(v=col("price") * 2.0).sink_callback(first_stops)
    plan = sc.Plan.of((sink,), "colflushstop")
    run = sc.start(plan, options=RunOptions(engine="native", workers=2, display=False))
    run.wait(60)
    assert run.status == "stopped"
    assert calls == [1024]  # no callback after the stop
    counts = {r["step"]: r for r in run.counts().iter_rows(named=True)}
    out = counts[plan.steps[-1].step_id]
    assert out["unprocessed"] == out["rows_in"] - 1024 > 0


def test_a_source_whose_columns_chunk_apart_fails_after_its_rows_before(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Column streams whose second chunks differ in length: the first chunk's rows go in and
    are processed, then the run fails with a streamcell error naming the source (as a source
    that raises does); the read is one push call, so the error waits for the next one."""
    import pyarrow as pa

    from streamcell.errors import NativeError
    from streamcell.sources import ArrowReader

    df = pl.DataFrame({"i": list(range(10)), "x": [float(v) for v in range(10)]})

    def apart(self: ArrowReader, accept: object) -> list[object]:
        self._snap = None
        i = pa.chunked_array([pa.array(range(3)), pa.array(range(3, 10))])
        x = pa.chunked_array([pa.array([0.0, 1.0, 2.0]), pa.array([3.0]), pa.array([4.0] * 6)])
        return [i.__arrow_c_stream__(), x.__arrow_c_stream__()]

    monkeypatch.setattr(ArrowReader, "column_streams", apart)
    plan = sc.source(df).with_columns(y=col("x") + 1.0).plan("colapart")
    run = sc.start(plan, options=RunOptions(engine="native", workers=2, display=False))
    with pytest.raises(NativeError, match="reading the source: its columns' chunks differ"):
        run.wait(60)
    assert run.status == "failed"
    assert run.progress()["rows_in"] == 3
    assert_frame_equal(run.table(), df.head(3).with_columns(y=pl.col("x") + 1.0))
