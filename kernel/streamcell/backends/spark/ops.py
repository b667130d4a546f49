"""Stateful steps on Spark: the reference's own operators, run per partition in order (the
fallback where streamcell's native operators cannot run, see :mod:`.native_ops`; the side-row
protocol and order-key rules below are shared by both).

A keyed step (``agg``, ``running``, ``top_k``, ``dedup``, windowed ``agg``) is lowered to
``repartition(keys) -> sortWithinPartitions(_o) -> mapInArrow``: every key lives in one
partition and its rows arrive there sorted by their order key ``_o``, so running the
reference operator over the partition processes each key in arrival order, keys in parallel
(DESIGN.md section 2). The partition function emits, besides output rows:

- side rows (``_k`` = DEAD or LATE) carrying the pickled reason and input row, so the
  driver can file them in the reference's order;
- one STATS row with the partition's step counters.

Order keys: ``_o`` is an array of longs compared lexicographically. A source row's key is
``[serial]``; an operator emitting several rows for one input appends the output's index;
rows flushed at end of stream start with ``[END, step index]``. Sorting a sink's rows by
``_o`` gives exactly the reference's sequential output order.
"""

from __future__ import annotations

import dataclasses
import pickle
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa

from ... import plan as P
from ...stores import StepCounters
from ...types import Schema

LIVE, DEAD, LATE, STATS = 0, 1, 2, 3
END = 2**62  # first element of the order key of rows flushed at end of stream
HIDDEN = ("_o", "_k", "_b")

_ARROW = {
    "int": pa.int64(),
    "float": pa.float64(),
    "bool": pa.bool_(),
    "str": pa.string(),
    "datetime": pa.timestamp("us"),
    "date": pa.date32(),
    "null": pa.null(),
}


def arrow_schema(schema: Schema, extra: list[pa.Field] | None = None) -> pa.Schema:
    fields = [pa.field(n, _ARROW[t.name]) for n, t in schema]
    return pa.schema(fields + (extra or []))


ORDER_FIELD = pa.field("_o", pa.list_(pa.int64()))
SIDE_FIELDS = [ORDER_FIELD, pa.field("_k", pa.int8()), pa.field("_b", pa.binary())]


class MiniCompiled:
    """What a reference operator reads from its Compiled: the schemas."""

    def __init__(self, schemas: dict[str, Schema]):
        self.schemas = schemas


class PartitionEnv:
    """The reference ``Env`` inside a Spark task: side outputs are kept with the current
    row's order key and shipped to the driver as side rows."""

    def __init__(self) -> None:
        self.counters: dict[str, StepCounters] = defaultdict(StepCounters)
        self.side: list[tuple[int, list[int], Any]] = []
        self.o: list[int] = []
        self.position = ""

    def dead_letter(self, step: str, reason: str, raw: str, position: str | None = None) -> None:
        self.side.append((DEAD, self.o, (reason, raw)))

    def late_row(self, step: str, row: dict[str, Any]) -> None:
        self.side.append((LATE, self.o, dict(row)))


def detach(step: P.Step) -> P.Step:
    """The step without its inputs (so shipping it to executors does not ship the source)."""
    stubs = tuple(P.Step(step_id=i.step_id) for i in step.inputs)
    return dataclasses.replace(step, inputs=stubs)


class PartitionOut:
    """Buffers output rows of one partition and yields Arrow batches of a fixed schema."""

    def __init__(self, schema: pa.Schema, names: list[str]):
        self.schema = schema
        self.names = names
        self.rows: list[dict[str, Any]] = []

    def add(self, row: dict[str, Any], o: list[int]) -> None:
        row["_o"] = o
        row["_k"] = LIVE
        self.rows.append(row)

    def side(self, kind: int, o: list[int], payload: Any) -> None:
        self.rows.append({"_o": o, "_k": kind, "_b": pickle.dumps(payload)})

    def full(self) -> bool:
        return len(self.rows) >= 4096

    def batch(self) -> pa.RecordBatch:
        rows, self.rows = self.rows, []
        return pa.RecordBatch.from_pylist(rows, schema=self.schema)


def run_op(op: Any, env: PartitionEnv, row: dict[str, Any], o: list[int]) -> list[dict[str, Any]]:
    """One row, at order key ``o``, through a reference operator inside a Spark task: its
    outputs, counted; a row the operator cannot process is its dead letter (into
    ``env.side`` with the operator's other side outputs)."""
    from streamcell.backends.evaluate import RowError

    env.o = o
    cnt = op.cnt
    cnt.rows_in += 1
    try:
        res: list[dict[str, Any]] = op.push(row, 0)
    except RowError as e:
        op.dead(row, str(e))
        res = []
    cnt.rows_out += len(res)
    return res


def push_row(op: Any, env: PartitionEnv, out: PartitionOut, r: dict[str, Any], multi: bool) -> None:
    """Run one input row (with its order key ``_o``) through a reference operator inside a
    Spark task: outputs get the row's order key (extended by the output's index when the step
    emits several rows), side outputs go out as side rows."""
    o = r.pop("_o")
    res = run_op(op, env, r, o)
    if res:
        if multi:
            for i, x in enumerate(res):
                out.add(x, o + [i])
        else:
            out.add(res[0], o)
    for kind, so, payload in env.side:
        out.side(kind, so, payload)
    env.side.clear()


def keyed_fn(
    step: P.Step, index: int, schemas: dict[str, Schema], out_schema: Schema
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The mapInArrow function running ``step`` (agg, running, top_k, dedup) over a
    partition whose rows are sorted by ``_o``."""
    step = detach(step)
    multi = isinstance(step, P.TopK)
    schema = arrow_schema(out_schema, SIDE_FIELDS)
    names = [n for n, _ in out_schema]

    def fn(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from streamcell.backends.reference import make_op

        env = PartitionEnv()
        op = make_op(step, MiniCompiled(schemas), env)  # type: ignore[arg-type]
        cnt = op.cnt
        out = PartitionOut(schema, names)
        for b in batches:
            for r in b.to_pylist():
                push_row(op, env, out, r, multi)
                if out.full():
                    yield out.batch()
        out.side(STATS, [], dataclasses.asdict(cnt))
        yield out.batch()

    return fn


WINDOW_HIDDEN = [
    pa.field("_ws", pa.int64()),
    pa.field("_we", pa.int64()),
    pa.field("_wq", pa.list_(pa.int64())),
]


def window_fn(
    step: P.Aggregate, index: int, schemas: dict[str, Schema], out_schema: Schema
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The mapInArrow function of a windowed aggregate over a partition sorted by ``_o``.

    Rows arrive with ``_dead`` / ``_late`` decided on the global watermark (by Spark, in
    arrival order); the reference's window operator folds the admitted rows per key and every
    window comes out with its raw bounds (``_ws``, ``_we``) and creation order (``_wq``), from
    which the driver's plan derives when the reference would have closed it."""
    step = detach(step)  # type: ignore[assignment]
    schema = arrow_schema(out_schema, SIDE_FIELDS + WINDOW_HIDDEN)
    names = [n for n, _ in out_schema]

    def fn(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import heapq

        from streamcell.backends.evaluate import RowError
        from streamcell.backends.reference import WindowOp, WindowState

        env = PartitionEnv()
        made: list[Any] = []
        cur: dict[str, Any] = {"o": [], "n": 0}

        class Op(WindowOp):
            def _new(self, key: Any, start: int, end: int) -> WindowState:
                cur["n"] += 1
                win = WindowState(key, start, end, tuple(cur["o"]) + (cur["n"],), self.spec.new())  # type: ignore[arg-type]
                heapq.heappush(self.heap, (end, start, win.seq, next(self.uid), win))
                return win

            def _emit(self, win: WindowState) -> dict[str, Any]:
                row = super()._emit(win)
                row["_ws"], row["_we"], row["_wq"] = win.start, win.end, list(win.seq)  # type: ignore[call-overload]
                made.append(row)
                return row

        op = Op(step, MiniCompiled(schemas), env)  # type: ignore[arg-type]
        cnt = op.cnt
        et = op.et
        flags: dict[str, bool] = {"late": False}
        admit = et.admit

        def spark_admit(row: dict[str, Any]) -> int | None:
            t = et.ticks(row)
            if t is not None and flags["late"]:
                cnt.late += 1
                env.late_row(step.step_id, row)
                return None
            return admit(row) if t is None else t

        et.admit = spark_admit  # type: ignore[method-assign]
        out = PartitionOut(schema, names + ["_ws", "_we", "_wq"])
        for b in batches:
            for r in b.to_pylist():
                o = r.pop("_o")
                flags["late"] = bool(r.pop("_late"))
                spark_dead = bool(r.pop("_dead"))
                env.o = o
                cur["o"], cur["n"] = o, 0
                cnt.rows_in += 1
                before = cnt.dead
                try:
                    op.push(r, 0)
                except RowError as e:
                    op.dead(r, str(e))
                if (cnt.dead > before) != spark_dead:
                    raise AssertionError(
                        f"{step.step_id}: Spark and the reference disagree on whether row "
                        f"{r!r} is a dead letter"
                    )
                for kind, so, payload in env.side:
                    out.side(kind, so, payload)
                env.side.clear()
                if out.full():
                    yield out.batch()
        op.end()
        for row in made:
            out.add(row, [])
        cnt.rows_out += len(made)
        out.side(STATS, [], dataclasses.asdict(cnt))
        yield out.batch()

    return fn


def side_payload(kind: int, blob: bytes) -> Any:
    return pickle.loads(blob)


SKETCH = 4  # side row: a partition's partial sketches (see sketch_fn)


def sketch_for_call(call: P.SketchCall, is_str: bool) -> Any:
    """An empty streamcell sketch for ``call`` (the native engine's kinds and parameters)."""
    from .sketch import new_sketch

    return new_sketch(call.fn, {call.param_name: call.param}, pa.string() if is_str else pa.int64())


def sketch_column(call: P.SketchCall, col: pa.Array) -> pa.Array:
    """A column as the sketches take it: bools as int64 (as the native engine updates them),
    datetimes/dates as their int64 ticks, strings as large strings."""
    t = col.type
    if pa.types.is_boolean(t) or pa.types.is_timestamp(t):
        return col.cast(pa.int64())
    if pa.types.is_date32(t):
        return col.cast(pa.int32()).cast(pa.int64())
    if pa.types.is_null(t):
        return col.cast(pa.int64() if call.fn != "kll" else pa.float64())
    if call.fn == "kll" and pa.types.is_integer(t):
        return col.cast(pa.float64())
    return col


def sketch_fn(
    step: P.Sketch, schema: Schema
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The mapInArrow function of a ``sketch`` stage: rows pass through unchanged (``_k`` =
    LIVE); each partition's partial sketches (per key, with the order key of the key's first
    row) leave as one SKETCH side row of DataSketches bytes, merged on the driver."""
    step = detach(step)  # type: ignore[assignment]
    types = dict(schema)
    names = [n for n, _ in schema]
    out_schema = arrow_schema(schema, SIDE_FIELDS)

    def fn(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        parts: dict[tuple[Any, ...], tuple[list[int], list[Any]]] = {}
        n = 0

        def fresh() -> list[Any]:
            return [sketch_for_call(c, types[c.column].name == "str") for _, c in step.sketches]

        for b in batches:
            n += b.num_rows
            if step.keys:
                keys = list(zip(*(b.column(k).to_pylist() for k in step.keys)))
                orders = b.column("_o").to_pylist()
                rows: dict[tuple[Any, ...], list[int]] = {}
                for i, k in enumerate(keys):
                    rows.setdefault(k, []).append(i)
                for k, idx in rows.items():
                    if k not in parts:
                        parts[k] = (orders[idx[0]], fresh())
                    taken = b.take(pa.array(idx, type=pa.int64()))
                    for sk, (_, c) in zip(parts[k][1], step.sketches):
                        sk.update_batch(sketch_column(c, taken.column(c.column)))
            else:
                if () not in parts:
                    parts[()] = ([], fresh())
                for sk, (_, c) in zip(parts[()][1], step.sketches):
                    sk.update_batch(sketch_column(c, b.column(c.column)))
            cols = [b.column(x) for x in names] + [
                b.column("_o"),
                pa.array([LIVE] * b.num_rows, type=pa.int8()),
                pa.nulls(b.num_rows, type=pa.binary()),
            ]
            yield pa.RecordBatch.from_arrays(cols, schema=out_schema)
        payload = {k: (o, [bytes(sk.to_bytes()) for sk in sks]) for k, (o, sks) in parts.items()}
        side = PartitionOut(out_schema, names)
        side.side(SKETCH, [], payload)
        side.side(STATS, [], {"rows_in": n, "rows_out": n, "filtered": 0, "late": 0, "dead": 0})
        yield side.batch()

    return fn


def as_payload(merged: dict[tuple[Any, ...], list[Any]], payloads: list[Any]) -> dict[Any, Any]:
    """``merged`` (merge_sketches of ``payloads``) as one payload: merged bytes per key with
    the key's first order key; what a streaming run keeps between micro-batches."""
    firsts: dict[tuple[Any, ...], list[int]] = {}
    for payload in payloads:
        for key, (o, _) in payload.items():
            if key not in firsts or o < firsts[key]:
                firsts[key] = o
    return {
        k: (firsts.get(k, []), [bytes(sk.to_bytes()) for sk in sks]) for k, sks in merged.items()
    }


def merge_sketches(
    step: P.Sketch, schema: Schema, payloads: list[Any]
) -> dict[tuple[Any, ...], list[Any]]:
    """The driver's half: merge every partition's partial sketches per key (``merge_bytes``);
    keys in order of their first row (as the reference lists them)."""
    from .sketch import merge_bytes

    types = dict(schema)
    calls = [c for _, c in step.sketches]
    first: dict[tuple[Any, ...], list[int]] = {}
    blobs: dict[tuple[Any, ...], list[list[bytes]]] = {}
    for payload in payloads:
        for key, (o, parts) in payload.items():
            if key not in first or o < first[key]:
                first[key] = o
            per = blobs.setdefault(key, [[] for _ in calls])
            for i, b in enumerate(parts):
                per[i].append(b)
    if not step.keys:
        first.setdefault((), [])
        blobs.setdefault((), [[] for _ in calls])
    out: dict[tuple[Any, ...], list[Any]] = {}
    for key in sorted(blobs, key=lambda k: first[k]):
        out[key] = [
            merge_bytes(
                c.fn,
                parts,
                pa.string() if types[c.column].name == "str" else pa.int64(),
                **{c.param_name: c.param},
            )
            for c, parts in zip(calls, blobs[key])
        ]
    return out
