"""The executor half of a streaming run on Spark: every step as a stage of one Structured
Streaming query, keyed state in Spark's state store.

Between stages a row is five columns (``STREAM_DDL``):

- ``_f``: the name of the file the row came from (``""`` for a generator), ``_o``: its order
  key within that file (``[row in file]``, or ``[i]`` for generator row ``i``), extended by
  the output's index where a step emits several rows for one input. Within a micro-batch,
  ``(_f, _o)`` is arrival order (files by name, then rows), as a watched folder delivers
  them; across micro-batches the state store carries what came before.
- ``_k``: LIVE for a data row; DEAD / LATE for a side output, STATS for a step's counters,
  SKETCH for a partition's partial sketches. Side rows pass every later stage unchanged and
  reach the sink, which files them (the driver never runs a second job for them).
- ``_b``: the pickled row (a dict: every type exactly as the reference holds it), or for a
  side row the pickled ``(step id, payload)``.
- ``_g``: the pickled key of the next keyed step (``b""`` otherwise), the grouping column of
  ``applyInPandasWithState``.

Stateless steps (``filter``, ``select``, ``with_columns``) run the reference's operators in
``mapInArrow``. A keyed step (``agg``, ``running``, ``top_k``, ``dedup``) is
``groupBy(_g).applyInPandasWithState``: per key and micro-batch the reference operator is
restored from the key's state in the state store (:func:`set_state`), fed the key's new rows
sorted by ``(_f, _o)``, and its state is written back (:func:`get_state`); in a plan with
several keyed steps each is a ``transformWithStateInPandas`` processor instead
(:func:`keyed_processor`: Spark runs one ``applyInPandasWithState`` per query). ``transfer`` and
windowed ``agg`` are one group (their state spans keys: balances of both entities; the
engine's watermark over every key in arrival order), so they close windows exactly where
the reference does. The state store is versioned with the checkpoint: a query restarted
from its checkpoint continues with the state of the last committed micro-batch.
"""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa

from ... import plan as P
from ...files import data_file, with_query
from ...sources import CHUNK, BadRow, read_file
from ...types import Schema
from .ops import DEAD, LIVE, SKETCH, STATS, MiniCompiled, PartitionEnv, detach, run_op

STREAM_DDL = "`_f` string, `_o` array<bigint>, `_k` tinyint, `_b` binary, `_g` binary"
STATE_DDL = "`st` binary"
STREAM_SCHEMA = pa.schema(
    [
        pa.field("_f", pa.string()),
        pa.field("_o", pa.list_(pa.int64())),
        pa.field("_k", pa.int8()),
        pa.field("_b", pa.binary()),
        pa.field("_g", pa.binary()),
    ]
)
STATELESS = (P.Filter, P.Select, P.WithColumns)
KEYED = (P.Aggregate, P.Running, P.TopK, P.Dedup, P.Transfer)


def dumps(x: Any) -> bytes:
    return pickle.dumps(x, protocol=pickle.HIGHEST_PROTOCOL)


# --------------------------------------------------------------------------- group keys


def group_keys(s: P.Step, schema: Schema) -> tuple[str, ...] | None:
    """The columns a keyed step groups by (``()``: one group), or None for other steps."""
    if isinstance(s, P.Aggregate) and s.window is not None:
        return ()  # one watermark over every key, in arrival order
    if isinstance(s, P.Transfer):
        return ()  # a transfer touches two entities' balances
    if isinstance(s, P.Dedup):
        return s.keys or tuple(n for n, _ in schema)
    if isinstance(s, (P.Aggregate, P.Running, P.TopK)):
        return s.keys
    return None


def _canon(v: Any) -> Any:
    """A key part as one value per group: every NaN one value, -0.0 as 0.0 (as the
    reference's ``_key`` groups them)."""
    if isinstance(v, float):
        return "nan" if v != v else (0.0 if v == 0 else v)
    if isinstance(v, list | tuple):
        return tuple(_canon(x) for x in v)
    return v


def group_of(row: dict[str, Any], keys: tuple[str, ...] | None) -> bytes:
    if not keys:
        return b""
    return dumps(tuple(_canon(row[k]) for k in keys))


# --------------------------------------------------------------------------- state


def _renan(x: Any) -> Any:
    """Unpickled state with the reference's one NaN object back in keys and sets (its dicts
    and sets find NaN keys by identity)."""
    from ...stores import NAN_KEY

    if isinstance(x, float) and x != x:
        return NAN_KEY
    if isinstance(x, tuple):
        return tuple(_renan(v) for v in x)
    if isinstance(x, frozenset):
        return frozenset(_renan(v) for v in x)
    if isinstance(x, set):
        return {_renan(v) for v in x}
    return x


def _accs(accs: list[Any]) -> list[tuple[Any, int]]:
    return [(a.v, a.n) for a in accs]


def _restore_accs(spec: Any, saved: list[tuple[Any, int]]) -> list[Any]:
    accs = spec.new()
    for a, (v, n) in zip(accs, saved):
        a.v, a.n = (_renan(v) if a.fn == "count_distinct" else v), n
    return accs


def get_state(op: Any) -> dict[str, Any]:
    """A reference operator's state as plain data: accumulators as ``(value, count)`` (their
    argument functions are rebuilt from the step on restore); a window operator's open
    windows, its heap of closing points (live entries only) and its watermark."""
    from ..reference import AggregateOp, DedupOp, TopKOp, TransferOp, WindowOp

    st: dict[str, Any] = {"seq": op.seq}
    if isinstance(op, WindowOp):
        index: dict[int, int] = {}
        wins: list[dict[str, Any]] = []

        def ref(w: Any) -> int:
            if id(w) not in index:
                index[id(w)] = len(wins)
                wins.append(
                    {
                        "key": w.key,
                        "start": w.start,
                        "last": w.last,
                        "end": w.end,
                        "seq": w.seq,
                        "alive": w.alive,
                        "accs": _accs(w.state),
                    }
                )
            return index[id(w)]

        st["heap"] = [(e, s, q, u, ref(w)) for e, s, q, u, w in op.heap if op._valid(e, s, q, w)]
        if op.w.kind == "session":
            st["open"] = [(k, [ref(w) for w in v]) for k, v in op.open.items()]
        else:
            st["open"] = [(k, ref(w)) for k, w in op.open.items()]
        st.update(wins=wins, nwin=op.nwin, uid=next(op.uid), max_t=op.et.max_t)
    elif isinstance(op, AggregateOp):  # RunningOp too
        st["state"] = [(k, _accs(a)) for k, a in op.state.items()]
    elif isinstance(op, TopKOp):
        st["state"] = list(op.state.items())
    elif isinstance(op, DedupOp):
        st["seen"] = list(op.seen)
    elif isinstance(op, TransferOp):
        st["bal"] = list(op.bal.items())
    return st


def set_state(op: Any, st: dict[str, Any]) -> None:
    """Restore what :func:`get_state` saved into a fresh operator of the same step."""
    import heapq
    import itertools

    from ..reference import AggregateOp, DedupOp, TopKOp, TransferOp, WindowOp, WindowState

    op.seq = st["seq"]
    if isinstance(op, WindowOp):
        wins = []
        for d in st["wins"]:
            w = WindowState(
                _renan(d["key"]), d["start"], d["end"], d["seq"], _restore_accs(op.spec, d["accs"])
            )
            w.last, w.alive = d["last"], d["alive"]
            wins.append(w)
        op.heap = [(e, s, q, u, wins[i]) for e, s, q, u, i in st["heap"]]
        heapq.heapify(op.heap)
        if op.w.kind == "session":
            op.open = {_renan(k): [wins[i] for i in v] for k, v in st["open"]}
        else:
            op.open = {_renan(k): wins[i] for k, i in st["open"]}
        op.nwin, op.uid, op.et.max_t = st["nwin"], itertools.count(st["uid"]), st["max_t"]
    elif isinstance(op, AggregateOp):
        op.state = {_renan(k): _restore_accs(op.spec, a) for k, a in st["state"]}
    elif isinstance(op, TopKOp):
        op.state = {_renan(k): v for k, v in st["state"]}
    elif isinstance(op, DedupOp):
        op.seen = {_renan(k) for k in st["seen"]}
    elif isinstance(op, TransferOp):
        op.bal = {_renan(k): v for k, v in st["bal"]}


# --------------------------------------------------------------------------- rows out


class Out:
    """Rows of the stream schema, buffered and handed out as Arrow batches."""

    def __init__(self) -> None:
        self.cols: list[list[Any]] = [[], [], [], [], []]

    def add(self, f: str, o: list[int], k: int, b: bytes, g: bytes = b"") -> None:
        for c, v in zip(self.cols, (f, o, k, b, g)):
            c.append(v)

    def side(self, f: str, o: list[int], k: int, sid: str, payload: Any) -> None:
        self.add(f, o, k, dumps((sid, payload)))

    def __len__(self) -> int:
        return len(self.cols[0])

    def batch(self) -> pa.RecordBatch:
        cols, self.cols = self.cols, [[], [], [], [], []]
        return pa.RecordBatch.from_arrays(
            [pa.array(c, type=f.type) for c, f in zip(cols, STREAM_SCHEMA)], schema=STREAM_SCHEMA
        )

    def pandas(self) -> Any:
        return self.batch().to_pandas()


def _counts(cnt: Any) -> dict[str, int]:
    return dataclasses.asdict(cnt)  # type: ignore[no-any-return]


def run_row(
    op: Any, env: PartitionEnv, out: Out, f: str, o: list[int], row: dict[str, Any]
) -> list[tuple[list[int], dict[str, Any]]]:
    """One row through one reference operator: its outputs with their order keys (the
    output's index appended where it emits several), its side outputs into ``out``."""
    res = run_op(op, env, row, o)
    for kind, so, payload in env.side:
        out.side(f, so, kind, op.sid, payload)
    env.side.clear()
    if len(res) == 1:
        return [(o, res[0])]
    return [(o + [i], r) for i, r in enumerate(res)]


# --------------------------------------------------------------------------- sources


def file_source_fn(
    spec: P.SourceSpec, schema: Schema, sid: str, next_keys: tuple[str, ...] | None
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """mapInArrow over the file stream's ``path`` rows: each new file read with streamcell's
    reader (bad rows are DEAD side rows, as on the reference), one STATS row per file."""

    def fn(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        out = Out()
        for b in batches:
            for path in b.column(0).to_pylist():
                f = data_file(with_query(path, str(spec.arg("path"))))
                name = f.name
                n = bad = 0
                for item in read_file(spec, schema, f):
                    if isinstance(item, BadRow):
                        out.side(name, [n], DEAD, sid, item)
                        n += 1
                        bad += 1
                        continue
                    for row in item.to_pylist():
                        out.add(name, [n], LIVE, dumps(row), group_of(row, next_keys))
                        n += 1
                    if len(out) >= 4096:
                        yield out.batch()
                stats = {"rows_in": n, "rows_out": n - bad, "filtered": 0, "late": 0, "dead": bad}
                out.side(name, [], STATS, sid, stats)
        yield out.batch()

    return fn


def generator_source_fn(
    spec: P.SourceSpec, sid: str, next_keys: tuple[str, ...] | None
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """mapInArrow over the rate source's row numbers: row ``i`` of the generator."""

    def fn(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import numpy as np

        from streamcell.sources import GENERATORS

        gen = GENERATORS[spec.kind]
        cache: dict[int, pa.RecordBatch] = {}
        out = Out()
        n = 0
        for b in batches:
            ids = b.column(0).to_numpy()
            chunks = ids // CHUNK
            for c in np.unique(chunks):
                sel = ids[chunks == c]
                if int(c) not in cache:
                    cache.clear()
                    cache[int(c)] = gen(spec, int(c), CHUNK)
                rows = cache[int(c)].take(pa.array(sel - int(c) * CHUNK)).to_pylist()
                for i, row in zip(sel.tolist(), rows):
                    out.add("", [i], LIVE, dumps(row), group_of(row, next_keys))
                n += len(sel)
                if len(out) >= 4096:
                    yield out.batch()
        stats = {"rows_in": n, "rows_out": n, "filtered": 0, "late": 0, "dead": 0}
        out.side("", [], STATS, sid, stats)
        yield out.batch()

    return fn


# --------------------------------------------------------------------------- steps


def stateless_fn(
    steps: list[P.Step], schemas: dict[str, Schema], next_keys: tuple[str, ...] | None
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """mapInArrow running consecutive stateless steps (the reference's operators) row by
    row; side rows pass through; one STATS row per step and partition."""
    steps = [detach(s) for s in steps]

    def fn(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from streamcell.backends.reference import make_op

        env = PartitionEnv()
        ops = [make_op(s, MiniCompiled(schemas), env) for s in steps]  # type: ignore[arg-type]
        out = Out()
        for b in batches:
            fs, os_, ks, bs = (b.column(c).to_pylist() for c in ("_f", "_o", "_k", "_b"))
            for f, o, k, blob in zip(fs, os_, ks, bs):
                if k != LIVE:
                    out.add(f, o, k, blob)
                    continue
                rows = [(o, pickle.loads(blob))]
                for op in ops:
                    rows = [x for ro, r in rows for x in run_row(op, env, out, f, ro, r)]
                for ro, r in rows:
                    out.add(f, ro, LIVE, dumps(r), group_of(r, next_keys))
            if len(out) >= 4096:
                yield out.batch()
        for op in ops:
            out.side("", [], STATS, op.sid, _counts(op.cnt))
        yield out.batch()

    return fn


def keyed_state_fn(
    step: P.Step, schemas: dict[str, Schema], next_keys: tuple[str, ...] | None
) -> Callable[[Any, Iterator[Any], Any], Iterator[Any]]:
    """The ``applyInPandasWithState`` function of a keyed step: for one group, the
    reference operator restored from the group's state, fed the group's new rows in arrival
    order, and its state written back to the state store."""
    step = detach(step)

    def fn(key: Any, pdfs: Iterator[Any], state: Any) -> Iterator[Any]:
        from streamcell.backends.reference import make_op

        out = Out()
        live: list[tuple[str, list[int], bytes]] = []
        for pdf in pdfs:  # by position: transformWithStateInPandas names them _0, _1, ...
            cols = [pdf.iloc[:, i] for i in range(4)]  # _f, _o, _k, _b
            for f, o, k, blob in zip(*cols):
                o = [int(x) for x in o]
                if int(k) != LIVE:  # side rows of earlier steps pass through
                    out.add(f, o, int(k), blob)
                else:
                    live.append((f, o, blob))
        if live:
            env = PartitionEnv()
            op = make_op(step, MiniCompiled(schemas), env)  # type: ignore[arg-type]
            if state.exists:
                set_state(op, pickle.loads(state.get[0]))
            live.sort(key=lambda x: (x[0], x[1]))  # the group's rows in arrival order
            for f, o, blob in live:
                for ro, r in run_row(op, env, out, f, o, pickle.loads(blob)):
                    out.add(f, ro, LIVE, dumps(r), group_of(r, next_keys))
            out.side("", [], STATS, op.sid, _counts(op.cnt))
            state.update((dumps(get_state(op)),))
        if len(out):
            yield out.pandas()

    return fn


class _ValueState:
    """A ``transformWithStateInPandas`` value state seen as the ``GroupState`` that
    :func:`keyed_state_fn` uses (``exists``, ``get``, ``update``)."""

    def __init__(self, vs: Any):
        self.vs = vs

    @property
    def exists(self) -> bool:
        return bool(self.vs.exists())

    @property
    def get(self) -> Any:
        return self.vs.get()

    def update(self, v: tuple[bytes]) -> None:
        self.vs.update(v)


def keyed_processor(
    step: P.Step, schemas: dict[str, Schema], next_keys: tuple[str, ...] | None
) -> Any:
    """The same keyed step as a ``StatefulProcessor`` for ``transformWithStateInPandas``
    (Spark 4): one value state per group, the pickled operator state. Spark allows one
    ``applyInPandasWithState`` per query but chains of ``transformWithStateInPandas``, so a
    plan with several keyed steps uses this."""
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor

    fn = keyed_state_fn(step, schemas, next_keys)

    class KeyedProcessor(StatefulProcessor):  # type: ignore[misc]
        def init(self, handle: Any) -> None:
            from pyspark.sql.types import BinaryType, StructField, StructType

            schema = StructType([StructField("st", BinaryType())])
            self.st = handle.getValueState("st", schema)

        def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:
            yield from fn(key, rows, _ValueState(self.st))

        def close(self) -> None:
            pass

    return KeyedProcessor()


def sketch_stage_fn(
    step: P.Sketch, schema: Schema, next_keys: tuple[str, ...] | None
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """mapInArrow of a ``sketch`` stage: rows pass unchanged; the partition's partial
    sketches per key (with the key's first ``(_f, _o)``) leave as one SKETCH side row."""
    step = detach(step)  # type: ignore[assignment]
    types = dict(schema)

    def fn(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from .ops import arrow_schema, sketch_column, sketch_for_call

        arrow = arrow_schema(schema)
        out = Out()
        first: dict[tuple[Any, ...], tuple[str, list[int]]] = {}
        values: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
        n = 0
        for b in batches:
            fs, os_, ks, bs = (b.column(c).to_pylist() for c in ("_f", "_o", "_k", "_b"))
            for f, o, k, blob in zip(fs, os_, ks, bs):
                if k != LIVE:
                    out.add(f, o, k, blob)
                    continue
                n += 1
                row = pickle.loads(blob)
                key = tuple(row[c] for c in step.keys)
                if key not in first or (f, o) < first[key]:
                    first[key] = (f, o)
                values.setdefault(key, []).append(row)
                out.add(f, o, LIVE, blob, group_of(row, next_keys))
            if len(out) >= 4096:
                yield out.batch()
        payload = {}
        for key, rows in values.items():
            parts = []
            for _, call in step.sketches:
                sk = sketch_for_call(call, types[call.column].name == "str")
                col = pa.array([r[call.column] for r in rows], type=arrow.field(call.column).type)
                sk.update_batch(sketch_column(call, col))
                parts.append(bytes(sk.to_bytes()))
            payload[key] = (first[key], parts)
        out.side("", [], SKETCH, step.step_id, payload)
        stats = {"rows_in": n, "rows_out": n, "filtered": 0, "late": 0, "dead": 0}
        out.side("", [], STATS, step.step_id, stats)
        yield out.batch()

    return fn


def streaming_refusal(s: P.Step) -> str | None:
    """Why ``s`` cannot run on a streaming source on Spark, or None."""
    if isinstance(s, (P.Source, P.Sink, P.Sketch, *STATELESS, *KEYED)):
        return None
    return f"{type(s).__name__.lower()} on a streaming source"
