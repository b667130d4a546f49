"""The reference backend: a sequential, one-row-at-a-time interpreter of the plan.

It is the definition of correct (DESIGN.md section 2): every other backend's output
sequence must equal this one's. Obviously correct first, fast never.

Arrival order with several sources is round-robin by row in source (step-id) order: the
first row of each source, then the second of each, and so on; an exhausted source drops out.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import polars as pl

from .. import plan as P
from ..compiler import Compiled
from ..sources import BadRow
from ..stores import StepCounters, key_part
from ..types import DATE, DATETIME, FLOAT, Schema
from .evaluate import RowError, compile_row_expr, epoch_us, from_epoch_us, wrap64
from .pacing import TokenBucket

Row = dict[str, Any]


# ------------------------------------------------------------------------- aggregates


class _Acc:
    __slots__ = ("fn", "arg", "v", "n")

    def __init__(self, fn: str, arg: Callable[[Row], Any] | None):
        self.fn, self.arg = fn, arg
        self.v: Any = set() if fn == "count_distinct" else None
        self.n = 0

    def update(self, x: Any, seq: int) -> None:
        """Fold in one row's argument value ``x`` (``count()`` ignores it)."""
        fn = self.fn
        if self.arg is None:  # count()
            self.n += 1
            return
        if fn == "first":
            if self.v is None:
                self.v = (seq, x)
            return
        if fn == "last":
            self.v = (seq, x)
            return
        if fn == "count_distinct":
            self.v.add(key_part(x))  # one NaN value, as for keys
            return
        if x is None:
            return
        self.n += 1
        if fn == "sum" or fn == "mean":
            x = int(x) if isinstance(x, bool) else x
            self.v = x if self.v is None else self.v + x
            if isinstance(self.v, int):
                self.v = wrap64(self.v)
        elif fn == "min":
            if self.v is None or _less(x, self.v):
                self.v = x
        elif fn == "max":
            if self.v is None or _less(self.v, x):
                self.v = x

    def merge(self, o: _Acc) -> None:
        fn = self.fn
        if fn == "first":
            if self.v is None or (o.v is not None and o.v[0] < self.v[0]):
                self.v = o.v
        elif fn == "last":
            if self.v is None or (o.v is not None and o.v[0] > self.v[0]):
                self.v = o.v
        elif fn == "count_distinct":
            self.v |= o.v
        elif fn in ("sum", "mean"):
            if o.v is not None:
                self.v = o.v if self.v is None else self.v + o.v
                if isinstance(self.v, int):
                    self.v = wrap64(self.v)
        elif fn == "min":
            if o.v is not None and (self.v is None or _less(o.v, self.v)):
                self.v = o.v
        elif fn == "max":
            if o.v is not None and (self.v is None or _less(self.v, o.v)):
                self.v = o.v
        self.n += o.n

    def result(self) -> Any:
        fn = self.fn
        if fn == "count":
            return self.n
        if fn == "count_distinct":
            return len(self.v)
        if fn in ("first", "last"):
            return None if self.v is None else self.v[1]
        if fn == "sum":
            return 0 if self.v is None else self.v
        if fn == "mean":
            return None if self.n == 0 else self.v / self.n
        return self.v


def _less(a: Any, b: Any) -> bool:
    # NaN sorts above every number (Polars); used by min/max and top_k
    if isinstance(a, float) and a != a:
        return False
    if isinstance(b, float) and b != b:
        return True
    return bool(a < b)


class _AggSpec:
    def __init__(self, aggs: tuple[tuple[str, Any], ...], out: Schema):
        self.names = [n for n, _ in aggs]
        self.parts = [(a.fn, None if a.arg is None else compile_row_expr(a.arg)) for _, a in aggs]
        # a float sum of no value is 0.0, as Polars' sum and the other engines' rows have it
        types = dict(out)
        self.zero = [0.0 if a.fn == "sum" and types[n].name == "float" else None for n, a in aggs]

    def new(self) -> list[_Acc]:
        return [_Acc(fn, arg) for fn, arg in self.parts]

    def values(self, row: Row) -> list[Any]:
        """Every aggregate's argument for ``row``, evaluated before any state changes: a row
        whose argument fails (RowError) is dead-lettered without touching the state."""
        return [None if arg is None else arg(row) for _, arg in self.parts]

    @staticmethod
    def update(state: list[_Acc], vals: list[Any], seq: int) -> None:
        for a, x in zip(state, vals):
            a.update(x, seq)

    def results(self, state: list[_Acc]) -> Row:
        out = {}
        for n, a, zero in zip(self.names, state, self.zero):
            v = a.result()
            out[n] = zero if zero is not None and a.v is None else v
        return out


# -------------------------------------------------------------------------- operators


class Op:
    """One step. ``push`` returns the rows it emits; ``end`` flushes at end of stream."""

    def __init__(self, step: P.Step, c: Compiled, env: Env):
        self.step = step
        self.sid = step.step_id
        self.c = c
        self.env = env
        self.cnt: StepCounters = env.counters[step.step_id]
        self.seq = 0

    def push(self, row: Row, port: int) -> list[Row]:
        raise NotImplementedError

    def end(self) -> list[Row]:
        return []

    def dead(self, row: Row, reason: str) -> None:
        self.cnt.dead += 1
        self.env.dead_letter(self.sid, reason, repr(row)[:500])


class FilterOp(Op):
    def __init__(self, step: P.Filter, c: Compiled, env: Env):
        super().__init__(step, c, env)
        self.pred = compile_row_expr(step.predicate)

    def push(self, row: Row, port: int) -> list[Row]:
        if self.pred(row) is True:
            return [row]
        self.cnt.filtered += 1
        return []


class ProjectOp(Op):
    def __init__(self, step: P.Select | P.WithColumns, c: Compiled, env: Env):
        super().__init__(step, c, env)
        self.exprs = [(n, compile_row_expr(e)) for n, e in step.exprs]
        self.keep = isinstance(step, P.WithColumns)
        self.order = [n for n, _ in c.schemas[step.step_id]]
        # a float column holds floats: an int from a when/fill_null branch becomes float here
        types = dict(c.schemas[step.step_id])
        self.floats = {n for n, _ in step.exprs if types[n] == FLOAT}

    def push(self, row: Row, port: int) -> list[Row]:
        new = {n: f(row) for n, f in self.exprs}
        for n in self.floats:
            v = new[n]
            if v is not None and not isinstance(v, float):
                new[n] = float(v)
        if self.keep:
            out = dict(row)
            out.update(new)
            return [{n: out[n] for n in self.order}]
        return [new]


class ExplodeOp(Op):
    def __init__(self, step: P.Explode, c: Compiled, env: Env):
        super().__init__(step, c, env)
        self.cols = step.columns

    def push(self, row: Row, port: int) -> list[Row]:
        lists = [row[c] for c in self.cols]
        lens = {len(x) for x in lists if x}
        if len(lens) > 1:
            self.dead(row, f"explode: lists of different lengths in {', '.join(self.cols)}")
            return []
        n = lens.pop() if lens else 0
        if n == 0:
            out = dict(row)
            for c in self.cols:
                out[c] = None
            return [out]
        rows = []
        for i in range(n):
            out = dict(row)
            for c, x in zip(self.cols, lists):
                out[c] = x[i] if x else None
            rows.append(out)
        return rows


def _key(row: Row, keys: tuple[str, ...]) -> tuple[Any, ...]:
    return tuple(key_part(row[k]) for k in keys)


class AggregateOp(Op):
    """Unwindowed keyed (or global) aggregate: emits the key's updated row per input."""

    def __init__(self, step: P.Aggregate, c: Compiled, env: Env):
        super().__init__(step, c, env)
        self.keys = step.keys
        self.spec = _AggSpec(step.aggs, c.schemas[step.step_id])
        self.state: dict[tuple[Any, ...], list[_Acc]] = {}

    def push(self, row: Row, port: int) -> list[Row]:
        results = self._fold(row)
        out = {n: row[n] for n in self.keys}
        out.update(results)
        return [out]

    def _fold(self, row: Row) -> Row:
        vals = self.spec.values(row)
        self.seq += 1
        k = _key(row, self.keys)
        st = self.state.get(k)
        if st is None:
            st = self.state[k] = self.spec.new()
        self.spec.update(st, vals, self.seq)
        return self.spec.results(st)

    def state_size(self) -> int:
        return len(self.state)


class RunningOp(AggregateOp):
    def push(self, row: Row, port: int) -> list[Row]:
        out = dict(row)
        out.update(self._fold(row))
        return [out]


class _EventTime:
    """Event-time bookkeeping shared by windows and joins: converts the time column to
    integer ticks, tracks the watermark (max time seen - lateness), flags late rows."""

    def __init__(
        self, op: Op, time_col: str, schema: Schema, lateness: P.Duration, extra: list[P.Duration]
    ):
        self.col = time_col
        self.ttype = dict(schema)[time_col]
        self.temporal = self.ttype in (DATETIME, DATE)
        self.lateness = P.parse_duration(lateness)
        self.extra = [P.parse_duration(d) for d in extra]
        self.max_t: int | None = None
        self.op = op

    def ticks(self, row: Row) -> int | None:
        v = row[self.col]
        if v is None:
            return None
        return epoch_us(v) if self.temporal else v

    def out(self, t: int) -> Any:
        return from_epoch_us(t) if self.temporal else t

    @property
    def watermark(self) -> int | None:
        return None if self.max_t is None else self.max_t - self.lateness

    def admit(self, row: Row) -> int | None:
        """Ticks of a row that may be processed, or None (the row was sent to dead/late)."""
        t = self.ticks(row)
        if t is None:
            self.op.dead(row, f"null event time in column {self.col!r}")
            return None
        wm = self.watermark
        if wm is not None and t < wm:
            self.op.cnt.late += 1
            self.op.env.late_row(self.op.sid, row)
            return None
        return t

    def advance(self, t: int) -> int:
        if self.max_t is None or t > self.max_t:
            self.max_t = t
        return self.max_t - self.lateness


class WindowState:
    __slots__ = ("key", "start", "last", "end", "seq", "state", "alive")

    def __init__(self, key: tuple[Any, ...], start: int, end: int, seq: int, state: list[_Acc]):
        self.key, self.start, self.last, self.end, self.seq, self.state = (
            key,
            start,
            start,
            end,
            seq,
            state,
        )
        self.alive = True


class WindowOp(Op):
    """Tumbling / sliding / session windows per key; emits a row when a window closes.

    A window closes when the watermark reaches its end. Windows closing together are
    emitted by (end, start, creation order). Rows earlier than the watermark are late.
    """

    def __init__(self, step: P.Aggregate, c: Compiled, env: Env):
        super().__init__(step, c, env)
        w = step.window
        assert w is not None
        self.w = w
        self.keys = step.keys
        self.spec = _AggSpec(step.aggs, c.schemas[step.step_id])
        self.et = _EventTime(self, w.time, c.schemas[step.inputs[0].step_id], w.lateness, [])
        self.size = P.parse_duration(w.size)
        self.every = P.parse_duration(w.every) if w.every is not None else self.size
        self.open: dict[
            tuple[Any, ...], Any
        ] = {}  # (key, start) -> WindowState, or key -> [WindowState] for sessions
        self.heap: list[tuple[int, int, int, int, WindowState]] = []
        self.nwin = 0
        self.uid = itertools.count()

    def _new(self, key: tuple[Any, ...], start: int, end: int) -> WindowState:
        self.nwin += 1
        win = WindowState(key, start, end, self.nwin, self.spec.new())
        heapq.heappush(self.heap, (end, start, win.seq, next(self.uid), win))
        return win

    def push(self, row: Row, port: int) -> list[Row]:
        vals = self.spec.values(row)  # a failing argument dead-letters the row first
        t = self.et.admit(row)
        if t is None:
            return []
        self.seq += 1
        k = _key(row, self.keys)
        if self.w.kind == "session":
            self._session(k, t, vals)
        else:
            first = (t - self.size) // self.every * self.every + self.every
            for start in range(first, t + 1, self.every):
                if start <= t < start + self.size:
                    win = self.open.get((k, start))
                    if win is None:
                        win = self.open[(k, start)] = self._new(k, start, start + self.size)
                    self.spec.update(win.state, vals, self.seq)
        return self._close(self.et.advance(t))

    def _session(self, k: tuple[Any, ...], t: int, vals: list[Any]) -> None:
        gap = self.size
        sessions: list[WindowState] = self.open.setdefault(k, [])
        hit = [s for s in sessions if s.start - gap < t < s.last + gap]
        if not hit:
            win = self._new(k, t, t + gap)
            sessions.append(win)
            self.spec.update(win.state, vals, self.seq)
            return
        hit.sort(key=lambda s: s.seq)
        keep = hit[0]
        for other in hit[1:]:
            for a, b in zip(keep.state, other.state):
                a.merge(b)
            keep.start, keep.last = min(keep.start, other.start), max(keep.last, other.last)
            keep.seq = min(keep.seq, other.seq)
            other.alive = False
            sessions.remove(other)
        self.spec.update(keep.state, vals, self.seq)
        keep.start, keep.last = min(keep.start, t), max(keep.last, t)
        keep.end = keep.last + gap
        heapq.heappush(self.heap, (keep.end, keep.start, keep.seq, next(self.uid), keep))

    def _emit(self, win: WindowState) -> Row:
        out = {n: v for n, v in zip(self.keys, win.key)}
        if self.keys:
            out = {n: self._key_value(n, v) for n, v in out.items()}
        out["window_start"] = self.et.out(win.start)
        out["window_end"] = self.et.out(win.end)
        out.update(self.spec.results(win.state))
        return out

    @staticmethod
    def _key_value(n: str, v: Any) -> Any:
        return list(v) if isinstance(v, tuple) else v

    def _valid(self, end: int, start: int, seq: int, win: WindowState) -> bool:
        return win.alive and win.end == end and win.start == start and win.seq == seq

    def _close(self, wm: int | None) -> list[Row]:
        out = []
        while self.heap and (wm is None or self.heap[0][0] <= wm):
            end, start, seq, _, win = heapq.heappop(self.heap)
            if not self._valid(end, start, seq, win):
                continue
            win.alive = False
            if self.w.kind == "session":
                lst = self.open[win.key]
                lst.remove(win)
                if not lst:
                    del self.open[win.key]
            else:
                del self.open[(win.key, win.start)]
            out.append(self._emit(win))
        return out

    def end(self) -> list[Row]:
        return self._close(None)

    def state_size(self) -> int:
        return (
            sum(len(v) for v in self.open.values()) if self.w.kind == "session" else len(self.open)
        )


class TopKOp(Op):
    """Per key, the k rows with the best ``by`` (ties: earlier arrival first). When the
    set changes, emits the key's whole current top-k with ``rank`` 1..n."""

    def __init__(self, step: P.TopK, c: Compiled, env: Env):
        super().__init__(step, c, env)
        self.s = step
        self.state: dict[tuple[Any, ...], list[tuple[Any, int, Row]]] = {}

    def _better(self, a: Any, b: Any) -> bool:
        return _less(b, a) if self.s.descending else _less(a, b)

    def push(self, row: Row, port: int) -> list[Row]:
        v = row[self.s.by]
        if v is None:
            self.cnt.filtered += 1
            return []
        self.seq += 1
        k = _key(row, self.s.keys)
        cur = self.state.setdefault(k, [])
        pos = len(cur)
        for i, (cv, _, _) in enumerate(cur):
            if self._better(v, cv):
                pos = i
                break
        if pos >= self.s.k:
            return []
        cur.insert(pos, (v, self.seq, row))
        del cur[self.s.k :]
        return [dict(r, rank=i + 1) for i, (_, _, r) in enumerate(cur)]

    def state_size(self) -> int:
        return sum(len(v) for v in self.state.values())


class DedupOp(Op):
    def __init__(self, step: P.Dedup, c: Compiled, env: Env):
        super().__init__(step, c, env)
        self.keys = step.keys or tuple(n for n, _ in c.schemas[step.step_id])
        self.seen: set[tuple[Any, ...]] = set()

    def push(self, row: Row, port: int) -> list[Row]:
        k = _key(row, self.keys)
        if k in self.seen:
            self.cnt.filtered += 1
            return []
        self.seen.add(k)
        return [row]

    def state_size(self) -> int:
        return len(self.seen)


class UnionOp(Op):
    def __init__(self, step: P.Union, c: Compiled, env: Env):
        super().__init__(step, c, env)
        self.order = [n for n, _ in c.schemas[step.step_id]]

    def push(self, row: Row, port: int) -> list[Row]:
        return [row] if port == 0 else [{n: row[n] for n in self.order}]


class JoinOp(Op):
    """Keyed interval join (inner): rows with equal keys whose times differ by at most
    ``within``. A row is late if earlier than the watermark (max time seen - lateness);
    stored rows older than watermark - within are evicted (they can match no future row)."""

    def __init__(self, step: P.Join, c: Compiled, env: Env):
        super().__init__(step, c, env)
        self.s = step
        left = c.schemas[step.inputs[0].step_id]
        right = c.schemas[step.inputs[1].step_id]
        self.et = _EventTime(self, step.time, left, step.lateness, [])
        self.within = P.parse_duration(step.within)
        names = {n for n, _ in left}
        self.rmap = [
            (n, n if n not in names else f"{n}_right") for n, _ in right if n not in step.on
        ]
        self.store: list[dict[tuple[Any, ...], list[tuple[int, int, Row]]]] = [{}, {}]
        self.heap: list[tuple[int, int, int, tuple[Any, ...]]] = []

    def _combine(self, left: Row, right: Row) -> Row:
        out = dict(left)
        for n, m in self.rmap:
            out[m] = right[n]
        return out

    def push(self, row: Row, port: int) -> list[Row]:
        t = self.et.admit(row)
        if t is None:
            return []
        self.seq += 1
        k = _key(row, self.s.on)
        out: list[Row] = []
        if any(v is None for v in k):
            return out
        for ot, _, other in self.store[1 - port].get(k, ()):
            if abs(ot - t) <= self.within:
                out.append(self._combine(row, other) if port == 0 else self._combine(other, row))
        self.store[port].setdefault(k, []).append((t, self.seq, row))
        heapq.heappush(self.heap, (t, self.seq, port, k))
        wm = self.et.advance(t)
        horizon = wm - self.within
        while self.heap and self.heap[0][0] < horizon:
            ht, hseq, hport, hk = heapq.heappop(self.heap)
            lst = self.store[hport][hk]
            lst[:] = [e for e in lst if e[1] != hseq]
            if not lst:
                del self.store[hport][hk]
        return out

    def state_size(self) -> int:
        return len(self.heap)


class CorrelateOp(Op):
    """Conditions over several streams (plan.Correlate; README "correlate"), the definition.

    Inputs arrive merged (port = the input's position). One watermark over all inputs. Per
    (key, port) the admitted rows in insertion order; admitting (port i, key k, time t) sets
    T_k = max(T_k, t), appends the row to (k, i), drops from every port's rows of k those with
    time <= T_k - over, then emits the key, t and every aggregate over its port's kept rows.
    """

    def __init__(self, step: P.Correlate, c: Compiled, env: Env):
        super().__init__(step, c, env)
        self.s = step
        first = c.schemas[step.inputs[0].step_id]
        self.et = _EventTime(self, step.time, first, step.lateness, [])
        self.over = P.parse_duration(step.over)
        self.nports = len(step.inputs)
        # per key: [T_k, rows of port 0, rows of port 1, ...]; a row is (ticks, row dict)
        self.state: dict[tuple[Any, ...], list[Any]] = {}

    def push(self, row: Row, port: int) -> list[Row]:
        t = self.et.admit(row)
        if t is None:
            return []
        self.et.advance(t)
        k = _key(row, self.s.on)
        st = self.state.get(k)
        if st is None:
            st = self.state[k] = [t] + [[] for _ in range(self.nports)]
        st[0] = max(st[0], t)
        st[1 + port].append((t, row))
        horizon = st[0] - self.over
        for i in range(self.nports):
            st[1 + i] = [e for e in st[1 + i] if e[0] > horizon]
        out = {n: row[n] for n in self.s.on}
        out[self.s.time] = row[self.s.time]
        for name, a in self.s.aggs:
            out[name] = _corr_value(a, st[1 + a.port])
        return [out]

    def state_size(self) -> int:
        return sum(len(rows) for st in self.state.values() for rows in st[1:])


def _corr_value(a: P.CorrAgg, rows: list[tuple[int, Row]]) -> Any:
    """One correlate aggregate over kept rows (insertion order): nulls skipped except by
    last; sums left to right; mean = s / n; std = sqrt(sum((x - mean)**2) / (n - 1))."""
    if a.column is None:
        return len(rows)
    if a.fn == "last":
        return rows[-1][1][a.column] if rows else None
    xs = [r[a.column] for _, r in rows if r[a.column] is not None]
    if a.fn == "count":
        return len(xs)
    if not xs:
        return None
    if a.fn in ("min", "max"):
        best = xs[0]
        for x in xs[1:]:
            if (a.fn == "min" and _less(x, best)) or (a.fn == "max" and _less(best, x)):
                best = x
        return best
    total = xs[0]
    for x in xs[1:]:
        total = total + x
    if isinstance(total, int):
        total = wrap64(total)
    if a.fn == "sum":
        return total
    mean = total / len(xs)
    if a.fn == "mean":
        return mean
    if len(xs) < 2:
        return None
    ss = 0.0
    for x in xs:
        d = float(x) - mean
        ss = ss + d * d
    return math.sqrt(ss / (len(xs) - 1))


class TransferOp(Op):
    """Multi-entity transfer (plan.Transfer), sequentially: the definition the native ticket
    ordering must reproduce."""

    def __init__(self, step: P.Transfer, c: Compiled, env: Env):
        super().__init__(step, c, env)
        self.src, self.dst = step.keys
        self.amount = step.amount
        self.out_a, self.out_b = step.balance_columns
        is_float = dict(c.schemas[step.step_id])[self.out_a].name == "float"
        self.initial: Any = float(step.initial) if is_float else int(step.initial)
        self.is_float = is_float
        self.overdraft = step.overdraft
        self.bal: dict[Any, Any] = {}

    def push(self, row: Row, port: int) -> list[Row]:
        a, b, amt = row[self.src], row[self.dst], row[self.amount]
        for col, v in ((self.src, a), (self.dst, b), (self.amount, amt)):
            if v is None:
                self.dead(row, f"transfer: {col} is null")
                return []
        if isinstance(amt, float) and amt != amt:
            self.dead(row, "transfer: amount is NaN")
            return []
        if amt < 0:
            self.dead(row, "transfer: amount is negative")
            return []
        if self.is_float:
            amt = float(amt)
        ka, kb = key_part(a), key_part(b)
        ba = self.bal.get(ka, self.initial)
        if not self.overdraft and ba < amt:
            self.dead(row, f"transfer rejected: {self.src} balance below amount")
            return []
        ba = ba - amt if self.is_float else wrap64(ba - amt)
        self.bal[ka] = ba
        bb = self.bal.get(kb, self.initial)
        bb = bb + amt if self.is_float else wrap64(bb + amt)
        self.bal[kb] = bb
        out = dict(row)
        out[self.out_a] = self.bal[ka]
        out[self.out_b] = self.bal[kb]
        return [out]

    def state_size(self) -> int:
        return len(self.bal)


class SpeculateOp(Op):
    """A speculate stage (plan.Speculate), sequentially: the user's transactional function on
    each row in arrival order against one plain dict (key -> int64 value; absent reads 0),
    through the compiled module's reference wrapper. The definition the native speculative
    engine must reproduce."""

    def __init__(self, step: P.Speculate, c: Compiled, env: Env):
        super().__init__(step, c, env)
        from ..compiler import speculate_function

        spec, self.cols = speculate_function(step)
        self.fn = spec.row
        self.name = step.name
        self.float_args = [k == "d" for _, k in spec.params]
        self.store: dict[int, int] = {}

    def push(self, row: Row, port: int) -> list[Row]:
        args = [
            float(row[c]) if f and row[c] is not None else row[c]
            for c, f in zip(self.cols, self.float_args)
        ]
        out = dict(row)
        out[self.name] = self.fn(self.store, *args)
        return [out]

    def state_size(self) -> int:
        return len(self.store)


class ApplyOp(Op):
    """An apply stage (plan.Apply), sequentially: per row, the user's keyed step on its key's
    state, a zeroed ``bytearray`` of the struct's size made when the key is first seen,
    through the compiled module's reference wrapper (the same compiled function the native
    engine calls). The definition the native keyed operator must reproduce."""

    def __init__(self, step: P.Apply, c: Compiled, env: Env):
        super().__init__(step, c, env)
        from ..compiler import apply_function

        spec, self.cols = apply_function(step)
        self.fn = spec.row
        self.size = spec.state_size
        self.keys = step.keys
        self.name = step.name
        self.float_args = [k == "d" for _, k in spec.params]
        self.states: dict[tuple[Any, ...], bytearray] = {}

    def push(self, row: Row, port: int) -> list[Row]:
        k = _key(row, self.keys)
        st = self.states.get(k)
        if st is None:
            st = self.states[k] = bytearray(self.size)
        args = [
            float(row[c]) if f and row[c] is not None else row[c]
            for c, f in zip(self.cols, self.float_args)
        ]
        out = dict(row)
        out[self.name] = self.fn(st, *args)
        return [out]

    def state_size(self) -> int:
        return len(self.states)


class SketchOp(Op):
    """Exact answers for a sketch stage (streamcell.sketching.ReferenceStage); rows pass."""

    def __init__(self, step: P.Sketch, c: Compiled, env: Env):
        super().__init__(step, c, env)
        from ..sketching import ReferenceStage

        self.stage = ReferenceStage(step)
        self.keys = step.keys
        attach = getattr(env, "attach_sketch", None)
        if attach is not None:
            attach(step.step_id, self.stage)

    def push(self, row: Row, port: int) -> list[Row]:
        self.stage.update(tuple(row[k] for k in self.keys), row)
        return [row]

    def state_size(self) -> int:
        return len(self.stage.state) if self.keys else 0


class SinkOp(Op):
    def __init__(self, step: P.Sink, c: Compiled, env: Env):
        super().__init__(step, c, env)
        self.writer = env.sink_writer(step)
        self.buf: list[Row] = []
        # tables (and Parquet sinks that keep one: complete / update) take every row at once
        self.batch = 1 if step.target == "table" or step.mode is not None else 1024

    def push(self, row: Row, port: int) -> list[Row]:
        self.buf.append(row)
        if len(self.buf) >= self.batch:
            self.flush()
        return []

    def flush(self) -> None:
        if self.buf:
            rows, self.buf = self.buf, []
            self.writer(rows)

    def end(self) -> list[Row]:
        self.flush()
        return []


_OPS: dict[type, Callable[..., Op]] = {
    P.Filter: FilterOp,
    P.Select: ProjectOp,
    P.WithColumns: ProjectOp,
    P.Explode: ExplodeOp,
    P.Running: RunningOp,
    P.TopK: TopKOp,
    P.Dedup: DedupOp,
    P.Sketch: SketchOp,
    P.Transfer: TransferOp,
    P.Speculate: SpeculateOp,
    P.Apply: ApplyOp,
    P.Union: UnionOp,
    P.Join: JoinOp,
    P.Correlate: CorrelateOp,
    P.Sink: SinkOp,
}


def make_op(step: P.Step, c: Compiled, env: Env) -> Op:
    if isinstance(step, P.Aggregate):
        return (WindowOp if step.window is not None else AggregateOp)(step, c, env)
    return _OPS[type(step)](step, c, env)


# ----------------------------------------------------------------------------- driver


class Env(Protocol):
    """What the interpreter needs from its run: counters, stores, control, progress."""

    counters: dict[str, StepCounters]

    def dead_letter(
        self, step: str, reason: str, raw: str, position: str | None = None
    ) -> None: ...
    def late_row(self, step: str, row: Row) -> None: ...
    def sink_writer(self, sink: P.Sink) -> Callable[[list[Row]], None]: ...
    def should_stop(self) -> bool: ...
    def paused(self) -> bool: ...
    def wait_if_paused(self) -> bool: ...
    def on_source_row(self, n: int) -> None: ...
    def record_latency(self, ns: int) -> None: ...

    position: str


def _throttled(rows: Iterator[Any], rate: float | None) -> Iterator[Any]:
    """``rows`` at most ``rate`` per second (a token bucket: no catch-up after a pause)."""
    if rate is None:
        yield from rows
        return
    bucket = TokenBucket(rate)
    for i, r in enumerate(rows):
        bucket.wait(i)
        yield r


def execute(c: Compiled, env: Env) -> bool:
    """Run the plan to completion (True) or until stopped (False).

    Sources are merged in arrival order, one row of each live source in turn (round
    robin); each row is one phase. In a phase every step runs once, in plan order (inputs
    before consumers), on the rows its inputs produced for that phase; a step with several
    inputs takes them in port order. At the end of the input every step, in plan order,
    takes the rows its inputs emitted at their end (ordered by the emitting step, then
    port) and then ends itself. This sequential definition is what the native DAG
    executor's phases must equal (Zimmerman and Chandy); for a chain it is plain depth-first delivery.
    """
    steps = c.plan.steps
    ops = {s.step_id: make_op(s, c, env) for s in steps if not isinstance(s, P.Source)}
    consumers: dict[str, list[tuple[Op, int]]] = {s.step_id: [] for s in steps}
    for s in steps:
        for port, i in enumerate(s.inputs):
            consumers[i.step_id].append((ops[s.step_id], port))
    counters = env.counters
    perf = time.perf_counter_ns
    linear = c.plan.is_chain()
    index = {s.step_id: k for k, s in enumerate(steps)}
    targets = {sid: [(index[op.sid], port) for op, port in cs] for sid, cs in consumers.items()}
    by_index = [ops.get(s.step_id) for s in steps]
    fanin = [len(s.inputs) > 1 for s in steps]

    def push(op: Op, r: Row, port: int) -> list[Row]:
        """One row into one step: counted; a data error makes it a dead letter."""
        op.cnt.rows_in += 1
        try:
            out = op.push(r, port)
        except RowError as e:
            op.dead(r, str(e))
            return []
        op.cnt.rows_out += len(out)
        return out

    def deliver(sid: str, rows: list[Row]) -> None:
        for op, port in consumers[sid]:
            for r in rows:
                out = push(op, r, port)
                if out:
                    deliver(op.sid, out)

    def run_step(k: int, items: list[tuple[int, int, Row]], pending: list[list[Any]]) -> None:
        op = by_index[k]
        assert op is not None
        if fanin[k]:
            items.sort(key=lambda e: (e[0], e[1]))  # stable: a port keeps its order
        for origin, port, r in items:
            out = push(op, r, port)
            if out:
                for ck, cport in targets[op.sid]:
                    pending[ck].extend((origin, cport, o) for o in out)

    def phase(sid: str, row: Row) -> None:
        pending: list[list[Any]] = [[] for _ in steps]
        for ck, cport in targets[sid]:
            pending[ck].append((0, cport, row))
        for k in range(len(steps)):
            if pending[k]:
                run_step(k, pending[k], pending)

    sources = [s for s in steps if isinstance(s, P.Source)]
    streams = [(s, _throttled(c.readers[s.step_id].rows(), s.rate)) for s in sources]
    live = list(streams)
    n = 0
    while live:
        for entry in list(live):
            s, it = entry
            if env.should_stop() or not env.wait_if_paused():
                return False
            try:
                item = next(it)
            except StopIteration:
                live.remove(entry)
                continue
            except Exception:  # the source failed: rows read so far reach their sinks
                for sink_op in ops.values():
                    if isinstance(sink_op, SinkOp):
                        sink_op.flush()
                raise
            n += 1
            cnt = counters[s.step_id]
            cnt.rows_in += 1
            env.on_source_row(n)
            if isinstance(item, BadRow):
                cnt.dead += 1
                env.dead_letter(s.step_id, item.reason, item.raw, f"{s.step_id} {item.position}")
                continue
            env.position = f"{s.step_id} row {cnt.rows_in - 1}"
            cnt.rows_out += 1
            t0 = perf()
            if linear:
                deliver(s.step_id, [item])
            else:
                phase(s.step_id, item)
            env.record_latency(perf() - t0)
    if linear:
        for s in steps:
            if s.step_id in ops:
                out = ops[s.step_id].end()
                if out:
                    counters[s.step_id].rows_out += len(out)
                    deliver(s.step_id, out)
        return True
    pending: list[list[Any]] = [[] for _ in steps]
    for k, s in enumerate(steps):
        op = by_index[k]
        if op is None:
            continue
        if pending[k]:
            run_step(k, pending[k], pending)
        out = op.end()
        if out:
            counters[s.step_id].rows_out += len(out)
            for ck, cport in targets[s.step_id]:
                pending[ck].extend((k, cport, o) for o in out)
    return True


def state_sizes(ops: dict[str, Op]) -> dict[str, int]:
    return {sid: op.state_size() for sid, op in ops.items() if hasattr(op, "state_size")}


def run_to_frames(c: Compiled) -> dict[str, pl.DataFrame]:
    """Convenience for tests: run synchronously, return every table sink as a DataFrame."""
    from ..run import start

    run = start(c.plan, name=c.plan.name or "reference", options=None, compiled=c, display=False)
    run.wait()
    return {name: run.table(name) for name in run.table_names()}
