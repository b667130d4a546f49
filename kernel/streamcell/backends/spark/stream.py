"""Streaming sources on Spark: a Structured Streaming query per run.

The query's source is Spark's own streaming source, which discovers new data and keeps the
offsets in the checkpoint folder:

- a watched folder (:func:`streamcell.watch`) -> Spark's file stream source (``binaryFile``,
  paths only): each micro-batch is the set of new files, read on the executors with
  streamcell's own readers (``mapInArrow``), so bad rows are dead letters exactly as on the
  reference;
- an unbounded generator (``sc.clickstream(rows=None)``, ``sc.store_sales(rows=None)``) ->
  Spark's ``rate`` source at the source's ``rate=`` (rows per second): row ``i`` of the
  generator is generated on the executors.

Every step is a stage of the query itself (:mod:`.state`): stateless steps in
``mapInArrow``, keyed steps and windows in ``applyInPandasWithState`` with their state in
Spark's state store (RocksDB), versioned with the checkpoint. A query restarted from its
checkpoint after the driver died re-runs the micro-batch that was not committed, from the
state of the last one that was, so the sink sees every row exactly once.

The sink is ``foreachBatch``: one action per micro-batch brings the batch's rows, side
rows (dead letters, late rows, counters, partial sketches) included, to the driver, which
orders the rows by (file rank by name, order key) -- the reference's arrival order -- and
writes them. A Parquet sink gets one file per micro-batch, named by the batch id and
replaced atomically, so a re-run micro-batch rewrites its own file and never adds one.
"""

from __future__ import annotations

import json
import os
import pickle
import threading
import time
import uuid
from typing import Any

import polars as pl

from ... import plan as P
from ...compiler import Compiled
from ...files import folder, spark_path, write_file
from ...options import RunOptions
from .backend import source_spec
from .ops import DEAD, LATE, LIVE, SKETCH, STATS
from .state import (
    STATE_DDL,
    STATELESS,
    STREAM_DDL,
    file_source_fn,
    generator_source_fn,
    group_keys,
    keyed_processor,
    keyed_state_fn,
    sketch_stage_fn,
    stateless_fn,
    streaming_refusal,
)

__all__ = ["StreamDriver", "streaming_refusal"]


class _Stopped(Exception):
    """Raised in ``foreachBatch`` when the run stops: the micro-batch is not committed, so
    a restart from the checkpoint processes it again."""


def _progress_dict(p: Any) -> dict[str, Any]:
    if isinstance(p, dict):
        return p
    js = getattr(p, "json", None)
    if js is not None:
        return json.loads(js() if callable(js) else js)  # type: ignore[no-any-return]
    return dict(p)


class StreamDriver:
    """Runs a plan over a streaming source as one Structured Streaming query."""

    def __init__(self, c: Compiled, env: Any, options: RunOptions, steps: list[P.Step]):
        from .backend import BatchDriver

        self.c, self.env, self.options, self.steps = c, env, options, steps
        src = steps[0]
        assert isinstance(src, P.Source)
        self.src = src
        self.spec = source_spec(src)
        self.schema = c.schemas[src.step_id]
        self.files = self.spec.kind in P.FILE_KINDS
        self.batch = BatchDriver(c, env, options, steps)
        self.serial = 0  # rows (good and bad) the source has delivered so far
        self.progress: list[dict[str, Any]] = []
        self.fed = 0
        self.rows_by_batch: dict[int, int] = {}
        self.delivered_id: int | None = None  # the last micro-batch whose rows were delivered
        self.progress_lock = threading.Lock()
        self.out_by_batch: dict[int, int] = {}
        self.prev_ts: float | None = None
        self.last_rows_at: float | None = None  # set by the first micro-batch
        self.error: BaseException | None = None
        self.stopping = False
        # the Spark jobs of a micro-batch carry this tag, so a stop cancels them at once
        self.job_tag = f"streamcell-stream-{uuid.uuid4().hex[:12]}"
        # set when a micro-batch's action ends and when the run is stopped: the micro-batch
        # waits on it, so a stop does not wait for Spark to unwind a cancelled job
        self.wake = threading.Event()
        self.index = {x.step_id: j for j, x in enumerate(steps)}

    # ----------------------------------------------------------------- the query
    def checkpoint_dir(self) -> str:
        if self.options.checkpoint_dir:
            return self.options.checkpoint_dir
        run = getattr(self.env, "run", None)
        name = getattr(run, "name", "run")
        base = os.path.join(os.getcwd(), ".streamcell", "checkpoints")
        return os.path.join(base, f"{name}-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}")

    def stream_df(self, spark: Any) -> Any:
        if self.files:
            from pyspark.sql import types as T

            from ...sources import EXTENSIONS

            path = str(self.spec.arg("path"))
            exts = EXTENSIONS[self.spec.kind]
            binary = T.StructType(  # exactly the binaryFile source's schema
                [
                    T.StructField("path", T.StringType(), False),
                    T.StructField("modificationTime", T.TimestampType(), False),
                    T.StructField("length", T.LongType(), False),
                    T.StructField("content", T.BinaryType(), True),
                ]
            )
            return (
                spark.readStream.format("binaryFile")
                .schema(binary)
                .option("pathGlobFilter", "*{" + ",".join(exts) + "}")
                .load(spark_path(path))
                .select("path")
            )
        rate = self.src.rate or 10_000.0
        return (
            spark.readStream.format("rate")
            .option("rowsPerSecond", max(1, int(rate)))
            .option("numPartitions", 2)
            .load()
            .select("value")
        )

    def keys_of(self, j: int) -> tuple[str, ...] | None:
        """The group keys of step ``j`` if it is keyed (what the stage before it computes
        into ``_g``), else None."""
        if j >= len(self.steps) - 1:
            return None
        s = self.steps[j]
        return group_keys(s, self.c.schemas[s.inputs[0].step_id])

    def schemas(self, steps: list[P.Step]) -> dict[str, Any]:
        return {x.step_id: self.c.schemas[x.step_id] for s in steps for x in (s, *s.inputs)}

    def query_df(self, spark: Any) -> Any:
        """The streaming DataFrame of the whole plan up to its sink: one stage per run of
        stateless steps, per sketch and per keyed step (see :mod:`.state`)."""
        df = self.stream_df(spark)
        sid = self.src.step_id
        if self.files:
            df = df.mapInArrow(
                file_source_fn(self.spec, self.schema, sid, self.keys_of(1)), STREAM_DDL
            )
        else:
            df = df.mapInArrow(generator_source_fn(self.spec, sid, self.keys_of(1)), STREAM_DDL)
        j, last = 1, len(self.steps) - 1
        keyed = sum(1 for s in self.steps[1:last] if not isinstance(s, (*STATELESS, P.Sketch)))
        while j < last:
            s = self.steps[j]
            if isinstance(s, STATELESS):
                k = j
                while k < last and isinstance(self.steps[k], STATELESS):
                    k += 1
                run = self.steps[j:k]
                df = df.mapInArrow(
                    stateless_fn(run, self.schemas(run), self.keys_of(k)), STREAM_DDL
                )
                j = k
                continue
            if isinstance(s, P.Sketch):
                fn = sketch_stage_fn(s, self.c.schemas[s.inputs[0].step_id], self.keys_of(j + 1))
                df = df.mapInArrow(fn, STREAM_DDL)
            elif keyed > 1:  # Spark runs one applyInPandasWithState per query, not two
                proc = keyed_processor(s, self.schemas([s]), self.keys_of(j + 1))
                df = df.groupBy("_g").transformWithStateInPandas(proc, STREAM_DDL, "Append", "None")
            else:
                df = df.groupBy("_g").applyInPandasWithState(
                    keyed_state_fn(s, self.schemas([s]), self.keys_of(j + 1)),
                    STREAM_DDL,
                    STATE_DDL,
                    "append",
                    "NoTimeout",
                )
            j += 1
        return df

    def run(self) -> bool:
        from .session import get_session

        spark = get_session()
        env = self.env
        run = getattr(env, "run", None)
        q = (
            self.query_df(spark)
            .writeStream.foreachBatch(self.micro_batch)
            .option("checkpointLocation", self.checkpoint_dir())
            .trigger(processingTime=f"{int(self.options.trigger_interval * 1000)} milliseconds")
            .queryName(f"streamcell_{uuid.uuid4().hex[:8]}")
            .start()
        )
        if run is not None:
            run.streaming_query = q
            run.stop_hooks.append(self._cancel_jobs)
            run.metrics_feed = self.metrics_rows
            run.operator_metrics = self.operator_metrics
        idle = self.spec.arg("idle_timeout") if self.files else None
        stop_event = getattr(run, "_stop", None)
        next_poll = 0.0
        try:
            while q.isActive:
                if env.should_stop():
                    self._stop_between_batches(q)
                    return False
                seen = self.last_rows_at
                if idle is not None and seen is not None and time.monotonic() - seen >= idle:
                    st = q.status
                    if not st["isTriggerActive"] and not st["isDataAvailable"]:
                        self._stop_between_batches(q)
                        return self.error is None or self._raise()
                now = time.monotonic()
                if now >= next_poll:  # recentProgress parses every recent batch's JSON
                    self._poll_progress(q)
                    next_poll = now + 0.25
                if stop_event is not None:  # wakes at once on a stop
                    stop_event.wait(0.1)
                else:
                    q.awaitTermination(0.1)
            if self.error is not None:
                self._raise()
            if self.stopping or env.should_stop():  # a micro-batch saw the stop first
                return False
            exc = q.exception()
            if exc is not None:
                from ...errors import StreamcellError

                raise StreamcellError(f"the Spark streaming query failed: {exc}")
            return not env.should_stop()
        finally:
            self._poll_progress(q)
            if q.isActive:
                q.stop()

    def _stop_between_batches(self, q: Any) -> None:
        """Cancel the running micro-batch's Spark jobs (by their tag), then ``query.stop()``.

        ``query.stop()`` alone interrupts the query's thread and waits for it, but that thread
        is inside the Python ``foreachBatch`` function waiting for its action, which Spark
        cancels only after the wait: 0.4-3.7 s here. Cancelled first, the action fails at
        once and the micro-batch raises, uncommitted (a restart from the checkpoint re-runs
        it); its rows are counted as ``unprocessed``.

        A micro-batch that already delivered its rows is let finish: Spark writes its commit
        and posts its progress right after ``foreachBatch`` returns (milliseconds), and a
        ``stop()`` in between would leave delivered rows with no progress entry in
        ``run.metrics()`` (and a checkpoint that would run them again)."""
        self._cancel_jobs()
        self._await_commit(q)
        q.stop()

    def _await_commit(self, q: Any, timeout: float = 2.0) -> None:
        want = self.delivered_id
        if want is None:
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if not q.isActive:
                    return
                last = q.lastProgress
            except Exception:  # the query is gone
                return
            if last is not None and int(_progress_dict(last).get("batchId", -1)) >= want:
                return
            time.sleep(0.01)

    def _cancel_jobs(self) -> None:
        """Cancel the Spark jobs of the running micro-batch (also a stop hook of the run,
        called on the stopping thread at once)."""
        self.stopping = True
        self.wake.set()
        try:
            from .session import get_session

            get_session().sparkContext.cancelJobsWithTag(self.job_tag)
        except Exception:  # a session already gone: query.stop() ends the query
            pass

    def _raise(self) -> bool:
        assert self.error is not None
        raise self.error

    # ----------------------------------------------------------------- one micro-batch
    def micro_batch(self, batch_df: Any, batch_id: int) -> None:
        # What this raises reaches Spark as a Py4J error whose message Spark matches with a
        # backtracking regex (is it an interrupt?): a long message (a Java stack trace inside a
        # Py4JJavaError) overflows the JVM stack. So a short exception, without its context,
        # leaves; the run thread re-raises the real one.
        try:
            self._micro_batch(batch_df, batch_id)
        except BaseException as e:
            if self.stopping or self.env.should_stop():
                raise _Stopped() from None  # uncommitted: a restart runs this batch again
            if self.error is None:  # kept for the run thread: a failed micro-batch fails the run
                self.error = e
            raise RuntimeError(f"streamcell: micro-batch {batch_id} failed") from None

    def _micro_batch(self, batch_df: Any, batch_id: int) -> None:
        from ...stores import _pl_frame

        env, b = self.env, self.batch
        if self.stopping or env.should_stop() or not env.wait_if_paused():
            self.stopping = True
            raise _Stopped()
        t0 = time.perf_counter_ns()
        tbl = self._action(batch_df)
        if self.stopping or env.should_stop():
            self.stopping = True
            raise _Stopped()
        fs, os_, ks, bs = (tbl.column(c).to_pylist() for c in ("_f", "_o", "_k", "_b"))
        ranks = {f: i for i, f in enumerate(sorted({f for f in fs if f}))}
        live: list[tuple[int, list[int], bytes]] = []
        side: list[tuple[int, list[int], int, int, str, Any]] = []
        stats: list[tuple[str, str, dict[str, int]]] = []
        sketches: list[tuple[str, Any]] = []
        for f, o, k, blob in zip(fs, os_, ks, bs):
            if k == LIVE:
                live.append((ranks.get(f, 0), o, blob))
                continue
            sid, payload = pickle.loads(blob)
            if k == STATS:
                stats.append((f, sid, payload))
            elif k == SKETCH:
                sketches.append((sid, payload))
            else:
                side.append((ranks.get(f, 0), o, self.index[sid], k, sid, payload))
        src = self.src.step_id
        per_file = {ranks[f]: p["rows_in"] for f, sid, p in stats if sid == src and f}
        bases: dict[int, int] = {}
        acc = self.serial
        for rank in sorted(per_file):
            bases[rank] = acc
            acc += per_file[rank]
        delivered = sum(p["rows_in"] for _, sid, p in stats if sid == src)

        def order(f_rank: int, o: list[int]) -> list[int]:
            return [batch_id, f_rank, *o] if self.files else list(o)

        def position(rank: int, o: list[int]) -> str:
            if not o:
                return ""
            return f"{src} row {bases.get(rank, 0) + int(o[0]) if self.files else int(o[0])}"

        live.sort(key=lambda x: (x[0], x[1]))
        sink = self.steps[-1]
        frame = _pl_frame([pickle.loads(x[2]) for x in live], self.c.schemas[sink.step_id])
        if self.stopping or env.should_stop():  # the last point where the batch is discarded
            self.stopping = True
            raise _Stopped()
        self.delivered_id = batch_id  # a stop from here on lets Spark commit the batch
        # delivered: the counters, side outputs and sketches of the batch, then its rows
        counters = env.counters
        for _, sid, p in stats:
            cnt = counters[sid]
            for name in ("rows_in", "rows_out", "filtered", "late", "dead"):
                setattr(cnt, name, getattr(cnt, name) + p[name])
        for rank, o, _, k, sid, payload in sorted(side, key=lambda x: (x[0], x[1], x[2])):
            if k == DEAD and hasattr(payload, "position"):  # a bad row of the source
                env.dead_letter(sid, payload.reason, payload.raw, f"{sid} {payload.position}")
                continue
            env.position = position(rank, o)
            if k == DEAD:
                reason, raw = payload
                env.dead_letter(sid, reason, raw)
            elif k == LATE:
                env.late_row(sid, payload)
        for sid, payload in sketches:
            parts = {key: (order(ranks.get(f, 0), o), p) for key, ((f, o), p) in payload.items()}
            b.sketch_parts.setdefault(sid, []).append(parts)
        if sketches:
            b._attach_sketches(compact=True)  # run.sketch() is current as of this micro-batch
        self._write(sink, frame, batch_id)
        self.serial += delivered
        # known before anything samples the metrics (on_source_row may)
        self.rows_by_batch[batch_id] = delivered
        self.out_by_batch[batch_id] = frame.height
        env.on_source_row(self.serial)
        if delivered or self.last_rows_at is None:
            self.last_rows_at = time.monotonic()
        env.record_latency(time.perf_counter_ns() - t0)

    def _action(self, batch_df: Any) -> Any:
        """The micro-batch's one action (every stage of it runs here): ``toArrow()``, on a
        thread of its own that inherits the query thread's Spark properties, with the run's
        job tag.

        The micro-batch waits for it or for a stop, whichever comes first. Spark takes
        0.15-0.4 s to fail an action whose jobs were cancelled; a stopped micro-batch does
        not wait for that: it raises at once (uncommitted), so ``query.stop()`` returns and the
        run ends. The abandoned action fails moments later on its daemon thread, and its
        result, if any, is dropped: nothing of the batch is delivered."""
        from pyspark.util import InheritableThread

        out: dict[str, Any] = {}
        done = threading.Event()
        wake, tag = self.wake, self.job_tag
        ctx = batch_df.sparkSession.sparkContext

        def action() -> None:
            ctx.addJobTag(tag)  # job tags are per thread: this thread's jobs carry it
            try:
                out["tbl"] = batch_df.toArrow()
            except BaseException as e:
                out["err"] = e
            finally:
                ctx.removeJobTag(tag)
                done.set()
                wake.set()

        wake.clear()
        if self.stopping:  # a stop between the caller's check and the clear
            raise _Stopped()
        InheritableThread(action, name="streamcell-spark-action", daemon=True).start()
        while not done.is_set():
            if self.stopping or self.env.should_stop():
                self.stopping = True
                ctx.cancelJobsWithTag(tag)
                raise _Stopped()
            wake.wait(0.1)
        if "err" in out:
            raise out["err"]
        return out["tbl"]

    def _write(self, sink: P.Step, frame: pl.DataFrame, batch_id: int) -> None:
        """A Parquet sink: the micro-batch's rows as ``part-b<batch id>.parquet``, written
        to a temporary name and renamed (a re-run micro-batch replaces its own file). Other
        sinks: the run's writer."""
        assert isinstance(sink, P.Sink)
        if sink.target != "parquet":
            self.batch._write(frame, sink)
            return
        self.env.counters[sink.step_id].rows_in += frame.height
        if frame.height == 0:
            return
        assert sink.name is not None
        fs, where = folder(sink.name)  # a local folder or a pyarrow filesystem's
        fs.create_dir(where, recursive=True)
        final = f"{where}/part-b{batch_id:09d}.parquet"
        tmp = f"{where}/.part-b{batch_id:09d}.{uuid.uuid4().hex[:8]}.tmp"
        write_file(fs, final, tmp, frame.write_parquet)

    # ----------------------------------------------------------------- metrics
    def _poll_progress(self, q: Any) -> None:
        try:
            recent = q.recentProgress
        except Exception:  # the query is gone (stopped while polling)
            return
        with self.progress_lock:  # metrics_rows reads it from other threads
            seen = {p["batchId"] for p in self.progress}
            for p in recent:
                d = _progress_dict(p)
                if d.get("batchId") not in seen:
                    self.progress.append(d)
                    seen.add(d.get("batchId"))

    def metrics_rows(self) -> list[dict[str, Any]]:
        """New rows for ``run.metrics()``: one per StreamingQueryProgress since the last call."""
        run = self.env.run
        rows = []
        with self.progress_lock:
            new, self.fed = self.progress[self.fed :], len(self.progress)
        p = run.progress()
        for d in new:
            bid = int(d.get("batchId", 0))
            dur = (d.get("durationMs") or {}).get("triggerExecution") or 0
            # the file source counts files, not rows: rows are streamcell's count for the batch
            n_in = self.rows_by_batch.get(bid, int(d.get("numInputRows") or 0))
            ts = d.get("timestamp")
            now = time.time()
            if isinstance(ts, str):
                from datetime import datetime

                now = datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()
            # Spark's definition: rows of this batch / time since the previous batch started
            since = now - self.prev_ts if self.prev_ts is not None else 0.0
            self.prev_ts = now
            rows.append(
                {
                    "name": run.name,
                    "batchId": bid,
                    "timestamp": now,
                    "_t": now,
                    "numInputRows": n_in,
                    "numOutputRows": self.out_by_batch.get(bid, 0),
                    "inputRowsPerSecond": float(d.get("inputRowsPerSecond") or 0.0)
                    if not self.files
                    else (n_in / since if since > 0 else 0.0),
                    "processedRowsPerSecond": n_in / (dur / 1000) if dur else 0.0,
                    "totalInputRows": p["rows_in"],
                    "totalOutputRows": p["rows_out"],
                    "latencyP50Ms": p["p50_ms"],
                    "latencyP99Ms": p["p99_ms"],
                    "lateRows": p["late"],
                    "deadLetters": p["dead"],
                    "elapsedSeconds": p["elapsed_s"],
                    "status": p["status"],
                }
            )
        return rows

    def operator_metrics(self) -> list[dict[str, Any]]:
        """Per-step rows for the dashboard (rows in/out per step, summed over micro-batches)."""
        ops = []
        for s in self.steps:
            c = self.env.counters[s.step_id]
            rin, rout = int(c.rows_in), int(c.rows_out)
            ops.append(
                {
                    "name": s.step_id,
                    "rows_in": rin,
                    "rows_out": rout,
                    "selectivity": rout / rin if rin else None,
                    "cost_ns_per_row": None,
                    "queue_depth": None,
                    "workers": None,
                    "state_size": None,
                }
            )
        return ops
