"""The drivers: a chain's (``Driver``) and a DAG's (``DagDriver``). On the run's thread they
feed the sources in, drain outputs, dead letters and late rows, and mirror the runtime's
counters into the run.
"""

from __future__ import annotations

import gc
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa

from ... import plan as P
from ...compiler import Compiled
from ...options import RunOptions
from ...sources import BadRow, locate_serial, merged_serials, row_batches
from ..evaluate import RowError, compile_row_expr
from ..pacing import TokenBucket
from .arrow import _arrow_target, _conform_batch, _conform_plan, to_frame
from .lowering import lower, paced_batches, tagged_schema, untag_row
from .program import PHASES, build
from .sinks import _SinkOut

CHUNK = 8  # phases the DAG driver reads and pushes per call (it takes outputs between)
PUSH_ROWS = 65_536  # rows per push call (stop / pause / drain are checked between)
DAG_PHASE_ROUNDS = 1024


def reason_fn(s: P.Step, c: Compiled) -> Callable[[dict[str, Any]], str | None]:
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


BUFFER_IDLE_S = 10.0  # freed column buffers kept for reuse longer than this are released
_trim_due: float | None = None  # when the trimmer next releases idle buffers (monotonic s)
_trim_wake = threading.Condition()
_trimmer: threading.Thread | None = None


def _trim_loop() -> None:
    """The one thread that releases idle column buffers once BUFFER_IDLE_S * 1.5 has passed
    since the last run ended (a run's end moves the deadline; no thread per run)."""
    from ... import _runtime as R

    global _trim_due
    while True:
        with _trim_wake:
            while _trim_due is None or time.monotonic() < _trim_due:
                _trim_wake.wait(None if _trim_due is None else _trim_due - time.monotonic())
            _trim_due = None
        R.buffer_cache_trim(BUFFER_IDLE_S)


def _release_idle_buffers() -> None:
    """At a run's end: release the column buffers the runtime has kept unused for
    BUFFER_IDLE_S (runtime/batch.h, sc_colbuf), and again once that long has passed, so a
    kernel that stops running pipelines gives the memory back. Output the notebook drops
    later refills the cache for the next run (the reason it exists)."""
    from ... import _runtime as R

    global _trim_due, _trimmer
    R.buffer_cache_trim(BUFFER_IDLE_S)
    with _trim_wake:
        _trim_due = time.monotonic() + BUFFER_IDLE_S * 1.5
        if _trimmer is None:
            _trimmer = threading.Thread(
                target=_trim_loop, name="streamcell-buffer-trim", daemon=True
            )
            _trimmer.start()
        _trim_wake.notify()


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
        self._jobs: deque[list[Any]] = deque()  # a paced run's chunks not yet all pushed
        self._pushed = 0  # rows the pacer pushed, as last counted
        self._next_seq = 0  # the source row after the last one the pacer pushed
        self._pacing = False  # a pacer pushes this run's rows now (_feed_paced)
        self._ends()

    def _ends(self) -> None:
        """The chain's source and its one sink's output."""
        self.source = self.low.source
        self.sink = self.low.sink
        self.sink_schema = self.c.schemas[self.sink.inputs[0].step_id]
        self.out = _SinkOut(
            self.env,
            self.sink,
            self.sink_schema,
            self.low.publishing,
            takes=True,
            defer=bool(self.source.rate),
        )

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
            have, plan = None, None
            for b in batches:
                if isinstance(b, BadRow):
                    yield b
                    continue
                if have is None or not b.schema.equals(have):  # worked out once per schema
                    have = b.schema
                    plan = _conform_plan(have, target)
                yield _conform_batch(b, target, plan)
            return
        yield from row_batches(reader.rows(), target, 4096, self.env.should_stop)

    def run(self) -> bool:

        from ...sketching import NativeStage

        prog = build(self.low, self.c)
        self.prog = prog
        if not self.low.vertices:  # a chain: outputs may share a Polars source's buffers
            reader = self.c.readers.get(self.source.step_id)
            prog.share_sources = bool(getattr(reader, "shares_buffers", False))
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
                # a paced source's latency is what its user watches: every batch a sample
                marker_every=1 if self.source.rate else 16,
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
            _release_idle_buffers()
            if err is not None and not self.env.should_stop():
                raise RuntimeError(f"native runtime error in {err[1]}: {err[2]} (status {err[0]})")

    def _feed(self, prog: Any) -> bool:
        from ... import _runtime as R

        if self.source.rate:
            return self._feed_paced(prog)
        try:
            streams = self._column_streams(prog)
        except Exception as e:  # noqa: BLE001 - the user's source, as in _batches
            self.source_error = e
            return True
        if streams is not None:
            return self._feed_columns(prog, streams)
        env = self.env
        bs = self.low.batch_size
        seq = 0
        for item in self._batches(self.source):
            if isinstance(item, BadRow):
                self._bad_source_row(item, seq)
                seq += 1
                continue
            n = item.num_rows
            off = 0
            while off < n:
                if env.should_stop() or not env.wait_if_paused():
                    return False
                # one call, no GIL: cut into batch_size runtime batches; a full pipeline
                # makes it wait up to 2 ms and return what it took (backpressure)
                m = min(n - off, PUSH_ROWS)
                rc, took = prog.push_many(item, off, m, seq, bs, 2_000_000)
                off += took
                seq = self._went_in(seq, took)
                if rc == R.CLOSED:
                    return False
                self._drain(prog)
        return True

    def _went_in(self, seq: int, took: int) -> int:
        """``took`` source rows from row ``seq`` on went into the runtime: the source counts
        them, progress and positions follow; returns the next row's number."""
        if not took:
            return seq
        sid = self.source.step_id
        cnt = self.env.counters[sid]
        seq += took
        cnt.rows_in += took
        cnt.rows_out += took
        self.env.on_source_row(seq)
        self.last_position = f"{sid} row {seq - 1}"
        return seq

    def _column_streams(self, prog: Any) -> Any:
        """The source as one Arrow C stream per column read in C (``Program.column_streams``),
        where its reader has them (a Polars frame whose batches :meth:`_read` would push as
        they are: no cast); else None."""
        reader = self.c.readers[self.source.step_id]
        take = getattr(reader, "column_streams", None)
        if take is None:
            return None
        target = _arrow_target(self.c.schemas[self.source.step_id])
        capsules = take(lambda have: _conform_plan(have, target) is None)
        return None if capsules is None else prog.column_streams(capsules)

    def _paced_items(self, prog: Any) -> Iterator[Any]:
        """What the pacer is handed: a Polars frame's chunks read in C (``HeldChunk``), else
        the source's record batches and bad rows; a source's error is kept in
        ``source_error``, as :meth:`_batches` keeps it."""
        try:
            streams = self._column_streams(prog)
            if streams is not None:
                yield from iter(streams.next_chunk, None)
                return
        except Exception as e:  # noqa: BLE001 - the user's source: re-raised by run()
            self.source_error = e
            return
        yield from self._batches(self.source)

    def _feed_columns(self, prog: Any, src: Any) -> bool:
        """:meth:`_feed` over column streams: the runtime reads the chunks, PUSH_ROWS rows a
        call, stop / pause / outputs looked at between calls as there."""
        from ... import _runtime as R

        env = self.env
        bs = self.low.batch_size
        seq = 0
        while True:
            if env.should_stop() or not env.wait_if_paused():
                return False
            try:
                rc, took, ended = prog.push_columns(src, PUSH_ROWS, seq, bs, 2_000_000)
            except Exception as e:  # noqa: BLE001 - reading the source failed: as in _batches,
                self.source_error = e  # run() processes the rows read before it, then raises it
                return True
            seq = self._went_in(seq, took)
            if rc == R.CLOSED:
                return False
            if ended:
                return True
            self._drain(prog)

    def _bad_source_row(self, item: BadRow, seq: int) -> None:
        """A row the source could not read: a dead letter at its place in the source."""
        sid = self.source.step_id
        cnt = self.env.counters[sid]
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
        self.env.dead_letter(sid, item.reason, item.raw, f"{sid} {item.position}")

    def _feed_paced(self, prog: Any) -> bool:
        """A throttled source: the pacer (exec/pacer.h) pushes each chunk's rows on a thread
        of its own when they are due, what is due every 200 us cut into one batch per worker
        when large enough (lowering.paced_batches), so that a batch takes tens of
        microseconds to run, its rows' latency. This thread meanwhile takes the outputs,
        builds the table's frames and watches for stop and pause: none of it delays a push,
        as it did when pushes and this work took turns on one thread (a frame built between
        two pushes made the rows due meanwhile go in back to back, each waiting for the ones
        before). Two chunks wait in the pacer at most: the next is handed over before the
        current one ends. On pause the pacer is halted (what it pushed counts) and the rest
        is queued again on resume; the schedule, a token bucket, then restarts from now."""
        from ... import _runtime as R

        rate = self.source.rate
        assert rate
        b, burst = paced_batches(rate, self.low.batch_size, self.options.workers)
        catchup = TokenBucket(rate, lambda: 0.0).burst_s
        prog.pace(rate, b, burst, R.now_ns(), int(catchup * 1e9))
        self._pacing = True
        try:
            seq = 0
            for item in self._paced_items(prog):
                # a source slower than its rate never fills the pacer: stop, pause, progress
                # and outputs are looked at for every chunk it reads, not only when it waits
                if not self._pace_step(prog, 0):
                    return False
                if isinstance(item, BadRow):
                    # after the rows before it: a dead letter (and the source's count) once
                    # the pacer has pushed them, never ahead of it (a stop between the two
                    # would leave a dead letter for a row past the last that went in)
                    if self._jobs:
                        self._jobs.append([item, 0, 0, seq])
                    else:
                        self._bad_source_row(item, seq)
                        self._next_seq = seq + 1
                    seq += 1
                    continue
                n = item.num_rows
                if not n:
                    continue
                while (rc := prog.pace_submit(item, 0, n, seq)) != R.OK:
                    if rc == R.CLOSED or not self._pace_step(prog):
                        return False
                self._jobs.append([item, 0, n, seq])
                seq += n
            while self._jobs:
                if not self._pace_step(prog):
                    return False
            return True
        finally:
            _, pushed = prog.pace_halt()  # every row that went in counts, also on a stop
            self._count_pushed(pushed)
            self._pacing = False
            prog.pace_end()
            self._jobs.clear()  # what a stop left unpushed (chunks, bad rows) is not kept

    def _pace_step(self, prog: Any, timeout_ns: int = 10_000_000) -> bool:
        """Wait for the pacer's news (a chunk done, outputs due; at most ``timeout_ns``),
        count what it pushed, handle a stop or a pause, take the outputs. False when the run
        ends here."""
        from ... import _runtime as R

        rc, pushed, _ = prog.pace_wait(timeout_ns)
        self._count_pushed(pushed)
        if rc == R.CLOSED or self.env.should_stop():
            return False
        if self.env.paused():
            _, pushed = prog.pace_halt()
            self._count_pushed(pushed)
            self._drain(prog)  # the table shows every row that went in, through the pause
            if not self.env.wait_if_paused():
                return False
            for batch, off, n, seq0 in self._jobs:  # at most two: the pacer takes them all
                if isinstance(batch, BadRow):
                    continue  # a bad row's place among them (see _feed_paced)
                rc = prog.pace_submit(batch, off, n, seq0)
                if rc != R.OK:
                    return False
        self._drain(prog)
        return True

    def _count_pushed(self, pushed: int) -> None:
        """The pacer pushed ``pushed`` rows in all: count the new ones, and drop the chunks
        it finished (a chunk it is in the middle of keeps only its rest)."""
        took, self._pushed = pushed - self._pushed, pushed
        if not took:
            return
        cnt = self.env.counters[self.source.step_id]
        cnt.rows_in += took
        cnt.rows_out += took
        while self._jobs:
            job = self._jobs[0]
            if isinstance(job[0], BadRow):  # every row before it went in
                self._jobs.popleft()
                self._bad_source_row(job[0], job[3])
                self._next_seq = job[3] + 1
                continue
            if not took:
                break
            m = min(took, job[2])
            job[1] += m
            job[2] -= m
            job[3] += m
            took -= m
            self._next_seq = job[3]
            if not job[2]:
                self._jobs.popleft()
        self.env.on_source_row(self._next_seq)
        self.last_position = f"{self.source.step_id} row {self._next_seq - 1}"

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
        from ... import _runtime as R

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
        from ... import _runtime as R

        if not self._end_input(prog):
            return False
        while True:
            if self.env.should_stop():
                return False
            rc, eos, _ = self._take_outputs(prog, 20_000_000)
            if rc == R.CLOSED:
                return False
            if eos:
                self.out.flush()
                if self.low.publishing:  # the last publish accounts for every changelog row
                    self._sync_counters(prog)
                    self.out.account_published()
                self.out.flush_callback()
                return True
            self._periodic(prog)

    _next_sync = 0.0

    def _metrics(self, prog: Any) -> dict[str, Any]:
        """The program's metrics plus the multi-entity and speculate stages' own counters."""
        metrics: dict[str, Any] = prog.metrics()
        in_flight = 0
        if self._pacing:  # the pacer pushes meanwhile: its count, read after the operators'
            pushed, in_flight = prog.pace_pushed()
            self._count_pushed(pushed)
        # the run's own numbers at the same instant (after _sync_counters), so a display shows
        # the headline and the operator table from one frame. A batch the pacer is pushing may
        # already be counted by an operator before the pacer counts it: the headline includes
        # it (in_flight), so no operator has taken more rows than the headline says were read
        run = self.env.run
        metrics["rows_in"] = run._progress.rows_read + in_flight
        metrics["rows_out"] = run.sink_rows()
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
            self._drain_sides(prog)
            self._sync_counters(prog)
            self.env.run.native_metrics = self._metrics(prog)

    def _drain(self, prog: Any) -> None:
        from ... import _runtime as R

        while True:
            rc, eos, got = self._take_outputs(prog, 0)
            if rc != R.OK or not got:
                break
        self._periodic(prog)

    def _take_outputs(self, prog: Any, timeout_ns: int) -> tuple[int, bool, bool]:
        """Take the outputs ready now (waiting up to ``timeout_ns`` for the first) to the sink:
        (status, end of stream, whether any were taken). A sink of plain columns keeps them
        in C until it builds a frame (``OutBatches``), others take pyarrow batches."""
        if self.out.direct:
            rc, eos, batches = prog.take_batches(timeout_ns)
            if batches is None:
                return rc, eos, False
            self.taken += batches.num_rows
            self.out.write_batches(batches)
            return rc, eos, True
        rc, eos, chunks = prog.take_chunks(timeout_ns)
        if chunks:
            self._write(chunks)
        return rc, eos, bool(chunks)

    def _write(self, chunks: list[pa.RecordBatch]) -> None:
        """Output chunks, in order, to the sink (exported as they are: no copy, no join)."""
        for rb in chunks:
            self.taken += rb.num_rows
            self.out.write(rb)

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
        sides = prog.sides()
        if not sides:
            return
        # every dead or late row becomes a few dicts that live on (the run's logs): Python's
        # cyclic collector would run a full pass over the kernel's objects every few hundred
        # of them (12% of a tumbling run's CPU with 1% late rows), finding nothing to free
        enabled = gc.isenabled()
        gc.disable()
        try:
            self._drain_side_rows(sides)
        finally:
            if enabled:
                gc.enable()

    def _drain_side_rows(self, sides: list[Any]) -> None:
        for step, kinds, serials, rows, reasons, rb in sides:
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
                self.reasons[step] = reason_fn(s, self.c)
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
        from ...stores import RowLog

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
            _SinkOut(
                self.env,
                x.sink,
                self.c.schemas[x.sink.inputs[0].step_id],
                takes=True,
                defer=any(v.source.rate for v in verts if v.source is not None),
            )
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

        from ... import _runtime as R

        env = self.env
        n = len(self.sources)
        its = [self._batches(s) for s in self.sources]
        bufs: list[Any] = [deque() for _ in range(n)]
        rates = [s.rate for s in self.sources]
        # a phase holds at most DAG_PHASE_ROUNDS rounds: each phase's outputs travel as one
        # unit, so larger phases only delay the sinks (batch_size is a chain's batch)
        k, chunk = min(self.low.batch_size, DAG_PHASE_ROUNDS), CHUNK
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
        from ... import _runtime as R

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
            # a direct sink's batches stay in C until its frame is built (one Arrow C stream)
            take, write = (
                (prog.dag_take_batches, o.write_batches) if o.direct else (prog.dag_take, o.write)
            )
            while (got := take(k)) is not None:
                write(got)
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
