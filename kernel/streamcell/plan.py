"""The plan: an inert, frozen DAG of steps, and the fluent builder that makes one.

Nothing runs until a plan is started. Each step is a frozen dataclass with a stable
``step_id`` (``kind#n``, numbered by a depth-first walk from the sinks, so the same
pipeline always gets the same ids whether it came from DSL text or from Python).

Every edge says how data moves to the step: ``forward`` (same order, any worker),
``hash(keys)`` (keyed: each key in arrival order, keys in parallel) or ``single``
(one worker at a time). Backends read that contract from :func:`edge_kind`.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from .errors import ArgumentError, PlanError
from .expr import IR, AggCall, Col, Expr, Named, _ir, output_name, to_text

if TYPE_CHECKING:
    from .options import RunOptions
    from .run import Run

Duration = int | str
"""A duration: a string like ``"30m"`` (for datetime columns) or an int in the column's units."""

_DURATION_RE = re.compile(r"^\s*(\d+)\s*(us|ms|s|m|h|d|w)\s*$")
_UNIT_US = {
    "us": 1,
    "ms": 1_000,
    "s": 1_000_000,
    "m": 60_000_000,
    "h": 3_600_000_000,
    "d": 86_400_000_000,
    "w": 604_800_000_000,
}


def parse_duration(d: Duration) -> int:
    """Microseconds for ``"30m"``-style strings; ints are returned unchanged (column units)."""
    if isinstance(d, bool):
        raise ValueError(f"invalid duration {d!r}")
    if isinstance(d, int):
        if d < 0:
            raise ValueError(f"duration must be >= 0, got {d}")
        return d
    m = _DURATION_RE.match(d)
    if not m:
        raise ValueError(f'invalid duration {d!r}; use e.g. "500ms", "30s", "5m", "1h", "1d"')
    return int(m.group(1)) * _UNIT_US[m.group(2)]


class ObjRef:
    """A Python object referenced by a plan (a DataFrame, an iterable, a callback).

    Compared by identity: two plans are equal only if they reference the same object.
    """

    __slots__ = ("obj", "label")

    def __init__(self, obj: Any, label: str | None = None):
        self.obj = obj
        self.label = label or getattr(obj, "__name__", None) or type(obj).__name__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ObjRef) and other.obj is self.obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __repr__(self) -> str:
        return self.label


@dataclass(frozen=True)
class SourceSpec:
    """What a source reads: ``kind`` is a generator name, a file format, or ``object``."""

    kind: str
    args: tuple[tuple[str, Any], ...] = ()
    obj: ObjRef | None = None

    def arg(self, name: str, default: Any = None) -> Any:
        return dict(self.args).get(name, default)

    def text(self) -> str:
        if self.kind == "object":
            assert self.obj is not None
            return self.obj.label
        parts: list[str] = []
        for k, v in self.args:
            if k == "path" and self.kind in FILE_KINDS:
                from .files import shown  # a URI's query and user info may hold credentials

                parts.insert(0, repr(shown(str(v))))
            else:
                parts.append(f"{k}={_value_text(v)}")
        return f"{self.kind}({', '.join(parts)})"


FILE_KINDS = ("parquet", "csv", "ndjson")
GENERATOR_KINDS = ("clickstream", "store_sales", "sequence")


def _value_text(v: Any) -> str:
    if isinstance(v, tuple) and v and all(isinstance(x, tuple) and len(x) == 2 for x in v):
        return "{" + ", ".join(f"{k!r}: {_value_text(x)}" for k, x in v) + "}"
    if isinstance(v, tuple):
        return "[" + ", ".join(_value_text(x) for x in v) + "]"
    if isinstance(v, ObjRef):
        return v.label
    return repr(v)


@dataclass(frozen=True)
class Window:
    """An event-time window: tumbling(size), sliding(size, every) or session(gap)."""

    kind: Literal["tumbling", "sliding", "session"]
    time: str
    size: Duration
    every: Duration | None = None
    lateness: Duration = 0

    def text(self) -> str:
        first = "gap" if self.kind == "session" else "size"
        parts = [f"{first}={self.size!r}"]
        if self.every is not None:
            parts.append(f"every={self.every!r}")
        parts.append(f"time={self.time}")
        if self.lateness != 0:
            parts.append(f"lateness={self.lateness!r}")
        return f"{self.kind} " + ", ".join(parts)


# ------------------------------------------------------------------------------- steps


@dataclass(frozen=True, kw_only=True)
class Step:
    step_id: str = ""
    inputs: tuple[Step, ...] = ()
    pos: Any = field(default=None, compare=False, repr=False)

    kind = "step"


@dataclass(frozen=True, kw_only=True)
class Source(Step):
    spec: SourceSpec
    rate: float | None = None
    name: str | None = field(default=None, compare=False)
    kind = "source"


@dataclass(frozen=True, kw_only=True)
class Filter(Step):
    predicate: IR
    kind = "filter"


@dataclass(frozen=True, kw_only=True)
class Select(Step):
    exprs: tuple[tuple[str, IR], ...]
    kind = "select"


@dataclass(frozen=True, kw_only=True)
class WithColumns(Step):
    exprs: tuple[tuple[str, IR], ...]
    kind = "with_columns"


@dataclass(frozen=True, kw_only=True)
class Explode(Step):
    columns: tuple[str, ...]
    kind = "explode"


@dataclass(frozen=True, kw_only=True)
class Aggregate(Step):
    keys: tuple[str, ...]
    window: Window | None
    aggs: tuple[tuple[str, AggCall], ...]
    kind = "aggregate"


@dataclass(frozen=True, kw_only=True)
class Running(Step):
    keys: tuple[str, ...]
    aggs: tuple[tuple[str, AggCall], ...]
    kind = "running"


@dataclass(frozen=True, kw_only=True)
class TopK(Step):
    keys: tuple[str, ...]
    k: int
    by: str
    descending: bool = True
    kind = "top_k"


@dataclass(frozen=True, kw_only=True)
class Dedup(Step):
    keys: tuple[str, ...]
    kind = "dedup"


SKETCH_PARAMS = {
    "theta": ("lg_k", 12),
    "hll": ("lg_k", 12),
    "kll": ("k", 200),
    "frequent": ("lg_max_map_size", 10),
}
"""Each sketch function's one size parameter and its default."""


@dataclass(frozen=True)
class SketchCall:
    """One sketch of a ``sketch`` stage: ``theta(user_id)``, ``kll(price, k=400)`` ..."""

    fn: Literal["theta", "hll", "kll", "frequent"]
    column: str
    param: int

    @property
    def param_name(self) -> str:
        return SKETCH_PARAMS[self.fn][0]

    def text(self) -> str:
        name, default = SKETCH_PARAMS[self.fn]
        extra = f", {name}={self.param}" if self.param != default else ""
        return f"{self.fn}({to_text(Col(self.column))}{extra})"


def sketch_call(fn: str, column: Any, **params: Any) -> SketchCall:
    """Build a :class:`SketchCall`, checking the function and its parameter."""
    if fn not in SKETCH_PARAMS:
        raise ValueError(f"unknown sketch {fn!r}; sketches: {', '.join(SKETCH_PARAMS)}")
    name, default = SKETCH_PARAMS[fn]
    bad = set(params) - {name}
    if bad:
        raise ValueError(f"{fn}() takes {name}=, not {', '.join(sorted(bad))}")
    value = params.get(name, default)
    limits = {
        "lg_k": (5, 26) if fn == "theta" else (4, 21),
        "k": (8, 65535),
        "lg_max_map_size": (3, 26),
    }
    lo, hi = limits[name]
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise ValueError(f"{fn}(): {name} must be an integer in [{lo}, {hi}], got {value!r}")
    col = column if isinstance(column, str) else output_name(_ir(column))
    return SketchCall(fn, col, value)  # type: ignore[arg-type]


def theta(column: Any, *, lg_k: int = 12) -> SketchCall:
    """Θ distinct count of ``column`` (a ``sketch`` stage; RSE ≈ 1/sqrt(2**lg_k))."""
    return sketch_call("theta", column, lg_k=lg_k)


def hll(column: Any, *, lg_k: int = 12) -> SketchCall:
    """HyperLogLog distinct count of ``column`` (a ``sketch`` stage; RSE ≈ 1.04/sqrt(2**lg_k))."""
    return sketch_call("hll", column, lg_k=lg_k)


def kll(column: Any, *, k: int = 200) -> SketchCall:
    """KLL quantiles of numeric ``column`` (a ``sketch`` stage; rank error ≈ 1.65% at k=200)."""
    return sketch_call("kll", column, k=k)


def frequent(column: Any, *, lg_max_map_size: int = 10) -> SketchCall:
    """Frequent items (heavy hitters) of ``column`` (a ``sketch`` stage; error ≤ 3.5/2**lg · N)."""
    return sketch_call("frequent", column, lg_max_map_size=lg_max_map_size)


@dataclass(frozen=True, kw_only=True)
class Sketch(Step):
    """Sketch columns as rows pass (rows go on unchanged); one set of sketches per key."""

    keys: tuple[str, ...]
    sketches: tuple[tuple[str, SketchCall], ...]
    kind = "sketch"


@dataclass(frozen=True, kw_only=True)
class Transfer(Step):
    """A multi-entity event (the lazy topological sorting design): move ``amount`` from the entity named by ``keys[0]``
    to the one named by ``keys[1]``; every balance starts at ``initial``. A transfer that
    would take a balance below zero is rejected (a dead letter) unless ``overdraft``. Each
    output row is the input row plus both balances after the transfer."""

    keys: tuple[str, ...]
    amount: str
    initial: float | int = 0
    overdraft: bool = False
    kind = "transfer"

    @property
    def balance_columns(self) -> tuple[str, str]:
        return (f"{self.keys[0]}_balance", f"{self.keys[1]}_balance")


Horizon = int | Literal["adaptive"]
"""How far speculation may run ahead of the earliest uncommitted event: a fixed number of
events (1: sequential) or ``"adaptive"`` (driven by the abort rate, Sturzrehm §5.2.2)."""

MAX_HORIZON = 4096  # exec/speculate.h SC_SPEC_MAX_HORIZON


def check_horizon(h: Any) -> Horizon:
    """``h`` if it is a valid horizon, else ValueError saying what is allowed."""
    if h == "adaptive" or (
        isinstance(h, int) and not isinstance(h, bool) and 1 <= h <= MAX_HORIZON
    ):
        return h  # type: ignore[no-any-return]
    raise ValueError(f'horizon must be "adaptive" or an integer in [1, {MAX_HORIZON}], got {h!r}')


@dataclass(frozen=True, kw_only=True)
class Speculate(Step):
    """Run the transactional user function ``fn`` (compiled with ``sc.cython_udf``; first
    argument ``sc_txn *tx``) once per row, in arrival order by definition, against one keyed
    store (int64 keys and values) that lives as long as the run; ``args`` are the input
    columns passed to it (empty: the columns named like its parameters) and ``name`` the
    result column added to each row. Engines may run rows speculatively ahead (Sturzrehm), but
    the output equals the sequential run's."""

    fn: str
    args: tuple[str, ...]
    name: str
    horizon: Horizon = "adaptive"
    kind = "speculate"


@dataclass(frozen=True, kw_only=True)
class Apply(Step):
    """A keyed step over a typed state struct: the user function ``fn`` (compiled with
    ``sc.cython_udf``; first argument a pointer to a ``cdef struct`` declared in the same
    source) runs once per row, in arrival order, with the state of the row's key (``keys``;
    none: one global state), zero-initialised when the key is first seen, and the columns
    ``args`` (empty: the columns named like its parameters). Its result is added to each row
    as column ``name``; rows pass through, like ``running``. A null argument gives a null
    result without calling ``fn``."""

    keys: tuple[str, ...]
    fn: str
    args: tuple[str, ...]
    name: str
    kind = "apply"


@dataclass(frozen=True, kw_only=True)
class Union(Step):
    kind = "union"


@dataclass(frozen=True, kw_only=True)
class Join(Step):
    on: tuple[str, ...]
    within: Duration
    time: str
    lateness: Duration = 0
    kind = "join"


CORRELATE_FUNCTIONS = ("count", "sum", "mean", "std", "min", "max", "last")
"""The aggregates of a ``correlate`` stage."""


@dataclass(frozen=True)
class CorrAgg:
    """One aggregate of a ``correlate`` stage: ``fn`` over ``column`` (None for ``count()``)
    of input ``port`` (0: the current stream, i: the step's i-th input)."""

    fn: str
    column: str | None
    port: int = 0
    pos: Any = field(default=None, compare=False, repr=False)

    def text(self, names: list[str] | None = None) -> str:
        """DSL text: ``mean(temp)``, ``std(b.temp)`` (``names[port]`` names the input)."""
        names = names or []
        if self.column is None:
            arg = "" if self.port == 0 else names[self.port]
        else:
            plain = to_text(Col(self.column)) == self.column
            if self.port:
                name = names[self.port]
                arg = f"{name}.{self.column}" if plain else f"{name}.col({self.column!r})"
            else:
                arg = self.column if plain and self.column not in names else f"col({self.column!r})"
        return f"{self.fn}({arg})"


@dataclass(frozen=True, kw_only=True)
class Correlate(Step):
    """Conditions over several streams (see README "correlate"): per key, for every admitted
    row of any input, one row with the key, the row's time and each aggregate over the rows
    of its input that are within ``over`` of the key's latest time."""

    on: tuple[str, ...]
    time: str
    over: Duration
    lateness: Duration = 0
    aggs: tuple[tuple[str, CorrAgg], ...]
    kind = "correlate"


@dataclass(frozen=True, kw_only=True)
class Sink(Step):
    target: Literal["table", "parquet", "callback", "none"]
    name: str | None = None  # table name or parquet directory
    callback: ObjRef | None = None
    # table sinks: "append" | "upsert"; Parquet sinks: an output mode, OUTPUT_MODES
    mode: Literal["append", "upsert", "complete", "update"] | None = None
    key: tuple[str, ...] | None = None
    kind = "sink"


OUTPUT_MODES = ("append", "complete", "update")
"""A Parquet sink's output modes, as Spark users know them: ``append`` writes every row of
the stream (after an unwindowed ``agg``, its per-row changelog), ``complete`` the table (the
latest row per key, as an upsert table holds it) at the end of a finite run and again per
epoch of an unbounded one, ``update`` the rows changed since the previous write."""


def check_output_mode(mode: Any) -> None:
    """Raise :class:`ArgumentError` naming ``mode`` unless it is one of OUTPUT_MODES."""
    if mode not in OUTPUT_MODES:
        raise ArgumentError(
            f"parquet sink: mode must be one of {', '.join(map(repr, OUTPUT_MODES))}, got {mode!r}",
            "mode",
        )


def edge_kind(step: Step) -> str:
    """How rows move into ``step``: ``forward``, ``hash(k1,k2)`` or ``single``."""
    keys = getattr(step, "keys", None)
    if isinstance(step, Transfer):
        return f"entities({','.join(step.keys)})"
    if isinstance(step, (Join, Correlate)):
        return f"hash({','.join(step.on)})"
    if keys:
        return f"hash({','.join(keys)})"
    if isinstance(step, (Aggregate, Running, TopK, Dedup, Sketch, Speculate, Apply)):
        return "single"
    return "forward"


def operator_kind(step: Step) -> str:
    """Prasaad et al.'s operator kinds: ``stateless``, ``partitioned`` (keyed) or ``stateful``."""
    if isinstance(step, (Filter, Select, WithColumns, Explode)):
        return "stateless"
    if isinstance(step, Transfer):
        return "multi-entity"
    if isinstance(step, Speculate):
        return "speculative"
    if isinstance(step, (Join, Correlate)) or getattr(step, "keys", None):
        return "partitioned"
    if isinstance(step, (Source, Sink, Union)):
        return "io"
    return "stateful"


# -------------------------------------------------------------------------------- plan


MAX_PIPELINE_DEPTH = 200
"""The most steps on one path from a source to a sink. Plans are nested frozen dataclasses
that numbering, comparison, compilation and the engines walk recursively; a limit turns a
``RecursionError`` into one clear error (no real pipeline comes near it)."""


def _check_depth(sinks: tuple[Sink, ...]) -> None:
    """Refuse a plan deeper than MAX_PIPELINE_DEPTH (an iterative walk: any depth is safe)."""
    depth: dict[int, int] = {}
    stack: list[tuple[Step, bool]] = [(s, False) for s in sinks]
    while stack:
        s, inputs_done = stack.pop()
        if id(s) in depth:
            continue
        if not inputs_done:
            stack.append((s, True))
            stack.extend((i, False) for i in s.inputs if id(i) not in depth)
            continue
        depth[id(s)] = 1 + max((depth[id(i)] for i in s.inputs), default=0)
        if depth[id(s)] > MAX_PIPELINE_DEPTH + 2:  # + the source and the sink
            pos = getattr(s, "pos", None)
            msg = (
                f"a pipeline may have at most {MAX_PIPELINE_DEPTH} steps between a source "
                f"and a sink; this one has more ({s.kind} step)"
            )
            if pos is not None and pos.line:
                raise PlanError(msg, pos.line, pos.column, pos.text, pos.length)
            raise PlanError(msg)


def _number(sinks: tuple[Sink, ...]) -> tuple[Sink, ...]:
    """Assign ``kind#n`` step ids by a post-order walk from the sinks (inputs first)."""
    memo: dict[int, Step] = {}
    counter = [0]

    def visit(s: Step) -> Step:
        if id(s) in memo:
            return memo[id(s)]
        inputs = tuple(visit(i) for i in s.inputs)
        counter[0] += 1
        new = dataclasses.replace(s, inputs=inputs, step_id=f"{s.kind}#{counter[0]}")
        memo[id(s)] = new
        return new

    return tuple(visit(s) for s in sinks)  # type: ignore[misc]


@dataclass(frozen=True)
class Plan:
    """A frozen pipeline: the sinks and, through their inputs, every step.

    Build one from DSL text (:func:`streamcell.parse`) or with the fluent API
    (``sc.source(...).filter(...).plan()``); both give equal plans for the same pipeline.
    """

    sinks: tuple[Sink, ...]
    name: str | None = field(default=None, compare=False)

    @staticmethod
    def of(sinks: tuple[Sink, ...], name: str | None = None) -> Plan:
        _check_depth(sinks)
        return Plan(_number(sinks), name)

    @functools.cached_property
    def steps(self) -> tuple[Step, ...]:
        """Every step, inputs before consumers, in step-id order (found once per plan: a
        plan never changes)."""
        seen: dict[str, Step] = {}

        def visit(s: Step) -> None:
            if s.step_id in seen:
                return
            for i in s.inputs:
                visit(i)
            seen[s.step_id] = s

        for s in self.sinks:
            visit(s)
        return tuple(seen.values())

    @property
    def sources(self) -> tuple[Source, ...]:
        return tuple(s for s in self.steps if isinstance(s, Source))

    def step(self, step_id: str) -> Step:
        for s in self.steps:
            if s.step_id == step_id:
                return s
        raise KeyError(step_id)

    def is_chain(self) -> bool:
        """One source, no step with several inputs, no step feeding several: a chain."""
        steps = self.steps
        uses = [i.step_id for s in steps for i in s.inputs]
        return (
            sum(isinstance(s, Source) for s in steps) == 1
            and all(len(s.inputs) <= 1 for s in steps)
            and len(uses) == len(set(uses))
        )

    def consumers(self) -> dict[str, list[Step]]:
        out: dict[str, list[Step]] = {s.step_id: [] for s in self.steps}
        for s in self.steps:
            for i in s.inputs:
                out[i.step_id].append(s)
        return out

    def to_dsl(self) -> str:
        """The pipeline as ``%%stream`` cell text (parsing it gives an equal plan)."""
        from .dsl import print_plan

        return print_plan(self)

    def explain(self) -> str:
        """A text rendering: one line per step with its edge kind and output schema."""
        from .explain import explain_text

        return explain_text(self)

    def _repr_html_(self) -> str:
        from .explain import explain_html

        return explain_html(self)

    def __repr__(self) -> str:
        return f"Plan({self.name or ''}, {len(self.steps)} steps)"

    def start(self, name: str | None = None, options: RunOptions | None = None, **kw: Any) -> Run:
        """Start running the plan and return the :class:`~streamcell.run.Run` handle at once."""
        from .run import start

        return start(self, name=name or self.name, options=options, **kw)

    run = start


# ------------------------------------------------------------------------------ builder


def _named(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[str, IR], ...]:
    out: list[tuple[str, IR]] = []
    for a in args:
        if isinstance(a, Named):
            out.append((a.name, a.ir))
        elif isinstance(a, str):
            out.append((a, Col(a)))
        else:
            ir = _ir(a)
            out.append((output_name(ir), ir))
    for k, v in kwargs.items():
        out.append((k, _ir(v)))
    return tuple(out)


def _aggs(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[str, AggCall], ...]:
    out = _named(args, kwargs)
    for name, ir in out:
        if not isinstance(ir, AggCall):
            raise TypeError(
                f"{name}: expected an aggregate such as sc.count() or sc.col('x').sum(), got {to_text(ir)}"
            )
    return out  # type: ignore[return-value]


def _cols(cols: Any) -> tuple[str, ...]:
    if isinstance(cols, str):
        return (cols,)
    return tuple(c if isinstance(c, str) else output_name(_ir(c)) for c in cols)


class Stream:
    """A pipeline under construction (fluent, Polars-like; each method returns a new Stream).

    Examples
    --------
    >>> import streamcell as sc
    >>> s = (sc.source(sc.clickstream(rows=1000, seed=1))
    ...        .filter(sc.col("event") == "view")
    ...        .key_by("user_id")
    ...        .session(gap="30m", time="ts")
    ...        .agg(pages=sc.count(), spent=sc.col("price").sum()))
    >>> plan = s.plan("sessions")
    """

    def __init__(self, step: Step, name: str | None = None):
        self._step = step
        self._name = name

    # stateless
    def filter(self, predicate: Expr) -> Stream:
        """Keep rows where ``predicate`` is true (null counts as false). All backends."""
        return Stream(Filter(inputs=(self._step,), predicate=_ir(predicate)), self._name)

    def select(self, *exprs: Any, **named: Any) -> Stream:
        """Keep/compute exactly these columns: ``select("a", b=sc.col("x") * 2)``."""
        return Stream(Select(inputs=(self._step,), exprs=_named(exprs, named)), self._name)

    def with_columns(self, *exprs: Any, **named: Any) -> Stream:
        """Add or replace columns, keeping the others: ``with_columns(total=sc.col("p") * sc.col("q"))``."""
        return Stream(WithColumns(inputs=(self._step,), exprs=_named(exprs, named)), self._name)

    def explode(self, *columns: str) -> Stream:
        """One row per element of list column(s) (empty/null list gives one row with null)."""
        return Stream(Explode(inputs=(self._step,), columns=_cols(columns)), self._name)

    # keyed / stateful
    def key_by_all(self, *keys: str) -> EntityStream:
        """Events that name several entities up front (the lazy topological sorting design), e.g.
        ``key_by_all("src", "dst").transfer("amount", initial=100)``: each event updates
        every entity it names, in arrival order per entity."""
        return EntityStream(self, _cols(keys))

    def key_by(self, *keys: str) -> KeyedStream:
        """Partition by key columns for the next stateful step (agg, running, window, top_k, dedup)."""
        return KeyedStream(self, _cols(keys))

    def agg(self, *aggs: Any, **named: Any) -> Stream:
        return KeyedStream(self, ()).agg(*aggs, **named)

    def running(self, *aggs: Any, **named: Any) -> Stream:
        return KeyedStream(self, ()).running(*aggs, **named)

    def apply(self, fn: Any, *args: str, name: str | None = None) -> Stream:
        """A keyed step without ``key_by``: one global state for every row (see
        :meth:`KeyedStream.apply`)."""
        return KeyedStream(self, ()).apply(fn, *args, name=name)

    def tumbling(self, size: Duration, *, time: str, lateness: Duration = 0) -> WindowedStream:
        return KeyedStream(self, ()).tumbling(size, time=time, lateness=lateness)

    def sliding(
        self, size: Duration, *, every: Duration, time: str, lateness: Duration = 0
    ) -> WindowedStream:
        return KeyedStream(self, ()).sliding(size, every=every, time=time, lateness=lateness)

    def session(self, gap: Duration, *, time: str, lateness: Duration = 0) -> WindowedStream:
        return KeyedStream(self, ()).session(gap, time=time, lateness=lateness)

    def top_k(self, k: int, *, by: str, descending: bool = True) -> Stream:
        return KeyedStream(self, ()).top_k(k, by=by, descending=descending)

    def dedup(self, *columns: str) -> Stream:
        """Keep the first row for each value of ``columns`` (all columns if none given)."""
        return Stream(Dedup(inputs=(self._step,), keys=_cols(columns)), self._name)

    def sketch(self, **sketches: SketchCall) -> Stream:
        """Sketch columns as rows pass: ``sketch(users=sc.theta("user_id"))``; query the live
        sketch with ``run.sketch("users")``. Rows go on unchanged."""
        return KeyedStream(self, ()).sketch(**sketches)

    def speculate(
        self,
        fn: Any,
        *args: str,
        horizon: Horizon = "adaptive",
        name: str | None = None,
    ) -> Stream:
        """Run a transactional native function once per row against a keyed state store.

        ``fn`` is a function compiled with :func:`streamcell.cython_udf` whose first argument
        is the state (``sc_txn *tx``), read and written with ``tx_get(tx, key)`` and
        ``tx_put(tx, key, value)`` (int64 keys and values; a key never written reads 0).
        Rows pass in arrival order with the function's result added as column ``name``
        (default: the function's name); a null argument gives a null result without running
        the function. The result always equals running the function on the rows one at a
        time in arrival order; the native engine runs rows ahead speculatively on
        ``RunOptions.workers`` threads, commits them in order and re-runs a row whose reads
        an earlier row changed (Sturzrehm). Native and reference engines; Spark refuses it.

        Parameters
        ----------
        fn : str or UdfSpec
            The function's name (or ``udfs.functions["name"]``).
        *args : str
            Input columns passed to the function after ``tx``; default: the columns named
            like the function's parameters.
        horizon : int or "adaptive"
            How many events from the earliest uncommitted one on may run: ``1`` is
            sequential; ``"adaptive"`` (default) follows the abort rate.
        name : str, optional
            The result column.

        Examples
        --------
        >>> import streamcell as sc
        >>> udfs = sc.cython_udf(
        ...     "cdef long claim(sc_txn *tx, long driver) noexcept nogil:\n"
        ...     "    if tx_get(tx, driver) == 0:\n"
        ...     "        tx_put(tx, driver, 1)\n"
        ...     "        return driver\n"
        ...     "    return -1\n"
        ... )  # doctest: +SKIP
        >>> s = sc.source(frame).speculate("claim", "driver", horizon=8)  # doctest: +SKIP
        """
        fname = fn if isinstance(fn, str) else getattr(fn, "name", None)
        if not isinstance(fname, str) or not fname.isidentifier():
            raise TypeError(f"speculate() takes a function name or UdfSpec, got {fn!r}")
        return Stream(
            Speculate(
                inputs=(self._step,),
                fn=fname,
                args=_cols(args) if args else (),
                name=name or fname,
                horizon=check_horizon(horizon),
            ),
            self._name,
        )

    # fan-in
    def union(self, *others: Stream) -> Stream:
        """Merge streams with the same schema, in round-robin arrival order (see README)."""
        return Stream(Union(inputs=(self._step, *(o._step for o in others))), self._name)

    def join(
        self,
        other: Stream,
        *,
        on: str | list[str],
        within: Duration,
        time: str,
        lateness: Duration = 0,
    ) -> Stream:
        """Keyed interval join: rows with equal ``on`` whose ``time`` differ by at most ``within``."""
        return Stream(
            Join(
                inputs=(self._step, other._step),
                on=_cols(on),
                within=within,
                time=time,
                lateness=lateness,
            ),
            self._name,
        )

    def correlate(
        self,
        *others: Stream,
        on: str | list[str],
        time: str,
        over: Duration,
        lateness: Duration = 0,
        **aggs: Any,
    ) -> Stream:
        """Conditions over several streams: per key, for every row of any input, one row
        with the key, the row's time and aggregates over each input's rows within ``over``.

        Parameters
        ----------
        *others
            The other streams (inputs 1, 2, ...; this stream is input 0).
        on, time
            Key column(s) and event-time column, present in every input with one type.
        over
            How far back (from the key's latest time) rows count.
        lateness
            Allowed disorder: rows older than (latest time seen - lateness) are late.
        **aggs
            ``name=stream.col("x").mean()`` (count, sum, mean, std, min, max, last;
            ``stream.col().count()`` counts rows); ``sc.col("x").mean()`` and
            ``sc.count()`` refer to this stream.

        Examples
        --------
        >>> import polars as pl, streamcell as sc
        >>> a = sc.source(pl.DataFrame({"region": [1], "ts": [0], "temp": [20.0]}))
        >>> b = sc.source(pl.DataFrame({"region": [1], "ts": [1], "temp": [18.0]}))
        >>> s = a.correlate(b, on="region", time="ts", over=60,
        ...                 a_avg=a.col("temp").mean(), b_std=b.col("temp").std())

        Backends: reference and native; Spark refuses it.
        """
        streams = (self, *others)
        out: list[tuple[str, CorrAgg]] = []
        for name, a in aggs.items():
            out.append((name, _corr_agg(name, a, streams)))
        return Stream(
            Correlate(
                inputs=tuple(x._step for x in streams),
                on=_cols(on),
                time=_cols(time)[0],
                over=over,
                lateness=lateness,
                aggs=tuple(out),
            ),
            self._name,
        )

    def col(self, name: str | None = None) -> StreamColumn:
        """Column ``name`` of this stream, for :meth:`correlate` aggregates
        (``b.col("temp").std()``); ``col()`` with no name: ``b.col().count()`` counts rows."""
        return StreamColumn(self, name)

    # sinks
    def sink_table(
        self,
        name: str | None = None,
        *,
        mode: Literal["append", "upsert"] | None = None,
        key: list[str] | None = None,
    ) -> Sink:
        """A live table, queried with ``run.table(name)`` (mode defaults by the step: see README)."""
        return Sink(
            inputs=(self._step,),
            target="table",
            name=name,
            mode=mode,
            key=None if key is None else _cols(key),
        )

    def sink_parquet(
        self,
        path: str,
        *,
        mode: Literal["append", "complete", "update"] = "append",
        key: list[str] | None = None,
    ) -> Sink:
        """Write Parquet part files into directory ``path``.

        Parameters
        ----------
        path
            The directory (created if missing). On Spark, any URI Spark writes.
        mode
            ``"append"`` (default): every row of the stream, in order (after an unwindowed
            ``agg``, its per-row changelog). ``"complete"``: the table, the latest row per
            key as ``sink_table`` would hold it, written when a finite run ends and
            rewritten per epoch of an unbounded one. ``"update"``: per write, the rows
            changed since the previous write (a finite run writes once, at its end).
        key
            The key of ``complete`` / ``update`` (default: the ``agg`` / ``top_k`` keys
            before the sink; without a key every row is a row of the table).

        Every engine supports every mode.

        Examples
        --------
        >>> s = sc.source(sc.clickstream(rows=1000)).key_by("user_id").agg(n=sc.count())
        >>> s.sink_parquet("out/", mode="complete")  # doctest: +SKIP
        """
        check_output_mode(mode)
        if key is not None and mode == "append":
            raise ArgumentError('parquet sink: key= needs mode="complete" or "update"', "key")
        return Sink(
            inputs=(self._step,),
            target="parquet",
            name=path,
            mode=None if mode == "append" else mode,
            key=None if key is None else _cols(key),
        )

    def sink_callback(self, fn: Any) -> Sink:
        """Call ``fn(df)`` with consecutive Polars DataFrames of output rows."""
        return Sink(inputs=(self._step,), target="callback", callback=ObjRef(fn))

    def sink_none(self) -> Sink:
        """Drop the rows (the default after a final ``sketch`` stage)."""
        return Sink(inputs=(self._step,), target="none")

    def plan(self, name: str | None = None) -> Plan:
        """Freeze into a :class:`Plan` (adds ``sink_table()`` if the stream has no sink, or
        ``sink_none()`` when it ends with a ``sketch`` stage)."""
        if isinstance(self._step, Sketch):
            return Plan.of((self.sink_none(),), name)
        return Plan.of((self.sink_table(),), name)

    def start(self, name: str | None = None, **kw: Any) -> Run:
        return self.plan(name).start(name, **kw)


class StreamColumn:
    """A column of a named stream in a :meth:`Stream.correlate` aggregate."""

    def __init__(self, stream: Stream, name: str | None):
        self.stream = stream
        self.name = name

    def _agg(self, fn: str) -> _StreamAgg:
        if self.name is None and fn != "count":
            raise TypeError(f"{fn}() needs a column: stream.col('x').{fn}()")
        return _StreamAgg(self.stream, fn, self.name)

    def count(self) -> _StreamAgg:
        """Non-null values (rows, for ``col()``)."""
        return self._agg("count")

    def sum(self) -> _StreamAgg:
        return self._agg("sum")

    def mean(self) -> _StreamAgg:
        return self._agg("mean")

    def std(self) -> _StreamAgg:
        """Sample standard deviation (ddof=1; null under two values)."""
        return self._agg("std")

    def min(self) -> _StreamAgg:
        return self._agg("min")

    def max(self) -> _StreamAgg:
        return self._agg("max")

    def last(self) -> _StreamAgg:
        """The most recent row's value (null or not)."""
        return self._agg("last")


@dataclass(frozen=True)
class _StreamAgg:
    stream: Stream
    fn: str
    column: str | None


def _corr_agg(name: str, a: Any, streams: tuple[Stream, ...]) -> CorrAgg:
    if isinstance(a, _StreamAgg):
        for port, st in enumerate(streams):
            if st._step is a.stream._step:
                return CorrAgg(a.fn, a.column, port)
        raise ValueError(f"{name}: the stream of {a.fn}() is not an input of this correlate")
    ir = _ir(a) if not isinstance(a, AggCall) else a
    if isinstance(ir, AggCall) and (ir.arg is None or isinstance(ir.arg, Col)):
        if ir.fn not in CORRELATE_FUNCTIONS:
            raise ValueError(
                f"{name}: correlate aggregates are {', '.join(CORRELATE_FUNCTIONS)}, not {ir.fn}"
            )
        return CorrAgg(ir.fn, None if ir.arg is None else ir.arg.name, 0)
    raise TypeError(
        f"{name}: expected an aggregate of one column such as b.col('x').mean() "
        f"or sc.col('x').mean(), got {a!r}"
    )


class EntityStream:
    """A stream whose events name several entities (``key_by_all``); finish with a
    multi-entity update such as :meth:`transfer`."""

    def __init__(self, stream: Stream, keys: tuple[str, ...]):
        self._s = stream
        self._keys = keys

    def transfer(self, amount: str, *, initial: float | int = 0, overdraft: bool = False) -> Stream:
        """Move ``amount`` from the first entity to the second (balances start at
        ``initial``); adds ``<key>_balance`` columns; rejected transfers are dead letters."""
        return Stream(
            Transfer(
                inputs=(self._s._step,),
                keys=self._keys,
                amount=_cols(amount)[0],
                initial=initial,
                overdraft=overdraft,
            ),
            self._s._name,
        )


class KeyedStream:
    """A stream partitioned by key; the next stateful step runs per key."""

    def __init__(self, stream: Stream, keys: tuple[str, ...]):
        self._s = stream
        self._keys = keys

    def _wrap(self, step: Step) -> Stream:
        return Stream(step, self._s._name)

    def agg(self, *aggs: Any, **named: Any) -> Stream:
        """Aggregate per key; emits the updated row for the key after every input (upsert)."""
        return self._wrap(
            Aggregate(
                inputs=(self._s._step,), keys=self._keys, window=None, aggs=_aggs(aggs, named)
            )
        )

    def running(self, *aggs: Any, **named: Any) -> Stream:
        """Per-event running aggregates: each row plus the aggregates so far for its key."""
        return self._wrap(
            Running(inputs=(self._s._step,), keys=self._keys, aggs=_aggs(aggs, named))
        )

    def apply(self, fn: Any, *args: str, name: str | None = None) -> Stream:
        """Run a keyed step, a native function over a typed per-key state struct, once per row.

        ``fn`` is a function compiled with :func:`streamcell.cython_udf` whose first argument
        is a pointer to a ``cdef struct`` declared in the same source. Each key gets its own
        zero-initialised struct; the function is called once per row, in arrival order, with
        its key's state and the row's ``args``, and its result is added as column ``name``
        (default: the function's name). Rows pass through, like :meth:`running`. A null
        argument gives a null result without calling the function; a null key is a key.
        Native (partitioned by key on worker threads, without the GIL) and reference
        engines; Spark refuses it.

        Parameters
        ----------
        fn : str or UdfSpec
            The function's name (or ``udfs.functions["name"]``).
        *args : str
            Input columns passed after the state; default: the columns named like the
            function's parameters.
        name : str, optional
            The result column.

        Examples
        --------
        >>> import streamcell as sc
        >>> udfs = sc.cython_udf(
        ...     "cdef struct Avg:\n    double total\n    long n\n"
        ...     "cdef double running_avg(Avg *st, double price) noexcept nogil:\n"
        ...     "    st.total += price\n    st.n += 1\n    return st.total / st.n\n"
        ... )  # doctest: +SKIP
        >>> s = sc.source(frame).key_by("user_id").apply("running_avg", "price", name="avg")  # doctest: +SKIP
        """
        fname = fn if isinstance(fn, str) else getattr(fn, "name", None)
        if not isinstance(fname, str) or not fname.isidentifier():
            raise TypeError(f"apply() takes a function name or UdfSpec, got {fn!r}")
        return self._wrap(
            Apply(
                inputs=(self._s._step,),
                keys=self._keys,
                fn=fname,
                args=_cols(args) if args else (),
                name=name or fname,
            )
        )

    def top_k(self, k: int, *, by: str, descending: bool = True) -> Stream:
        """The k rows with the largest (or smallest) ``by`` per key, emitted when they change."""
        return self._wrap(
            TopK(inputs=(self._s._step,), keys=self._keys, k=k, by=by, descending=descending)
        )

    def dedup(self) -> Stream:
        """Keep the first row of each key."""
        return self._wrap(Dedup(inputs=(self._s._step,), keys=self._keys))

    def sketch(self, **sketches: SketchCall) -> Stream:
        """One set of sketches per key: ``key_by("category").sketch(users=sc.theta("user_id"))``."""
        if not sketches:
            raise TypeError("sketch() needs at least one name=sc.theta(...)/hll/kll/frequent")
        for name, call in sketches.items():
            if not isinstance(call, SketchCall):
                raise TypeError(
                    f"sketch {name}: expected sc.theta / sc.hll / sc.kll / sc.frequent, got {call!r}"
                )
        return self._wrap(
            Sketch(inputs=(self._s._step,), keys=self._keys, sketches=tuple(sketches.items()))
        )

    def tumbling(self, size: Duration, *, time: str, lateness: Duration = 0) -> WindowedStream:
        return WindowedStream(self, Window("tumbling", time, size, None, lateness))

    def sliding(
        self, size: Duration, *, every: Duration, time: str, lateness: Duration = 0
    ) -> WindowedStream:
        return WindowedStream(self, Window("sliding", time, size, every, lateness))

    def session(self, gap: Duration, *, time: str, lateness: Duration = 0) -> WindowedStream:
        return WindowedStream(self, Window("session", time, gap, None, lateness))


class WindowedStream:
    """A keyed (or global) stream with an event-time window; finish with :meth:`agg`."""

    def __init__(self, keyed: KeyedStream, window: Window):
        self._k = keyed
        self._w = window

    def agg(self, *aggs: Any, **named: Any) -> Stream:
        """Aggregate per key and window; one row per window when the watermark closes it."""
        k = self._k
        return k._wrap(
            Aggregate(inputs=(k._s._step,), keys=k._keys, window=self._w, aggs=_aggs(aggs, named))
        )


def source(what: Any, *, rate: float | None = None, name: str | None = None) -> Stream:
    """Start a pipeline from a source.

    ``what`` is a generator/file spec (``sc.clickstream(...)``, ``sc.parquet(path)``...), a
    Polars DataFrame, a pyarrow Table / RecordBatchReader, anything with
    ``__arrow_c_stream__``, or an iterable of dicts. ``rate`` throttles to rows per second.
    """
    spec = what if isinstance(what, SourceSpec) else SourceSpec("object", (), ObjRef(what, name))
    return Stream(Source(spec=spec, rate=None if rate is None else float(rate), name=name), name)


def combine(*sinks: Sink, name: str | None = None) -> Plan:
    """A plan with several sinks (e.g. two chains with their own tables)."""
    return Plan.of(tuple(sinks), name)


def _spec(kind: str, **args: Any) -> SourceSpec:
    def freeze(v: Any) -> Any:
        if isinstance(v, dict):
            return tuple((k, freeze(x)) for k, x in v.items())
        if isinstance(v, list):
            return tuple(freeze(x) for x in v)
        return v

    return SourceSpec(kind, tuple((k, freeze(v)) for k, v in args.items() if v is not None))


_COUNT_LIMIT = 10**12  # users, items, stores, customers: numpy draws int64 ids below it


def _check_int(kind: str, name: str, v: Any, lo: int, hi: int | None = None) -> None:
    if isinstance(v, bool) or not isinstance(v, int):
        raise ArgumentError(f"{kind}: {name} must be an integer, got {v!r}", name)
    if v < lo or (hi is not None and v > hi):
        bound = f"between {lo:_} and {hi:_}" if hi is not None else f">= {lo}"
        raise ArgumentError(f"{kind}: {name} must be {bound}, got {v!r}", name)


def check_generator_args(kind: str, args: dict[str, Any]) -> None:
    """Validate a generator's arguments; raises :class:`ArgumentError` naming the parameter."""
    for name, v in args.items():
        if name == "rows":
            if v is not None:
                _check_int(kind, name, v, 0)
        elif name == "seed":
            _check_int(kind, name, v, 0)
        elif name in ("users", "items", "stores", "customers"):
            _check_int(kind, name, v, 1, _COUNT_LIMIT)
        elif name == "late_fraction":
            ok = isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 1
            if not ok:
                raise ArgumentError(
                    f"{kind}: late_fraction must be a number from 0 to 1, got {v!r}", name
                )


def clickstream(
    *,
    rows: int | None = None,
    users: int = 10_000,
    items: int = 1_000,
    seed: int = 0,
    late_fraction: float = 0.01,
) -> SourceSpec:
    """Deterministic web clickstream (TPCx-BB web_clickstreams shape).

    Columns: ts (datetime), user_id (int, ~1% null), item_id, category (int), event
    ("view" | "cart" | "purchase"), price (float). ``rows=None`` is unbounded.
    ``users``/``items`` are at least 1, ``seed`` at least 0, ``late_fraction`` from 0 to 1
    (an :class:`~streamcell.errors.ArgumentError` names the parameter otherwise).
    """
    check_generator_args(
        "clickstream",
        dict(rows=rows, users=users, items=items, seed=seed, late_fraction=late_fraction),
    )
    return _spec(
        "clickstream", rows=rows, users=users, items=items, seed=seed, late_fraction=late_fraction
    )


def store_sales(
    *,
    rows: int | None = None,
    stores: int = 50,
    items: int = 1_000,
    customers: int = 10_000,
    seed: int = 0,
) -> SourceSpec:
    """Deterministic store sales (TPCx-BB store_sales shape).

    Columns: ts, ticket, store_id, item_id, customer_id, category, quantity, price, net_paid.
    ``stores``/``items``/``customers`` are at least 1 and ``seed`` at least 0.
    """
    check_generator_args(
        "store_sales",
        dict(rows=rows, stores=stores, items=items, customers=customers, seed=seed),
    )
    return _spec(
        "store_sales", rows=rows, stores=stores, items=items, customers=customers, seed=seed
    )


def parquet(path: str) -> SourceSpec:
    """Parquet file or directory of files, streamed batch by batch."""
    return _spec("parquet", path=str(path))


def csv(path: str, *, schema: dict[str, str] | None = None, header: bool = True) -> SourceSpec:
    """CSV file or directory, streamed; ``schema`` maps column to type (inferred if omitted)."""
    return _spec("csv", path=str(path), schema=schema, header=None if header else False)


def ndjson(path: str, *, schema: dict[str, str] | None = None) -> SourceSpec:
    """Newline-delimited JSON file or directory, streamed; ``schema`` optional."""
    return _spec("ndjson", path=str(path), schema=schema)
