"""Runs: start a plan in the background and control it through a :class:`Run` handle.

Every run lives in the kernel-wide registry (:func:`registry`) under its name; starting a
run with a name that is taken stops the old run first and replaces it.
"""

from __future__ import annotations

import contextlib
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any, Literal

import polars as pl

from . import plan as P
from .compiler import Compiled, compile_plan
from .errors import ArgumentError, RunFailed, StopTimeout, StreamcellError
from .files import local_path, shown
from .options import RunOptions
from .sketching import KeyedSketch, SketchSlot, SketchValue, live
from .stores import (
    Deferred,
    ParquetWriter,
    Progress,
    RowLog,
    StepCounters,
    TableStore,
    dead_letter_frame,
    late_frame,
)

Status = Literal["starting", "running", "paused", "finished", "stopped", "failed"]

_REGISTRY: dict[str, Run] = {}
_REGISTRY_LOCK = threading.Lock()


def registry() -> dict[str, Run]:
    """All runs of this kernel by name (a copy; the runs themselves are live)."""
    with _REGISTRY_LOCK:
        return dict(_REGISTRY)


class _SinkGate:
    """A sink's writer as an engine sees it: it passes rows on until the run is asked to
    stop, then drops them (a stopping run starts no sink callback and writes no row: its
    in-flight rows are discarded), and counts the rows it passed, so the run can count what
    reached the sink but was never written as ``unprocessed``."""

    def __init__(self, stop: threading.Event, write: Callable[[list[dict[str, Any]]], None]):
        self._stop = stop
        self._write = write
        self.written = 0
        self.dropped = False  # rows came after the stop request

    def write(self, rows: list[dict[str, Any]]) -> None:
        if self._stop.is_set():  # checked before every call: no new callback after a stop
            self.dropped = True
            return
        self._write(rows)
        self.written += len(rows)


class _FrameGate(_SinkGate):
    """A :class:`_SinkGate` over a store that also takes whole frames (tables, Parquet):
    engines that produce frames find ``write_frame`` on the writer's ``__self__``."""

    def __init__(self, stop: threading.Event, store: Any):
        super().__init__(stop, store.write)
        self._store = store

    @property
    def takes_deferred(self) -> bool:
        """Whether the store builds :class:`~streamcell.stores.Deferred` chunks itself when
        read (a table); other stores get frames."""
        return bool(getattr(self._store, "takes_deferred", False))

    def write_frame(
        self, df: pl.DataFrame | Deferred, stands_for: int | None = None, replace: bool = False
    ) -> None:
        """Write a frame (or deferred rows, where :attr:`takes_deferred`); ``stands_for``:
        the rows it accounts for when that is not its height (the changed keys a publishing
        aggregate sends in place of its changelog rows); ``replace``: the frame is the whole
        table (an upsert table's rows, one per key)."""
        if self._stop.is_set():
            self.dropped = True
            return
        if not isinstance(df, pl.DataFrame) and (replace or not self.takes_deferred):
            df = df.frame()
        if replace:
            self._store.replace_frame(df)
        else:
            self._store.write_frame(df)
        self.written += df.height if stands_for is None else stands_for

    def adopt(self, remote: Any, rows: int) -> None:
        """Hand the store an engine's finished result kept outside the kernel (a Spark
        table); ``rows``: the rows that reached the sink."""
        if self._stop.is_set():
            self.dropped = True
            return
        self._store.adopt(remote)
        self.written += rows

    def delegate(self, rows: int) -> None:
        """The engine wrote the sink itself (Spark's executors wrote the Parquet files)."""
        if self._stop.is_set():
            self.dropped = True
            return
        self._store.delegated = True
        self.written += rows


class _Env:
    """The run-side services a backend uses (see ``backends.reference.Env``)."""

    def __init__(self, run: Run):
        self.run = run
        self.counters = run._counters
        self.position = ""
        self._sample_at = 0.0

    def dead_letter(self, step: str, reason: str, raw: str, position: str | None = None) -> None:
        self.run._dead.add(
            {"step": step, "position": position or self.position, "reason": reason, "row": raw}
        )

    def late_row(self, step: str, row: dict[str, Any]) -> None:
        self.run._late.add(dict(row, _step=step, _position=self.position))

    def sink_writer(self, sink: P.Sink) -> Callable[[list[dict[str, Any]]], None]:
        return self.run._writers[sink.step_id]

    def should_stop(self) -> bool:
        return self.run._stop.is_set()

    def paused(self) -> bool:
        """Whether the run is paused now (without blocking)."""
        return not self.run._resume.is_set()

    def wait_if_paused(self) -> bool:
        """Block while paused; False if the run was stopped meanwhile."""
        r = self.run
        if r._resume.is_set():
            return True
        r._set_status("paused")
        while not r._resume.wait(0.05):
            if r._stop.is_set():
                return False
        r._set_status("running")
        return not r._stop.is_set()

    def on_source_row(self, n: int) -> None:
        self.run._progress.rows_read = n
        if n & 1023 == 0:
            now = time.monotonic()
            if now >= self._sample_at:
                self._sample_at = now + 1.0
                self.run._sample_metrics()

    def record_latency(self, ns: int) -> None:
        self.run._progress.latencies_ns.append(ns)

    def attach_sketch(self, step_id: str, stage: Any) -> None:
        """An engine's answers for sketch stage ``step_id`` (see ``streamcell.sketching``)."""
        for slot in self.run._sketches.values():
            if slot.step.step_id == step_id:
                slot.stage = stage


class Run:
    """A running (or finished) pipeline. Returned at once by ``plan.start()`` and ``%%stream``.

    Examples
    --------
    >>> run = sc.source(sc.clickstream(rows=10_000)).filter(sc.col("price") > 5).start("cheap")
    >>> run.wait().table("cheap").height  # doctest: +SKIP
    """

    def __init__(
        self, name: str, compiled: Compiled, options: RunOptions, cell_id: str | None = None
    ):
        self.name = name
        self.plan = compiled.plan
        self.options = options
        self.cell_id = cell_id
        self._compiled = compiled
        self._status: Status = "starting"
        self._error: BaseException | None = None
        self._stop = threading.Event()
        self._resume = threading.Event()
        self._resume.set()
        self._done = threading.Event()
        self._counters = {s.step_id: StepCounters() for s in compiled.plan.steps}
        self._late = RowLog()
        self._dead = RowLog()
        self._progress = Progress()
        self._metrics: list[dict[str, Any]] = []
        self._tables: dict[str, TableStore] = {}
        self._parquet: list[ParquetWriter] = []
        self._writers: dict[str, Callable[[list[dict[str, Any]]], None]] = {}
        self._gates: dict[str, _SinkGate] = {}
        self._make_writers()
        self._sketches: dict[str, SketchSlot] = {}
        for st in compiled.plan.steps:
            if isinstance(st, P.Sketch):
                for i, (sk_name, _) in enumerate(st.sketches):
                    schema = compiled.schemas[st.inputs[0].step_id]
                    self._sketches[sk_name] = SketchSlot(sk_name, st, i, schema)
        self._thread = threading.Thread(
            target=self._main, name=f"streamcell-run-{name}", daemon=True
        )
        self.finished_at: float | None = None
        self.native_metrics: dict[str, Any] | None = None
        """Native engine only: per-operator metrics and end-to-end latency (latest snapshot)."""
        self.dashboard: Any = None
        """The live display of the ``%%stream`` cell (a ``widgets.dashboard.Dashboard``)."""
        self.engine_note = ""
        """Why ``engine="auto"`` chose the reference engine (empty when it did not)."""
        self.streaming_query: Any = None
        """Spark streaming runs: the ``pyspark.sql.streaming.StreamingQuery`` (while it runs)."""
        self.stop_hooks: list[Callable[[], None]] = []
        """Called by :meth:`stop` on the stopping thread before it waits for the run's thread
        (an engine cancels there what its own thread would only see later)."""
        self.metrics_feed: Callable[[], list[dict[str, Any]]] | None = None
        """An engine's own metrics rows (Spark streaming: one per StreamingQueryProgress)."""
        self.operator_metrics: Callable[[], list[dict[str, Any]]] | None = None
        """An engine's per-operator rows for :func:`streamcell.snapshot.metrics_snapshot`."""
        self.spark_operators: dict[str, str] = {}
        """Spark finite runs: how each stateful step ran, by step id: ``"native"``
        (streamcell's C operator in ``mapInArrow``), ``"spark groupBy"`` (a final table by
        Spark's own operators) or ``"reference: <why>"`` (the Python operator)."""

    @property
    def engine(self) -> str:
        """The engine this run runs on (``"auto"`` resolved)."""
        return self.options.engine

    # ---------------------------------------------------------------- lifecycle
    def _make_writers(self) -> None:
        c = self._compiled
        for sink in c.plan.sinks:
            schema = c.schemas[sink.step_id]
            gate: _SinkGate
            if sink.target == "table":
                store = TableStore(c.table_names[sink.step_id], schema, c.upsert_keys[sink.step_id])
                self._tables[store.name] = store
                gate = _FrameGate(self._stop, store)
            elif sink.target == "none":
                gate = _SinkGate(self._stop, lambda rows: None)
            elif sink.target == "parquet":
                assert sink.name is not None
                try:
                    # Spark's executors write a URI themselves when Spark has its filesystem
                    uri = local_path(sink.name) is None and self.options.engine == "spark"
                    w = ParquetWriter(
                        sink.name,
                        schema,
                        mode=sink.mode or "append",
                        key=c.upsert_keys[sink.step_id],
                        epoch_s=1.0 if _unbounded(c) else None,
                        create=not uri,
                    )
                except (OSError, StreamcellError) as e:  # refused at start(), at its text
                    raise _sink_error(sink, e) from None
                self._parquet.append(w)
                gate = _FrameGate(self._stop, w)
            else:
                assert sink.callback is not None
                fn = sink.callback.obj
                pschema = {n: t for n, t in schema}

                def call(rows: list[dict[str, Any]], fn: Any = fn, pschema: Any = pschema) -> None:
                    from .types import polars_schema

                    fn(
                        pl.DataFrame(
                            rows, schema=polars_schema(tuple(pschema.items())), orient="row"
                        )
                    )

                gate = _SinkGate(self._stop, call)
            self._gates[sink.step_id] = gate
            self._writers[sink.step_id] = gate.write

    def _start(self) -> None:
        self._progress = Progress()
        self._set_status("running")
        self._thread.start()

    def _main(self) -> None:
        from .backends import get_backend

        status: Status = "failed"
        try:
            backend = get_backend(self.options.engine)
            completed = backend.execute(self._compiled, _Env(self), self.options)
            # an engine that ended its input while the stop request dropped its last rows
            # (a Spark batch job) stopped: not everything was delivered
            dropped = any(g.dropped for g in self._gates.values())
            status = "finished" if completed and not dropped else "stopped"
        except KeyboardInterrupt as e:  # Polars aborts queries on any thread on SIGINT
            if self._stop.is_set():  # the interrupt that stops this run: not a failure
                status = "stopped"
            else:
                self._error = e
        except BaseException as e:  # the driver parks every exception for wait()
            self._error = e
        finally:
            try:  # what a Parquet sink accepted is written at every end (parts of 64K rows)
                for w in self._parquet:
                    w.close()
            except BaseException as e:
                if self._error is None:
                    self._error, status = e, "failed"
            self._settle_counts()
            self.finished_at = time.monotonic()
            self._set_status(status)
            self._sample_metrics()
            self._done.set()

    def _settle_counts(self) -> None:
        """Close the books when the run ends (finished, stopped or failed): a step's rows_in
        becomes what its inputs emitted, and what it received but never finished (in flight
        when stopped or failed, or accepted by a sink and never written) is ``unprocessed``,
        so ``rows_in = consumed + filtered + late + dead + unprocessed`` at every end."""
        counters = self._counters
        for s in self.plan.steps:
            c = counters[s.step_id]
            if isinstance(s, P.Source):  # read from the source, never pushed on
                c.unprocessed = max(0, c.rows_in - c.rows_out - c.dead - c.filtered - c.late)
                continue
            got = sum(counters[i.step_id].rows_out for i in s.inputs)
            c.unprocessed = max(0, got - c.rows_in)
            c.rows_in = max(c.rows_in, got)
            if isinstance(s, P.Sink) and s.target != "none":  # dropped rows count as written
                done = c.filtered + c.late + c.dead + self._gates[s.step_id].written
                c.unprocessed = max(c.unprocessed, c.rows_in - done)

    def _set_status(self, s: Status) -> None:
        self._status = s

    @property
    def status(self) -> Status:
        """``running``, ``paused``, ``finished``, ``stopped`` or ``failed``."""
        return self._status

    @property
    def error(self) -> BaseException | None:
        """The exception that failed the run, if it failed."""
        return self._error

    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> Run:
        """Block until the run ends (or ``timeout`` seconds pass); return the run.

        A kernel interrupt (KeyboardInterrupt) while waiting stops the run and re-raises.
        If the run failed, re-raises the original exception with its traceback.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            while not self._done.wait(0.05):
                if deadline is not None and time.monotonic() >= deadline:
                    return self
        except KeyboardInterrupt:
            try:
                self.stop()
            except StopTimeout as e:  # the interrupt still interrupts; the stop is said loudly
                import warnings

                warnings.warn(str(e), RuntimeWarning, stacklevel=2)
            # a fresh one, raised here: its traceback ends in this frame, not in threading's
            # Condition.wait, so the kernel's reply need not parse threading.py (~0.2 s the
            # first time a kernel formats a traceback)
            raise KeyboardInterrupt from None
        if self._error is not None:
            err = self._error
            if isinstance(err, Exception):
                raise err.with_traceback(err.__traceback__)
            raise RunFailed(f"run {self.name!r} failed: {err!r}") from err
        return self

    def stop(self, timeout: float = 10.0) -> Run:
        """Stop the run; return once it has stopped (status ``stopped``, its threads ended).

        Stop is prompt on every engine: rows in flight are discarded, not delivered (they are
        counted as ``unprocessed``), open windows are not flushed, and no sink callback starts
        after the request. A callback already running is not interrupted (Python cannot kill
        it): ``stop`` waits for it to return, at most ``timeout`` seconds.

        Raises
        ------
        StopTimeout
            If the run's thread is still alive after ``timeout`` seconds (a callback that
            does not return). The run stays asked to stop; call ``stop()`` again to wait.

        Examples
        --------
        >>> run = sc.source(sc.clickstream(rows=None)).start("live")  # doctest: +SKIP
        >>> run.stop().status  # doctest: +SKIP
        'stopped'
        """
        self._stop.set()
        self._resume.set()
        for hook in list(self.stop_hooks):
            with contextlib.suppress(Exception):  # the run's thread still stops it
                hook()
        if threading.current_thread() is self._thread:  # from a sink callback: ends after it
            return self
        if self._thread.is_alive():
            self._thread.join(timeout)
        if self._thread.is_alive() or not (self._done.is_set() or self._status == "starting"):
            raise StopTimeout(
                f"run {self.name!r} did not stop within {timeout:g} s (a sink callback still "
                "running?); it starts no new callback and ends when the current one returns. "
                "Call stop() again to wait longer."
            )
        return self

    def pause(self) -> Run:
        """Pause ingestion (state is kept); :meth:`resume` continues."""
        if not self._done.is_set():
            self._resume.clear()
        return self

    def resume(self) -> Run:
        self._resume.set()
        return self

    # ------------------------------------------------------------------- queries
    def table_names(self) -> list[str]:
        return list(self._tables)

    def table(self, name: str | None = None, *, limit: int | None = None) -> pl.DataFrame:
        """A consistent snapshot of a live table as a Polars DataFrame (default: the first).

        ``limit``: only the first ``limit`` rows. On Spark a finished table stays in Spark
        until asked for: ``limit`` brings only those rows into the notebook, and taking more
        than a million rows without it warns (every engine supports ``limit``).

        Examples
        --------
        >>> run.table("per_user", limit=10)  # doctest: +SKIP
        """
        if limit is not None and (
            isinstance(limit, bool) or not isinstance(limit, int) or limit < 0
        ):
            raise ArgumentError(f"run.table: limit must be an integer >= 0, got {limit!r}", "limit")
        if name is None:
            if not self._tables:
                raise KeyError(f"run {self.name!r} has no table sinks")
            name = next(iter(self._tables))
        if name not in self._tables:
            raise KeyError(
                f"no table {name!r} in run {self.name!r}; tables: {', '.join(self._tables)}"
            )
        return self._tables[name].snapshot(limit)

    def sketch_names(self) -> list[str]:
        return list(self._sketches)

    def sketch(self, name: str | None = None) -> SketchValue | KeyedSketch:
        """A sketch stage's current answer, from any cell while the run is live (default: the
        first): ``run.sketch("users").estimate()``; keyed stages give one answer per key."""
        if name is None:
            if not self._sketches:
                raise KeyError(f"run {self.name!r} has no sketch stages")
            name = next(iter(self._sketches))
        if name not in self._sketches:
            known = ", ".join(self._sketches) or "none"
            raise KeyError(f"no sketch {name!r} in run {self.name!r}; sketches: {known}")
        return live(self._sketches[name])

    def sketches(self) -> dict[str, Any]:
        """Every sketch's current answer for displays (keyed stages: their first keys)."""
        out: dict[str, Any] = {}
        for name, slot in self._sketches.items():
            if not slot.step.keys:
                out[name] = _display(name, slot.value())
                continue
            for key in slot.keys()[:3]:
                label = ", ".join(str(k) for k in key)
                out[f"{name}[{label}]"] = _display(f"{name}[{label}]", slot.value(key))
        return out

    def late(self, step: str | None = None) -> pl.DataFrame:
        """Rows that arrived behind the watermark (the late side output), with ``_step``."""
        # late rows are the step's *input* rows: type them with the input schema(s)
        # (a join's two sides merged), not the step's output schema
        c = self._compiled
        inputs: dict[str, Any] = {}
        for s in self.plan.steps:
            merged: dict[str, Any] = {}
            for i in s.inputs:
                for n, t in c.schemas[i.step_id]:
                    merged.setdefault(n, t)
            inputs[s.step_id] = tuple(merged.items())
        return late_frame(self._late, inputs, step)

    def dead_letters(self) -> pl.DataFrame:
        """Rows that could not be processed: ``step``, ``position``, ``reason``, ``row``."""
        return dead_letter_frame(self._dead)

    def counts(self) -> pl.DataFrame:
        """Conservation counts per step: ``rows_in = consumed + filtered + late + dead +
        unprocessed``, and ``rows_out`` (what the step emitted).

        ``unprocessed``: rows that had reached the step but were not finished when the run
        ended (a stop discards rows in flight; a failure ends the run): zero for a finished
        run. Every step's ``rows_in`` equals the sum of its inputs' ``rows_out`` once the run
        has ended (while it runs, rows in flight are in neither).
        """
        rows = []
        for s in self.plan.steps:
            c = self._counters[s.step_id]
            rows.append(
                {
                    "step": s.step_id,
                    "rows_in": c.rows_in,
                    "rows_out": c.rows_out,
                    "consumed": c.consumed,
                    "filtered": c.filtered,
                    "late": c.late,
                    "dead": c.dead,
                    "unprocessed": c.unprocessed,
                }
            )
        return pl.DataFrame(rows)

    def sink_rows(self) -> int:
        """Rows the run's sinks have received so far."""
        return sum(self._counters[s.step_id].rows_in for s in self.plan.sinks)

    def progress(self) -> dict[str, Any]:
        """A cheap snapshot for status displays (rows, rate, latency, elapsed)."""
        p = self._progress
        end = self.finished_at or time.monotonic()
        sink_rows = self.sink_rows()
        return {
            "name": self.name,
            "status": self.status,
            "rows_in": p.rows_read,
            "rows_out": sink_rows,
            "rows_done": p.rows_read,
            "rows_per_s": 0.0 if self.done() else p.rate(),
            "rows_out_per_s": 0.0 if self.done() else p.out_rate(sink_rows),
            "p50_ms": p.latency_ms(0.5),
            "p99_ms": p.latency_ms(0.99),
            "elapsed_s": end - p.started,
            "late": self._late.total,
            "dead": self._dead.total,
            "cell_id": self.cell_id,
        }

    def _sample_metrics(self) -> None:
        # one row per sample (about 1/s): Spark's StreamingQueryProgress names where the meaning
        # is the same (numInputRows: rows since the previous sample, like a trigger's)
        if self.metrics_feed is not None:
            self._metrics.extend(self.metrics_feed())
            return
        p = self.progress()
        now = time.time()
        prev = self._metrics[-1] if self._metrics else None
        n_in = p["rows_in"] - (prev["totalInputRows"] if prev else 0)
        n_out = p["rows_out"] - (prev["totalOutputRows"] if prev else 0)
        dt = now - prev["_t"] if prev else p["elapsed_s"]
        self._metrics.append(
            {
                "name": self.name,
                "batchId": len(self._metrics),
                "timestamp": now,
                "_t": now,
                "numInputRows": n_in,
                "numOutputRows": n_out,
                "inputRowsPerSecond": n_in / dt if dt > 0 else 0.0,
                "processedRowsPerSecond": n_out / dt if dt > 0 else 0.0,
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

    def metrics(self) -> pl.DataFrame:
        """Metrics history as a Polars DataFrame, about one row per second.

        Names follow Spark's StreamingQueryProgress where the meaning is the same: ``name``,
        ``batchId`` (sample number), ``timestamp`` (UTC), ``numInputRows`` (rows read since the
        previous row), ``inputRowsPerSecond``, ``processedRowsPerSecond``; plus running totals
        (``totalInputRows``, ``totalOutputRows``), ``latencyP50Ms``/``latencyP99Ms``,
        ``lateRows``, ``deadLetters``, ``elapsedSeconds`` and ``status``.
        """
        rows = [{k: v for k, v in m.items() if k != "_t"} for m in list(self._metrics)]
        schema = {
            "name": pl.String,
            "batchId": pl.Int64,
            "timestamp": pl.Float64,
            "numInputRows": pl.Int64,
            "numOutputRows": pl.Int64,
            "inputRowsPerSecond": pl.Float64,
            "processedRowsPerSecond": pl.Float64,
            "totalInputRows": pl.Int64,
            "totalOutputRows": pl.Int64,
            "latencyP50Ms": pl.Float64,
            "latencyP99Ms": pl.Float64,
            "lateRows": pl.Int64,
            "deadLetters": pl.Int64,
            "elapsedSeconds": pl.Float64,
            "status": pl.String,
        }
        df = (
            pl.DataFrame(rows, schema=schema, orient="row") if rows else pl.DataFrame(schema=schema)
        )
        return df.with_columns(
            (pl.col("timestamp") * 1e6).cast(pl.Int64).cast(pl.Datetime("us", "UTC"))
        )

    def explain(self) -> str:
        return self.plan.explain()

    def __repr__(self) -> str:
        from .fmt import count, elapsed

        p = self.progress()
        return f"<Run {self.name!r} {p['status']}: {count(p['rows_in'])} rows in {elapsed(p['elapsed_s'])}>"

    def _repr_html_(self) -> str:
        from .widgets.status import status_html

        return status_html(self)


def start(
    plan: P.Plan,
    *,
    name: str | None = None,
    options: RunOptions | None = None,
    compiled: Compiled | None = None,
    cell_id: str | None = None,
    display: bool = False,
    **option_overrides: Any,
) -> Run:
    """Compile and start ``plan`` in the background; return its :class:`Run` at once.

    Raises compile-time errors (bad columns, types, sources) immediately, in the caller.
    """
    opts = (options or RunOptions()).with_(**option_overrides)
    name = name or plan.name or "stream"
    if plan.name != name:
        plan = P.Plan(plan.sinks, name)
    from .backends import get_backend

    c = (
        compiled
        if compiled is not None and compiled.plan.name == name
        else compile_plan(plan, compiled.readers if compiled else None)
    )
    resolved, note = _resolve_engine(c, opts)
    if opts.engine != "auto":  # "auto" checked the engine it chose
        get_backend(resolved.engine).check(c, resolved)
    opts = resolved
    with _REGISTRY_LOCK:
        old = _REGISTRY.get(name)
    if old is not None:  # raises StopTimeout (and starts nothing) if the old run lives on
        old.stop()
    run = Run(name, c, opts, cell_id)
    run.engine_note = note
    with _REGISTRY_LOCK:
        _REGISTRY[name] = run
    # the old run's outputs (a table of the runtime's buffers) are freed here, before the new
    # run starts, unless the notebook still holds that run: freeing millions of rows while
    # the new run's workers allocate took milliseconds of its start (a paced run's
    # latency tail)
    del old
    run._start()
    return run


def _unbounded(c: Compiled) -> bool:
    """Whether a source may run without end (an unbounded generator, a watched folder, an
    iterator) or is throttled (``rate=``): complete / update Parquet sinks then write once per
    epoch, not only at the end."""
    for src in c.plan.sources:
        if src.rate is not None:
            return True
        spec = src.spec
        if (
            spec.kind == "object"
            and spec.obj is not None
            and isinstance(spec.obj.obj, P.SourceSpec)
        ):
            spec = spec.obj.obj
        if spec.kind in ("clickstream", "store_sales") and spec.arg("rows") is None:
            return True
        if not getattr(c.readers.get(src.step_id), "never_waits", True):
            return True
    return False


def _sink_error(sink: P.Sink, e: OSError | StreamcellError) -> ArgumentError:
    where = shown(sink.name or "")
    why = f"{e.strerror or e} ({e.filename or where})" if isinstance(e, OSError) else str(e)
    msg = f"parquet sink: cannot create the directory {where!r}: {why}"
    p = sink.pos
    if p is not None and p.line:
        return ArgumentError(
            msg, "path", line=p.line, column=p.column, text=p.text, length=p.length
        )
    return ArgumentError(msg, "path", step=sink.step_id)


def _resolve_engine(c: Compiled, opts: RunOptions) -> tuple[RunOptions, str]:
    """``engine="auto"``: native when built and every step is supported, else reference."""
    from .backends import available, get_backend
    from .errors import NotSupportedError

    if opts.engine != "auto":
        return opts, ""
    if "native" not in available():
        return opts.with_(engine="reference"), "native runtime not built: reference engine"
    native = opts.with_(engine="native")
    try:
        get_backend("native").check(c, native)
    except NotSupportedError as e:
        return opts.with_(engine="reference"), f"reference engine ({e})"
    return native, ""


def _display(label: str, v: SketchValue) -> Any:
    import dataclasses

    from .snapshot import sketch_snapshot

    return dataclasses.replace(sketch_snapshot(label, v.snapshot()), kind=v.kind)


def stop_all() -> None:
    """Stop every run of this kernel (used at extension unload and interpreter exit)."""
    import warnings

    for r in registry().values():
        try:
            r.stop()
        except StopTimeout as e:
            warnings.warn(str(e), RuntimeWarning, stacklevel=2)


def format_exception(e: BaseException) -> str:
    return "".join(traceback.format_exception(type(e), e, e.__traceback__))
