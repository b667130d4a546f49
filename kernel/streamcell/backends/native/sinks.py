"""A sink's outputs: ordered chunks from the runtime into the run's store, a callback, or
nowhere.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from ... import plan as P
from ...errors import NativeError
from ...types import Schema, polars_schema
from .arrow import direct_frames, stream_frame, to_frame
from .lowering import OUT_ROWS

# rows the sink gathers before it builds one frame: each frame costs ~0.2 ms of Polars' Python-side
# construction, so a bulk run builds few; a slow stream still flushes every 20 ms
SINK_ROWS = 4 * OUT_ROWS

CALLBACK_ROWS = 1024
"""Rows per call of a callback sink, as on the reference."""


class DeferredBatches:
    """Output batches kept in C (an ``OutBatches``) that a table builds into a frame when it
    is read (:class:`streamcell.stores.Deferred`): while nobody reads the table, the driver
    only counts them, and batches that come one after another join into one Arrow C stream,
    which Polars imports in one call.

    Building moves the batches out of C into the frame, once. A reader on the main thread
    has a thread of its own build it and waits: an interrupt there (the user's) stops the
    wait, not the build, and the next read finds the frame. The build is claimed by the
    thread that runs it, first thing: a builder that was never started (an interrupt while
    it was being started) is replaced by the next reader's, never run twice."""

    __slots__ = (
        "batches",
        "schema",
        "height",
        "_cv",
        "_state",
        "_claimed",
        "_thread",
        "_df",
        "_error",
    )

    UNBUILT, BUILDING, DONE = 0, 1, 2

    def __init__(self, batches: Any, schema: Schema):
        self.batches: Any = batches
        self.schema = schema
        self.height = int(batches.num_rows)
        self._cv = threading.Condition(threading.Lock())
        self._state = self.UNBUILT
        self._claimed = False
        self._thread: threading.Thread | None = None
        self._df: pl.DataFrame | None = None
        self._error: BaseException | None = None

    def join(self, later: Any) -> bool:
        if not isinstance(later, DeferredBatches) or later.schema is not self.schema:
            return False
        with self._cv:
            if self._state != self.UNBUILT or self._claimed:
                return False
            self.batches.absorb(later.batches)
            self.height += later.height
            return True

    def frame(self) -> pl.DataFrame:
        main = threading.current_thread() is threading.main_thread()
        while True:
            inline = False
            with self._cv:
                if self._state == self.DONE:
                    break
                t = self._thread
                stalled = t is not None and not t.is_alive() and not self._claimed
                if self._state == self.UNBUILT or (self._state == self.BUILDING and stalled):
                    if main:
                        # an interrupt anywhere here leaves a builder that never started,
                        # found stalled by the next read (one that did start claims first)
                        t = threading.Thread(target=self._build, name="sc-table-read", daemon=True)
                        self._thread = t
                        self._state = self.BUILDING
                        t.start()
                    else:  # no interrupt comes to this thread: it builds itself
                        self._thread, self._state, inline = None, self.BUILDING, True
                if not inline:
                    self._cv.wait(0.05)
            if inline:
                self._build()
        if self._df is None:
            raise NativeError(
                f"{self.height:,} of the table's rows could not be read from the runtime "
                f"into a frame ({type(self._error).__name__}: {self._error})"
            ) from self._error
        return self._df

    def _build(self) -> None:
        with self._cv:
            if self._claimed:
                return
            self._claimed = True
            batches, self.batches = self.batches, None
        df: pl.DataFrame | None = None
        err: BaseException | None = None
        try:
            df = stream_frame(batches, self.schema)
        except BaseException as e:  # handed to every reader (the rows are gone with it)
            err = e
        with self._cv:
            self._df, self._error, self._state = df, err, self.DONE
            self._cv.notify_all()


class _SinkOut:
    """One sink's outputs: ordered chunks into the run's store (or callback, or nowhere)."""

    def __init__(
        self,
        env: Any,
        sink: P.Sink,
        schema: Schema,
        publishing: bool = False,
        takes: bool = False,
        defer: bool = False,
    ):
        self.env, self.sink, self.schema = env, sink, schema
        # hand a table its batches unbuilt (DeferredBatches): for a throttled source, whose
        # driver shares the cores with workers that have a latency to keep. An unthrottled
        # run builds frames as it goes, the import overlapping the workers' last batches
        # (deferred, a 10M-row run to a table took ~3 ms, 5%, longer until run.table())
        self.defer = defer
        # fed by a publishing aggregate: each chunk holds changed keys, hidden column 0 the
        # serial of each key's first row; the run counts the sink's rows from the aggregate
        self.publishing = publishing
        self.covered = 0  # publishing: changelog rows accounted for by the frames written
        # the end-of-stream publish of an aggregate feeding a table holds every key (its rows
        # have hidden column 1, pos, set to 1): kept aside, it replaces the table at the end
        self.complete: list[pa.RecordBatch] = []
        self.writer = env.sink_writer(sink)
        self.frame_writer = getattr(self.writer, "__self__", None)
        self.pending: list[pa.RecordBatch] = []
        # a sink of plain columns (not publishing) whose driver takes the runtime's batches
        # as they are (``takes``) builds each frame from them as one Arrow C stream
        # (write_batches)
        self.direct = takes and not publishing and direct_frames(schema)
        self.batches: Any = None  # direct: the OutBatches gathered since the last frame
        self.rows = 0
        self.since = 0.0
        self.callback_buf: list[dict[str, Any]] = []

    def write(self, rb: pa.RecordBatch) -> None:
        """Queue an ordered output chunk; the sink sees chunks of ~64K rows, or what arrived
        in the last ~20 ms when the stream is slow (so live tables stay fresh)."""
        if self.publishing and rb.num_rows and rb.column(1)[-1].as_py() == 1:
            # the complete publish comes last, in one run of rows: set it aside
            pos = rb.column(1).to_numpy()
            at = int(np.argmax(pos == 1))
            self.complete.append(rb.slice(at))
            if at == 0:
                return
            rb = rb.slice(0, at)
        if not self.rows:
            self.pending = []
            self.since = time.monotonic()
        self.pending.append(rb)
        self._added(rb.num_rows)

    def write_batches(self, batches: Any) -> None:
        """As :meth:`write`, for runtime batches kept in C (an ``OutBatches``)."""
        n = batches.num_rows
        if not self.rows:
            self.batches = batches
            self.since = time.monotonic()
        else:
            self.batches.absorb(batches)
        self._added(n)

    def _added(self, n: int) -> None:
        """``n`` rows queued: a frame is built once SINK_ROWS wait or the oldest is stale."""
        self.rows += n
        if self.rows >= SINK_ROWS or self.stale(time.monotonic()):
            self.flush()

    def stale(self, now: float) -> bool:
        return bool(self.rows) and now - self.since > 0.02

    def flush(self) -> None:
        if not self.rows:
            return
        n, batches, self.pending, self.rows = self.rows, self.pending, [], 0
        direct, self.batches = self.batches, None
        cnt = self.env.counters[self.sink.step_id]
        if self.sink.target == "none":  # rows are dropped: count them, build nothing
            cnt.rows_in += n
            return
        store = self.frame_writer
        if direct is not None and self.defer and getattr(store, "takes_deferred", False):
            assert store is not None
            cnt.rows_in += n  # a table: it builds the frame when read
            store.write_frame(DeferredBatches(direct, self.schema))
            return
        df = (
            stream_frame(direct, self.schema)
            if direct is not None
            else to_frame(batches, self.schema)
        )
        stands_for = None
        if self.publishing:  # new keys in order of first appearance, as the changelog has them
            first = pa.chunked_array([b.column(0) for b in batches]).to_numpy()
            df = df[np.argsort(first, kind="stable")]
            # the changelog rows this publish accounts for: those counted into the sink by the
            # last counter sync (a lower bound while running; exact at the end of the stream)
            stands_for, self.covered = cnt.rows_in - self.covered, cnt.rows_in
        else:
            cnt.rows_in += df.height
        if store is not None and hasattr(store, "write_frame"):
            store.write_frame(df, stands_for=stands_for)  # the run's _FrameGate
            return
        self._call_back(df)

    def _call_back(self, df: pl.DataFrame) -> None:
        """Hand ``df``'s rows to the callback in batches of 1024 rows, as on the reference (the
        rest waits for the next frame). Rows become dicts a batch at a time, and none once the
        run is asked to stop (a stop is prompt whatever the frame's size: its rows are the
        run's unprocessed ones)."""
        rows, off, n = self.callback_buf, 0, df.height
        while off < n:
            if self.env.should_stop():
                self.callback_buf = []
                self.writer([])  # the gate drops it: the run counts as stopped, not finished
                return
            take = min(CALLBACK_ROWS - len(rows), n - off)
            rows.extend(df.slice(off, take).to_dicts())
            off += take
            if len(rows) == CALLBACK_ROWS:
                self.writer(rows)
                rows = []
        self.callback_buf = rows

    def account_published(self) -> None:
        """At the end of the stream: the frames written so far hold every published key, so
        they account for every changelog row counted into the sink."""
        rest = self.env.counters[self.sink.step_id].rows_in - self.covered
        store = self.frame_writer
        if self.complete and store is not None and hasattr(store, "write_frame"):
            # every key (each partition's in first-row order), ordered by first row: the table
            first = pa.chunked_array([b.column(0) for b in self.complete]).to_numpy()
            df = to_frame(self.complete, self.schema)[np.argsort(first, kind="stable")]
            self.complete = []
            store.write_frame(df, stands_for=max(rest, 0), replace=True)
            self.covered += max(rest, 0)
            return
        if rest > 0 and self.frame_writer is not None:
            empty = pl.DataFrame(schema=polars_schema(self.schema))
            self.frame_writer.write_frame(empty, stands_for=rest)
            self.covered += rest

    def flush_callback(self) -> None:
        if self.callback_buf:
            rows, self.callback_buf = self.callback_buf, []
            self.writer(rows)
