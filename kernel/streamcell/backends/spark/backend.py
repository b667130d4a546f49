"""The Spark backend: the same plan on Apache Spark through PySpark 4.

Two modes, chosen by the source:

- **finite sources** (files, DataFrames, iterables, generators with ``rows=N``) run as one
  Spark batch job (:class:`BatchDriver`);
- **streaming sources** (a folder watched for new files, an unbounded generator) run as a
  Structured Streaming query (:mod:`.stream`): every step is a stage of the query
  (:mod:`.state`), keyed steps and windows keep their state in Spark's state store (in the
  checkpoint), and each micro-batch is delivered sorted by arrival order.

Lowering of a finite run, step by step:

- ``filter`` / ``select`` / ``with_columns`` -> DataFrame operations over Spark SQL functions
  (:mod:`.expr`); rows whose expression fails (a bad cast) are dead letters;
- ``agg`` / ``running`` (unwindowed), ``top_k``, ``dedup`` -> ``repartition(keys)`` +
  ``sortWithinPartitions(_o)`` + ``mapInArrow`` running streamcell's native C operator per
  partition (:mod:`.native_ops`; the reference operator of :mod:`.ops` where the native one
  cannot run): Spark's own ``groupBy`` gives the final aggregate, not the changelog of
  updates our semantics define, and its float sums are not in arrival order;
- an ``agg`` whose only consumer is its final upsert table, of count / min / max / integer
  sums / count_distinct of columns -> Spark's ``groupBy`` (``Lowering.group_by``);
- windowed ``agg`` -> the watermark in arrival order by a Spark window function, windows
  per key as above, and each window's closing point by an as-of join on the watermark.

Every row carries an order key ``_o`` (its source serial number, extended by each operator
that emits several rows); sinks receive rows sorted by it, so finite runs equal the
reference exactly: tables, counts, late rows and dead letters.
"""

from __future__ import annotations

import functools
import itertools
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import polars as pl
import pyarrow as pa

from ... import plan as P
from ...compiler import Compiled
from ...errors import ArgumentError, NotSupportedError, StreamcellError
from ...expr import FUNCTIONS, IR, Binary, Call, Col, Lit, Unary, When
from ...files import local_path, remote, scheme, shown
from ...options import RunOptions
from ...sources import BadRow, locate_serial, row_batches
from ...types import BOOL, Schema, polars_schema
from ..evaluate import RowError, compile_row_expr
from . import native_ops
from .direct import Lineage, source_lineage, through
from .expr import NAME, Translator, can_fail, check_names, qcol, spark_type
from .fold import direct_fold
from .groupby import (
    WINDOW_CLOSE,
    agg_columns,
    exact_aggs,
    first_order,
    grouped,
    running_columns,
    running_fits,
    session_fits,
    sessions,
    tumbling,
    tumbling_fits,
)
from .io import (
    NO_FS_HINT,
    SparkTable,
    file_splits,
    in_order,
    keep_bounded,
    latest_per_key,
    merged_order,
    merged_serial,
    spark_reads,
    spark_source,
    spark_writes,
    write_parquet,
    written_rows,
)
from .native_ops import NATIVE, native_keyed_fn, native_refusal, native_window_fn
from .ops import (
    DEAD,
    END,
    LATE,
    LIVE,
    SKETCH,
    STATS,
    keyed_fn,
    merge_sketches,
    side_payload,
    sketch_fn,
    window_fn,
)

_ids = itertools.count()


class Translated(NamedTuple):
    """A stateless step as Spark columns (:meth:`Lowering._translated`)."""

    computed: dict[str, Any]
    """A filter's predicate (under the key ``""``) or a projection's computed columns."""
    err: Any
    """True where the reference fails on the row (None when nothing can fail)."""
    stages: list[dict[str, Any]]
    """Hidden columns that ``computed`` and ``err`` read, to add first, stage by stage: the
    step's repeated subexpressions, each computed once (:meth:`Translator.share`)."""


def _drop(df: Any, names: list[str]) -> Any:
    return df.drop(*names) if names else df


_TRANSLATED: dict[tuple[str, str, str], tuple[Any, Translated]] = {}
"""A stateless step's Spark columns (:meth:`Lowering._translated`) by the step's kind and
expressions, its input and its output schema, with (a weak reference to) the session they
belong to: every column is built by round trips to the JVM (a filter and a two-operator
projection took 84 ms a run), and a cell is re-run with the same steps. Columns are
immutable; those of another session are made anew."""


# --------------------------------------------------------------------------- checking


def source_spec(source: P.Source) -> P.SourceSpec:
    """The source's spec, looking through a notebook variable that holds a spec."""
    spec = source.spec
    if spec.kind == "object" and spec.obj is not None and isinstance(spec.obj.obj, P.SourceSpec):
        return spec.obj.obj
    return spec


def is_streaming(source: P.Source) -> bool:
    """Whether the source is unbounded (a Structured Streaming query on Spark)."""
    spec = source_spec(source)
    if spec.kind in ("clickstream", "store_sales") and spec.arg("rows") is None:
        return True
    return spec.kind in P.FILE_KINDS and bool(spec.arg("watch", False))


def chain(c: Compiled) -> list[P.Step]:
    """The plan as one source-to-sink chain (what Structured Streaming runs), or
    NotSupportedError naming the step."""
    steps = c.plan.steps
    consumers = c.plan.consumers()
    for s in steps:
        if len(s.inputs) > 1:
            raise NotSupportedError(
                s.step_id,
                NAME,
                f"fan-in ({s.kind}) on a streaming source; run it on finite sources",
            )
        if len(consumers[s.step_id]) > 1:
            raise NotSupportedError(
                s.step_id, NAME, "fan-out on a streaming source; run it on finite sources"
            )
    if len(c.plan.sources) > 1:
        raise NotSupportedError(
            c.plan.sources[1].step_id, NAME, "several streaming sources; run them on finite sources"
        )
    return graph(c)


def graph(c: Compiled) -> list[P.Step]:
    """The plan's steps for a batch job: a chain or a DAG of several sources, unions and
    fan-out (other multi-input steps are refused), or NotSupportedError naming the step."""
    steps = c.plan.steps
    for s in steps:
        if len(s.inputs) > 1 and not isinstance(s, (P.Union, P.Join)):
            raise NotSupportedError(
                s.step_id, NAME, f"fan-in ({s.kind}) is not on Spark yet; use engine='native'"
            )
        if isinstance(s, P.Explode):
            raise NotSupportedError(s.step_id, NAME, "list columns (explode)")
        if isinstance(s, P.Apply):
            raise NotSupportedError(
                s.step_id,
                NAME,
                f"apply {s.fn} (a native keyed step over a Cython state struct); "
                "use engine='native' or 'reference'",
            )
        if isinstance(s, P.Speculate):
            raise NotSupportedError(
                s.step_id,
                NAME,
                f"speculate {s.fn} (a native transactional function over one shared store); "
                "use engine='native' or 'reference'",
            )
        for _, t in c.schemas[s.step_id]:
            if t.name == "list":
                raise NotSupportedError(s.step_id, NAME, "list columns")
    return list(steps)


_SUPPORTED_FNS = set(FUNCTIONS)


def check_expr(e: IR | None, step: P.Step) -> None:
    """Static check that the translator handles ``e`` (no Spark needed)."""
    if e is None or isinstance(e, (Col, Lit)):
        return
    if isinstance(e, Unary):
        check_expr(e.operand, step)
    elif isinstance(e, Binary):
        check_expr(e.left, step)
        check_expr(e.right, step)
    elif isinstance(e, When):
        for cnd, v in e.branches:
            check_expr(cnd, step)
            check_expr(v, step)
        check_expr(e.otherwise, step)
    elif isinstance(e, Call):
        if e.fn not in _SUPPORTED_FNS:
            raise NotSupportedError(step.step_id, NAME, f"function {e.fn}")
        if e.fn == "round" and len(e.args) > 1:
            d = e.args[1]
            if not isinstance(d, Lit) or not isinstance(d.value, int):
                raise NotSupportedError(step.step_id, NAME, "round() with non-literal decimals")
        for a in e.args:
            if e.fn not in ("is_in", "cast") or a is e.args[0]:
                check_expr(a, step)
    else:
        raise NotSupportedError(step.step_id, NAME, f"expression {e!r}")


def check_step(s: P.Step, streaming: bool) -> None:
    if isinstance(s, P.Filter):
        check_expr(s.predicate, s)
    elif isinstance(s, (P.Select, P.WithColumns)):
        for _, e in s.exprs:
            check_expr(e, s)
    elif isinstance(s, (P.Aggregate, P.Running)):
        for _, a in s.aggs:
            check_expr(a.arg, s)
    if streaming:
        from .stream import streaming_refusal

        why = streaming_refusal(s)
        if why is not None:
            raise NotSupportedError(s.step_id, NAME, why + "; run it on a finite source")
    if isinstance(s, P.Sink) and s.target not in ("table", "parquet", "callback", "none"):
        raise NotSupportedError(s.step_id, NAME, f"sink {s.target}")


_ENV_PROBLEM: list[str | None] = []


def environment_problem() -> str | None:
    """Why Spark cannot run here (no PySpark, no Java 17), checked once per kernel."""
    if not _ENV_PROBLEM:
        from .session import java_problem, pyspark_problem

        _ENV_PROBLEM.append(pyspark_problem() or java_problem())
    return _ENV_PROBLEM[0]


class SparkBackend:
    name = NAME

    def check(self, c: Compiled, options: RunOptions) -> None:
        streaming = any(is_streaming(s) for s in c.plan.sources)
        steps = chain(c) if streaming else graph(c)
        for s in steps:
            check_step(s, streaming)
            if not streaming:  # a streaming run's rows travel pickled: no name can clash
                check_names(s.step_id, c.schemas[s.step_id])
        src = steps[0]
        assert isinstance(src, P.Source)
        if streaming and src.rate is not None and source_spec(src).kind in P.FILE_KINDS:
            raise NotSupportedError(
                src.step_id,
                NAME,
                "rate= on a watched folder (Spark's file stream reads whole new files per "
                "micro-batch and is not throttled)",
            )
        problem = environment_problem()
        if problem:
            raise StreamcellError(problem)
        from .session import get_session

        spec = source_spec(src)
        if streaming and spec.kind in P.FILE_KINDS:
            path = str(spec.arg("path"))
            if scheme(path) not in (None, "file") and not spark_reads(get_session(), path):
                raise NotSupportedError(
                    src.step_id,
                    NAME,
                    f"watch({shown(path)!r}): Spark lists a watched folder, and has no filesystem "
                    f"for this URI's scheme ({NO_FS_HINT})",
                )
        for sink in c.plan.sinks:  # a URI Spark cannot write must open through pyarrow
            name = sink.name or ""
            if sink.target != "parquet" or local_path(name) is not None:
                continue
            # a streaming run's Parquet sink is written by the driver, through pyarrow
            if streaming or not spark_reads(get_session(), name):
                try:
                    remote(name)
                except StreamcellError as e:
                    raise ArgumentError(
                        f"parquet sink: cannot create the directory {shown(name)!r}: {e}",
                        "path",
                        step=sink.step_id,
                    ) from None

    def execute(self, c: Compiled, env: Any, options: RunOptions) -> bool:
        if any(is_streaming(s) for s in c.plan.sources):
            from .stream import StreamDriver

            return StreamDriver(c, env, options, chain(c)).run()
        return BatchDriver(c, env, options, graph(c)).run()


# --------------------------------------------------------------------------- helpers


def map_in_arrow(df: Any, fn: Callable[..., Any], schema: str) -> Any:
    """``df.mapInArrow(fn, schema)``, also over columns whose names Spark reads as paths.
    PySpark passes each column to the function by its bare name, and a name like ``a.b`` is
    then field ``b`` of a column ``a``; the columns go in under positional names
    (``__sc_in0``...) and ``fn`` gets its batches under their own names back (no copy)."""
    names = list(df.columns)
    if not any("." in n or "`" in n for n in names):
        return df.mapInArrow(fn, schema)
    safe = [f"__sc_in{i}" for i in range(len(names))]

    def renamed(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return fn(b.rename_columns(names) for b in batches)

    return df.toDF(*safe).mapInArrow(renamed, schema)


def ddl(schema: Schema, extra: str = "") -> str:
    cols = ", ".join(f"`{n.replace('`', '``')}` {spark_type(t)}" for n, t in schema)
    return cols + (", " + extra if extra and cols else extra)


ORDER_DDL = "`_o` array<bigint>"
SIDE_DDL = ORDER_DDL + ", `_k` tinyint, `_b` binary"


def order_array(seqs: pa.Array) -> pa.Array:
    """``[[s] for s in seqs]`` as an Arrow list<int64> array, built without Python loops."""
    import numpy as np

    offsets = pa.array(np.arange(len(seqs) + 1, dtype=np.int32))
    return pa.ListArray.from_arrays(offsets, seqs.cast(pa.int64()))


def source_table(
    c: Compiled,
    source: P.Source,
    schema: Schema,
    on_bad: Callable[[int, BadRow], None],
    pace: Callable[[int], bool] = lambda n: True,
    on_error: Callable[[Exception], None] | None = None,
) -> pa.Table:
    """Every row of a finite source as one Arrow table with its serial number ``_o``
    (bad rows take a serial number too and go to ``on_bad``). ``pace(rows so far)`` is
    called as rows are read: it throttles (``rate=``), waits while paused, reports progress,
    and returns False to stop reading (the run was stopped). With ``on_error``, an error the
    source raises is handed to it and ends the table: the rows read before it are kept."""
    from .ops import arrow_schema

    reader = c.readers[source.step_id]
    target = arrow_schema(schema)
    parts: list[pa.RecordBatch] = []
    seq = 0
    step = 8192 if source.rate is None else max(1, int(source.rate * 0.02))

    def add(b: pa.RecordBatch) -> None:
        nonlocal seq
        b = conform_to_spark(b, target)
        for off in range(0, b.num_rows, step):
            part = b.slice(off, step)
            seqs = pa.array(range(seq, seq + part.num_rows), type=pa.int64())
            parts.append(
                pa.RecordBatch.from_arrays(
                    list(part.columns) + [order_array(seqs)], names=[*part.schema.names, "_o"]
                )
            )
            seq += part.num_rows
            if not pace(seq):
                raise _Stopped()

    def bad(b: BadRow) -> None:
        nonlocal seq
        on_bad(seq, b)
        seq += 1
        if not pace(seq):
            raise _Stopped()

    try:
        batches = reader.arrow_batches()
        if batches is not None:
            for b in batches:
                bad(b) if isinstance(b, BadRow) else add(b)
        else:
            for item in row_batches(reader.rows(), target, step):
                bad(item) if isinstance(item, BadRow) else add(item)
    except Exception as e:  # noqa: BLE001 - the user's source; re-raised by the caller
        if on_error is None:
            raise
        on_error(e)
    out_schema = target.append(pa.field("_o", pa.list_(pa.int64())))
    return pa.Table.from_batches(parts, schema=out_schema) if parts else out_schema.empty_table()


def conform_to_spark(b: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    if b.schema.equals(target):
        return b
    arrays = []
    for k, f in enumerate(target):
        a = b.column(k)
        if pa.types.is_timestamp(a.type) and a.type.tz is not None:
            a = a.cast(pa.timestamp("us", tz="UTC")).cast(pa.timestamp("us"))
        arrays.append(a if a.type == f.type else a.cast(f.type))
    return pa.RecordBatch.from_arrays(arrays, schema=target)


def to_polars(tbl: pa.Table, schema: Schema) -> pl.DataFrame:
    names = [n for n, _ in schema]
    if not names:
        return pl.DataFrame()
    cols = []
    for n, t in schema:
        a = tbl.column(n)
        if t.name == "null":
            a = pa.nulls(len(a))
        elif t.name == "datetime" and a.type != pa.timestamp("us"):
            a = a.cast(pa.timestamp("us"))
        cols.append(a)
    return pl.from_arrow(  # type: ignore[return-value]
        pa.Table.from_arrays(cols, names=names), schema_overrides=polars_schema(schema)
    )


def dead_reason(s: P.Step, row: dict[str, Any]) -> str:
    """The reference's reason for a row that a stateless step sends to the dead letters."""
    fns: list[Callable[[dict[str, Any]], Any]]
    if isinstance(s, P.Filter):
        fns = [compile_row_expr(s.predicate)]
    else:
        assert isinstance(s, (P.Select, P.WithColumns))
        fns = [compile_row_expr(e) for _, e in s.exprs]
    for f in fns:
        try:
            f(row)
        except RowError as e:
            return str(e)
    raise AssertionError(f"{s.step_id}: Spark flagged a row the reference accepts: {row!r}")


def event_ticks(schema: Schema, time_col: str) -> Any:
    """The event time column as integer ticks (microseconds for dates and datetimes), as the
    reference's ``_EventTime.ticks`` computes them."""
    from pyspark.sql import functions as F

    tt = dict(schema)[time_col]
    tcol = qcol(time_col)
    if tt.name == "datetime":
        return F.unix_micros(tcol.cast("timestamp"))
    if tt.name == "date":
        return F.unix_date(tcol).cast("bigint") * F.lit(86_400_000_000)
    return tcol.cast("bigint")


def _rows_out(env: Any, step_id: str) -> int:
    """A step's rows out so far (read after the job that counted them)."""
    return int(env.counters[step_id].rows_out)


@dataclass
class Lowered:
    """A step lowered onto a DataFrame, with what the driver reads back after the job."""

    step: P.Step
    # "stateless" | "python" (a partition function's side rows) | "final" (groupBy) |
    # "filter" / "pass" (a filter / projection that cannot fail: rows in from ``into``)
    kind: str
    observation: Any
    cols: list[str] = field(default_factory=list)
    into: Callable[[], int] | None = None
    # kind "filter" without an observation: its rows out, as the sink counted them
    out: Callable[[], int] | None = None
    # kind "applied": files its counters and side rows itself, (counters, side rows list)
    apply: Callable[[Any, list[Any]], None] | None = None


# --------------------------------------------------------------------------- lowering


class Lowering:
    """Builds the DataFrame pipeline; shared by batch and streaming drivers."""

    def __init__(self, c: Compiled, steps: list[P.Step], spark: Any, streaming: bool = False):
        self.c = c
        self.steps = steps
        self.spark = spark
        self.streaming = streaming
        self.uid = next(_ids)
        self.lowered: list[Lowered] = []
        self.partitions = max(2, spark.sparkContext.defaultParallelism)
        self.checkpoint: Callable[[Any], Any] | None = None
        # how each stateful step runs: "native" (streamcell's C operator in mapInArrow),
        # "spark groupBy" (a final table), or "reference: <why>" (the Python operator)
        self.how: dict[str, str] = {}
        # steps lowered to one row per key (a groupBy): their sinks need no latest-per-key
        self.final: set[str] = set()
        # the rows a step's output holds, read after a batch job (sources, and stateless
        # steps that cannot fail): steps after them need no metric of their own
        self.count_of: dict[str, Callable[[], int]] = {}
        # steps whose output holds one row per value of these columns (no latest-per-key)
        self.unique_on: dict[str, tuple[str, ...]] = {}
        # steps whose rows' order keys are one serial each (a source's, through stateless steps)
        self.flat: set[str] = set()
        # runs a Spark action while lowering (batch runs: cancelled by a stop)
        self.action: Callable[[Callable[[], Any]], Any] = lambda fn: fn()
        # the filter whose rows out are the rows its sink counts after the job, which then
        # needs no metric of its own (BatchDriver._counted_by_sink), and that count
        self.counted_by_sink: str | None = None
        self.sink_rows: dict[str, int] = {}
        # each stateless step's Spark columns, translated once (``can_fail`` asks first)
        self._columns: dict[str, Translated] = {}
        # steps whose rows are a local Parquet source's through filters and projections that
        # cannot fail: their window steps' passes read the files themselves (:mod:`.direct`)
        self.direct: dict[str, Lineage] = {}
        # rows out of filters a worker's fold counted (their own metric never runs: .fold)
        self.counted: dict[str, Callable[[], int]] = {}
        # steps whose output is one partition already in order of its order keys
        self.in_order: set[str] = set()
        # steps a fold's task ran (fold.fused_tail): the filters, which pass the frame on,
        # and the top_k's raw output (side rows included), by step
        self.fused_away: set[str] = set()
        self.fused: dict[str, Any] = {}

    def in_schema(self, s: P.Step) -> Schema:
        return self.c.schemas[s.inputs[0].step_id]

    def schemas(self, s: P.Step) -> dict[str, Schema]:
        return {x.step_id: self.c.schemas[x.step_id] for x in (s, *s.inputs)}

    def observe(self, df: Any, j: int, *metrics: Any) -> tuple[Any, Any]:
        from pyspark.sql import Observation

        name = f"sc{self.uid}_{j}"
        if self.streaming:
            return df.observe(name, *metrics), name
        obs = Observation(name)
        return df.observe(obs, *metrics), obs

    def lower(self, j: int, s: P.Step, df: Any) -> Any:
        if s.step_id in self.fused_away:
            return df
        if isinstance(s, (P.Filter, P.Select, P.WithColumns)):
            out = self.stateless(j, s, df)
            if s.inputs[0].step_id in self.in_order:  # rows keep their partition and order
                self.in_order.add(s.step_id)
            lin = self.direct.get(s.inputs[0].step_id)
            done = self.lowered[-1] if self.lowered else None
            if lin is not None and done is not None and done.step is s:
                lin = through(s, done.kind, lin)
                if lin is not None:
                    self.direct[s.step_id] = lin
            return out
        if isinstance(s, P.Aggregate) and s.window is not None:
            return self.window(j, s, df)
        if isinstance(s, P.Aggregate) and self.final_table(s):
            return self.group_by(j, s, df)
        if isinstance(s, (P.Aggregate, P.Running)) and self.spark_running(s):
            return self.running(j, s, df)
        if isinstance(s, P.Dedup) and self.spark_dedup(s):
            return self.dedup(j, s, df)
        if isinstance(s, (P.Aggregate, P.Running, P.TopK, P.Dedup)):
            return self.keyed(j, s, df)
        if isinstance(s, P.Sketch):
            return self.sketch(j, s, df)
        if isinstance(s, P.Transfer):  # entities cross partitions: one ordered partition
            return self.keyed(j, s, df)
        raise NotSupportedError(s.step_id, NAME, type(s).__name__)

    # ----------------------------------------------------------------- sketches
    def sketch(self, j: int, s: P.Sketch, df: Any) -> Any:
        """Each partition sketches its rows (streamcell's native sketches, no shuffle); the
        partials come back as side rows and the driver merges them (``merge_sketches``)."""
        from pyspark.sql import functions as F

        schema = self.in_schema(s)
        out = map_in_arrow(df, sketch_fn(s, schema), ddl(schema, SIDE_DDL))
        out = self._side_observe(j, s, out)
        return out.filter(F.col("_k") == F.lit(LIVE)).drop("_k", "_b")

    # ----------------------------------------------------------------- stateless
    def _translated(self, s: P.Step) -> Translated:
        """A filter's predicate (under the key ``""``) or a select / with_columns step's
        computed columns, as Spark columns, and the error column of the rows any of them fails
        on (None when none can fail). A re-run of the cell finds them in :data:`_TRANSLATED`."""
        got = self._columns.get(s.step_id)
        if got is None:
            # what the translation reads: the step's own expressions (not its inputs, which
            # may name a source's credentials) and its schemas; repr tells apart what == does
            # not (1 and 1.0; 0.0 and -0.0)
            what = s.predicate if isinstance(s, P.Filter) else getattr(s, "exprs", None)
            key = (
                f"{s.kind} {what!r}",
                repr(self.in_schema(s)),
                repr(self.c.schemas[s.step_id]),
            )
            hit = _TRANSLATED.get(key)
            if hit is not None and hit[0]() is self.spark:
                got = hit[1]
            else:
                got = self._translate(s)
                keep_bounded(_TRANSLATED, key, (weakref.ref(self.spark), got), 256)
            self._columns[s.step_id] = got
        return got

    def _translate(self, s: P.Step) -> Translated:
        tr = Translator(self.in_schema(s), s)
        if isinstance(s, P.Filter):
            tr.share([s.predicate])
            v, err = tr.translate(s.predicate, BOOL)
            return Translated({"": v}, err, tr.stages)
        assert isinstance(s, (P.Select, P.WithColumns))
        types = dict(self.c.schemas[s.step_id])
        computed, err = {}, None
        tr.share([e for _, e in s.exprs])
        for n, e in s.exprs:
            computed[n], ce = tr.translate(e, types[n])
            if ce is not None:
                err = ce if err is None else err | ce
        return Translated(computed, err, tr.stages)

    def can_fail(self, s: P.Step) -> bool:
        """Whether a filter / select / with_columns step has an expression that can fail: its
        failing rows are dead letters, and it counts its rows with a metric of its own."""
        return self._translated(s).err is not None

    def stateless(self, j: int, s: P.Step, df: Any) -> Any:
        from pyspark.sql import functions as F

        schema = self.in_schema(s)
        out = self.c.schemas[s.step_id]
        names = [n for n, _ in schema]
        computed, err, stages = self._translated(s)
        shared = [n for stage in stages for n in stage]
        for stage in stages:  # subexpressions computed once (Translator.share)
            df = df.withColumns(stage)
        if isinstance(s, P.Filter):
            exprs: list[Any] = []
            # a null predicate drops the row, as Spark's filter does with it bare: left bare,
            # Spark pushes it into the Parquet scan (row groups skipped by their statistics)
            keep = computed[""]
        else:
            exprs = [computed[n].alias(n) if n in computed else qcol(n) for n, _ in out]
            keep = F.lit(True)
        into = self.count_of.get(s.inputs[0].step_id)
        if s.inputs[0].step_id in self.flat:  # rows pass with their order keys as they are
            self.flat.add(s.step_id)
        # a filter straight over the shared columns' projections would be pushed below them,
        # and Spark's pushdown inlines each column it passes: a predicate that reuses its
        # parts (e = f(e, e), k times) would become their 2^k-leaf tree again. Taken as a
        # step that can fail, the filter reads a flag above the step's metrics instead, which
        # no filter is pushed through
        inlined = bool(shared) and isinstance(s, P.Filter)
        if err is None and into is not None and not self.streaming and not inlined:
            return self._cannot_fail(j, s, df, keep, exprs, into, shared)
        err_col = F.coalesce(err, F.lit(False)) if err is not None else F.lit(False)
        df = df.withColumn("_e", err_col).withColumn("_p", keep & ~F.col("_e"))
        metrics = [
            F.count(F.lit(1)).alias("n"),
            F.sum(F.when(F.col("_p"), 1).otherwise(0)).alias("out"),
            F.sum(F.when(F.col("_e"), 1).otherwise(0)).alias("dead"),
        ]
        if err is not None:
            metrics.append(
                F.collect_list(
                    F.when(F.col("_e"), F.struct(*[qcol(n) for n in names], F.col("_o")))
                ).alias("dead_rows")
            )
        df, obs = self.observe(df, j, *metrics)
        self.lowered.append(Lowered(s, "stateless", obs, names))
        df = df.filter(F.col("_p"))
        if isinstance(s, P.Filter):
            return df.drop("_e", "_p", *shared)
        return df.select(*exprs, F.col("_o"))

    def _cannot_fail(
        self,
        j: int,
        s: P.Step,
        df: Any,
        keep: Any,
        exprs: list[Any],
        into: Callable[[], int],
        shared: list[str],
    ) -> Any:
        """A stateless step none of whose expressions can fail (no dead letters): a plain
        filter or projection that Spark fuses with its neighbours. Its rows in are the rows
        out of the step before (``into``, read after the job); a filter counts the rows it
        keeps (one metric after it), a projection keeps every row and counts nothing."""
        from pyspark.sql import functions as F

        if isinstance(s, P.Filter) and s.step_id == self.counted_by_sink:
            rows = self.sink_rows
            self.lowered.append(Lowered(s, "filter", None, into=into, out=lambda: rows["n"]))
            self.count_of[s.step_id] = lambda: rows["n"]
            return _drop(df.filter(keep), shared)
        if isinstance(s, P.Filter):
            df, obs = self.observe(df.filter(keep), j, F.count(F.lit(1)).alias("out"))
            self.lowered.append(Lowered(s, "filter", obs, into=into))
            sid = s.step_id
            self.count_of[sid] = lambda: (
                self.counted[sid]() if sid in self.counted else int(obs.get["out"] or 0)
            )
            return _drop(df, shared)
        self.lowered.append(Lowered(s, "pass", None, into=into))
        self.count_of[s.step_id] = into
        return df.select(*exprs, F.col("_o"))

    # ----------------------------------------------------------------- keyed
    def _partition(self, df: Any, keys: tuple[str, ...], schema: Schema) -> Any:
        from pyspark.sql import functions as F

        if not keys:
            return df.repartition(1).sortWithinPartitions("_o")
        types = dict(schema)
        parts: list[Any] = []
        for k in keys:
            c = qcol(k)
            if types[k].name == "float":  # one partition for every NaN, and for 0.0 / -0.0
                c = F.when(F.isnan(c), F.lit(float("nan"))).when(c == 0, F.lit(0.0)).otherwise(c)
            parts.append(c.alias(f"_h{len(parts)}"))
        cols = list(df.columns)
        df = df.select(*[qcol(n) for n in cols], *parts)
        df = df.repartition(self.partitions, *[f"_h{i}" for i in range(len(parts))])
        return df.sortWithinPartitions("_o").select(*[qcol(n) for n in cols])

    def _side_observe(self, j: int, s: P.Step, out: Any) -> Any:
        from pyspark.sql import functions as F

        side = F.col("_k") != F.lit(LIVE)
        out, obs = self.observe(
            out,
            j,
            F.collect_list(F.when(side, F.struct("_k", "_o", "_b"))).alias("side"),
        )
        self.lowered.append(Lowered(s, "python", obs))
        return out

    def keyed(self, j: int, s: P.Step, df: Any) -> Any:
        from pyspark.sql import functions as F

        if s.step_id in self.fused:  # run by the task that folded the windows before it
            self.how[s.step_id] = f"{NATIVE}, in the python fold"
            out = self._side_observe(j, s, self.fused.pop(s.step_id))
            return out.filter(F.col("_k") == F.lit(LIVE)).drop("_k", "_b")
        schema = self.in_schema(s)
        out_schema = self.c.schemas[s.step_id]
        keys = s.keys if not isinstance(s, P.Dedup) or s.keys else tuple(n for n, _ in schema)  # type: ignore[attr-defined]
        if isinstance(s, P.Transfer):
            keys = ()
        if not keys and s.inputs[0].step_id in self.in_order:
            part = df  # already the one partition in order that a global step takes
        else:
            part = self._partition(df, keys, schema)
        why = native_refusal(s, self.schemas(s))
        if why is None:
            fn = native_keyed_fn(s, j, self.schemas(s), out_schema)
            self.how[s.step_id] = NATIVE
        else:
            fn = keyed_fn(s, j, self.schemas(s), out_schema)
            self.how[s.step_id] = f"reference: {why}"
        out = map_in_arrow(part, fn, ddl(out_schema, SIDE_DDL))
        out = self._side_observe(j, s, out)
        return out.filter(F.col("_k") == F.lit(LIVE)).drop("_k", "_b")

    # ----------------------------------------------------------------- running aggregates

    def _arrival(self, s: P.Step) -> Any:
        """What a window over ``s``'s input sorts by for arrival order: the serial as a long
        where each row has one (``flat``), else the order key. ``s`` passes each row's order
        key through, so it stays flat when its input is."""
        from pyspark.sql import functions as F

        if s.inputs[0].step_id not in self.flat:
            return F.col("_o")
        self.flat.add(s.step_id)
        return F.col("_o")[0]

    def spark_running(self, s: P.Aggregate | P.Running) -> bool:
        """Whether Spark's own window functions give exactly the reference's rows for ``s``: a
        ``running`` or the per-row changelog of an unwindowed keyed ``agg``, in a finite run,
        with the aggregates of ``groupby.running_fits``."""
        from . import native_ops

        if self.streaming or not native_ops.GROUP_BY:
            return False
        if isinstance(s, P.Aggregate) and s.window is not None:
            return False
        return running_fits(s, dict(self.in_schema(s)))

    def running(self, j: int, s: P.Aggregate | P.Running, df: Any) -> Any:
        """A ``running`` (the input row and its key's aggregates so far) or an unwindowed
        ``agg``'s changelog (the key and its aggregates so far) as Spark window functions
        over the key's rows in arrival order (``groupby.running_columns``): one exchange and
        sort by key, no Python on the executors. Every input row is one output row with the
        input row's order key, and no row can fail (the aggregates read columns)."""
        from pyspark.sql import functions as F

        types = dict(self.in_schema(s))
        cols = running_columns(s.keys, s.aggs, types, self._arrival(s))
        into = self.count_of.get(s.inputs[0].step_id)
        if into is None:
            df, obs = self.observe(df, j, F.count(F.lit(1)).alias("n"))
            into = lambda: int(obs.get["n"] or 0)  # noqa: E731 - read after the job
        self.lowered.append(Lowered(s, "pass", None, into=into))
        self.count_of[s.step_id] = into
        self.how[s.step_id] = "spark window"
        out = [
            cols[n].cast(spark_type(t)).alias(n) if n in cols else qcol(n)
            for n, t in self.c.schemas[s.step_id]
        ]
        return df.select(*out, F.col("_o"))

    def spark_dedup(self, s: P.Dedup) -> bool:
        """Whether a ``dedup`` runs as Spark's ``row_number``: in a finite run (keys are scalars;
        Spark's window partitions group NaN as one value and 0.0 with -0.0, as the reference's
        keys do, and keep each row's own values)."""
        from . import native_ops

        return not self.streaming and native_ops.GROUP_BY

    def dedup(self, j: int, s: P.Dedup, df: Any) -> Any:
        """A ``dedup`` as each key's first row in arrival order: ``row_number() == 1`` over the
        key's rows ordered by order key (one exchange and sort, no Python on the executors).
        The dropped rows are the step's filtered rows."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        types = dict(self.in_schema(s))
        keys = s.keys or tuple(types)
        w = Window.partitionBy(*[qcol(k) for k in keys]).orderBy(self._arrival(s))
        marked = df.withColumn("__sc_first", F.row_number().over(w) == F.lit(1))
        first = F.col("__sc_first")
        marked, obs = self.observe(
            marked,
            j,
            F.count(F.lit(1)).alias("n"),
            F.sum(F.when(first, 1).otherwise(0)).alias("out"),
            F.sum(F.lit(0)).alias("dead"),
        )
        self.lowered.append(Lowered(s, "stateless", obs, list(types)))
        self.count_of[s.step_id] = lambda: int(obs.get["out"] or 0)
        self.how[s.step_id] = "spark window"
        return marked.filter(first).drop("__sc_first")

    def relative_order(self, s: P.Step) -> bool:
        """Whether only the order of ``s``'s output rows among themselves matters, not where
        they fall among other rows: in a finite run, every step after ``s`` has one input
        (no union or join sets them among another stream's rows), cannot fail (a dead letter
        is filed by its order key among the source's), and keeps or folds rows in arrival
        order (a filter or projection; ``top_k``, ``dedup``, or an unwindowed ``agg`` /
        ``running`` of columns) on the way to its sinks. A window step then needs no pass
        to find the row that closes each window (:func:`.groupby.tumbling`)."""
        from . import groupby

        if self.streaming or not groupby.RELATIVE_ORDER:
            return False
        consumers = self.c.plan.consumers()
        todo = [s]
        while todo:
            for c in consumers[todo.pop().step_id]:
                if isinstance(c, P.Sink):
                    continue
                if isinstance(c, (P.Filter, P.Select, P.WithColumns)):
                    if self.can_fail(c):
                        return False
                elif isinstance(c, (P.Aggregate, P.Running)):
                    if getattr(c, "window", None) is not None:
                        return False
                    if any(a.arg is not None and not isinstance(a.arg, Col) for _, a in c.aggs):
                        return False
                elif not isinstance(c, (P.TopK, P.Dedup)):
                    return False
                todo.append(c)
        return True

    # ----------------------------------------------------------------- final tables

    def final_table(self, s: P.Aggregate) -> bool:
        """Whether Spark's own ``groupBy`` gives exactly what the reference leaves in the
        final table: an unwindowed keyed ``agg`` (of a finite run) whose only consumer is an
        upsert table on its keys, or a Parquet sink in ``complete`` / ``update`` mode on
        them (the final table, not the changelog), with count / min / max / sums /
        count_distinct / first / last of columns. Float sums are folded in arrival order
        (:meth:`group_by`), so they are the reference's to the last bit."""
        from . import native_ops

        if self.streaming or not s.keys or s.window is not None or not native_ops.GROUP_BY:
            return False
        consumers = self.c.plan.consumers()[s.step_id]
        if len(consumers) != 1:
            return False
        sink = consumers[0]
        if not isinstance(sink, P.Sink) or sink.target not in ("table", "parquet"):
            return False
        if self.c.upsert_keys.get(sink.step_id) != tuple(s.keys):
            return False
        return exact_aggs(s, dict(self.in_schema(s)))

    def group_by(self, j: int, s: P.Aggregate, df: Any) -> Any:
        """The final table of a keyed ``agg`` by Spark's ``groupBy``: one row per key with
        the aggregates over all its rows and the key's first order key ``min(_o)`` (the
        table lists keys in order of first appearance). Integer sums wrap around at 64 bits
        as the reference's do; count_distinct counts null as a value, as the reference
        does (and NaN as one value); first / last are the values at the key's first / last
        order key (null included, as the reference keeps them). A float sum is the
        reference's left fold in arrival order: a running sum over the key's rows sorted
        by order key, read at its last row (so a lone -0.0 stays -0.0; see
        ``groupby.grouped``); Spark's own ``sum`` adds partial sums in whatever order the
        shuffle delivers them."""
        from pyspark.sql import functions as F

        folded = direct_fold(self, j, s)
        if folded is not None:  # read and folded in arrival order by one worker
            return folded
        into = self.count_of.get(s.inputs[0].step_id)
        if into is None:
            df, obs = self.observe(df, j, F.count(F.lit(1)).alias("n"))
            self.lowered.append(Lowered(s, "final", obs))
        else:
            self.lowered.append(Lowered(s, "final", None, into=into))
        self.how[s.step_id] = "spark groupBy"
        types = dict(self.in_schema(s))
        flat = s.inputs[0].step_id in self.flat
        by = [qcol(k) for k in s.keys]
        out = grouped(df, by, s.aggs, types, flat).agg(
            *agg_columns(s.aggs, types), first_order(flat, grouped=True).alias("_o")
        )
        self.final.add(s.step_id)
        self.unique_on[s.step_id] = tuple(s.keys)
        return out.select(*[qcol(n) for n, _ in self.c.schemas[s.step_id]], "_o")

    # ----------------------------------------------------------------- joins
    def join(self, j: int, s: P.Join, parts: list[Any]) -> Any:
        """The interval join as one Spark equi-join, exactly the reference's.

        In arrival order (the inputs' rows merged as a union orders them) a row is dead when
        its time is null and late when earlier than the watermark (the largest time before it
        of rows with a time and a non-null key, minus ``lateness``): a running max over the
        order key, as for windows. The reference keeps a row until the watermark passes
        ``time + within``, and an admitted row is never earlier than the watermark, so a row
        that could still match was never evicted: the output is every pair of admitted rows of
        the two inputs with equal non-null keys (NaN keys are one value, as in Polars and Spark) and times at most
        ``within`` apart, emitted when the later of the two arrives, after that row's earlier
        matches in their arrival order."""
        from functools import reduce

        from pyspark.sql import Window
        from pyspark.sql import functions as F

        schemas = [self.c.schemas[x.step_id] for x in s.inputs]
        out_schema = self.c.schemas[s.step_id]
        lateness, within = P.parse_duration(s.lateness), P.parse_duration(s.within)
        structs = []
        for df, schema in zip(parts, schemas, strict=True):
            row = F.struct(*[qcol(n) for n, _ in schema]).alias("_row")
            structs.append((row, df.select(row).schema.fields[0].dataType))
        sides = []
        for p, (df, schema) in enumerate(zip(parts, schemas, strict=True)):
            null_key = reduce(lambda a, b: a | b, [qcol(k).isNull() for k in s.on])
            rows = [
                (structs[q][0] if q == p else F.lit(None).cast(structs[q][1])).alias(f"_r{q}")
                for q in range(2)
            ]
            sides.append(
                df.select(
                    "_o",
                    F.lit(p).alias("_p"),
                    event_ticks(schema, s.time).alias("_t"),
                    null_key.alias("_nk"),
                    *rows,
                )
            )
        merged = sides[0].unionByName(sides[1])
        arrival = Window.orderBy("_o").rowsBetween(Window.unboundedPreceding, -1)
        dead = F.col("_t").isNull()
        advances = ~dead & ~F.col("_nk")  # a null-key row returns before the watermark moves
        flagged = merged.withColumn("_dead", dead).withColumn(
            "_prev", F.max(F.when(advances, F.col("_t"))).over(arrival)
        )
        late = (
            ~F.col("_dead")
            & F.col("_prev").isNotNull()
            & (F.col("_t") < F.col("_prev") - F.lit(lateness))
        )
        flagged = flagged.withColumn("_late", late)
        side = F.struct("_o", "_p", "_r0", "_r1")
        flagged, obs = self.observe(
            flagged,
            j,
            F.count(F.lit(1)).alias("n"),
            F.collect_list(F.when(F.col("_dead"), side)).alias("dead_rows"),
            F.collect_list(F.when(F.col("_late"), side)).alias("late_rows"),
        )
        self.lowered.append(Lowered(s, "join", obs))
        assert self.checkpoint is not None
        flagged = self.checkpoint(flagged)
        admitted = flagged.filter(~F.col("_dead") & ~F.col("_late") & ~F.col("_nk"))
        left = admitted.filter(F.col("_p") == 0).select(
            F.col("_o").alias("_lo"), F.col("_t").alias("_lt"), F.col("_r0").alias("_l")
        )
        right = admitted.filter(F.col("_p") == 1).select(
            F.col("_o").alias("_ro"), F.col("_t").alias("_rt"), F.col("_r1").alias("_rr")
        )
        cond = [F.col("_l")[k] == F.col("_rr")[k] for k in s.on]
        cond.append(F.abs(F.col("_lt") - F.col("_rt")) <= F.lit(within))
        pairs = left.join(right, on=reduce(lambda a, b: a & b, cond), how="inner")
        left_names = {n for n, _ in schemas[0]}
        cols = [F.col("_l")[n].alias(n) for n, _ in schemas[0]]
        cols += [
            F.col("_rr")[n].alias(n if n not in left_names else f"{n}_right")
            for n, _ in schemas[1]
            if n not in s.on
        ]
        order = F.when(F.col("_lo") > F.col("_ro"), F.concat(F.col("_lo"), F.col("_ro"))).otherwise(
            F.concat(F.col("_ro"), F.col("_lo"))
        )
        out = pairs.select(*cols, order.alias("_o"))
        out = out.select(*[qcol(n) for n, _ in out_schema], "_o")
        out, obs_out = self.observe(out, j, F.count(F.lit(1)).alias("out"))
        self.lowered.append(Lowered(s, "emitted", obs_out))
        return out

    # ----------------------------------------------------------------- windows
    def window(self, j: int, s: P.Aggregate, df: Any) -> Any:
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        w = s.window
        assert w is not None
        schema = self.in_schema(s)
        if not self.streaming and s.inputs[0].step_id in self.flat and native_ops.GROUP_BY:
            if tumbling_fits(s, schema):
                return tumbling(self, j, s, df)
            if session_fits(s, schema):
                return sessions(self, j, s, df)
        out_schema = self.c.schemas[s.step_id]
        tr = Translator(schema, s)
        err = None
        for _, a in s.aggs:
            if a.arg is not None and can_fail(a.arg):
                _, e = tr.translate(a.arg)
                err = e if err is None else err | e
        ticks = event_ticks(schema, w.time)
        lateness = P.parse_duration(w.lateness)
        dead = ticks.isNull()
        if err is not None:
            dead = dead | F.coalesce(err, F.lit(False))
        arrival = Window.orderBy("_o").rowsBetween(Window.unboundedPreceding, -1)
        flagged = df.withColumn("_t", ticks).withColumn("_dead", dead)
        flagged = flagged.withColumn(
            "_prev", F.max(F.when(~F.col("_dead"), F.col("_t"))).over(arrival)
        )
        late = (
            ~F.col("_dead")
            & F.col("_prev").isNotNull()
            & (F.col("_t") < F.col("_prev") - F.lit(lateness))
        )
        flagged = flagged.withColumn("_late", late).withColumn(
            "_wma", F.greatest(F.col("_prev"), F.col("_t")) - F.lit(lateness)
        )
        assert self.checkpoint is not None
        flagged = self.checkpoint(flagged)
        names = [n for n, _ in schema]
        # when the reference closes a window: at the first admitted row whose watermark
        # reaches the window's end (watermarks only grow in arrival order)
        admitted = flagged.filter(~F.col("_dead") & ~F.col("_late"))
        marks = admitted.groupBy("_wma").agg(F.min("_o").alias("co"))
        part = self._partition(
            flagged.select(*[qcol(n) for n in names], "_o", "_dead", "_late"), s.keys, schema
        )
        why = native_refusal(s, self.schemas(s))
        if why is None:
            fn = native_window_fn(s, j, self.schemas(s), out_schema)
            self.how[s.step_id] = NATIVE
        else:
            fn = window_fn(s, j, self.schemas(s), out_schema)
            self.how[s.step_id] = f"reference: {why}"
        out = map_in_arrow(
            part,
            fn,
            ddl(out_schema, SIDE_DDL + ", `_ws` bigint, `_we` bigint, `_wq` array<bigint>"),
        )
        out = self._side_observe(j, s, out)
        out = self.checkpoint(out)
        wins = out.filter(F.col("_k") == F.lit(LIVE))
        ends = wins.select(F.col("_we").alias("v")).distinct()
        u = ends.select("v", F.lit(0).alias("tag"), F.lit(None).cast("array<bigint>").alias("co"))
        u = u.unionByName(marks.select(F.col("_wma").alias("v"), F.lit(1).alias("tag"), "co"))
        # the first mark at or after each end: the last non-null one in descending order over
        # a growing frame (a frame to unbounded *following* is re-evaluated per row: O(n^2))
        ahead = Window.orderBy(F.col("v").desc(), F.col("tag").desc()).rowsBetween(
            Window.unboundedPreceding, Window.currentRow
        )
        closes = (
            u.withColumn(WINDOW_CLOSE, F.last("co", ignorenulls=True).over(ahead))
            .filter(F.col("tag") == 0)
            .select(F.col("v").alias("_we"), WINDOW_CLOSE)
        )
        wins = wins.join(closes, on="_we", how="left")
        end_key = F.array(F.lit(END).cast("bigint"), F.lit(j).cast("bigint"))
        order = F.concat(
            F.coalesce(F.col(WINDOW_CLOSE), end_key),
            F.array(F.col("_we"), F.col("_ws")),
            F.col("_wq"),
        )
        return wins.select(*[qcol(n) for n, _ in out_schema], order.alias("_o"))


# --------------------------------------------------------------------------- batch driver


class BatchDriver:
    """Runs a finite plan as Spark jobs and files everything into the run's stores."""

    def __init__(self, c: Compiled, env: Any, options: RunOptions, steps: list[P.Step]):
        self.c, self.env, self.options, self.steps = c, env, options, steps
        self.sources = [s for s in steps if isinstance(s, P.Source)]
        self.sinks = [s for s in steps if isinstance(s, P.Sink)]
        self.source = self.sources[0]
        self.local_files: dict[int, list[tuple[str, int, list[int]]]] = {}
        self.sink = self.sinks[-1]
        self.counts: list[int] = []  # rows (good and bad) of each source: merged serials
        self.side: list[tuple[list[int], int, str, Any]] = []  # (o, kind, step, payload)
        self.group = f"streamcell-{next(_ids)}"
        self.sketch_parts: dict[str, list[Any]] = {}  # sketch step -> partition partials
        self.changelog: dict[str, int] = {}  # a final-table agg -> the changelog rows it stands for
        self.text_sources: list[tuple[int, Any]] = []  # (source, io.SparkSource) parsed by Spark
        # the one source's partitions are its files in order (io.by_file): its per-file scans
        self.scans = 0

    @property
    def by_file(self) -> bool:
        """The one source's partitions are its files' splits in order (:func:`.io.file_splits`)."""
        return self.scans > 0

    def _action(self, fn: Callable[[], Any]) -> Any:
        """Run a Spark action on a helper thread so a stop request cancels it promptly.

        On a stop the action's jobs are cancelled and the run goes on stopping at once: Spark
        takes 0.15-0.4 s to fail a cancelled action, which the daemon thread waits out alone
        (its result, if any, is dropped). A run whose source is read file by file sizes the
        files' splits for the job (:func:`.io.file_splits`)."""
        from .session import get_session

        spark = get_session()
        sc = spark.sparkContext
        box: dict[str, Any] = {}

        def target() -> None:
            try:
                sc.setJobGroup(self.group, "streamcell run", interruptOnCancel=True)
                box["v"] = fn()
            except BaseException as e:  # handed to the run thread
                box["e"] = e

        with file_splits(spark, self.scans):
            t = threading.Thread(target=target, name="streamcell-spark-action", daemon=True)
            t.start()
            while t.is_alive():
                t.join(0.01)
                if self.env.should_stop():
                    sc.cancelJobGroup(self.group)
                    raise _Stopped()
        if "e" in box:
            raise box["e"]
        return box["v"]

    def run(self) -> bool:
        from .session import get_session

        spark = get_session()
        try:
            return self._run(spark)
        except _Stopped:
            return False

    def _run(self, spark: Any) -> bool:
        env = self.env
        t0 = time.perf_counter_ns()
        read = self._read_sources(spark)
        if read is None:
            return False
        frames, bad_rows, lasts, failed = read
        env.on_source_row(sum(self.counts))
        if len(self.sources) > 1:  # serial numbers of the round-robin merge of the sources
            frames = [merged_order(f, i, self.counts) for i, f in enumerate(frames)]
            bad_rows = [(i, merged_serial(i, q, self.counts), b) for i, q, b in bad_rows]
            lasts = [(i, None if x is None else merged_serial(i, x, self.counts)) for i, x in lasts]
        for i, q, b in bad_rows:
            self.side.append(([q], DEAD, self.sources[i].step_id, b))
        known = [x for _, x in lasts if x is not None]
        self.last_good = max(known) if known else None
        low = Lowering(self.c, self.steps, spark)
        low.checkpoint = lambda d: self._action(lambda: d.localCheckpoint(eager=True))
        low.action = self._action
        low.counted_by_sink = self._counted_by_sink(spark, low)
        consumers = self.c.plan.consumers()
        dfs: dict[str, Any] = {}
        for j, s in enumerate(self.steps):
            if isinstance(s, P.Source):
                df = frames[self.sources.index(s)]
                low.count_of[s.step_id] = functools.partial(_rows_out, env, s.step_id)
                low.flat.add(s.step_id)
                files = self.local_files.get(self.sources.index(s))
                if files is not None and len(self.sources) == 1:
                    schema = self.c.schemas[s.step_id]
                    low.direct[s.step_id] = source_lineage(files, schema, low.partitions)
            elif isinstance(s, P.Sink):
                continue
            elif isinstance(s, P.Union):
                df = self._union(s, dfs)
            elif isinstance(s, P.Join):
                df = low.join(j, s, [self._ported(s, p, dfs) for p in range(len(s.inputs))])
            else:
                df = low.lower(j, s, dfs[s.inputs[0].step_id])
            if len(consumers[s.step_id]) > 1:  # fan-out: compute once, for every branch
                df = low.checkpoint(df)
            dfs[s.step_id] = df
            if env.should_stop():
                return False
        done = [self._sink_job(low, j, s, dfs[s.inputs[0].step_id]) for j, s in self._sink_steps()]
        self._read_text_sources()  # before _read_back: the sources' counts feed its steps'
        self._read_back(low)
        self.env.run.spark_operators = dict(low.how)
        for s in self.steps:  # a union passes every row of its inputs
            if isinstance(s, P.Union):
                n = sum(env.counters[x.step_id].rows_out for x in s.inputs)
                env.counters[s.step_id].rows_in = env.counters[s.step_id].rows_out = n
        self._file_side()
        self._attach_sketches()
        for finish in done:
            finish()
        env.record_latency(time.perf_counter_ns() - t0)
        if failed:
            raise failed[0]
        return True

    def _read_text_sources(self) -> None:
        """Dead letters, counts and the last good row of the sources Spark parsed."""
        multi = len(self.sources) > 1
        for i, src in self.text_sources:
            m = src.observation.get
            sid = self.sources[i].step_id
            cnt = self.env.counters[sid]
            for r in m["side"] or []:
                payload = side_payload(r["_k"], r["_b"])
                if r["_k"] == STATS:
                    cnt.rows_out += payload["rows_out"]
                    cnt.dead += payload["dead"]
                    continue
                q = int(r["_o"][0])
                q = merged_serial(i, q, self.counts) if multi else q
                self.side.append(([q], DEAD, sid, payload))
            if m["last"] is not None:
                last = int(m["last"])
                last = merged_serial(i, last, self.counts) if multi else last
                self.last_good = last if self.last_good is None else max(self.last_good, last)

    def _counted_by_sink(self, spark: Any, low: Lowering) -> str | None:
        """The filter whose rows out its sink counts for it, or None. In a run read file by file
        (one chain of stateless steps, source to sink) into a table or a local Parquet folder,
        the last filter's rows are the sink's when no step after it can fail (a failing row
        would be a dead letter between them), and the sink counts them anyway (a table's
        ``count``) or cheaply (the written files' footers): Spark's per-row metric would cost
        the job ~15% (it ends whole-stage code generation and updates a counter per row).
        Local Parquet folders only on a local master, where the driver sees what was written."""
        sinks = self._sink_steps()
        if not self.by_file or len(sinks) != 1:
            return None
        sink = sinks[0][1]
        if sink.target == "parquet":
            path = sink.name or ""
            schema = self.c.schemas[sink.step_id]
            if not spark.sparkContext.master.startswith("local") or local_path(path) is None:
                return None
            if not spark_writes(schema, path, spark):
                return None
        elif sink.target != "table":
            return None
        for s in reversed(self.steps):
            if isinstance(s, P.Filter):
                return s.step_id
            if isinstance(s, (P.Select, P.WithColumns)) and low.can_fail(s):
                return None
        return None

    def _unshuffled(self) -> bool:
        """Whether every row reaches its sink through stateless steps only (one source, a
        chain, every sink taking every row): the source's partitions then reach the sinks
        as they are, and a source read one partition per file needs no distributed sort."""
        consumers = self.c.plan.consumers()
        if len(self.sources) != 1:
            return False
        for s in self.steps:
            if not isinstance(s, (P.Source, P.Filter, P.Select, P.WithColumns, P.Sink)):
                return False
            if len(consumers[s.step_id]) > 1:
                return False
            if isinstance(s, P.Sink) and self.c.upsert_keys[s.step_id] is not None:
                return False
        return True

    def _sink_steps(self) -> list[tuple[int, P.Sink]]:
        return [(j, s) for j, s in enumerate(self.steps) if isinstance(s, P.Sink)]

    def _read_sources(self, spark: Any) -> Any:
        """Each source as a DataFrame with ``_o`` = [its own serial]: read by Spark's
        executors where it can be (:mod:`.io`), else from the driver (notebook frames,
        iterables, text files, throttled sources). None when the run was stopped."""
        env = self.env
        start = time.monotonic()
        done = [0]  # rows of the sources read before the current one
        frames: list[Any] = []
        bad_rows: list[tuple[int, int, BadRow]] = []  # source, local serial, row
        lasts: list[tuple[int, int | None]] = []  # source, local serial of its last good row
        failed: list[Exception] = []  # a source that raised: what was read runs, then it
        for i, src in enumerate(self.sources):
            schema = self.c.schemas[src.step_id]
            on_spark = spark_source(spark, self.c, src, source_spec(src), self._unshuffled())
            self.scans = on_spark.scans if on_spark is not None and on_spark.by_file else 0
            if on_spark is not None:
                if on_spark.local is not None:
                    self.local_files[i] = on_spark.local
                if on_spark.observation is not None:  # bad rows known after the job
                    self.text_sources.append((i, on_spark))
                frames.append(on_spark.df)
                bad_rows.extend((i, q, b) for q, b in on_spark.bad)
                lasts.append((i, on_spark.last_good))
                self.counts.append(on_spark.count)
                good, n_bad = on_spark.count - len(on_spark.bad), len(on_spark.bad)
                if on_spark.observation is not None:  # counted by the job (STATS)
                    good = n_bad = 0
            else:

                def on_bad(seq: int, b: BadRow, i: int = i) -> None:
                    bad_rows.append((i, seq, b))

                def pace(n: int, src: P.Source = src) -> bool:
                    env.on_source_row(done[0] + n)
                    if src.rate:
                        delay = start + n / src.rate - time.monotonic()
                        while delay > 0:
                            if env.should_stop():
                                return False
                            time.sleep(min(delay, 0.05))
                            delay = start + n / src.rate - time.monotonic()
                    return not env.should_stop() and env.wait_if_paused()

                try:
                    tbl = source_table(
                        self.c, src, schema, on_bad, pace, failed.append if not failed else None
                    )
                except _Stopped:
                    return None
                frames.append(spark.createDataFrame(tbl, schema=ddl(schema, ORDER_DDL)))
                lasts.append((i, self._last_good(tbl)))
                n_bad = sum(1 for b in bad_rows if b[0] == i)
                good = tbl.num_rows
                self.counts.append(good + n_bad)
            done[0] += self.counts[-1]
            cnt = env.counters[src.step_id]
            cnt.rows_in, cnt.rows_out, cnt.dead = self.counts[-1], good, n_bad
        return frames, bad_rows, lasts, failed

    def _sink_job(self, low: Lowering, j: int, sink: P.Sink, df: Any) -> Callable[[], None]:
        """Run the Spark job that feeds ``sink``; return what hands its result to the run
        once the side outputs are filed. Parquet files are written by the executors and
        tables stay in Spark; only a callback sink's rows come to the driver (the callback
        is a notebook function)."""
        from pyspark.sql import functions as F

        schema = self.c.schemas[sink.step_id]
        names = [n for n, _ in schema]
        key = self.c.upsert_keys[sink.step_id]
        gate: Any = self.env.sink_writer(sink).__self__
        into = sink.inputs[0].step_id
        count = low.count_of.get(into)
        if count is None and into not in low.final:  # else known without a metric here
            df, obs = low.observe(df, j, F.count(F.lit(1)).alias("n"))
            count = lambda: int(obs.get["n"] or 0)  # noqa: E731
        parts = low.partitions

        def rows() -> int:
            """The rows the sink stands for: those reaching it, or for a final table that
            Spark's groupBy computed, the changelog rows of its aggregate (read back with
            the side outputs, before any finish runs)."""
            stands_for = self.changelog.get(into)
            if stands_for is not None:
                return stands_for
            assert count is not None
            return count()

        def ordered(d: Any) -> Any:
            if self.by_file or (into in low.in_order and d is df):  # in order as read
                return d  # (io._parquet), or one partition in order (a worker's fold)
            if into not in low.flat:
                # rows that come out of a shuffle's reduce side (an aggregate, a keyed
                # operator): materialized once, or the range sort's sampling pass computes
                # that whole stage a second time
                assert low.checkpoint is not None
                d = low.checkpoint(d)
            return in_order(d, parts)

        if sink.target == "callback" or (
            sink.target == "parquet" and not spark_writes(schema, sink.name or "", low.spark)
        ):
            out = self._action(ordered(df).toArrow)
            return lambda: self._write(
                to_polars(out, schema), sink, self.changelog.get(sink.inputs[0].step_id)
            )
        if sink.target == "none":
            self._action(lambda: df.write.format("noop").mode("overwrite").save())

            def finish_none() -> None:
                n = rows()
                self.env.counters[sink.step_id].rows_in += n
                gate.written += n

            return finish_none
        if low.unique_on.get(into) == key:  # one row per key already (a groupBy's table)
            kept = df
        else:
            kept = latest_per_key(df, key if sink.target == "table" or sink.mode else None, names)
        if sink.target == "parquet":
            assert sink.name is not None
            path = sink.name
            self._action(lambda: write_parquet(ordered(kept), path, names))
            if low.counted_by_sink is not None:
                low.sink_rows["n"] = written_rows(path, low.spark)

            def finish_parquet() -> None:
                n = rows()
                self.env.counters[sink.step_id].rows_in += n
                gate.delegate(n)

            return finish_parquet
        table = self._action(lambda: ordered(kept).localCheckpoint(eager=True))
        height = self._action(table.count)
        low.sink_rows["n"] = height

        def finish_table() -> None:
            n = rows()
            self.env.counters[sink.step_id].rows_in += n
            name = self.c.table_names[sink.step_id]
            gate.adopt(SparkTable(table, schema, height, name), n)

        return finish_table

    def _union(self, s: P.Union, dfs: dict[str, Any]) -> Any:
        """Inputs in the union's column order. The order key gets the input's port right
        after the row's origin (its serial, or [END, step] for rows emitted at the end), so
        rows of one origin reached along several branches sort by port first and then keep
        their order within the port, as the reference takes them."""

        names = [n for n, _ in self.c.schemas[s.step_id]]
        parts = [self._ported(s, p, dfs, names) for p in range(len(s.inputs))]
        out = parts[0]
        for p in parts[1:]:
            out = out.unionByName(p)
        return out

    def _ported(
        self, s: P.Step, p: int, dfs: dict[str, Any], names: list[str] | None = None
    ) -> Any:
        """Input ``p`` of the fan-in ``s`` (columns ``names``, default all) with its port in
        the order key (see :meth:`_union`): the arrival order of the merged inputs."""
        from pyspark.sql import functions as F

        x = s.inputs[p]
        if names is None:
            names = [n for n, _ in self.c.schemas[x.step_id]]
        o = F.col("_o")
        head = F.when(o[0] < F.lit(END), F.lit(1)).otherwise(F.lit(2))
        port = F.array(F.lit(p).cast("bigint"))
        key = F.concat(F.slice(o, F.lit(1), head), port, F.slice(o, head + 1, F.size(o)))
        return dfs[x.step_id].select(*[qcol(n) for n in names], key.alias("_o"))

    def _attach_sketches(self, compact: bool = False) -> None:
        """Merge each sketch stage's partials and publish the answers (``run.sketch``); with
        ``compact`` (a streaming run, after each micro-batch) keep the merged sketches as the
        only partial for the next micro-batch."""
        from ...sketching import FixedStage
        from .ops import as_payload

        for s in self.steps:
            if isinstance(s, P.Sketch):
                schema = self.c.schemas[s.inputs[0].step_id]
                parts = self.sketch_parts.get(s.step_id, [])
                merged = merge_sketches(s, schema, parts)
                self.env.attach_sketch(s.step_id, FixedStage(merged))
                if compact:
                    self.sketch_parts[s.step_id] = [as_payload(merged, parts)]

    @staticmethod
    def _last_good(tbl: pa.Table) -> int | None:
        if tbl.num_rows == 0:
            return None
        return int(tbl.column("_o")[tbl.num_rows - 1][0].as_py())

    def _read_back(self, low: Lowering) -> None:
        """Counters and side rows from the observations of the finished job."""
        counters = self.env.counters
        for lw in low.lowered:
            m = lw.observation.get if lw.observation is not None else {}
            cnt = counters[lw.step.step_id]
            if lw.kind == "stateless":
                cnt.rows_in += int(m["n"] or 0)
                cnt.rows_out += int(m["out"] or 0)
                cnt.dead += int(m["dead"] or 0)
                cnt.filtered += int(m["n"] or 0) - int(m["out"] or 0) - int(m["dead"] or 0)
                for r in m.get("dead_rows") or []:
                    d = r.asDict()
                    o = list(d.pop("_o"))
                    self.side.append((o, DEAD, lw.step.step_id, d))
                continue
            if lw.kind == "join":
                cnt.rows_in += int(m["n"] or 0)
                why = f"null event time in column {lw.step.time!r}"  # type: ignore[attr-defined]
                for kind, rows in ((DEAD, m["dead_rows"]), (LATE, m["late_rows"])):
                    for r in rows or []:
                        row = r[f"_r{r['_p']}"].asDict()
                        if kind == DEAD:
                            cnt.dead += 1
                            payload: Any = (why, repr(row)[:500])
                        else:
                            cnt.late += 1
                            payload = row
                        self.side.append((list(r["_o"]), kind, lw.step.step_id, payload))
                continue
            if lw.kind == "emitted":
                cnt.rows_out += int(m["out"] or 0)
                continue
            if lw.kind == "applied":
                assert lw.apply is not None
                lw.apply(cnt, self.side)
                continue
            if lw.kind in ("filter", "pass"):
                assert lw.into is not None
                n = lw.into()
                if lw.out is not None:
                    out = lw.out()
                else:
                    out = int(m["out"] or 0) if lw.kind == "filter" else n
                cnt.rows_in += n
                cnt.rows_out += out
                cnt.filtered += n - out
                continue
            if lw.kind == "final":  # a groupBy: every input row is one changelog row
                n = lw.into() if lw.into is not None else int(m["n"] or 0)
                cnt.rows_in += n
                cnt.rows_out += n
                self.changelog[lw.step.step_id] = self.changelog.get(lw.step.step_id, 0) + n
                continue
            for r in m["side"] or []:
                kind, o, blob = r["_k"], list(r["_o"]), r["_b"]
                payload = side_payload(kind, blob)
                if kind == STATS:
                    for k in ("rows_in", "rows_out", "filtered", "late", "dead"):
                        setattr(cnt, k, getattr(cnt, k) + payload[k])
                    engine = payload.get("engine")  # an executor that fell back says why
                    if engine is not None and engine != NATIVE:
                        low.how[lw.step.step_id] = engine
                elif kind == SKETCH:
                    self.sketch_parts.setdefault(lw.step.step_id, []).append(payload)
                else:
                    self.side.append((o, kind, lw.step.step_id, payload))

    def _position(self, o: list[int]) -> str:
        seq = o[0] if o and o[0] < END else self.last_good
        if seq is None:
            return ""
        if len(self.sources) == 1:
            return f"{self.source.step_id} row {seq}"
        at = locate_serial(0, self.counts, seq)
        return "" if at is None else f"{self.sources[at[0]].step_id} row {at[1]}"

    def _file_side(self) -> None:
        env = self.env
        steps = {s.step_id: s for s in self.steps}
        for o, kind, sid, payload in sorted(self.side, key=lambda x: x[0]):
            if isinstance(payload, BadRow):
                env.dead_letter(sid, payload.reason, payload.raw, f"{sid} {payload.position}")
                continue
            env.position = self._position(o)
            if kind == DEAD:
                if isinstance(payload, dict):  # a stateless step: the reason from the reference
                    reason = dead_reason(steps[sid], payload)
                    env.dead_letter(sid, reason, repr(payload)[:500])
                else:
                    reason, raw = payload
                    env.dead_letter(sid, reason, raw)
            elif kind == LATE:
                env.late_row(sid, payload)

    def _write(
        self, frame: pl.DataFrame, sink: P.Sink | None = None, stands_for: int | None = None
    ) -> None:
        """``stands_for``: the changelog rows a final table (one row per key) accounts for."""
        sink = sink or self.sink
        self.env.counters[sink.step_id].rows_in += (
            frame.height if stands_for is None else stands_for
        )
        if sink.target != "none":
            write_frame(self.env.sink_writer(sink), frame, stands_for)


def write_frame(
    writer: Callable[[list[dict[str, Any]]], None],
    frame: pl.DataFrame,
    stands_for: int | None = None,
) -> None:
    """Hand rows to a sink writer: whole frames to tables and Parquet writers, batches of up
    to 1024 rows to callbacks (as the reference does). ``stands_for``: the rows a frame
    accounts for when that is not its height (a final table in place of its changelog)."""
    store = getattr(writer, "__self__", None)
    if store is not None and hasattr(store, "write_frame"):
        if stands_for is None:
            store.write_frame(frame)
        else:
            store.write_frame(frame, stands_for=stands_for)
        return
    rows = frame.to_dicts()
    for i in range(0, len(rows), 1024):
        writer(rows[i : i + 1024])


class _Stopped(Exception):
    pass
