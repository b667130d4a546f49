"""Keyed, windowed and session steps on Spark, run by streamcell's native C operators.

Each Spark partition of a keyed step (``agg``, ``running``, ``top_k``, ``dedup``, windowed
``agg``) arrives sorted by its order key ``_o`` (``Lowering._partition``). The partition
function builds a one-step native program (``native.lowering.lower_step``: the same C
operator the native engine runs, one worker, its changelog out), pushes the partition's
Arrow batches into it and takes its ordered output batches, all without the GIL. Every row
pushed gets a local serial (its position in the partition); the runtime copies the serial of
the input row onto each row it emits, so an output's order key is the input row's ``_o``
(extended by the output's index for ``top_k``, which re-emits a key's whole top k), exactly
as the reference operators running in the same place would emit it (:mod:`.ops`). Dead
rows come back from the operator's side log with their serial; their reasons are re-derived
with the reference's evaluator (``native.drivers.reason_fn``); the step's counters are the
runtime's. So the side rows (DEAD, LATE) and the STATS row of a partition are the ones the
reference operator would have produced.

Windows: Spark decides lateness on the global watermark (in arrival order) before the
partition; late rows are filed here as LATE side rows and never reach the native operator,
whose own (per-partition) watermark is never ahead of the global one, so it admits every row
it is given and closes no window that may still grow. Every window it emits carries the
serial of the row that opened it (``lower_step(creation=True)``), from which its creation
order ``_wq`` is the opening row's ``_o`` plus the window's index among the windows that row
opened (by start), as :func:`.ops.window_fn` records it.

When an executor cannot import the native extension, the partition runs the reference
operator instead and its STATS row says so (``engine``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ... import plan as P
from ...errors import NotSupportedError
from ...types import Schema
from .ops import (
    DEAD,
    LATE,
    LIVE,
    SIDE_FIELDS,
    STATS,
    WINDOW_HIDDEN,
    MiniCompiled,
    PartitionOut,
    arrow_schema,
    detach,
    keyed_fn,
    window_fn,
)

# The ablation switches (bench/bench_spark_ops.py; read on the driver when a plan is lowered):
# False runs every keyed / window step on the reference operators, or never uses Spark's
# own groupBy and window functions (final tables, running aggregates, dedup).
NATIVE_OPERATORS = True
GROUP_BY = True

CAP = 8192  # rows per runtime batch
PUSH_TIMEOUT_NS = 2_000_000  # a full pipeline makes a push wait this long, then we drain
NATIVE = "native"


def native_refusal(step: P.Step, schemas: dict[str, Schema]) -> str | None:
    """Why streamcell's native operators cannot run ``step`` on Spark (None: they can)."""
    if not NATIVE_OPERATORS:
        return "native operators switched off (native_ops.NATIVE_OPERATORS)"
    try:
        from ... import _runtime  # noqa: F401 - the native extension of this build
        from ..native.lowering import lower_step
    except ImportError as e:
        return f"the native extension is not importable here ({e})"
    try:
        lower_step(step, schemas, CAP, creation=True)
    except NotSupportedError as e:
        return str(e)
    return None


# --------------------------------------------------------------------------- order keys


class Orders:
    """The order keys ``_o`` of the rows pushed into a partition's program, by local serial;
    chunks whose rows can no longer be asked for are dropped (``drop_before``)."""

    def __init__(self) -> None:
        self.bases: list[int] = []
        self.keys: list[pa.ListArray] = []

    def add(self, base: int, keys: pa.Array) -> None:
        if isinstance(keys, pa.ChunkedArray):
            keys = keys.combine_chunks()
        self.bases.append(base)
        self.keys.append(keys)

    def take(self, seqs: np.ndarray) -> pa.Array:
        """The order keys of local serials ``seqs`` (each one pushed and not dropped)."""
        if len(seqs) == 0:
            return pa.array([], type=pa.list_(pa.int64()))
        lo = int(np.searchsorted(self.bases, int(seqs.min()), side="right")) - 1
        hi = int(np.searchsorted(self.bases, int(seqs.max()), side="right")) - 1
        keys = self.keys[lo] if lo == hi else pa.concat_arrays(self.keys[lo : hi + 1])
        return keys.take(pa.array(seqs - self.bases[lo], type=pa.int64()))

    def drop_before(self, seq: int) -> None:
        """Forget the chunks whose rows all have serials below ``seq``."""
        k = 0
        while k + 1 < len(self.bases) and self.bases[k + 1] <= seq:
            k += 1
        del self.bases[:k], self.keys[:k]


def extend_order(keys: pa.Array, idx: np.ndarray) -> pa.Array:
    """``[o + [i] for o, i in zip(keys, idx)]`` as an Arrow list<int64> array, built with
    numpy (an operator emitting several rows per input appends the output's index)."""
    keys = keys if isinstance(keys, pa.ListArray) else pa.array(keys)
    flat = keys.flatten().to_numpy(zero_copy_only=False).astype(np.int64)
    offs = keys.offsets.to_numpy().astype(np.int64)
    lens = np.diff(offs)
    new_offs = np.zeros(len(keys) + 1, dtype=np.int32)
    np.cumsum(lens + 1, out=new_offs[1:])
    values = np.empty(int(new_offs[-1]), dtype=np.int64)
    owner = np.repeat(np.arange(len(keys)), lens)
    values[np.arange(len(flat)) + owner] = flat  # row r's keys move r slots right
    values[new_offs[1:] - 1] = idx
    return pa.ListArray.from_arrays(pa.array(new_offs), pa.array(values))


def run_index(seqs: np.ndarray, carry: tuple[int, int]) -> tuple[np.ndarray, tuple[int, int]]:
    """Each row's index among the consecutive rows with its serial (the outputs of one input
    row), continuing ``carry`` = (serial, rows seen) from the previous batch."""
    n = len(seqs)
    if n == 0:
        return np.zeros(0, dtype=np.int64), carry
    starts = np.flatnonzero(np.r_[True, seqs[1:] != seqs[:-1]])
    lens = np.diff(np.r_[starts, n])
    idx = np.arange(n, dtype=np.int64) - np.repeat(starts, lens)
    if seqs[0] == carry[0]:
        idx[: lens[0]] += carry[1]
    last = int(seqs[-1])
    seen = int(idx[-1]) + 1
    return idx, (last, seen)


# --------------------------------------------------------------------------- Arrow in/out


def runtime_batch(b: pa.RecordBatch, names: list[str], schema: Schema) -> pa.RecordBatch:
    """A Spark batch's user columns as the runtime reads them (strings, ``timestamp[us]``,
    ``date32``, int64, double and bool are read as they come; others are cast)."""
    from ..native.arrow import _arrow_type

    cols = []
    for n, t in schema:
        a = b.column(n)
        want = _arrow_type(t)
        readable = (
            t.name == "null"
            or a.type == want
            or (t.name == "str" and a.type in (pa.string(), pa.large_string(), pa.string_view()))
            or (t.name == "datetime" and pa.types.is_timestamp(a.type) and a.type.unit == "us")
        )
        cols.append(a if readable else a.cast(want))
    return pa.RecordBatch.from_arrays(cols, names=names)


def spark_columns(rb: pa.RecordBatch, schema: Schema) -> list[pa.Array]:
    """The user columns of an exported runtime batch (hidden columns first) in the Arrow
    types Spark expects for ``schema`` (:func:`.ops.arrow_schema`)."""
    cols = []
    for k, (_, t) in enumerate(schema):
        a = rb.column(k + 2)
        if t.name == "str":
            a = a.cast(pa.string())
        elif t.name == "date":
            a = a.cast(pa.int32()).cast(pa.date32())
        elif t.name == "null":
            a = pa.nulls(len(a))
        elif t.name == "datetime" and a.type != pa.timestamp("us"):
            a = a.cast(pa.timestamp("us"))
        cols.append(a)
    return cols


def ticks(a: pa.Array) -> np.ndarray:
    """Raw int64 ticks of a window bound column (int, or ``timestamp[us]``)."""
    if pa.types.is_timestamp(a.type):
        a = a.cast(pa.int64())
    return a.to_numpy(zero_copy_only=False).astype(np.int64)


# --------------------------------------------------------------------------- one partition


class NativePartition:
    """One partition's native program: rows in (Arrow batches sorted by ``_o``), ordered
    output batches, side rows and counters out."""

    def __init__(self, step: P.Step, schemas: dict[str, Schema], creation: bool = False):
        from types import SimpleNamespace

        from ..native.lowering import lower_step
        from ..native.program import build

        low, view = lower_step(step, schemas, CAP, creation=creation)
        self.step = step
        self.prog = build(low, SimpleNamespace(schemas=view))  # type: ignore[arg-type]
        self.in_schema = schemas[step.inputs[0].step_id]
        self.names = [n for n, _ in self.in_schema]
        self.orders = Orders()
        self.seq = 0  # local serial of the next row pushed
        self.started = False
        self.eos = False  # the end-of-stream batch has been taken

    def start(self) -> None:
        self.prog.start(workers=1)
        self.started = True

    def push(self, b: pa.RecordBatch, keys: pa.Array) -> Iterator[pa.RecordBatch]:
        """Push rows (their order keys ``keys``), yielding output batches as they come."""
        from ... import _runtime as R

        n = b.num_rows
        if n == 0:
            return
        self.orders.add(self.seq, keys)
        data = runtime_batch(b, self.names, self.in_schema)
        off = 0
        while off < n:
            rc, took = self.prog.push_many(data, off, n - off, self.seq, CAP, PUSH_TIMEOUT_NS)
            off += took
            self.seq += took
            if rc == R.CLOSED:
                self.raise_error()
            yield from self.take(0)

    def take(self, timeout_ns: int) -> Iterator[pa.RecordBatch]:
        """Output batches ready now (waiting up to ``timeout_ns`` for the first); the last
        one is the end of stream's (``self.eos``)."""
        from ... import _runtime as R

        while True:
            rc, eos, rb = self.prog.take_many(timeout_ns)
            if rb is not None and rb.num_rows:
                yield rb
            if eos:
                self.eos = True
                return
            if rc == R.CLOSED:
                self.raise_error()
            if rc != R.OK or rb is None:
                return
            timeout_ns = 0

    def finish(self) -> Iterator[pa.RecordBatch]:
        """End of stream: the rest of the outputs (windows still open close now)."""
        from ... import _runtime as R

        while True:
            rc = self.prog.finish(PUSH_TIMEOUT_NS)
            if rc == R.OK:
                break
            if rc == R.CLOSED:
                self.raise_error()
            yield from self.take(0)
        while not self.eos:
            yield from self.take(20_000_000)
            if self.prog.error() is not None:
                self.raise_error()

    def sides(self) -> list[tuple[int, int, dict[str, Any], str | None]]:
        """Side rows recorded since the last call: (kind, local serial, input row, the
        reason recorded in C)."""
        from ..native.arrow import to_frame

        out: list[tuple[int, int, dict[str, Any], str | None]] = []
        for _, kinds, _, _, reasons, rb in self.prog.sides():
            seqs = rb.column(0).to_numpy(zero_copy_only=False)
            rows = to_frame(rb.select(list(range(2 + len(self.in_schema)))), self.in_schema)
            out += zip(kinds, (int(q) for q in seqs), rows.to_dicts(), reasons)
        return out

    def counters(self) -> dict[str, int]:
        rin, rout, filt, dead, late = self.prog.counters()[0]
        return {"rows_in": rin, "rows_out": rout, "filtered": filt, "late": late, "dead": dead}

    def raise_error(self) -> None:
        err = self.prog.error()
        what = f"{err[1]}: {err[2]} (status {err[0]})" if err else "closed"
        raise RuntimeError(f"{self.step.step_id}: native operator on a Spark executor: {what}")

    def close(self) -> None:
        from ... import _runtime as R

        if self.started:
            self.prog.stop()
        self.prog.close()
        # an executor's Python worker runs partition after partition and no driver run ever
        # ends in it: the freed column buffers it keeps for reuse (batch.h, sc_colbuf) are
        # released with each partition, so a worker holds no more than one partition needs
        R.buffer_cache_trim(0)


def _dead_rows(
    part: NativePartition, reason: Callable[[dict[str, Any]], str | None]
) -> list[tuple[int, list[int], Any]]:
    """The partition's dead rows so far as (order key, payload) with the reference's reason
    and raw text; their order keys are taken before any chunk is dropped."""
    got: list[tuple[int, list[int], Any]] = []
    sides = part.sides()
    if not sides:
        return got
    orders = part.orders.take(np.array([q for _, q, _, _ in sides], dtype=np.int64)).to_pylist()
    for (kind, _, row, recorded), o in zip(sides, orders):
        if kind == 1:  # as the native driver: the reference's reason, else the operator's
            why = reason(row) or recorded or "row could not be processed"
            got.append((DEAD, o, (why, repr(row)[:500])))
    return got


def _stats(part_counters: dict[str, int], engine: str, extra: dict[str, int] | None = None) -> Any:
    st: dict[str, Any] = dict(part_counters)
    for k, v in (extra or {}).items():
        st[k] += v
    st["engine"] = engine
    return st


def native_keyed_fn(
    step: P.Step, index: int, schemas: dict[str, Schema], out_schema: Schema
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The mapInArrow function running ``step`` (agg, running, top_k, dedup) over a partition
    sorted by ``_o`` with streamcell's native operator (see the module docstring)."""
    step = detach(step)
    multi = isinstance(step, P.TopK)
    schema = arrow_schema(out_schema, SIDE_FIELDS)
    names = [n for n, _ in out_schema]
    fallback = keyed_fn(step, index, schemas, out_schema)

    def fn(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        try:
            from ..native.drivers import reason_fn

            part = NativePartition(step, schemas)
        except ImportError as e:  # an executor without the native extension
            yield from _reference(fallback, batches, str(e))
            return
        reason = reason_fn(step, MiniCompiled(schemas))  # type: ignore[arg-type]
        carry = (-1, 0)
        side = PartitionOut(schema, names)

        def live(rb: pa.RecordBatch) -> pa.RecordBatch:
            nonlocal carry
            seqs = rb.column(0).to_numpy(zero_copy_only=False).astype(np.int64)
            keys = part.orders.take(seqs)
            if multi:
                idx, carry = run_index(seqs, carry)
                keys = extend_order(keys, idx)
            n = rb.num_rows
            cols = spark_columns(rb, out_schema) + [
                keys,
                pa.array(np.full(n, LIVE, dtype=np.int8)),
                pa.nulls(n, type=pa.binary()),
            ]
            return pa.RecordBatch.from_arrays(cols, schema=schema)

        def sides() -> Iterator[pa.RecordBatch]:
            for kind, o, payload in _dead_rows(part, reason):
                side.side(kind, o, payload)
            if side.rows:
                yield side.batch()

        try:
            part.start()
            for b in batches:
                last = None
                for rb in part.push(b, b.column("_o")):
                    out = live(rb)
                    last = int(rb.column(0)[rb.num_rows - 1].as_py())
                    yield out
                yield from sides()
                if last is not None:
                    part.orders.drop_before(last)
            for rb in part.finish():
                yield live(rb)
            yield from sides()
            side.side(STATS, [], _stats(part.counters(), NATIVE))
            yield side.batch()
        finally:
            part.close()

    return fn


def _reference(
    fallback: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]],
    batches: Iterator[pa.RecordBatch],
    why: str,
) -> Iterator[pa.RecordBatch]:
    """The reference operator's partition function, its STATS row marked with why."""
    import pickle

    for rb in fallback(batches):
        k = rb.column("_k").to_pylist()
        if STATS in k:
            blobs = rb.column("_b").to_pylist()
            for i, kind in enumerate(k):
                if kind == STATS:
                    st = pickle.loads(blobs[i])
                    st["engine"] = f"reference: {why}"
                    blobs[i] = pickle.dumps(st)
            at = rb.schema.get_field_index("_b")
            rb = rb.set_column(at, "_b", pa.array(blobs, type=pa.binary()))
        yield rb


def native_window_fn(
    step: P.Aggregate, index: int, schemas: dict[str, Schema], out_schema: Schema
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The mapInArrow function of a windowed aggregate over a partition sorted by ``_o``,
    with ``_dead`` / ``_late`` decided by Spark on the global watermark: late rows become
    LATE side rows here, the rest run through the native window operator, and every window
    leaves at the end with its raw bounds (``_ws``, ``_we``) and creation order (``_wq``), as
    :func:`.ops.window_fn` emits them."""
    step = detach(step)  # type: ignore[assignment]
    schema = arrow_schema(out_schema, SIDE_FIELDS + WINDOW_HIDDEN)
    names = [n for n, _ in out_schema]
    in_names = [n for n, _ in schemas[step.inputs[0].step_id]]
    fallback = window_fn(step, index, schemas, out_schema)

    def fn(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        try:
            from ..native.drivers import reason_fn

            part = NativePartition(step, schemas, creation=True)
        except ImportError as e:
            yield from _reference(fallback, batches, str(e))
            return
        reason = reason_fn(step, MiniCompiled(schemas))  # type: ignore[arg-type]
        side = PartitionOut(schema, names + ["_ws", "_we", "_wq"])
        wins: list[pa.RecordBatch] = []
        late_n = 0
        try:
            part.start()
            for b in batches:
                late = pc.fill_null(b.column("_late"), False)
                if pc.any(late).as_py():
                    gone = b.filter(late)
                    rows = gone.select(in_names).to_pylist()
                    for o, r in zip(gone.column("_o").to_pylist(), rows):
                        side.side(LATE, o, r)
                    late_n += gone.num_rows
                    b = b.filter(pc.invert(late))
                wins.extend(part.push(b, b.column("_o")))
                for kind, o, payload in _dead_rows(part, reason):
                    side.side(kind, o, payload)
                if side.rows:
                    yield side.batch()
            wins.extend(part.finish())
            for kind, o, payload in _dead_rows(part, reason):
                side.side(kind, o, payload)
            if wins:
                yield _windows(part, pa.Table.from_batches(wins), out_schema, schema)
            extra = {"rows_in": late_n, "late": late_n}
            side.side(STATS, [], _stats(part.counters(), NATIVE, extra))
            yield side.batch()
        finally:
            part.close()

    return fn


def _windows(
    part: NativePartition, tbl: pa.Table, out_schema: Schema, schema: pa.Schema
) -> pa.RecordBatch:
    """Every window the partition emitted, with ``_ws``, ``_we`` and ``_wq``: the opening
    row's order key and the window's index (from 1) among the windows that row opened."""
    rb = tbl.combine_chunks().to_batches()[0]
    n = rb.num_rows
    names = [nm for nm, _ in out_schema]
    ws = ticks(rb.column(2 + names.index("window_start")))
    we = ticks(rb.column(2 + names.index("window_end")))
    opened = rb.column(2 + len(out_schema)).to_numpy(zero_copy_only=False).astype(np.int64)
    by = np.lexsort((ws, opened))  # by opening row, then start
    idx = np.empty(n, dtype=np.int64)
    sorted_idx, _ = run_index(opened[by], (-1, 0))
    idx[by] = sorted_idx + 1
    order = extend_order(part.orders.take(opened), idx)
    cols = spark_columns(rb, out_schema) + [
        pa.array([[]] * n, type=pa.list_(pa.int64())),
        pa.array(np.full(n, LIVE, dtype=np.int8)),
        pa.nulls(n, type=pa.binary()),
        pa.array(ws),
        pa.array(we),
        order,
    ]
    return pa.RecordBatch.from_arrays(cols, schema=schema)


__all__ = [
    "GROUP_BY",
    "NATIVE",
    "NATIVE_OPERATORS",
    "NativePartition",
    "Orders",
    "extend_order",
    "native_keyed_fn",
    "native_refusal",
    "native_window_fn",
    "run_index",
]
