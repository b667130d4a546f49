"""Lowering: each plan step as native operators (kind, keyword arguments of the Program's
``add_*`` call), expressions as post-order sc_enode lists, and the tagged layout that
multi-input steps (join, correlate) read.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from typing import Any

from ... import plan as P
from ...compiler import Compiled, Typer
from ...errors import NotSupportedError
from ...expr import IR, Binary, Call, Col, Lit, Shapes, Unary, When
from ...options import RunOptions
from ...types import INT, DType, Schema
from ...udf import UDF_PREFIX
from ...udf import lookup as udf_lookup
from ..evaluate import epoch_days, epoch_us
from .typecodes import LT_LIST, NAME, _lt, _lts, _no_lists, encode_list
from .vertices import Vertex, _vertices

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
    """An expression as post-order sc_enode dicts over ``schema`` (user columns from 2).

    A subexpression that occurs more than once is one node that every parent reads
    (:class:`~streamcell.expr.Shapes`): the evaluator computes each node once per batch into
    a vector its parents only read, and each parent masks its operands' errors as it would a
    child of its own, so sharing changes no result, no error and no dead letter. Literals
    stay one node per use: they are scalars that cost nothing, and the fast kernels read a
    literal operand as a scalar only while no other parent has broadcast it."""
    typer = Typer(schema, step)
    index = {n: i + 2 for i, (n, _) in enumerate(schema)}
    nodes: list[dict[str, Any]] = []
    shapes = Shapes()
    done: dict[int, int] = {}  # shape -> its node

    def add(n: dict[str, Any]) -> int:
        nodes.append(n)
        return len(nodes) - 1

    def go(e: IR) -> int:
        if isinstance(e, Lit):
            return node(e)
        k = shapes.of(e)
        got = done.get(k)
        if got is None:
            got = done[k] = node(e)
        return got

    def node(e: IR) -> int:  # noqa: C901 - one dispatch over the IR
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
    batch_size: int = 16_384  # rows per batch the source is cut into (batch_rows)


def _agg_args(
    s: P.Aggregate | P.Running, schema: Schema, idx: int, low: Lowered, cap: int
) -> tuple[Schema, list[tuple[int, int, int]], bool]:
    """Aggregate specs (fn, arg column, result lt); puts a project in front when an argument
    is an expression. Returns the keyed operator's input schema and whether it counts rows_in."""
    typer = Typer(schema, s)
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


BATCH_ROWS = 16_384
"""Rows per batch when the run's options leave ``batch_size`` to the engine (None), for a plan
with a keyed, windowed or other stateful step: its operators partition and merge each batch,
and larger batches made a Zipf-keyed aggregate slower (figure 3)."""

STATELESS_BATCH_ROWS = 65_536
"""The same for a plan of stateless steps only (filters, selects, with_columns): besides the
columns' bytes, its costs are per batch (an output chunk Polars imports and later frees, a
scratch take, a queue slot), and four times fewer batches ran a 10M-row filter + with_columns
to a table 20-30% faster on the 2-core machine (the batches are slices of the source's
Arrow arrays, so a larger one copies nothing more)."""


STATELESS_STEPS = (P.Source, P.Sink, P.Filter, P.Select, P.WithColumns)
"""The step kinds of a plan that runs as one fused stateless stage."""


def batch_rows(c: Compiled, options: RunOptions) -> int:
    """Rows per batch of a run: ``options.batch_size``, or when that is None
    :data:`STATELESS_BATCH_ROWS` for a chain of :data:`STATELESS_STEPS` whose source is not
    throttled, and :data:`BATCH_ROWS` for any other plan. (A DAG runs its filters and
    projects unfused, in phases of at most 1,024 rows; a throttled source pushes what is due
    every :data:`PACED_BATCH_S`, cut for the workers: :func:`paced_batches`.)"""
    if options.batch_size is not None:
        return options.batch_size
    steps = c.plan.steps
    if (
        c.plan.is_chain()
        and all(isinstance(s, STATELESS_STEPS) for s in steps)
        and not any(isinstance(s, P.Source) and s.rate for s in steps)
    ):
        return STATELESS_BATCH_ROWS
    return BATCH_ROWS


PACED_BATCH_S = 0.0002
"""A throttled source pushes what is due at least this often (seconds)."""


OUT_ROWS = 65_536
"""Rows per chunk the runtime hands to the sink (exec/program.c joins smaller batches)."""

PACED_MIN_ROWS = OUT_ROWS // 64
"""The smallest batch an operator of a paced run allocates for: a batch of fewer rows is
joined into a chunk whatever its room (exec/program.c, least_chunk: ``chunk_rows / 64``)."""


PACED_SPLIT_ROWS = 2048
"""A paced push of at least twice this many rows is split into up to one batch per worker."""


def paced_rows(rate: float, batch_size: int) -> int:
    """Rows a source throttled to ``rate`` rows/s pushes at a time: what is due every
    :data:`PACED_BATCH_S`, at most ``batch_size``."""
    return min(batch_size, max(1, int(rate * PACED_BATCH_S)))


def paced_batches(rate: float, batch_size: int, workers: int) -> tuple[int, int]:
    """(rows per batch, batches per push) of a throttled source: each push of
    :func:`paced_rows` is cut into up to ``workers`` batches of at least
    :data:`PACED_SPLIT_ROWS` rows, which the workers run side by side, so a row waits for
    its part of the push rather than the whole of it."""
    rows = paced_rows(rate, batch_size)
    parts = max(1, min(workers, rows // PACED_SPLIT_ROWS))
    return -(-rows // parts), parts


def lower(c: Compiled, options: RunOptions) -> Lowered:  # noqa: C901 - one dispatch per step
    steps = list(c.plan.steps)
    source = next(s for s in steps if isinstance(s, P.Source))
    # operators size their batches for what arrives: a paced chain's batches are small, and
    # outputs that fill their batches pass to the sink without a copy (from PACED_MIN_ROWS
    # rows). The DAG driver pushes a paced source's rows in phases of its own size
    cap = batch = batch_rows(c, options)
    if source.rate and c.plan.is_chain():
        rows, _ = paced_batches(source.rate, cap, options.workers)
        cap = min(cap, max(PACED_MIN_ROWS, rows))
    sink = next(s for s in steps if isinstance(s, P.Sink))
    low = Lowered(len(steps), source, sink, c.schemas[source.step_id], batch_size=batch)
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
    its one consumer is a table that keeps the latest row per key (an upsert table, or a
    complete / update Parquet sink, on the aggregate's own keys), in a chain, so no one else sees the changelog. The source must never
    wait for data (memory, files, unthrottled generators): a publish rides on arriving rows."""
    if not s.keys or not c.plan.is_chain():
        return False
    src = next(x for x in c.plan.steps if isinstance(x, P.Source))
    if src.rate is not None or not getattr(c.readers.get(src.step_id), "never_waits", False):
        return False
    (sink,) = c.plan.consumers()[s.step_id] or (None,)
    return (
        isinstance(sink, P.Sink)
        and (sink.target == "table" or (sink.target == "parquet" and sink.mode is not None))
        and c.upsert_keys.get(sink.step_id) == tuple(s.keys)
    )


CREATION_COLUMN = "\x00created"  # lower_step(creation=True): the serial that opened a window


def lower_step(
    s: P.Step, schemas: dict[str, Schema], batch_size: int, creation: bool = False
) -> tuple[Lowered, dict[str, Schema]]:
    """One keyed or windowed step on its own, as a chain with its counters at index 0 and its
    per-row changelog out (never publishing): what the Spark engine runs over each partition.
    ``schemas`` holds the step's and its input's schemas. With ``creation`` a window step's
    output ends with :data:`CREATION_COLUMN`, the serial of the row that opened the window.
    Returns the lowered chain and the schemas ``build`` reads (the step's possibly widened).
    NotSupportedError names a step the native operators cannot run."""
    from types import SimpleNamespace

    inp = schemas[s.inputs[0].step_id]
    out = schemas[s.step_id]
    widen = creation and isinstance(s, P.Aggregate) and s.window is not None
    if widen:
        out = tuple(out) + ((CREATION_COLUMN, INT),)
    view: Any = SimpleNamespace(schemas={**schemas, s.step_id: out})
    source = P.Source(step_id="\x00in", spec=P.SourceSpec("object"))
    sink = P.Sink(step_id="\x00out", inputs=(P.Step(step_id=s.step_id),), target="none")
    low = Lowered(1, source, sink, inp)
    low.partitions = PARTITIONS_PER_WORKER
    low.step_index = {s.step_id: 0}
    for _, t in (*inp, *out):
        if _lt(t) >= LT_LIST:
            raise NotSupportedError(s.step_id, NAME, "list columns")
    _lower_step(s, 0, view, RunOptions(batch_size=batch_size), low, batch_size, changelog=True)
    if widen:
        kind, a = low.ops[-1]
        assert kind == "window"
        a["outs"] = [*a["outs"], (OUT_INPUT, 0)]  # hidden column 0: the row's serial
        a["out_lts"] = _lts(out)
    return low, view.schemas


def _lower_step(  # noqa: C901 - one dispatch per step kind
    s: P.Step,
    idx: int,
    c: Compiled,
    options: RunOptions,
    low: Lowered,
    cap: int,
    changelog: bool = False,
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
            publish = not changelog and isinstance(s, P.Aggregate) and _publishes(s, c)
            low.publishing = low.publishing or publish
            # a table takes the end-of-stream publish (every key) in place of what it holds; an
            # update-mode Parquet sink must see only the keys changed since its last write
            sink = c.plan.consumers()[s.step_id][0] if publish else None
            complete = isinstance(sink, P.Sink) and sink.target == "table"
            low.ops.append(
                ("keyed", dict(agg, kind="aggregate", publish=publish, complete=complete))
            )
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
        from ...compiler import speculate_function

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
        from ...compiler import apply_function

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
