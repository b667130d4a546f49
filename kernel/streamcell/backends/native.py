"""The native backend: the plan lowered to C operators on the ordered multicore runtime.

Lowering (``lower``) turns each step of a linear plan into native operators:

- ``filter`` -> a filter with the predicate as a vectorized expression;
- ``select`` / ``with_columns`` -> a project;
- ``agg`` / ``running`` (unwindowed), ``top_k``, ``dedup`` -> a keyed operator, run
  partitioned on the hybrid queue between a split and an order-restoring merge; aggregate
  arguments that are expressions are computed by a project in front (counted as the same
  step);
- windowed ``agg`` -> one stateful window operator (the watermark is global);
- the sink is the driver: it drains ordered output batches into the run's stores.

The driver (``execute``) runs on the run's thread: it reads the source as Arrow record
batches, pushes them in ``batch_size`` slices (copied into runtime batches without the GIL;
a full pipeline makes it wait, never drop), and drains outputs, dead letters and late rows.
Dead letters and late rows are put in the reference's order (source row, then step) and their
reasons are re-derived with the reference's expression evaluator, so every output equals
the reference's exactly.
"""

from __future__ import annotations

import datetime as _dt
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from .. import plan as P
from ..compiler import Compiled, _Typer
from ..errors import NotSupportedError
from ..expr import IR, Binary, Call, Col, Lit, Unary, When
from ..options import RunOptions
from ..sources import BadRow, locate_serial, merged_serials, row_batches
from ..types import DATE, INT, NULL, DType, Schema, polars_schema
from ..udf import UDF_PREFIX
from ..udf import lookup as udf_lookup
from .evaluate import RowError, compile_row_expr, epoch_days, epoch_us
from .pacing import TokenBucket

NAME = "native"

LT = {"null": 0, "int": 1, "float": 2, "bool": 3, "str": 4, "datetime": 5, "date": 6}
_HIDDEN = b"\x01\x01"  # seq, pos

_E_NAMES = [
    "col",
    "lit",
    "neg",
    "not",
    "add",
    "sub",
    "mul",
    "div",
    "floordiv",
    "mod",
    "pow",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "and",
    "or",
    "when",
    "is_null",
    "is_not_null",
    "fill_null",
    "cast",
    "is_in",
    "abs",
    "round",
    "str.contains",
    "str.starts_with",
    "str.ends_with",
    "str.to_lowercase",
    "str.to_uppercase",
    "str.len_chars",
    "dt.year",
    "dt.month",
    "dt.day",
    "dt.hour",
    "dt.minute",
    "dt.second",
    "dt.weekday",
    "dt.date",
    "dt.epoch_us",
    "udf",
]
E = {n: i + 1 for i, n in enumerate(_E_NAMES)}
_BINARY = {
    "+": "add",
    "-": "sub",
    "*": "mul",
    "/": "div",
    "//": "floordiv",
    "%": "mod",
    "**": "pow",
    "==": "eq",
    "!=": "ne",
    "<": "lt",
    "<=": "le",
    ">": "gt",
    ">=": "ge",
    "and": "and",
    "or": "or",
}
AGG = {
    "count": 1,
    "sum": 2,
    "mean": 3,
    "min": 4,
    "max": 5,
    "first": 6,
    "last": 7,
    "count_distinct": 8,
}
OUT_INPUT, OUT_AGG, OUT_WSTART, OUT_WEND, OUT_RANK = 1, 2, 3, 4, 5
WINDOW_KIND = {"tumbling": 1, "sliding": 2, "session": 3}
SKETCH_KIND = {"theta": 1, "hll": 2, "kll": 3, "frequent": 4}  # exec/ops_sketch.h
# keyed operators run in PARTITIONS_PER_WORKER x workers partitions: enough for every worker
# to find a partition to serve, few enough that each sub-batch stays large
PARTITIONS_PER_WORKER = 2
SPEC_MAX_HORIZON = 256  # the adaptive predictor's bound (exec/speculate.h)
MAX_VERTICES = 64  # exec/dag.h SC_DAG_MAX_VERTICES
PHASES = 16  # phases in flight at once on the DAG runtime
CHUNK = 8  # phases the DAG driver reads and pushes per call (it takes outputs between)
PUSH_ROWS = 65_536  # rows per push call (stop / pause / drain are checked between)
OUT_ROWS = 65_536  # rows per chunk handed to the sink
FLUSH_S = 0.002  # a throttled source pushes what is due at least this often
DAG_PHASE_ROUNDS = 1024
PUBLISH_NS = 100_000_000  # while rows arrive, a publishing aggregate publishes this often


LT_LIST = 16  # list[T] is LT_LIST + lt(T) (lists of lists too): encoded values (lists.h)


def _lt(t: DType) -> int:
    if t.name == "list":
        assert t.inner is not None
        return LT_LIST + _lt(t.inner)
    return LT[t.name]


def _lts(schema: Schema) -> bytes:
    return _HIDDEN + bytes(_lt(t) for _, t in schema)


def _no_lists(step: P.Step, what: str, types: list[DType]) -> None:
    if any(t.name == "list" for t in types):
        raise NotSupportedError(step.step_id, NAME, f"{what} over list columns is not native yet")


# --------------------------------------------------------------------------- checking


def _check_types(c: Compiled) -> None:
    for s in c.plan.steps:
        for _, t in c.schemas[s.step_id]:
            if _lt(t) > 255:  # a type is one byte: depth * 16 + leaf
                raise NotSupportedError(
                    s.step_id, NAME, f"lists nested deeper than 15 levels ({t})"
                )


@dataclass
class Vertex:
    """A vertex of the DAG runtime (exec/dag.h): a linear run of plan steps."""

    name: str
    steps: list[P.Step]
    inputs: list[int]  # vertex of each input port (merge vertices: one per plan input)
    sink: P.Sink | None = None
    source: P.Source | None = None


def _vertices(c: Compiled) -> tuple[list[Vertex], dict[str, int]]:
    """Cut the plan into vertices (a new vertex at each source, multi-input step and fan-out
    branch), numbered as seed 000 requires: topologically, sorted by the index of their
    last predecessor (so the vertices whose inputs all lie below x form a prefix)."""
    steps = c.plan.steps
    consumers = c.plan.consumers()
    verts: list[Vertex] = []
    of: dict[str, int] = {}
    for s in steps:
        if isinstance(s, P.Source):
            verts.append(Vertex(s.step_id, [], [], source=s))
            of[s.step_id] = len(verts) - 1
            continue
        ins = [of[i.step_id] for i in s.inputs]
        if len(s.inputs) == 1 and len(consumers[s.inputs[0].step_id]) == 1:
            v = ins[0]
        else:
            verts.append(Vertex(s.step_id, [], ins))
            v = len(verts) - 1
        of[s.step_id] = v
        if isinstance(s, P.Sink):
            verts[v].sink = s
        else:
            verts[v].steps.append(s)
    # seed 000 numbering: repeatedly take, among the vertices whose inputs are numbered,
    # the one whose last input was numbered earliest (sources first)
    new: dict[int, int] = {}
    pending = set(range(len(verts)))
    while pending:
        ready = [
            (max((new[i] + 1 for i in verts[v].inputs), default=0), v)
            for v in pending
            if all(i in new for i in verts[v].inputs)
        ]
        _, v = min(ready)
        new[v] = len(new)
        pending.remove(v)
    order = sorted(range(len(verts)), key=lambda v: new[v])
    out = []
    for v in order:
        x = verts[v]
        out.append(Vertex(x.name, x.steps, [new[i] for i in x.inputs], x.sink, x.source))
    return out, {sid: new[v] for sid, v in of.items()}


def _check_graph(c: Compiled) -> None:
    verts, _ = _vertices(c)
    if len(verts) > MAX_VERTICES:
        raise NotSupportedError(
            c.plan.steps[-1].step_id,
            NAME,
            f"the plan needs {len(verts)} vertices; the DAG runtime takes {MAX_VERTICES}",
        )


class NativeBackend:
    name = NAME

    def check(self, c: Compiled, options: RunOptions) -> None:
        _check_types(c)
        if not c.plan.is_chain():
            _check_graph(c)
        for s in c.plan.steps:
            if isinstance(s, P.Sink) and s.target not in ("table", "parquet", "callback", "none"):
                raise NotSupportedError(s.step_id, NAME, f"sink {s.target}")
        lower(c, options)  # expression support is checked by lowering
        if options.reorder == "none":
            for s in c.plan.steps:
                if isinstance(
                    s,
                    (
                        P.Aggregate,
                        P.Running,
                        P.TopK,
                        P.Dedup,
                        P.Transfer,
                        P.Sketch,
                        P.Speculate,
                        P.Apply,
                    ),
                ):
                    raise NotSupportedError(
                        s.step_id,
                        NAME,
                        "reorder='none' (the ordering-cost ablation) takes stateless plans only",
                    )

    def execute(self, c: Compiled, env: Any, options: RunOptions) -> bool:
        if c.plan.is_chain():
            return Driver(c, env, options).run()
        return DagDriver(c, env, options).run()


# --------------------------------------------------------------------------- lowering


def _elem(v: Any, inner: DType) -> Any:
    """A list element as a value of the element type ``inner`` (a nested list: its encoding),
    or _NO when no value of that type equals it (Python equality: 1 == 1.0 == True)."""
    if v is None:
        return None
    if inner.name == "list":
        assert inner.inner is not None
        if not isinstance(v, (list, tuple)):
            return _NO
        enc = encode_list(v, inner.inner)
        return _NO if enc is None else enc
    return _scalar_elem(v, inner.name)


def _scalar_elem(v: Any, inner: str) -> Any:
    if inner in ("int", "float", "bool"):
        if not isinstance(v, (bool, int, float)):
            return _NO
        if inner == "float":
            return float(v)
        if isinstance(v, float) and not (math.isfinite(v) and v.is_integer()):
            return _NO
        if inner == "int":
            return int(v) if -(2**63) <= v < 2**63 else _NO
        return bool(v) if v in (0, 1) else _NO
    if inner == "str":
        return v if isinstance(v, str) else _NO
    if inner == "datetime":
        return epoch_us(v) if isinstance(v, _dt.datetime) else _NO
    if inner == "date":
        ok = isinstance(v, _dt.date) and not isinstance(v, _dt.datetime)
        return epoch_days(v) if ok else _NO
    return _NO  # list[null]: only null elements


_NO = object()


def encode_list(values: Any, inner: DType) -> bytes | None:
    """A list literal in the runtime's list encoding (lists.h) with elements of type ``inner``,
    or None when an element has no value of that type (the list equals no such list)."""
    import struct

    out = bytearray()
    for v in values:
        x = _elem(v, inner)
        if x is _NO:
            return None
        if x is None:
            out.append(0)
            continue
        out.append(1)
        if inner.name == "list":
            out += struct.pack("<i", len(x)) + x
        elif inner.name == "float":
            out += struct.pack("<d", x)
        elif inner.name == "bool":
            out.append(int(x))
        elif inner.name == "str":
            b = x.encode()
            out += struct.pack("<i", len(b)) + b
        else:
            out += struct.pack("<q", x)
    return bytes(out)


def _lit_node(v: Any, t: DType) -> dict[str, Any]:
    n: dict[str, Any] = {"op": E["lit"], "lt": _lt(t)}
    if v is None:
        n["is_null"] = True
    elif t.name == "list":
        assert t.inner is not None
        enc = encode_list(v, t.inner)
        if enc is None:
            raise ValueError(f"list literal {v!r} with elements that are not {t.inner}")
        n["s"] = enc
    elif t.name == "bool":
        n["i"] = int(v)
    elif t.name == "int":
        n["i"] = v
    elif t.name == "float":
        n["f"] = float(v)
    elif t.name == "str":
        n["s"] = v.encode()
    elif t.name == "datetime":
        n["i"] = epoch_us(v)
    elif t.name == "date":
        n["i"] = epoch_days(v)
    else:
        raise ValueError(f"literal of type {t}")
    return n


def _in_list(values: tuple[Any, ...], t: DType) -> tuple[str, list[Any]]:
    """The literal list of ``is_in`` as values of the subject's type (others can never match)."""
    out: list[Any] = []
    if t.name in ("int", "bool"):
        for v in values:
            if isinstance(v, (bool, int)) or isinstance(v, float) and v.is_integer():
                out.append(int(v))
        return "i", out
    if t.name == "float":
        return "f", [float(v) for v in values if isinstance(v, (int, float)) and v is not None]
    if t.name == "str":
        return "s", [v.encode() for v in values if isinstance(v, str)]
    if t.name == "datetime":
        return "i", [epoch_us(v) for v in values if isinstance(v, _dt.datetime)]
    if t.name == "date":
        return "i", [
            epoch_days(v)
            for v in values
            if isinstance(v, _dt.date) and not isinstance(v, _dt.datetime)
        ]
    return "i", []


def lower_expr(e: IR, schema: Schema, step: P.Step) -> list[dict[str, Any]]:
    """An expression as post-order sc_enode dicts over ``schema`` (user columns from 2)."""
    typer = _Typer(schema, step)
    index = {n: i + 2 for i, (n, _) in enumerate(schema)}
    nodes: list[dict[str, Any]] = []

    def add(n: dict[str, Any]) -> int:
        nodes.append(n)
        return len(nodes) - 1

    def go(e: IR) -> int:  # noqa: C901 - one dispatch over the IR
        t = typer.type(e)
        lt = _lt(t)
        if isinstance(e, Col):
            return add({"op": E["col"], "lt": lt, "a": index[e.name]})
        if isinstance(e, Lit):
            try:
                return add(_lit_node(e.value, t))
            except ValueError as ex:
                raise NotSupportedError(step.step_id, NAME, str(ex)) from None
        if isinstance(e, Unary):
            return add({"op": E[e.op], "lt": lt, "a": go(e.operand)})
        if isinstance(e, Binary):
            return add({"op": E[_BINARY[e.op]], "lt": lt, "a": go(e.left), "b": go(e.right)})
        if isinstance(e, When):
            other = go(e.otherwise)
            for cond, val in reversed(e.branches):
                other = add({"op": E["when"], "lt": lt, "a": go(cond), "b": go(val), "c": other})
            return other
        if isinstance(e, Call):
            fn = e.fn
            if fn == "cast":
                return add({"op": E["cast"], "lt": lt, "a": go(e.args[0])})
            if fn == "is_in":
                lit = e.args[1]
                assert isinstance(lit, Lit)
                st = typer.type(e.args[0])
                if st.name == "list":  # equal to one of the literal's lists
                    assert st.inner is not None
                    encoded = [
                        encode_list(v, st.inner) for v in lit.value if isinstance(v, (list, tuple))
                    ]
                    kind, values = "s", [b for b in encoded if b is not None]
                else:
                    kind, values = _in_list(tuple(lit.value), st)
                return add(
                    {
                        "op": E["is_in"],
                        "lt": lt,
                        "a": go(e.args[0]),
                        "list": values,
                        "list_kind": kind,
                        "list_has_null": None in lit.value,
                    }
                )
            if fn.startswith(UDF_PREFIX):
                spec = udf_lookup(fn[len(UDF_PREFIX) :])
                if spec is None:
                    raise NotSupportedError(step.step_id, NAME, f"unregistered function {fn}")
                if spec.is_python:
                    raise NotSupportedError(
                        step.step_id,
                        NAME,
                        f"Python function {spec.name} (the slow path; write it with "
                        "sc.cython_udf to run natively)",
                    )
                kids = [go(a) for a in e.args]
                return add(
                    {
                        "op": E["udf"],
                        "lt": lt,
                        "a": kids[0],
                        "i": spec.kernel,
                        "list": kids,
                        "list_kind": "i",
                        "s": "".join(k for _, k in spec.params).encode(),
                    }
                )
            if fn not in E:
                raise NotSupportedError(step.step_id, NAME, f"function {fn}")
            args = [go(a) for a in e.args]
            n = {"op": E[fn], "lt": lt, "a": args[0]}
            if len(args) > 1:
                n["b"] = args[1]
            return add(n)
        raise NotSupportedError(step.step_id, NAME, f"expression {e!r}")

    go(e)
    return nodes


@dataclass
class Lowered:
    """The operator chain of a plan, ready to build into a Program."""

    nsteps: int
    source: P.Source
    sink: P.Sink
    in_schema: Schema
    ops: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    step_index: dict[str, int] = field(default_factory=dict)
    taps: dict[str, Any] = field(default_factory=dict)  # sketch step id -> _runtime.SketchTap
    entities: dict[str, int] = field(default_factory=dict)  # transfer step id -> entity table
    speculators: dict[str, int] = field(default_factory=dict)  # speculate step id -> operator
    vertices: list[Vertex] | None = None  # the DAG runtime's vertices (None: a chain)
    publishing: bool = False  # the sink gets an aggregate's changed keys, not its changelog
    partitions: int = 2  # of each keyed operator


def _agg_args(
    s: P.Aggregate | P.Running, schema: Schema, idx: int, low: Lowered, cap: int
) -> tuple[Schema, list[tuple[int, int, int]], bool]:
    """Aggregate specs (fn, arg column, result lt); puts a project in front when an argument
    is an expression. Returns the keyed operator's input schema and whether it counts rows_in."""
    typer = _Typer(schema, s)
    extra: list[tuple[str, IR]] = []
    specs: list[tuple[int, int, int]] = []
    names = {n: i + 2 for i, (n, _) in enumerate(schema)}
    for j, (_, a) in enumerate(s.aggs):
        rt = _lt(typer.agg(a))
        if a.arg is None:
            specs.append((AGG[a.fn], -1, rt))
        elif isinstance(a.arg, Col):
            specs.append((AGG[a.fn], names[a.arg.name], rt))
        else:
            extra.append((f"\x00arg{j}", a.arg))
            specs.append((AGG[a.fn], 2 + len(schema) + len(extra) - 1, rt))
    if not extra:
        return schema, specs, True
    out = tuple(schema) + tuple((n, typer.type(e)) for n, e in extra)
    src = list(range(2, 2 + len(schema))) + [-(k + 1) for k in range(len(extra))]
    low.ops.append(
        (
            "project",
            dict(
                step=idx,
                cin=True,
                cout=False,
                in_lts=_lts(schema),
                out_lts=_lts(out),
                src=[0, 1] + src,
                exprs=[lower_expr(e, schema, s) for _, e in extra],
                capacity=cap,
            ),
        )
    )
    return out, specs, False


def lower(c: Compiled, options: RunOptions) -> Lowered:  # noqa: C901 - one dispatch per step
    steps = list(c.plan.steps)
    cap = options.batch_size
    source = next(s for s in steps if isinstance(s, P.Source))
    sink = next(s for s in steps if isinstance(s, P.Sink))
    low = Lowered(len(steps), source, sink, c.schemas[source.step_id])
    low.partitions = PARTITIONS_PER_WORKER * max(1, options.workers)
    low.step_index = {s.step_id: i for i, s in enumerate(steps)}
    vertex_of: dict[str, int] = {}
    if not c.plan.is_chain():
        low.vertices, vertex_of = _vertices(c)
    for idx, s in enumerate(steps):
        if isinstance(s, (P.Source, P.Sink, P.Union)):
            continue
        first = len(low.ops)
        _lower_step(s, idx, c, options, low, cap)
        for _, a in low.ops[first:]:
            a["vertex"] = vertex_of.get(s.step_id, 0)
    if not low.ops and low.vertices is None:  # source -> sink: one pass-through
        sch = low.in_schema
        low.ops.append(
            (
                "project",
                dict(
                    step=low.step_index[sink.step_id],
                    cin=False,
                    cout=False,
                    in_lts=_lts(sch),
                    out_lts=_lts(sch),
                    src=list(range(2 + len(sch))),
                    exprs=[],
                    capacity=cap,
                ),
            )
        )
    return low


def _publishes(s: P.Aggregate, c: Compiled) -> bool:
    """Whether an aggregate may publish its changed keys instead of its per-row changelog:
    its one consumer is a table that keeps the latest row per key (an upsert table on the
    aggregate's own keys), in a chain, so no one else sees the changelog. The source must never
    wait for data (memory, files, unthrottled generators): a publish rides on arriving rows."""
    if not s.keys or not c.plan.is_chain():
        return False
    src = next(x for x in c.plan.steps if isinstance(x, P.Source))
    if src.rate is not None or not getattr(c.readers.get(src.step_id), "never_waits", False):
        return False
    (sink,) = c.plan.consumers()[s.step_id] or (None,)
    return (
        isinstance(sink, P.Sink)
        and sink.target == "table"
        and c.upsert_keys.get(sink.step_id) == tuple(s.keys)
    )


def _lower_step(  # noqa: C901 - one dispatch per step kind
    s: P.Step, idx: int, c: Compiled, options: RunOptions, low: Lowered, cap: int
) -> None:
    if isinstance(s, (P.Join, P.Correlate)):  # one operator over the tagged layout
        low.ops.append(lower_fanin(s, c, idx, cap))
        return
    schema = c.schemas[s.inputs[0].step_id]
    out = c.schemas[s.step_id]
    pos = {n: i + 2 for i, (n, _) in enumerate(schema)}
    if isinstance(s, P.Filter):
        low.ops.append(
            (
                "filter",
                dict(
                    step=idx,
                    cin=True,
                    cout=True,
                    lts=_lts(schema),
                    pred=lower_expr(s.predicate, schema, s),
                    capacity=cap,
                ),
            )
        )
    elif isinstance(s, (P.Select, P.WithColumns)):
        # a plain column reference is passed through (moved or copied), not evaluated
        passed = {n: e.name for n, e in s.exprs if isinstance(e, Col) and e.name in pos}
        computed = {n: k for k, n in enumerate(n for n, _ in s.exprs if n not in passed)}
        src = [0, 1]
        for n, _ in out:
            src.append(-(computed[n] + 1) if n in computed else pos[passed.get(n, n)])
        low.ops.append(
            (
                "project",
                dict(
                    step=idx,
                    cin=True,
                    cout=True,
                    in_lts=_lts(schema),
                    out_lts=_lts(out),
                    src=src,
                    exprs=[lower_expr(e, schema, s) for n, e in s.exprs if n in computed],
                    capacity=cap,
                ),
            )
        )
    elif isinstance(s, P.Explode):
        low.ops.append(
            (
                "explode",
                dict(
                    step=idx,
                    cin=True,
                    cout=True,
                    in_lts=_lts(schema),
                    out_lts=_lts(out),
                    cols=[pos[n] for n in s.columns],
                    # the reference's dead-letter reason, word for word
                    reason=(
                        f"explode: lists of different lengths in {', '.join(s.columns)}"
                    ).encode(),
                    capacity=cap,
                ),
            )
        )
    elif isinstance(s, (P.Aggregate, P.Running)):
        kin, specs, cin = _agg_args(s, schema, idx, low, cap)
        keys = [pos[k] for k in s.keys]
        outs: list[tuple[int, int]]
        if isinstance(s, P.Running):
            outs = [(OUT_INPUT, pos[n]) for n, _ in schema]
        else:
            outs = [(OUT_INPUT, pos[k]) for k in s.keys]
        w = s.window if isinstance(s, P.Aggregate) else None
        if w is not None:
            outs += [(OUT_WSTART, 0), (OUT_WEND, 0)]
        outs += [(OUT_AGG, j) for j in range(len(specs))]
        agg = dict(
            step=idx,
            cin=cin,
            cout=True,
            in_lts=_lts(kin),
            out_lts=_lts(out),
            keys=keys,
            aggs=specs,
            outs=outs,
            capacity=cap,
        )
        if w is None:
            publish = isinstance(s, P.Aggregate) and _publishes(s, c)
            low.publishing = low.publishing or publish
            low.ops.append(("keyed", dict(agg, kind="aggregate", publish=publish)))
        else:
            size = P.parse_duration(w.size)
            window = dict(
                kind=WINDOW_KIND[w.kind],
                time_col=pos[w.time],
                size=size,
                every=P.parse_duration(w.every) if w.every is not None else size,
                lateness=P.parse_duration(w.lateness),
            )
            low.ops.append(("window", dict(agg, **window)))
    elif isinstance(s, P.TopK):
        _no_lists(s, "top_k ordering", [dict(schema)[s.by]])  # the compiler refuses it
        low.ops.append(
            (
                "keyed",
                dict(
                    kind="topk",
                    step=idx,
                    cin=True,
                    cout=True,
                    in_lts=_lts(schema),
                    out_lts=_lts(out),
                    keys=[pos[k] for k in s.keys],
                    by=pos[s.by],
                    k=s.k,
                    descending=s.descending,
                    outs=[(OUT_INPUT, pos[n]) for n, _ in schema] + [(OUT_RANK, 0)],
                    capacity=cap,
                ),
            )
        )
    elif isinstance(s, P.Dedup):
        dkeys = s.keys or tuple(n for n, _ in schema)
        low.ops.append(
            (
                "keyed",
                dict(
                    kind="dedup",
                    step=idx,
                    cin=True,
                    cout=True,
                    in_lts=_lts(schema),
                    out_lts=_lts(out),
                    keys=[pos[k] for k in dkeys],
                    capacity=cap,
                ),
            )
        )
    elif isinstance(s, P.Transfer):
        is_float = dict(out)[s.balance_columns[0]].name == "float"
        mid = tuple(schema) + tuple((f"\x00t{i}", INT) for i in range(5))
        low.ops.append(
            (
                "transfer",
                dict(
                    step=idx,
                    in_lts=_lts(schema),
                    mid_lts=_lts(mid),
                    out_lts=_lts(out),
                    keys=[pos[k] for k in s.keys],
                    amount=pos[s.amount],
                    is_float=is_float,
                    initial_f=float(s.initial),
                    initial_i=int(s.initial) if not is_float else 0,
                    overdraft=s.overdraft,
                    serial=options.entity_order == "serial",
                    # the reference's dead-letter reasons, word for word
                    reasons=[
                        f"transfer: {s.keys[0]} is null".encode(),
                        f"transfer: {s.keys[1]} is null".encode(),
                        f"transfer: {s.amount} is null".encode(),
                        b"transfer: amount is NaN",
                        b"transfer: amount is negative",
                    ],
                    rejected=f"transfer rejected: {s.keys[0]} balance below amount".encode(),
                    sid=s.step_id,
                    capacity=cap,
                ),
            )
        )
    elif isinstance(s, P.Speculate):
        from ..compiler import speculate_function

        spec, cols = speculate_function(s)
        low.ops.append(
            (
                "speculate",
                dict(
                    step=idx,
                    in_lts=_lts(schema),
                    out_lts=_lts(out),
                    kernel=spec.kernel,
                    args=[pos[a] for a in cols],
                    kinds="".join(k for _, k in spec.params).encode(),
                    workers=options.workers,
                    horizon=0 if s.horizon == "adaptive" else int(s.horizon),
                    max_horizon=SPEC_MAX_HORIZON,
                    sid=s.step_id,
                    capacity=cap,
                ),
            )
        )
    elif isinstance(s, P.Apply):
        from ..compiler import apply_function

        fspec, fcols = apply_function(s)
        low.ops.append(
            (
                "step",
                dict(
                    step=idx,
                    in_lts=_lts(schema),
                    out_lts=_lts(out),
                    kernel=fspec.kernel,
                    keys=[pos[k] for k in s.keys],
                    args=[pos[a] for a in fcols],
                    kinds="".join(k for _, k in fspec.params).encode(),
                    ret=fspec.ret.encode(),
                    state_size=fspec.state_size,
                    capacity=cap,
                ),
            )
        )
    elif isinstance(s, P.Sketch):
        low.ops.append(
            (
                "sketch",
                dict(
                    step=idx,
                    cin=True,
                    cout=True,
                    lts=_lts(schema),
                    keys=[pos[k] for k in s.keys],
                    specs=[(SKETCH_KIND[c.fn], pos[c.column], c.param) for _, c in s.sketches],
                    sid=s.step_id,
                    capacity=cap,
                ),
            )
        )
    else:
        raise NotSupportedError(s.step_id, NAME, type(s).__name__)


# ------------------------------------------------------------------- multi-input steps

PORT_COLUMN = "\x00port"
CORR_FN = {"count": 1, "sum": 2, "mean": 3, "std": 4, "min": 5, "max": 6, "last": 7}
CORR_INPUT, CORR_AGG = 1, 2  # exec/ops_correlate.h sc_corr_out_kind


def tagged_name(port: int, name: str) -> str:
    """The name of input ``port``'s column ``name`` in the tagged layout: unique within
    it (no NUL byte: Polars cuts column names there)."""
    return f"{port}.{name}"


def tagged_schema(s: P.Step, c: Compiled) -> Schema:
    """The tagged layout a multi-input native operator reads (exec/fanin.h): the port column
    (int, never null: which input the row came from), then every input's columns in
    ``s.inputs`` order, renamed with :func:`tagged_name` (on a row from port i, the other
    ports' columns are null)."""
    cols: list[tuple[str, DType]] = [(PORT_COLUMN, INT)]
    for port, i in enumerate(s.inputs):
        cols += [(tagged_name(port, n), t) for n, t in c.schemas[i.step_id]]
    return tuple(cols)


def untag_row(s: P.Step, c: Compiled, row: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """(port, the input's own row) of a tagged row (e.g. a dead or late row of the step)."""
    port = row[PORT_COLUMN]
    own = c.schemas[s.inputs[port].step_id]
    return port, {n: row[tagged_name(port, n)] for n, _ in own}


def lower_fanin(
    s: P.Join | P.Correlate, c: Compiled, idx: int, cap: int
) -> tuple[str, dict[str, Any]]:
    """The native operator of a join / correlate step reading the tagged layout of its
    inputs (:func:`tagged_schema`): its kind ("join" / "correlate") and the keyword
    arguments of ``Program.add_join`` / ``Program.add_correlate``. ``idx`` is the step's
    counter index, ``cap`` the output batch capacity."""
    tagged = tagged_schema(s, c)
    where = {n: i + 2 for i, (n, _) in enumerate(tagged)}
    schemas = [c.schemas[i.step_id] for i in s.inputs]

    def col(port: int, name: str) -> int:
        return where[tagged_name(port, name)]

    for sch in schemas[1:]:
        for k in s.on:
            if dict(sch)[k] != dict(schemas[0])[k]:
                raise NotSupportedError(
                    s.step_id, NAME, f"key {k!r} has different types on the inputs"
                )
    widths = [len(sch) for sch in schemas]
    common = dict(
        step=idx,
        cin=True,
        cout=True,
        in_lts=_lts(tagged),
        out_lts=_lts(c.schemas[s.step_id]),
        widths=widths,
        time_cols=[col(p, s.time) for p in range(len(schemas))],
        lateness=P.parse_duration(s.lateness),
        # the reference's dead-letter reason, word for word
        reason=f"null event time in column {s.time!r}".encode(),
        capacity=cap,
    )
    if isinstance(s, P.Join):
        outs = [col(0, n) for n, _ in schemas[0]]
        outs += [col(1, n) for n, _ in schemas[1] if n not in s.on]
        return "join", dict(
            common,
            left_keys=[col(0, k) for k in s.on],
            right_keys=[col(1, k) for k in s.on],
            within=P.parse_duration(s.within),
            outs=outs,
        )
    aggs = [
        (CORR_FN[a.fn], a.port, -1 if a.column is None else col(a.port, a.column))
        for _, a in s.aggs
    ]
    outs2 = [(CORR_INPUT, j) for j in range(len(s.on) + 1)]
    outs2 += [(CORR_AGG, j) for j in range(len(aggs))]
    return "correlate", dict(
        common,
        keys=[[col(p, k) for k in s.on] for p in range(len(schemas))],
        over=P.parse_duration(s.over),
        aggs=aggs,
        outs=outs2,
    )


def build(low: Lowered, c: Compiled) -> Any:
    """A Program (not started) for a lowered plan."""
    from .. import _runtime as R

    dag = low.vertices is not None
    if dag:
        prog = _dag_program(low, c)
    else:
        prog = R.Program(low.nsteps, 64)
        prog.set_input(_lts(low.in_schema))
    parts = 1 if dag else low.partitions  # a DAG vertex runs its phases in order
    for kind, a in low.ops:
        if dag:
            prog.vertex = a["vertex"]
        if kind == "filter":
            prog.add_filter(a["step"], a["cin"], a["cout"], a["lts"], a["pred"], a["capacity"])
        elif kind == "project":
            prog.add_project(
                a["step"],
                a["cin"],
                a["cout"],
                a["in_lts"],
                a["out_lts"],
                a["src"],
                a["exprs"],
                a["capacity"],
            )
        elif kind == "keyed":
            prog.add_keyed(
                a["kind"],
                a["step"],
                a["cin"],
                a["cout"],
                a["in_lts"],
                a["out_lts"],
                a["keys"],
                parts,
                a["capacity"],
                aggs=a.get("aggs"),
                outs=a.get("outs"),
                by=a.get("by", -1),
                k=a.get("k", 0),
                descending=a.get("descending", False),
                publish_ns=PUBLISH_NS if a.get("publish") else 0,
            )
        elif kind == "window":
            prog.add_window(
                a["step"],
                a["cin"],
                a["cout"],
                a["in_lts"],
                a["out_lts"],
                a["keys"],
                a["aggs"],
                a["outs"],
                a["kind"],
                a["time_col"],
                a["size"],
                a["every"],
                a["lateness"],
                a["capacity"],
            )
        elif kind == "transfer":
            low.entities[a["sid"]] = prog.add_transfer(
                a["step"],
                a["in_lts"],
                a["mid_lts"],
                a["out_lts"],
                a["keys"],
                a["amount"],
                a["is_float"],
                a["initial_f"],
                a["initial_i"],
                a["overdraft"],
                a["serial"],
                a["reasons"],
                a["rejected"],
                a["capacity"],
            )
        elif kind == "speculate":
            low.speculators[a["sid"]] = prog.add_speculate(
                a["step"],
                a["in_lts"],
                a["out_lts"],
                a["kernel"],
                a["args"],
                a["kinds"],
                a["workers"],
                a["horizon"],
                a["max_horizon"],
                a["capacity"],
            )
        elif kind == "step":
            prog.add_step(
                a["step"],
                a["in_lts"],
                a["out_lts"],
                a["kernel"],
                a["keys"],
                a["args"],
                a["kinds"],
                a["ret"],
                a["state_size"],
                parts,
                a["capacity"],
            )
        elif kind == "sketch":
            low.taps[a["sid"]] = prog.add_sketch(
                a["step"],
                a["cin"],
                a["cout"],
                a["lts"],
                a["keys"],
                a["specs"],
                parts,
                a["capacity"],
            )
        elif kind in ("join", "correlate"):  # a ("join" | "correlate", kwargs) of lower_fanin
            getattr(prog, f"add_{kind}")(**{k: v for k, v in a.items() if k != "vertex"})
        elif kind == "explode":
            prog.add_explode(
                a["step"],
                a["cin"],
                a["cout"],
                a["in_lts"],
                a["out_lts"],
                a["cols"],
                a["reason"],
                a["capacity"],
            )
    if dag:
        assert low.vertices is not None
        for w, x in enumerate(low.vertices):
            for port, u in enumerate(x.inputs):
                prog.dag_edge(u, w, port)
    else:
        prog.set_output(_lts(c.schemas[low.sink.inputs[0].step_id]), OUT_ROWS)
    return prog


def merge_layout(s: P.Step, c: Compiled) -> tuple[Schema, list[list[int]], int]:
    """How a multi-input step's vertex merges its inputs (exec/dag.h sc_dag_merge): the
    merged schema, per port the input column of each merged column (-1: null), and the
    port column (-1: none). A union maps columns by name into its schema; other steps get
    the tagged layout: a port column, then each input's columns (null on the other ports'
    rows)."""
    ins = [c.schemas[i.step_id] for i in s.inputs]
    if isinstance(s, P.Union):
        out = c.schemas[s.step_id]
        maps = []
        for sch in ins:
            at = {n: k + 2 for k, (n, _) in enumerate(sch)}
            maps.append([0, 1] + [at[n] for n, _ in out])
        return out, maps, -1
    merged = tagged_schema(s, c)
    width = len(merged) + 2
    maps = []
    off = 3  # seq, pos, port
    for sch in ins:
        m = [0, 1, -1] + [-1] * (width - 3)
        for k in range(len(sch)):
            m[off + k] = 2 + k
        maps.append(m)
        off += len(sch)
    return merged, maps, 2


def _dag_program(low: Lowered, c: Compiled) -> Any:
    """A DAG-mode Program with its vertices, sources, sinks and merges declared."""
    from .. import _runtime as R

    verts = low.vertices
    assert verts is not None
    sinks = [x.sink for x in verts if x.sink is not None]
    sources = [x for x in verts if x.source is not None]
    prog = R.Program(low.nsteps, 64, dag=(len(verts), len(sources), len(sinks), PHASES))
    sink_no = {id(x.sink): k for k, x in enumerate(v for v in verts if v.sink is not None)}
    for v, x in enumerate(verts):
        nin = max(1, len(x.inputs))
        prog.dag_vertex(v, x.name, nin, sink_no.get(id(x.sink), -1) if x.sink else -1)
    for i, x in enumerate(sources):
        assert x.source is not None
        prog.dag_source(i, verts.index(x), _lts(c.schemas[x.source.step_id]))
    for x in verts:
        if x.sink is not None:
            prog.dag_sink(_lts(c.schemas[x.sink.inputs[0].step_id]))
    for v, x in enumerate(verts):
        if len(x.inputs) > 1:
            head = c.plan.step(x.name)
            merged, maps, port_col = merge_layout(head, c)
            prog.dag_merge(v, _lts(merged), maps, port_col)
    return prog


# ----------------------------------------------------------------------------- driver


_ARROW = {
    "int": pa.int64(),
    "float": pa.float64(),
    "bool": pa.bool_(),
    "str": pa.large_string(),
    "datetime": pa.timestamp("us"),
    "date": pa.date32(),
    "null": pa.null(),
}


def _arrow_type(t: DType) -> pa.DataType:
    if t.name == "list":
        assert t.inner is not None
        return pa.large_list(_arrow_type(t.inner))
    return _ARROW[t.name]


def _arrow_target(schema: Schema) -> pa.Schema:
    return pa.schema([pa.field(n, _arrow_type(t)) for n, t in schema])


def _decode_list(a: pa.Array, t: DType) -> pa.Array:
    """An exported list column (encoded values, lists.h) as a large-list array."""
    from .. import _runtime as R

    assert t.inner is not None
    inner = _arrow_type(t.inner)
    n, valid, offs, m, evalid, values, soffs, sdata = R.decode_list(a, _lt(t.inner))
    vb = pa.py_buffer(evalid)
    if t.inner.name == "null":
        child = pa.nulls(m)
    elif t.inner.name == "list":  # the elements are encoded lists: decode them in turn
        enc = pa.Array.from_buffers(
            pa.large_binary(), m, [vb, pa.py_buffer(soffs), pa.py_buffer(sdata or b"")]
        ).cast(pa.binary())
        child = _decode_list(enc, t.inner)
    elif t.inner.name == "str":
        child = pa.Array.from_buffers(
            inner, m, [vb, pa.py_buffer(soffs), pa.py_buffer(sdata or b"")]
        )
    else:
        child = pa.Array.from_buffers(inner, m, [vb, pa.py_buffer(values or b"")])
    return pa.Array.from_buffers(
        pa.large_list(inner),
        n,
        [None if valid is None else pa.py_buffer(valid), pa.py_buffer(offs)],
        children=[child],
    )


def to_frame(rb: pa.RecordBatch | list[pa.RecordBatch], schema: Schema) -> pl.DataFrame:
    """Exported runtime batches (hidden columns first) as one frame of ``schema``."""
    data: Any = rb
    if isinstance(rb, list):
        data = rb[0] if len(rb) == 1 else pa.Table.from_batches(rb)
    cols = []
    for k, (_, t) in enumerate(schema):
        a = data.column(k + 2)
        if t.name == "list":
            chunks = a.chunks if isinstance(a, pa.ChunkedArray) else [a]
            a = pa.chunked_array([_decode_list(x, t) for x in chunks], type=_arrow_type(t))
        elif t == DATE:
            a = a.cast(pa.int32()).cast(pa.date32())
        elif t == NULL:
            a = pa.nulls(len(a))
        cols.append(a)
    tbl = pa.Table.from_arrays(cols, names=[n for n, _ in schema]) if schema else None
    if tbl is None:
        return pl.DataFrame(schema=polars_schema(schema))
    return pl.from_arrow(tbl, schema_overrides=polars_schema(schema))  # type: ignore[return-value]


def _reason_fn(s: P.Step, c: Compiled) -> Callable[[dict[str, Any]], str | None]:
    """The reference's dead-letter reason for a row at step ``s``."""
    fns: list[Callable[[dict[str, Any]], Any]] = []
    if isinstance(s, P.Filter):
        fns = [compile_row_expr(s.predicate)]
    elif isinstance(s, (P.Select, P.WithColumns)):
        fns = [compile_row_expr(e) for _, e in s.exprs]
    elif isinstance(s, (P.Aggregate, P.Running)):
        fns = [compile_row_expr(a.arg) for _, a in s.aggs if a.arg is not None]
    time_col = s.window.time if isinstance(s, P.Aggregate) and s.window is not None else None

    def reason(row: dict[str, Any]) -> str | None:
        for f in fns:
            try:
                f(row)
            except RowError as e:
                return str(e)
        if time_col is not None and row.get(time_col) is None:
            return f"null event time in column {time_col!r}"
        return None

    return reason


class _SinkOut:
    """One sink's outputs: ordered chunks into the run's store (or callback, or nowhere)."""

    def __init__(self, env: Any, sink: P.Sink, schema: Schema, publishing: bool = False):
        self.env, self.sink, self.schema = env, sink, schema
        # fed by a publishing aggregate: each chunk holds changed keys, hidden column 0 the
        # serial of each key's first row; the run counts the sink's rows from the aggregate
        self.publishing = publishing
        self.covered = 0  # publishing: changelog rows accounted for by the frames written
        self.writer = env.sink_writer(sink)
        self.frame_writer = getattr(self.writer, "__self__", None)
        self.pending: list[pa.RecordBatch] = []
        self.rows = 0
        self.since = 0.0
        self.callback_buf: list[dict[str, Any]] = []

    def write(self, rb: pa.RecordBatch) -> None:
        """Queue an ordered output chunk; the sink sees chunks of ~64K rows, or what arrived
        in the last ~20 ms when the stream is slow (so live tables stay fresh)."""
        if not self.rows:
            self.pending = []
            self.since = time.monotonic()
        self.pending.append(rb)
        self.rows += rb.num_rows
        if self.rows >= OUT_ROWS or time.monotonic() - self.since > 0.02:
            self.flush()

    def stale(self, now: float) -> bool:
        return bool(self.rows) and now - self.since > 0.02

    def flush(self) -> None:
        if not self.rows:
            return
        batches, self.pending, self.rows = self.pending, [], 0
        cnt = self.env.counters[self.sink.step_id]
        if self.sink.target == "none":  # rows are dropped: count them, build nothing
            cnt.rows_in += sum(b.num_rows for b in batches)
            return
        df = to_frame(batches, self.schema)
        stands_for = None
        if self.publishing:  # new keys in order of first appearance, as the changelog has them
            first = pa.chunked_array([b.column(0) for b in batches]).to_numpy()
            df = df[np.argsort(first, kind="stable")]
            # the changelog rows this publish accounts for: those counted into the sink by the
            # last counter sync (a lower bound while running; exact at the end of the stream)
            stands_for, self.covered = cnt.rows_in - self.covered, cnt.rows_in
        else:
            cnt.rows_in += df.height
        store = self.frame_writer
        if store is not None and hasattr(store, "write_frame"):
            if stands_for is None:
                store.write_frame(df)
            else:
                store.write_frame(df, stands_for=stands_for)
            return
        # callbacks see batches of up to 1024 rows, as on the reference
        self.callback_buf.extend(df.to_dicts())
        while len(self.callback_buf) >= 1024:
            rows, self.callback_buf = self.callback_buf[:1024], self.callback_buf[1024:]
            self.writer(rows)

    def flush_callback(self) -> None:
        if self.callback_buf:
            rows, self.callback_buf = self.callback_buf, []
            self.writer(rows)


class Driver:
    """Feeds the source in, drains outputs and side logs, mirrors counters into the run."""

    def __init__(self, c: Compiled, env: Any, options: RunOptions):
        self.c, self.env, self.options = c, env, options
        self.low = lower(c, options)
        self.steps = list(c.plan.steps)
        self.side: list[tuple[tuple[int, int, int, int], str, dict[str, Any]]] = []
        self.reasons: dict[int, Callable[[dict[str, Any]], str | None]] = {}
        self.last_position = ""
        self.source_error: Exception | None = None  # what a source raised (see _batches)
        self.taken = 0  # rows taken from the chain's output queue
        self.phases_pushed = 0  # phases pushed into the DAG runtime
        self._ends()

    def _ends(self) -> None:
        """The chain's source and its one sink's output."""
        self.source = self.low.source
        self.sink = self.low.sink
        self.sink_schema = self.c.schemas[self.sink.inputs[0].step_id]
        self.out = _SinkOut(self.env, self.sink, self.sink_schema, self.low.publishing)

    # ---------------------------------------------------------------- source
    def _batches(self, s: P.Source) -> Iterator[pa.RecordBatch | BadRow]:
        """A source's rows as Arrow record batches of its schema, and its bad rows. When the
        source raises, the error is kept in ``source_error`` and the rows end here: the
        driver processes what was read (as the reference does), then fails the run with it.
        (A source's rows count when they are pushed into the runtime: the rest of a batch
        that a stop leaves behind was read ahead, not received.)"""
        try:
            yield from self._read(s)
        except Exception as e:  # noqa: BLE001 - the user's source: re-raised by run()
            self.source_error = e

    def _read(self, s: P.Source) -> Iterator[pa.RecordBatch | BadRow]:
        reader = self.c.readers[s.step_id]
        target = _arrow_target(self.c.schemas[s.step_id])
        batches = reader.arrow_batches()
        if batches is not None:
            for b in batches:
                yield b if isinstance(b, BadRow) else _conform_batch(b, target)
            return
        yield from row_batches(reader.rows(), target, 4096, self.env.should_stop)

    def run(self) -> bool:

        from ..sketching import NativeStage

        prog = build(self.low, self.c)
        self.prog = prog
        stages = []
        for sid, tap in self.low.taps.items():
            st = self.c.plan.step(sid)
            assert isinstance(st, P.Sketch)
            stage = NativeStage(st, tap, self.c.schemas[st.inputs[0].step_id])
            stages.append(stage)
            self.env.attach_sketch(sid, stage)
        try:
            o = self.options
            prog.start(
                workers=o.workers,
                scheduler=o.scheduler,
                reorder=o.reorder,
                keyed=o.keyed_queue,
            )
            ok = self._feed(prog)
            if ok and self.source_error is not None:
                self._settle(prog)  # the rows read before the source failed are processed
                raise self.source_error
            if ok:
                ok = self._finish(prog)
            return ok
        finally:
            prog.stop()
            if not self.env.should_stop():  # a stop discards the rows in flight
                self._flush_all()
            self._drain_sides(prog)
            self._sync_counters(prog)
            self._flush_side()
            self.env.run.native_metrics = self._metrics(prog)
            err = prog.error()
            for stage in stages:  # answers outlive the program
                stage.freeze()
            prog.close()
            if err is not None and not self.env.should_stop():
                raise RuntimeError(f"native runtime error in {err[1]}: {err[2]} (status {err[0]})")

    def _feed(self, prog: Any) -> bool:
        from .. import _runtime as R

        env, sid = self.env, self.source.step_id
        cnt = env.counters[sid]
        bs = self.options.batch_size
        seq = 0
        rate = self.source.rate
        bucket = TokenBucket(rate, lambda: R.now_ns() / 1e9) if rate else None
        for item in self._batches(self.source):
            if isinstance(item, BadRow):
                cnt.rows_in += 1
                cnt.dead += 1
                self.side.append(
                    (
                        (seq, 0, 0, 0),
                        "dead",
                        {
                            "step": sid,
                            "position": f"{sid} {item.position}",
                            "reason": item.reason,
                            "row": item.raw,
                        },
                    )
                )
                env.dead_letter(sid, item.reason, item.raw, f"{sid} {item.position}")
                seq += 1
                continue
            n = item.num_rows
            off = 0
            while off < n:
                if env.should_stop() or not env.wait_if_paused():
                    return False
                if rate:
                    # paced in C: each batch_size slice is pushed when its rows are due; a
                    # slow stream pushes what is due at least every FLUSH_S (low latency); one
                    # call covers at most ~20 ms and 32 batches, so stop / pause stay prompt
                    # and the driver drains outputs before the output queue fills. The
                    # schedule's origin comes from the token bucket: after a pause or a stall
                    # it restarts from now, a cap, not a quota to catch up on
                    assert bucket is not None
                    b = min(bs, max(1, int(rate * FLUSH_S)))
                    m = min(n - off, max(1, int(rate * 0.02)), 32 * b)
                    bucket.due(seq)
                    t0 = int(bucket.origin * 1e9)
                    rc, took = prog.push_many(item, off, m, seq, b, 2_000_000, rate, t0)
                else:
                    # one call, no GIL: cut into batch_size runtime batches; a full pipeline
                    # makes it wait up to 2 ms and return what it took (backpressure)
                    m = min(n - off, PUSH_ROWS)
                    rc, took = prog.push_many(item, off, m, seq, bs, 2_000_000)
                if took:
                    off += took
                    seq += took
                    cnt.rows_in += took
                    cnt.rows_out += took
                    env.on_source_row(seq)
                    self.last_position = f"{sid} row {seq - 1}"
                if rc == R.CLOSED:
                    return False
                self._drain(prog)
        return True

    def _settle(self, prog: Any) -> None:
        """Drain outputs until every pushed row has gone through the pipeline (or a stop).
        No end of stream is pushed: open windows stay open, as on the reference when its
        source fails. Counters are exact one by one but not together (runtime/metrics.h):
        the pipeline counts as settled when two checks 1 ms apart both find it so."""
        steady = 0
        while steady < 2 and not self.env.should_stop() and prog.error() is None:
            self._drain(prog)
            steady = steady + 1 if self._settled(prog) else 0
            time.sleep(0.001)
        self._drain(prog)
        self._flush_all()
        self._flush_callbacks()

    def _settled(self, prog: Any) -> bool:
        """Every row pushed has left the last operator and been taken (per-operator metrics:
        each operator took in what the one before sent on)."""
        ops = prog.metrics()["ops"]
        pushed = self.env.counters[self.source.step_id].rows_out
        if not ops or ops[0]["rows_in"] != pushed:
            return not ops and pushed == 0
        if any(b["rows_in"] != a["rows_out"] for a, b in zip(ops, ops[1:])):
            return False
        return self.taken == ops[-1]["rows_out"]

    def _flush_callbacks(self) -> None:
        self.out.flush_callback()

    def _end_input(self, prog: Any) -> bool:
        """Push the end of stream, draining outputs while the runtime is full."""
        from .. import _runtime as R

        while True:
            if self.env.should_stop():
                return False
            rc = prog.finish(2_000_000)
            if rc == R.OK:
                return True
            if rc == R.CLOSED:
                return False
            self._drain(prog)

    def _finish(self, prog: Any) -> bool:
        from .. import _runtime as R

        if not self._end_input(prog):
            return False
        while True:
            if self.env.should_stop():
                return False
            rc, eos, rb = prog.take_many(20_000_000)
            if rc == R.CLOSED:
                return False
            if rb is not None:
                self.taken += rb.num_rows
                self.out.write(rb)
            if eos:
                if self.low.publishing:  # the last publish accounts for every changelog row
                    self._sync_counters(prog)
                self.out.flush()
                self.out.flush_callback()
                return True
            self._periodic(prog)

    _next_sync = 0.0

    def _metrics(self, prog: Any) -> dict[str, Any]:
        """The program's metrics plus the multi-entity and speculate stages' own counters."""
        metrics: dict[str, Any] = prog.metrics()
        metrics["entities"] = {
            sid: dict(zip(("entities", "waited"), prog.entity_stats(t)))
            for sid, t in self.low.entities.items()
        }
        spec = {}
        for sid, op in self.low.speculators.items():
            st = self.c.plan.step(sid)
            assert isinstance(st, P.Speculate)
            spec[sid] = dict(prog.speculate_stats(op), function=st.fn)
        metrics["speculate"] = spec
        return metrics

    def _periodic(self, prog: Any) -> None:
        now = time.monotonic()
        if now >= self._next_sync:
            self._next_sync = now + 0.1
            self._flush_stale(now)
            self.env.run.native_metrics = self._metrics(prog)
            self._drain_sides(prog)
            self._sync_counters(prog)

    def _drain(self, prog: Any) -> None:
        from .. import _runtime as R

        while True:
            rc, eos, rb = prog.take_many(0)
            if rb is not None:
                self.taken += rb.num_rows
                self.out.write(rb)
            if rc != R.OK or rb is None:
                break
        self._periodic(prog)

    # ---------------------------------------------------------------- outputs
    def _flush_all(self) -> None:
        self.out.flush()

    def _flush_stale(self, now: float) -> None:
        if self.out.stale(now):
            self.out.flush()

    def _position(self, seq: int) -> str:
        """Where a dead or late row came from: its source row."""
        return f"{self.source.step_id} row {seq}" if seq < (1 << 62) else self.last_position

    def _sync_counters(self, prog: Any) -> None:
        publishing = self.low.publishing  # only chains publish
        for k, (rin, rout, filt, dead, late) in enumerate(prog.counters()):
            s = self.steps[k]
            if publishing and s.step_id == self.sink.inputs[0].step_id:
                # a publishing aggregate counts the changelog rows it stands for
                self.env.counters[self.sink.step_id].rows_in = rout
            if isinstance(s, (P.Source, P.Sink)):
                continue
            cnt = self.env.counters[s.step_id]
            cnt.rows_in, cnt.rows_out, cnt.filtered, cnt.dead, cnt.late = (
                rin,
                rout,
                filt,
                dead,
                late,
            )

    def _drain_sides(self, prog: Any) -> None:
        for step, kinds, serials, rows, reasons, rb in prog.sides():
            s = self.steps[step]
            seqs = rb.column(0).to_pylist()
            if isinstance(s, (P.Join, P.Correlate)):  # tagged rows: each input's own row
                tagged = to_frame(rb, tagged_schema(s, self.c)).to_dicts()
                dicts = [untag_row(s, self.c, r)[1] for r in tagged]
            else:
                in_schema = self.c.schemas[s.inputs[0].step_id]
                df = to_frame(rb.select(list(range(2 + len(in_schema)))), in_schema)
                dicts = df.to_dicts()
            if step not in self.reasons:
                self.reasons[step] = _reason_fn(s, self.c)
            for j, row in enumerate(dicts):
                seq = seqs[j]
                position = self._position(seq)
                key = (seq, step, serials[j], rows[j])
                if kinds[j] == 1:
                    reason = self.reasons[step](row) or reasons[j] or "row could not be processed"
                    rec = {
                        "step": s.step_id,
                        "position": position,
                        "reason": reason,
                        "row": repr(row)[:500],
                    }
                    self.side.append((key, "dead", rec))
                    self.env.dead_letter(s.step_id, reason, rec["row"], position)
                else:
                    rec = dict(row, _step=s.step_id, _position=position)
                    self.side.append((key, "late", rec))
                    self.env.run._late.add(rec)

    def _flush_side(self) -> None:
        """Put dead letters and late rows in the reference's order (by source row, then
        step), replacing the live (drain-order) logs."""
        from ..stores import RowLog

        self.side.sort(key=lambda x: x[0])
        run = self.env.run
        dead, late = RowLog(), RowLog()
        for _, kind, rec in self.side:
            (dead if kind == "dead" else late).add(rec)
        run._dead, run._late = dead, late


class DagDriver(Driver):
    """Feeds every source into the DAG runtime (exec/dag.h) as phases of the merged input
    (``batch_size`` rounds of the round-robin merge each), and drains every sink."""

    def _ends(self) -> None:
        """Every source, one output per sink, and where the phases' rows came from."""
        verts = self.low.vertices
        assert verts is not None
        self.sources = [x.source for x in verts if x.source is not None]
        self.source = self.sources[0]
        self.outs = [
            _SinkOut(self.env, x.sink, self.c.schemas[x.sink.inputs[0].step_id])
            for x in verts
            if x.sink is not None
        ]
        # where each phase's rows came from (for dead-letter positions); bounded: phases
        # whose side records have surely been drained are dropped
        self.phase_bases: list[int] = []
        self.phase_rows: list[tuple[list[int], list[int]]] = []  # rows, first local row
        self.pushed_at_drain = 0

    @staticmethod
    def _take(it: Iterator[Any], buf: Any, k: int) -> tuple[list[Any], int]:
        """Up to k items of one source: (record batch, offset, n) pieces and BadRows."""
        out: list[Any] = []
        got = 0
        while got < k:
            if not buf:
                item = next(it, None)
                if item is None:
                    break
                buf.append(item if isinstance(item, BadRow) else (item, 0))
            head = buf[0]
            if isinstance(head, BadRow):
                out.append(head)
                buf.popleft()
                got += 1
                continue
            rb, off = head
            m = min(rb.num_rows - off, k - got)
            if m > 0:
                out.append((rb, off, m))
                got += m
            if off + m >= rb.num_rows:
                buf.popleft()
            else:
                buf[0] = (rb, off + m)
        return out, got

    def _feed(self, prog: Any) -> bool:  # noqa: C901 - the merge, pacing and dead letters
        """Read CHUNK phases' worth of rounds of every live source at a time. The common case
        (one contiguous slice per source, all the same length, no bad rows) is cut into
        phases of ``batch_size`` rounds and pushed in one call without the GIL; otherwise
        (a source ending, bad rows, a record batch boundary) the chunk is one phase."""
        from collections import deque

        from .. import _runtime as R

        env = self.env
        n = len(self.sources)
        its = [self._batches(s) for s in self.sources]
        bufs: list[Any] = [deque() for _ in range(n)]
        rates = [s.rate for s in self.sources]
        # a phase holds at most DAG_PHASE_ROUNDS rounds: each phase's outputs travel as one
        # unit, so larger phases only delay the sinks (batch_size is a chain's batch)
        k, chunk = min(self.options.batch_size, DAG_PHASE_ROUNDS), CHUNK
        if any(rates):  # a throttled source: small phases, each pushed when its rows are due
            k, chunk = max(1, min(int(r * 0.02) for r in rates if r)), 1
        local = [0] * n
        seq = 0
        buckets = [TokenBucket(r) if r else None for r in rates]
        live = list(range(n))
        while live and self.source_error is None:  # a failed source ends the input
            if env.should_stop() or not env.wait_if_paused():
                return False
            takes: dict[int, list[Any]] = {}
            counts = [0] * n
            for i in live:
                takes[i], counts[i] = self._take(its[i], bufs[i], k * chunk)
            if not any(counts):
                break
            for i, bucket in enumerate(buckets):
                if bucket is not None and counts[i]:
                    bucket.wait(local[i] + counts[i] - 1)
            serials = merged_serials(seq, counts)
            active = [i for i in live if counts[i]]
            fast = len({counts[i] for i in active}) == 1 and all(
                len(takes[i]) == 1 and not isinstance(takes[i][0], BadRow) for i in active
            )
            if fast:
                srcs: list[Any] = [None] * n
                for i in active:
                    rb, off, m = takes[i][0]
                    srcs[i] = (rb, off, m, serials[i])
                done = 0
                while True:
                    rc, done = prog.push_phases(srcs, k, done, 2_000_000)
                    if rc == R.OK:
                        self.phases_pushed += done
                        break
                    if rc == R.CLOSED or env.should_stop():
                        return False
                    self._drain(prog)  # full: take outputs, then push the rest
            else:
                pieces = self._pieces(takes, live, serials)
                while True:
                    rc = prog.push_phase(pieces, 2_000_000)
                    if rc == R.OK:
                        self.phases_pushed += 1
                        break
                    if rc == R.CLOSED or env.should_stop():
                        return False
                    self._drain(prog)
            self.phase_bases.append(seq)
            self.phase_rows.append((counts, list(local)))
            for i in live:
                good = sum(p[2] for p in takes[i] if not isinstance(p, BadRow))
                cnt = env.counters[self.sources[i].step_id]
                cnt.rows_in += good
                cnt.rows_out += good
                local[i] += counts[i]
                if counts[i]:
                    self.last_position = f"{self.sources[i].step_id} row {local[i] - 1}"
            seq += sum(counts)
            env.on_source_row(seq)
            live = [i for i in live if counts[i] == k * chunk]
            self._drain(prog)
        return True

    def _pieces(
        self, takes: dict[int, list[Any]], live: list[int], serials: list[Any]
    ) -> list[list[Any]]:
        """One phase's pieces (record batch, offset, rows, serials) per source; bad rows
        become dead letters at their serial."""
        env = self.env
        pieces: list[list[Any]] = [[] for _ in self.sources]
        for i in live:
            sid = self.sources[i].step_id
            j = 0
            for p in takes[i]:
                if isinstance(p, BadRow):
                    cnt = env.counters[sid]
                    cnt.rows_in += 1
                    cnt.dead += 1
                    rec = {
                        "step": sid,
                        "position": f"{sid} {p.position}",
                        "reason": p.reason,
                        "row": p.raw,
                    }
                    self.side.append(((int(serials[i][j]), 0, 0, 0), "dead", rec))
                    env.dead_letter(sid, p.reason, p.raw, f"{sid} {p.position}")
                    j += 1
                else:
                    rb, off, m = p
                    pieces[i].append((rb, off, m, serials[i][j : j + m]))
                    j += m
        return pieces

    def _finish(self, prog: Any) -> bool:
        from .. import _runtime as R

        if not self._end_input(prog):
            return False
        while True:
            if self.env.should_stop():
                return False
            rc = prog.dag_wait(20_000_000)
            self._drain(prog)
            if rc == R.CLOSED:
                return False
            if rc == 1:
                self._drain(prog)
                for o in self.outs:
                    o.flush()
                    o.flush_callback()
                return True

    def _settled(self, prog: Any) -> bool:
        """Every pushed phase is done (its outputs wait in the sink queues)."""
        return bool(prog.dag_stats()[0]["phases"] >= self.phases_pushed)

    def _flush_callbacks(self) -> None:
        for o in self.outs:
            o.flush_callback()

    def _drain(self, prog: Any) -> None:
        for k, o in enumerate(self.outs):
            if o.sink.target == "none":  # dropped rows are only counted
                self.env.counters[o.sink.step_id].rows_in += prog.dag_discard(k)
                continue
            while True:
                rb = prog.dag_take(k)
                if rb is None:
                    break
                o.write(rb)
        self._periodic(prog)

    def _flush_all(self) -> None:
        for o in self.outs:
            o.flush()

    def _flush_stale(self, now: float) -> None:
        for o in self.outs:
            if o.stale(now):
                o.flush()

    def _position(self, seq: int) -> str:
        import bisect

        if seq >= 1 << 62 or not self.phase_bases:
            return self.last_position
        k = bisect.bisect_right(self.phase_bases, seq) - 1
        if k < 0:
            return self.last_position
        counts, starts = self.phase_rows[k]
        at = locate_serial(self.phase_bases[k], counts, seq)
        if at is None:
            return self.last_position
        return f"{self.sources[at[0]].step_id} row {starts[at[0]] + at[1]}"

    def _drain_sides(self, prog: Any) -> None:
        """Drain side records; then forget the phases that were done before the previous
        drain (at most PHASES are in flight, so their records are all in)."""
        super()._drain_sides(prog)
        drop = self.pushed_at_drain - PHASES
        if drop > 0:
            del self.phase_bases[:drop]
            del self.phase_rows[:drop]
        self.pushed_at_drain = len(self.phase_bases)

    def _sync_counters(self, prog: Any) -> None:
        super()._sync_counters(prog)
        counters = self.env.counters
        for s in self.steps:  # a union is the merge of its vertex: it passes every row
            if isinstance(s, P.Union):
                n = sum(counters[i.step_id].rows_out for i in s.inputs)
                counters[s.step_id].rows_in = counters[s.step_id].rows_out = n


def _conform_batch(b: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    if b.schema.equals(target):
        return b
    arrays = []
    for k, f in enumerate(target):
        a = b.column(k)
        if f.type == pa.large_string() and a.type in (pa.string(), pa.string_view()):
            arrays.append(a)  # read as is (u / vu)
            continue
        if pa.types.is_timestamp(a.type) and pa.types.is_timestamp(f.type) and a.type.unit == "us":
            arrays.append(a)
            continue
        if pa.types.is_large_list(f.type) and _list_readable(a.type, f.type.value_type):
            arrays.append(a)  # read as is (+l / +L with a child the runtime reads)
            continue
        arrays.append(a.cast(f.type))
    return pa.RecordBatch.from_arrays(arrays, names=target.names)


def _list_readable(t: pa.DataType, value: pa.DataType) -> bool:
    if not (pa.types.is_list(t) or pa.types.is_large_list(t)):
        return False
    v = t.value_type
    if pa.types.is_large_list(value):
        return _list_readable(v, value.value_type)
    if value == pa.large_string():
        return v in (pa.string(), pa.large_string(), pa.string_view())
    if pa.types.is_timestamp(value):
        return pa.types.is_timestamp(v) and v.unit == "us"
    return bool(v == value)
