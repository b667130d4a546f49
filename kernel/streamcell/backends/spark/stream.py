"""Streaming sources on Spark: a Structured Streaming query per run.

The query's source is Spark's own streaming source, which discovers new data and keeps the
offsets in the checkpoint folder:

- a watched folder (:func:`streamcell.watch`) -> Spark's file stream source (``binaryFile``,
  paths only): each micro-batch is the set of new files;
- an unbounded generator (``sc.clickstream(rows=None)``, ``sc.store_sales(rows=None)``) ->
  Spark's ``rate`` source at the source's ``rate=`` (rows per second): each micro-batch is a
  range of row numbers, and row ``i`` of the generator is generated on the executors.

Its sink is ``foreachBatch``: the micro-batch's files (or row range) become a batch
DataFrame, read on the executors with streamcell's own readers (``mapInArrow``), so bad rows
are dead letters exactly as on the reference; the plan's steps are lowered onto it as in a
finite run, and the sink receives the micro-batch's rows sorted by serial number.

Order keys: a generator row's ``_o`` is ``[i]`` (its serial number); a file row's is
``[batch id, file rank in the batch by name, row in file]``, mapped back to the global serial
number for dead-letter positions.

Keyed steps (``agg``, ``running``, ``top_k``, ``dedup``) are grouped stateful processing:
per micro-batch, the new rows cogrouped by key with the keys' state from the previous
micro-batch; per key, the reference operator is restored, fed the key's rows sorted by
``_o`` and its state kept for the next micro-batch (:class:`StreamLowering`). Windows are
refused (:func:`streaming_refusal`).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import unquote, urlparse

import pyarrow as pa

from ... import plan as P
from ...compiler import Compiled
from ...options import RunOptions
from ...sources import CHUNK, BadRow, read_file
from ...types import Schema
from .backend import SIDE_DDL, Lowering, ddl, source_spec
from .ops import DEAD, LIVE, SIDE_FIELDS, STATS, arrow_schema

WINDOW_REASON = (
    "windows on a streaming source: Spark's micro-batch watermark cannot close windows in "
    "arrival order"
)


def streaming_refusal(s: P.Step) -> str | None:
    """Why ``s`` cannot run on a streaming source on Spark, or None."""
    if isinstance(s, P.Aggregate) and s.window is not None:
        return WINDOW_REASON
    return None


def local_path(uri: str) -> str:
    u = urlparse(uri)
    return unquote(u.path) if u.scheme in ("file", "") else uri


# --------------------------------------------------------------------------- executor code


def file_reader_fn(
    spec: P.SourceSpec, schema: Schema, batch_id: int
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """mapInArrow over ``(rank, path)`` rows: each file read with streamcell's reader; rows
    out with ``_o = [batch, rank, row in file]``, bad rows as DEAD side rows, one STATS row
    per file (its row count)."""
    out_schema = arrow_schema(schema, SIDE_FIELDS)
    names = [n for n, _ in schema]

    def fn(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pickle

        from streamcell.backends.spark.backend import conform_to_spark

        target = arrow_schema(schema)
        for b in batches:
            for rank, path in zip(b.column(0).to_pylist(), b.column(1).to_pylist()):
                n = bad = 0
                for item in read_file(spec, schema, local_path(path)):
                    if isinstance(item, BadRow):
                        row: dict[str, Any] = {k: None for k in names}
                        row.update(_o=[batch_id, rank, n], _k=DEAD, _b=pickle.dumps(item))
                        yield pa.RecordBatch.from_pylist([row], schema=out_schema)
                        n += 1
                        bad += 1
                        continue
                    item = conform_to_spark(item, target)
                    k = item.num_rows
                    o = _triples(batch_id, rank, n, k)
                    yield pa.RecordBatch.from_arrays(
                        [
                            *item.columns,
                            o,
                            pa.array([LIVE] * k, type=pa.int8()),
                            pa.nulls(k, pa.binary()),
                        ],
                        schema=out_schema,
                    )
                    n += k
                stats = {"rows_in": n, "rows_out": n - bad, "filtered": 0, "late": 0, "dead": bad}
                row = dict.fromkeys(names)
                row.update(_o=[batch_id, rank], _k=STATS, _b=pickle.dumps(stats))
                yield pa.RecordBatch.from_pylist([row], schema=out_schema)

    return fn


def _triples(a: int, b: int, start: int, k: int) -> pa.Array:
    import numpy as np

    vals = np.empty((k, 3), dtype=np.int64)
    vals[:, 0], vals[:, 1], vals[:, 2] = a, b, np.arange(start, start + k)
    offsets = pa.array(np.arange(0, 3 * k + 1, 3, dtype=np.int32))
    return pa.ListArray.from_arrays(offsets, pa.array(vals.reshape(-1)))


def generator_fn(
    spec: P.SourceSpec, schema: Schema
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """mapInArrow over row numbers: row ``i`` of the generator, ``_o = [i]``."""
    out_schema = arrow_schema(schema).append(SIDE_FIELDS[0])

    def fn(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import numpy as np

        from streamcell.backends.spark.backend import order_array
        from streamcell.sources import GENERATORS

        gen = GENERATORS[spec.kind]
        cache: dict[int, pa.RecordBatch] = {}
        for b in batches:
            ids = b.column(0).to_numpy()
            if len(ids) == 0:
                continue
            chunks = ids // CHUNK
            for c in np.unique(chunks):
                sel = ids[chunks == c]
                if int(c) not in cache:
                    cache.clear()
                    cache[int(c)] = gen(spec, int(c), CHUNK)
                part = cache[int(c)].take(pa.array(sel - int(c) * CHUNK))
                yield pa.RecordBatch.from_arrays(
                    [*part.columns, order_array(pa.array(sel))], schema=out_schema
                )

    return fn


STATE = 4  # _k of a row carrying one key's operator state to the next micro-batch
_STATE_ATTRS = ("state", "seen", "seq", "bal")  # "bal": transfer balances


def get_state(op: Any) -> dict[str, Any]:
    """A reference operator's state as plain data (aggregates: each accumulator's value and
    count; its argument function is rebuilt from the step on restore)."""
    from ..reference import AggregateOp

    st = {k: getattr(op, k) for k in _STATE_ATTRS if hasattr(op, k)}
    if isinstance(op, AggregateOp):
        st["state"] = {k: [(a.v, a.n) for a in accs] for k, accs in op.state.items()}
    return st


def set_state(op: Any, st: dict[str, Any]) -> None:
    from ..reference import AggregateOp

    for k, v in st.items():
        if k == "state" and isinstance(op, AggregateOp):
            restored = {}
            for key, saved in v.items():
                accs = op.spec.new()
                for a, (val, n) in zip(accs, saved):
                    a.v, a.n = val, n
                restored[key] = accs
            v = restored
        setattr(op, k, v)


def keyed_state_fn(
    step: P.Step, schemas: dict[str, Schema], out_schema: Schema, in_names: list[str], nkeys: int
) -> Callable[[pa.Table, pa.Table], pa.Table]:
    """The cogroup function of a keyed step on a stream: for one key, the reference operator
    is restored from the key's state (the right side: zero or one ``_st`` row), fed the key's
    new rows sorted by ``_o`` (the left side), and its state is emitted as a STATE row."""
    from .ops import SIDE_FIELDS, detach

    step = detach(step)
    multi = isinstance(step, P.TopK)
    hidden = [f"_h{i}" for i in range(nkeys)]

    def fn(left: pa.Table, right: pa.Table) -> pa.Table:
        import dataclasses
        import pickle

        from streamcell.backends.reference import make_op
        from streamcell.backends.spark.ops import MiniCompiled, PartitionEnv, PartitionOut, push_row

        key_src = left if left.num_rows else right
        key_vals = {h: key_src.column(h)[0].as_py() for h in hidden}
        h_fields = [key_src.schema.field(h) for h in hidden]
        schema = arrow_schema(out_schema, SIDE_FIELDS).append(pa.field("_st", pa.binary()))
        for f in h_fields:
            schema = schema.append(f)
        if not left.num_rows:  # no new rows for this key: its state goes on as it was
            blob = right.column("_st")[0].as_py()
            row = {"_o": [], "_k": STATE, "_st": blob, **key_vals}
            return pa.Table.from_pylist([row], schema=schema)
        env = PartitionEnv()
        op = make_op(step, MiniCompiled(schemas), env)  # type: ignore[arg-type]
        if right.num_rows:
            set_state(op, pickle.loads(right.column("_st")[0].as_py()))
        cnt = op.cnt
        out = PartitionOut(schema, [n for n, _ in out_schema])
        rows = left.select([*in_names, "_o"]).to_pylist()
        rows.sort(key=lambda r: r["_o"])  # the key's rows in arrival order
        for r in rows:
            push_row(op, env, out, r, multi)
        out.side(STATS, [], dataclasses.asdict(cnt))
        out.rows.append({"_o": [], "_k": STATE, "_st": pickle.dumps(get_state(op)), **key_vals})
        return pa.Table.from_pylist(out.rows, schema=schema)

    return fn


class StreamLowering(Lowering):
    """Lowering of one micro-batch: keyed steps keep their per-key state across micro-batches
    in ``states[j]``, a DataFrame of the key columns (``_h*``) and the pickled operator state
    of that key (``_st``); ``new_states`` is what the micro-batch leaves for the next one."""

    def __init__(self, *a: Any, states: dict[int, Any], **kw: Any):
        super().__init__(*a, **kw)
        self.states = states
        self.new_states: dict[int, Any] = {}

    def keyed(self, j: int, s: P.Step, df: Any) -> Any:
        from pyspark.sql import functions as F

        from .expr import qcol

        schema = self.in_schema(s)
        out_schema = self.c.schemas[s.step_id]
        names = [n for n, _ in schema]
        keys = s.keys if not isinstance(s, P.Dedup) or s.keys else tuple(names)  # type: ignore[attr-defined]
        if isinstance(s, P.Transfer):  # entities cross keys: one group, all balances its state
            keys = ()
        types = dict(schema)
        hcols = []
        for i, k in enumerate(keys):
            c = qcol(k)
            if types[k].name == "float":  # one group for every NaN, and for 0.0 / -0.0
                c = F.when(F.isnan(c), F.lit(float("nan"))).when(c == 0, F.lit(0.0)).otherwise(c)
            hcols.append(c.alias(f"_h{i}"))
        if not hcols:
            hcols = [F.lit(0).cast("bigint").alias("_h0")]
        h = [f"_h{i}" for i in range(len(hcols))]
        left = df.select(*[qcol(n) for n in df.columns], *hcols)
        h_ddl = ", ".join(f"`{x}` {left.schema[x].dataType.simpleString()}" for x in h)
        prev = self.states.get(j)
        if prev is None:
            prev = self.spark.createDataFrame([], f"{h_ddl}, `_st` binary")
        fn = keyed_state_fn(s, self.schemas(s), out_schema, names, len(h))
        out = (
            left.groupBy(*h)
            .cogroup(prev.groupBy(*h))
            .applyInArrow(fn, ddl(out_schema, SIDE_DDL) + f", `_st` binary, {h_ddl}")
        )
        out = out.localCheckpoint(eager=True)  # computed once: read for rows and for state
        self.new_states[j] = out.filter(F.col("_k") == F.lit(STATE)).select(*h, "_st")
        rest = out.filter(F.col("_k") != F.lit(STATE)).drop("_st", *h)
        rest = self._side_observe(j, s, rest)
        return rest.filter(F.col("_k") == F.lit(LIVE)).drop("_k", "_b")


# --------------------------------------------------------------------------- the driver


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
        self.out_by_batch: dict[int, int] = {}
        self.prev_ts: float | None = None
        self.last_rows_at: float | None = None  # set by the first micro-batch
        self.error: BaseException | None = None
        self.stopping = False
        self.states: dict[int, Any] = {}  # keyed step index -> its per-key state DataFrame

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
                .load(str(self.spec.arg("path")))
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

    def run(self) -> bool:
        from .session import get_session

        spark = get_session()
        env = self.env
        run = getattr(env, "run", None)
        q = (
            self.stream_df(spark)
            .writeStream.foreachBatch(self.micro_batch)
            .option("checkpointLocation", self.checkpoint_dir())
            .trigger(processingTime=f"{int(self.options.trigger_interval * 1000)} milliseconds")
            .queryName(f"streamcell_{uuid.uuid4().hex[:8]}")
            .start()
        )
        if run is not None:
            run.streaming_query = q
            run.metrics_feed = self.metrics_rows
            run.operator_metrics = self.operator_metrics
        idle = self.spec.arg("idle_timeout") if self.files else None
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
                self._poll_progress(q)
                q.awaitTermination(0.1)
            if self.error is not None:
                self._raise()
            exc = q.exception()
            if exc is not None:
                from ...errors import StreamcellError

                raise StreamcellError(f"the Spark streaming query failed: {exc}")
            return not env.should_stop()
        finally:
            self._poll_progress(q)
            if q.isActive:
                q.stop()

    def _stop_between_batches(self, q: Any, timeout: float = 10.0) -> None:
        """``query.stop()`` once no micro-batch runs (the next one returns at once): stopping
        in the middle of a Python ``foreachBatch`` interrupts it with a JVM-side error."""
        self.stopping = True
        deadline = time.monotonic() + timeout
        while q.isActive and q.status["isTriggerActive"] and time.monotonic() < deadline:
            time.sleep(0.02)
        q.stop()

    def _raise(self) -> bool:
        assert self.error is not None
        raise self.error

    # ----------------------------------------------------------------- one micro-batch
    def micro_batch(self, batch_df: Any, batch_id: int) -> None:
        try:
            self._micro_batch(batch_df, batch_id)
        except BaseException as e:  # kept for the run thread: a failed micro-batch fails the run
            if self.error is None and not self.env.should_stop():
                self.error = e
            raise

    def _micro_batch(self, batch_df: Any, batch_id: int) -> None:
        from pyspark.sql import functions as F

        from .backend import ORDER_DDL, Lowered, to_polars

        env, b = self.env, self.batch
        if self.stopping or env.should_stop() or not env.wait_if_paused():
            self.stopping = True
            return
        t0 = time.perf_counter_ns()
        spark = batch_df.sparkSession
        b.side = []
        parts = max(2, spark.sparkContext.defaultParallelism)
        low = StreamLowering(self.c, self.steps, spark, states=self.states)
        low.checkpoint = lambda d: d.localCheckpoint(eager=True)
        if self.files:
            paths = sorted(
                (r[0] for r in batch_df.collect()), key=lambda p: os.path.basename(local_path(p))
            )
            if not paths:
                self.last_rows_at = self.last_rows_at or time.monotonic()
                return
            listing = spark.createDataFrame(
                list(enumerate(paths)), schema="rank int, path string"
            ).repartition(min(parts, len(paths)))
            fn = file_reader_fn(self.spec, self.schema, batch_id)
            df = listing.mapInArrow(fn, ddl(self.schema, SIDE_DDL))
            df = low._side_observe(0, self.src, df)
            df = df.filter(F.col("_k") == F.lit(LIVE)).drop("_k", "_b")
        else:
            lo, hi = batch_df.agg(F.min("value"), F.max("value")).first()
            if lo is None:
                self.last_rows_at = self.last_rows_at or time.monotonic()
                return
            df = spark.range(int(lo), int(hi) + 1, numPartitions=parts).mapInArrow(
                generator_fn(self.spec, self.schema), ddl(self.schema, ORDER_DDL)
            )
            n = int(hi) - int(lo) + 1
            cnt = env.counters[self.src.step_id]
            cnt.rows_in += n
            cnt.rows_out += n
        for j, s in enumerate(self.steps[1:-1], start=1):
            df = low.lower(j, s, df)
        out = df.orderBy("_o").toArrow()
        file_counts: dict[int, int] = {}
        if self.files:
            src_obs = low.lowered[0]
            assert isinstance(src_obs, Lowered)
            for r in src_obs.observation.get["side"] or []:
                if r["_k"] == STATS:
                    file_counts[int(r["_o"][1])] = b_rows(r["_b"])
        bases: dict[int, int] = {}
        acc = self.serial
        for rank in sorted(file_counts):
            bases[rank] = acc
            acc += file_counts[rank]
        delivered = acc - self.serial if self.files else int(hi) - int(lo) + 1
        first = self.serial if self.files else int(lo)

        def position(o: list[int]) -> str:
            sid = self.src.step_id
            if self.files and len(o) >= 3:
                return f"{sid} row {bases.get(int(o[1]), 0) + int(o[2])}"
            return f"{sid} row {o[0]}" if o else ""

        b._position = position  # type: ignore[method-assign]
        b._read_back(low)
        b._file_side()
        b._attach_sketches(compact=True)  # run.sketch() is current as of this micro-batch
        frame = to_polars(out, self.c.schemas[self.steps[-1].step_id])
        b._write(frame)
        self.states.update(low.new_states)  # the batch is delivered: its state is current
        self.serial = first + delivered
        env.on_source_row(self.serial)
        self.rows_by_batch[batch_id] = delivered
        self.out_by_batch[batch_id] = frame.height
        if delivered or self.last_rows_at is None:
            self.last_rows_at = time.monotonic()
        env.record_latency(time.perf_counter_ns() - t0)

    # ----------------------------------------------------------------- metrics
    def _poll_progress(self, q: Any) -> None:
        try:
            recent = q.recentProgress
        except Exception:  # the query is gone (stopped while polling)
            return
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


def b_rows(blob: bytes) -> int:
    import pickle

    return int(pickle.loads(blob)["rows_in"])
