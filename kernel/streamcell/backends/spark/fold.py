"""Final tables of keyed ``agg`` steps, tumbling windows and session windows folded in
arrival order by one Python worker that reads the Parquet files itself.

The reference folds each key's rows in arrival order, and a float sum depends on that order:
``(1e16 + 1.0) + 1.0`` is not ``1e16 + (1.0 + 1.0)``. Spark's ``sum`` adds partial sums in
whatever order its shuffle delivers them, so :func:`.groupby.grouped` sorts every group's rows
by order key first (a shuffle of the grouped columns and a sort: 7-8 s of CPU at 10M rows,
where a hand-written ``groupBy`` with a map-side combine takes about 1 s). Folding the rows in
order is cheap: it is the reading that costs. Where the step's rows are one local Parquet
source's rows through filters and projections that cannot fail (the lineage of
:mod:`.direct`), one task reads the keys, the time and the aggregated columns with pyarrow,
file after file in serial order (a reader thread decodes ahead, :func:`ahead`), and folds
them batch by batch with numpy's unbuffered ``ufunc.at``, which applies its updates one after
another in the order of the rows:

- keys become group numbers batch by batch (:class:`Numbering`: a dictionary encoding of the
  batch, then a lookup of each distinct key, in sorted runs of the integer keys seen or a
  dict of others; several key columns by :class:`Keys`); new keys, null included, are
  numbered in order of first appearance, the table's order;
- ``count()``, ``count(x)``: row counts, and counts of non-null values;
- an int or bool ``sum``: int64 additions, which wrap around at 64 bits as the reference's do
  (0 where no value is set);
- a float ``sum``: ``np.add.at`` from -0.0 (``-0.0 + x`` is ``x`` for every ``x``, so the
  fold starts from the first value, as the reference's does; 0.0 where no value is set);
- ``min`` / ``max`` of ints; of floats, ``np.fmin.at`` (NaN only where every value is NaN) and
  ``np.maximum.at`` (NaN where any value is), and where the result is a zero, the first zero
  of the group with its sign (the reference keeps the first of equal values);
- ``count_distinct`` of ints, strings and bools: the distinct (group, value) pairs
  (:class:`_Distinct`; null is a value, as the reference counts it).

Windows: the task keeps the watermark itself (:class:`Watermark`), groups a tumbling window's
rows by (keys, start) (:func:`fold_windows`, which also finds each window's closing row where
that is wanted) and a session's by sorting the admitted rows by key, time and serial
(:func:`fold_sessions`). The output is one partition in the reference's order, with each
group's first serial as its order key, what :meth:`.backend.Lowering.group_by` and
:func:`.groupby.tumbling` / :func:`.groupby.sessions` would give. It reads every row in one
task: a sequential fold is what the reference defines, and its cost is the read (10M rows
here: about 0.3 s of one core for a key and a float column). Where windows ordered among
themselves go through filters to a ``top_k``, the task runs those too (:func:`fused_tail`).
Inputs over :data:`FOLD_ROWS` rows (:data:`SESSION_ROWS` for sessions,
:data:`DISTINCT_ROWS` with a ``count_distinct``), float keys, other aggregates and remote
files keep Spark's path."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa

from ... import plan as P
from ...expr import Col
from ...types import Schema
from .direct import BATCH_ROWS, Lineage, Piece, Pred, _columns, _eval, _ticks, part_of, predicate

FOLD = True
"""Whether a final table whose rows a worker can read folds there (read on the driver; False:
always Spark's ``groupBy``, which the tests compare it with)."""

SESSION_ROWS = 50_000_000
"""Input rows one task folds into sessions at most: it holds each admitted row's key number,
time and serial (and the aggregated columns) to sort them by key and time."""

DISTINCT_ROWS = 50_000_000
"""Input rows one task folds at most where a ``count_distinct`` is among the aggregates: it
keeps every distinct (group, value) pair, up to one per row."""

FOLD_ROWS = 200_000_000
"""Input rows one task folds at most (by the files' footers); beyond, Spark's ``groupBy``
spreads the work over the cluster."""

STATS = 9
"""The ``_k`` of the output row that carries the task's counts in its order key: rows that
reached the table, then the rows out of each filter of the lineage."""

_FNS = {"count": ("int", "float", "bool", "str"), "sum": ("int", "float", "bool")}
_FNS["min"] = _FNS["max"] = ("int", "float")
_FNS["count_distinct"] = ("int", "str", "bool")  # a float's NaN and zeros keep Spark's path

Agg = tuple[str, str | None, str]
"""One aggregate as the fold computes it: (function, file column or None, streamcell type)."""

Spec = tuple[str, str]
"""A key as the fold reads it: ("col", file column), or a datetime part of one
(:data:`.direct.PARTS`: ("dt.month", file column) ...)."""


def key_spec(lin: Lineage, name: str) -> Spec | None:
    """How the fold reads key ``name`` of lineage ``lin`` (an int, string or bool column as
    read, or a datetime part), or None."""
    if name in lin.derived:
        return lin.derived[name]
    if name in lin.columns and lin.types[name] in ("int", "str", "bool"):
        return ("col", lin.columns[name])
    return None


def _column(b: pa.RecordBatch, spec: Spec) -> pa.Array:
    fn, col = spec
    a = b.column(col)
    if fn == "col":
        return a
    return part_of(fn, a)


class Keys:
    """Numbers rows by one or more key columns, in order of first appearance of each
    combination: each column by a :class:`Numbering`, then the pairs (combination so far,
    next column's number) by another."""

    def __init__(self, n: int):
        self.each = [Numbering() for _ in range(n)]
        self.pairs = [Numbering() for _ in range(n - 1)]

    def __len__(self) -> int:
        return len(self.pairs[-1]) if self.pairs else len(self.each[0])

    def ids(self, cols: list[pa.Array]) -> np.ndarray:
        code = self.each[0].ids(cols[0])
        for i in range(1, len(self.each)):
            k = self.each[i].ids(cols[i])
            if len(self.each[i]) >= 1 << 31 or len(self.pairs[i - 1]) >= 1 << 31:
                raise OverflowError("too many keys for one task's fold")
            code = self.pairs[i - 1].ids(pa.array((code << 32) | k))
        return code

    def values(self, ids: np.ndarray) -> list[pa.Array]:
        """Each key column's values of the combinations numbered ``ids``."""
        out: list[pa.Array] = [pa.array([])] * len(self.each)
        for i in range(len(self.each) - 1, 0, -1):
            pairs = self.pairs[i - 1].keys()
            assert pairs is not None
            codes = pairs.to_numpy(zero_copy_only=False).astype(np.int64)[ids]
            out[i] = _taken(self.each[i], codes & 0xFFFFFFFF)
            ids = codes >> 32
        out[0] = _taken(self.each[0], ids)
        return out


def _taken(n: Numbering, ids: np.ndarray) -> pa.Array:
    keys = n.keys()
    return pa.array([]) if keys is None else keys.take(pa.array(ids))


def fold_aggs(s: P.Aggregate, lin: Lineage) -> list[Agg] | None:
    """``s``'s aggregates over file columns, or None where the fold does not compute them all
    as the reference does (or a column is one pyarrow would read as a nested field)."""
    out: list[Agg] = []
    for _, a in s.aggs:
        if a.arg is None:
            if a.fn != "count":
                return None
            out.append(("count", None, "int"))
            continue
        if not isinstance(a.arg, Col) or a.arg.name not in lin.columns:
            return None
        t = lin.types[a.arg.name]
        if t not in _FNS.get(a.fn, ()):
            return None
        out.append((a.fn, lin.columns[a.arg.name], t))
    return out


def fold_fits(s: P.Aggregate, lin: Lineage | None) -> bool:
    """Whether :func:`fold_table` computes ``s``'s final table over rows of lineage ``lin``."""
    if not FOLD or lin is None or not lin.units or not s.keys:
        return False
    specs = [key_spec(lin, k) for k in s.keys]
    aggs = fold_aggs(s, lin)
    if aggs is None or any(x is None for x in specs):
        return False
    need = {x[1] for x in specs if x is not None} | {c for _, c, _ in aggs if c is not None}
    for p in lin.filters:
        _columns(p, need)
    if any("." in c for c in need):  # pyarrow reads a dotted name as a nested field's path
        return False
    return lin.rows <= _cap(FOLD_ROWS, aggs)


def _cap(rows: int, aggs: list[Agg]) -> int:
    """The input rows one task folds at most: ``rows``, or fewer with a ``count_distinct``."""
    return min(rows, DISTINCT_ROWS) if any(fn == "count_distinct" for fn, _, _ in aggs) else rows


class Numbering:
    """Numbers keys in order of first appearance, batch by batch: each batch's distinct keys
    (a dictionary encoding, null included as a key) are looked up among the keys seen so far,
    so the work per batch is one pass over its rows and a lookup per distinct key. Integer
    keys (the folds' combined codes, int columns) are looked up in sorted runs of those seen
    (``searchsorted``), other keys in a dict: the dict's lookups were two thirds of Q1's fold
    (700k windows). Each batch's new integer keys are a run of their own; a run at least half
    the size of the one before merges into it, so there are about log2(keys) runs and each
    key is copied about as often (where inserting each batch's keys into one sorted array
    copied every key seen per batch)."""

    def __init__(self) -> None:
        self.n = 0
        self.index: dict[Any, int] = {}  # other keys: number by key
        self.runs: list[tuple[np.ndarray, np.ndarray]] = []  # integer keys (sorted), numbers
        self.null = -1  # the number of the null key of integer keys (-1: none yet)
        self.chunks: list[pa.Array] = []

    def __len__(self) -> int:
        return self.n

    def ids(self, keys: pa.Array) -> np.ndarray:
        import pyarrow.compute as pc

        d = pc.dictionary_encode(keys, null_encoding="encode")
        if isinstance(d, pa.ChunkedArray):
            d = d.combine_chunks()
        distinct = d.dictionary
        if pa.types.is_integer(distinct.type):
            got = self._integers(distinct)
        else:
            got = self._others(distinct)
        new = got < 0
        if new.any():
            got[new] = np.arange(self.n, self.n + int(new.sum()), dtype=np.int64)
            self.n += int(new.sum())
            self._learn(distinct, got, new)
            self.chunks.append(distinct.filter(pa.array(new)))
        at = d.indices.to_numpy(zero_copy_only=False)
        return got[at]

    def _others(self, distinct: pa.Array) -> np.ndarray:
        index = self.index
        return np.fromiter(
            (index.get(x, -1) for x in distinct.to_pylist()), np.int64, len(distinct)
        )

    def _integers(self, distinct: pa.Array) -> np.ndarray:
        valid = distinct.is_valid().to_numpy(zero_copy_only=False)
        v = distinct.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        got = np.full(len(v), -1, np.int64)
        for codes, numbers in self.runs:
            miss = np.flatnonzero(valid & (got < 0))
            if not len(miss):
                break
            at = np.minimum(np.searchsorted(codes, v[miss]), len(codes) - 1)
            hit = codes[at] == v[miss]
            got[miss[hit]] = numbers[at[hit]]
        got[~valid] = self.null
        return got

    def _learn(self, distinct: pa.Array, got: np.ndarray, new: np.ndarray) -> None:
        """Remember the batch's new keys (``new``) and their numbers."""
        if not pa.types.is_integer(distinct.type):
            for x, i in zip(distinct.filter(pa.array(new)).to_pylist(), got[new].tolist()):
                self.index[x] = i
            return
        valid = distinct.is_valid().to_numpy(zero_copy_only=False)
        if (new & ~valid).any():
            self.null = int(got[new & ~valid][0])
        fresh = new & valid
        if not fresh.any():
            return
        v = distinct.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)[fresh]
        by = np.argsort(v)
        self.runs.append((v[by], got[fresh][by]))
        while len(self.runs) > 1 and 2 * len(self.runs[-1][0]) >= len(self.runs[-2][0]):
            (a, na), (b, nb) = self.runs.pop(-2), self.runs.pop()
            codes = np.concatenate([a, b])
            by = np.argsort(codes, kind="stable")
            self.runs.append((codes[by], np.concatenate([na, nb])[by]))

    def keys(self) -> pa.Array | None:
        """The keys in the order of their numbers."""
        return pa.concat_arrays(self.chunks) if self.chunks else None


class _Groups:
    """The groups seen so far and each aggregate's state, grown as keys appear."""

    def __init__(self, aggs: list[Agg]):
        self.aggs = aggs
        self.numbers = Numbering()
        self.n = 0
        self.first = np.empty(0, np.int64)  # each group's first serial
        self.acc: list[np.ndarray] = []  # per aggregate: counts, sums, minima / maxima
        self.seen: list[np.ndarray | None] = []  # per aggregate: values set (None: not kept)
        self.zero: list[np.ndarray | None] = []  # float min / max: first zero's sign (-1: none)
        self.distinct = [_Distinct() if fn == "count_distinct" else None for fn, _, _ in aggs]
        for fn, _, t in aggs:
            self.acc.append(np.empty(0, self._dtype(fn, t)))
            self.seen.append(None if fn in ("count", "count_distinct") else np.empty(0, np.int64))
            self.zero.append(
                np.empty(0, np.int8) if fn in ("min", "max") and t == "float" else None
            )

    @staticmethod
    def _dtype(fn: str, t: str) -> Any:
        return np.float64 if t == "float" and fn != "count" else np.int64

    @staticmethod
    def _start(fn: str, t: str) -> Any:
        """A new group's state: -0.0 for a float sum (so the fold starts at the first value),
        the identity of min / max (NaN for fmin; -inf for maximum)."""
        if fn == "sum":
            return -0.0 if t == "float" else 0
        if fn == "min":
            return np.nan if t == "float" else np.iinfo(np.int64).max
        if fn == "max":
            return -np.inf if t == "float" else np.iinfo(np.int64).min
        return 0

    def grow(self, n: int) -> None:
        if n <= self.n:
            return
        extra = n - self.n
        self.first = np.concatenate([self.first, np.full(extra, np.iinfo(np.int64).max)])
        for i, (fn, _, t) in enumerate(self.aggs):
            self.acc[i] = np.concatenate(
                [self.acc[i], np.full(extra, self._start(fn, t), self.acc[i].dtype)]
            )
            s = self.seen[i]
            if s is not None:
                self.seen[i] = np.concatenate([s, np.zeros(extra, np.int64)])
            z = self.zero[i]
            if z is not None:
                self.zero[i] = np.concatenate([z, np.full(extra, -1, np.int8)])
        self.n = n

    def ids(self, keys: pa.Array) -> np.ndarray:
        """Each row's group number; new keys (null included) become new groups, in order of
        first appearance."""
        got = self.numbers.ids(keys)
        self.grow(len(self.numbers))
        return got

    @property
    def keys(self) -> pa.Array | None:
        """The groups' keys, in order of first appearance."""
        return self.numbers.keys()

    def fold(self, ids: np.ndarray, o: np.ndarray, cols: dict[str, pa.Array]) -> None:
        """Fold one batch: its rows' group numbers, serials and aggregated columns, in order."""
        np.minimum.at(self.first, ids, o)
        for i, (fn, col, t) in enumerate(self.aggs):
            acc = self.acc[i]
            if col is None:
                acc += np.bincount(ids, minlength=self.n)
                continue
            a = cols[col]
            d = self.distinct[i]
            if d is not None:
                d.add(ids, a)
                continue
            valid = a.is_valid().to_numpy(zero_copy_only=False)
            g = ids[valid]
            if fn == "count":
                acc += np.bincount(g, minlength=self.n)
                continue
            seen = self.seen[i]
            assert seen is not None
            seen += np.bincount(g, minlength=self.n)
            if t == "float":
                v = np.asarray(a.cast(pa.float64()).fill_null(0.0).to_numpy(), np.float64)[valid]
            else:
                v = np.asarray(a.cast(pa.int64()).fill_null(0).to_numpy(), np.int64)[valid]
            with np.errstate(invalid="ignore"):  # NaN is a value here
                if fn == "sum":
                    np.add.at(acc, g, v)
                elif fn == "min":
                    (np.fmin if t == "float" else np.minimum).at(acc, g, v)
                else:
                    np.maximum.at(acc, g, v)
            z = self.zero[i]
            if z is not None:  # the first zero of each group that had none, with its sign
                at = np.flatnonzero(v == 0.0)
                if len(at):
                    zg, first = np.unique(g[at], return_index=True)
                    fresh = z[zg] < 0
                    z[zg[fresh]] = np.signbit(v[at[first[fresh]]]).astype(np.int8)

    def results(self) -> list[pa.Array]:
        """Each aggregate's value per group, as the reference has it."""
        out = []
        for i, (fn, _, t) in enumerate(self.aggs):
            acc, seen, z = self.acc[i], self.seen[i], self.zero[i]
            d = self.distinct[i]
            if fn == "count":
                out.append(pa.array(acc, pa.int64()))
            elif d is not None:
                out.append(pa.array(d.counts(self.n), pa.int64()))
            elif fn == "sum":
                assert seen is not None
                v = np.where(seen > 0, acc, 0.0 if t == "float" else 0)
                out.append(pa.array(v, pa.float64() if t == "float" else pa.int64()))
            else:
                assert seen is not None
                v = acc.copy()
                if z is not None:
                    zeros = (v == 0.0) & (z >= 0)
                    v[zeros] = np.where(z[zeros] == 1, -0.0, 0.0)
                typ = pa.float64() if t == "float" else pa.int64()
                out.append(pa.array(v, typ, mask=seen == 0))
        return out


def sorted_unique(x: np.ndarray) -> np.ndarray:
    """The distinct values of ``x``, sorted: a sort and a mask (``np.unique`` of numpy 2.4 took
    8.6 s for 7M int64 here, the sort 0.45 s)."""
    s = np.sort(x)
    keep = np.ones(len(s), bool)
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


class _Distinct:
    """A ``count_distinct``'s state: the distinct (group, value) pairs seen, each value
    numbered in order of first appearance (:class:`Numbering`: null is a value, as the
    reference counts it), a pair as one int64. Each batch's distinct pairs are kept; they
    are merged (sorted, duplicates dropped) once they outgrow twice what the last merge
    left, so the work is the sort of each pair a few times and the memory about twice the
    distinct pairs, which is the reference's state (a set per group)."""

    MERGE_AT = 1 << 22  # pairs held before the first merge

    def __init__(self) -> None:
        self.values = Numbering()
        self.parts: list[np.ndarray] = []
        self.size = 0  # pairs held
        self.merged = 0  # pairs the last merge left

    def add(self, ids: np.ndarray, values: pa.Array) -> None:
        v = self.values.ids(values)
        if len(self.values) > 1 << 32 or (len(ids) and int(ids.max()) >= 1 << 31):
            raise OverflowError("too many groups or values for one task's count_distinct")
        pairs = sorted_unique((ids.astype(np.int64) << 32) | v)
        self.parts.append(pairs)
        self.size += len(pairs)
        if self.size > max(self.MERGE_AT, 2 * self.merged):
            self._merge()

    def _merge(self) -> None:
        if len(self.parts) > 1:
            self.parts = [sorted_unique(np.concatenate(self.parts))]
        self.size = self.merged = len(self.parts[0]) if self.parts else 0

    def counts(self, n: int) -> np.ndarray:
        """Each of the ``n`` groups' distinct values."""
        self._merge()
        if not self.parts:
            return np.zeros(n, np.int64)
        return np.bincount(self.parts[0] >> 32, minlength=n).astype(np.int64)


def fold_table(
    units: tuple[tuple[Piece, ...], ...],
    keys: list[Spec],
    aggs: list[Agg],
    filters: tuple[Pred, ...],
    counts: list[int],
    batch_rows: int | None = None,
) -> tuple[list[pa.Array], list[pa.Array], np.ndarray]:
    """The final table of the rows of ``units`` that pass ``filters``, folded by ``keys`` in
    arrival order: each key column's values, each aggregate's values and each group's first
    serial, in order of first appearance. ``counts`` gets the rows that reached the table,
    then the rows out of each filter."""
    need = {c for _, c in keys} | {c for _, c, _ in aggs if c is not None}
    groups = _Groups(aggs)
    combos = Keys(len(keys)) if len(keys) > 1 else None
    for o, b in filtered(units, need, filters, counts, batch_rows):
        cols = [_column(b, k) for k in keys]
        if combos is None:
            ids = groups.ids(cols[0])
        else:
            ids = groups.ids(pa.array(combos.ids(cols)))
        groups.fold(ids, o, {c: b.column(c) for c in need})
    got = groups.keys
    if got is None:
        values = [pa.array([]) for _ in keys]
    elif combos is None:
        values = [got]
    else:
        values = combos.values(got.to_numpy(zero_copy_only=False).astype(np.int64))
    return values, groups.results(), groups.first


def filtered(
    units: tuple[tuple[Piece, ...], ...],
    need: set[str],
    filters: tuple[Pred, ...],
    counts: list[int],
    batch_rows: int | None = None,
) -> Iterator[tuple[np.ndarray, pa.RecordBatch]]:
    """The (serials, columns ``need``) batches of the rows of ``units`` that pass
    ``filters``, in order, read ahead (:func:`ahead`). ``counts`` gets the rows that pass,
    then the rows out of each filter."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    need = set(need)
    for p in filters:
        _columns(p, need)
    size = batch_rows or BATCH_ROWS
    counts[:] = [0] * (1 + len(filters))

    def read() -> Iterator[tuple[int, pa.RecordBatch]]:
        for unit in units:
            for path, o0, rgs in unit:
                with pq.ParquetFile(path) as f:
                    for b in f.iter_batches(size, list(rgs), sorted(need)):
                        yield o0, b
                        o0 += b.num_rows

    for o0, b in ahead(read()):
        o = np.arange(o0, o0 + b.num_rows, dtype=np.int64)
        keep = None
        for i, p in enumerate(filters):
            m = _eval(p, b)
            keep = m if keep is None else pc.and_kleene(keep, m)
            counts[1 + i] += int(pc.sum(pc.fill_null(keep, False)).as_py() or 0)
        if keep is not None:
            sel = pc.fill_null(keep, False)
            b = b.filter(sel)
            o = o[sel.to_numpy(zero_copy_only=False)]
        counts[0] += b.num_rows
        if b.num_rows:
            yield o, b


class Watermark:
    """Late rows as the reference finds them, batch by batch in arrival order: a row with a
    time is late when it is earlier than the largest earlier time minus the lateness (a late
    row is below that largest time, so it never raises it)."""

    def __init__(self, lateness: int):
        self.lateness = lateness
        self.top: int | None = None  # the largest time so far
        self.late: list[np.ndarray] = []  # the serials of the late rows

    def admit(self, t: np.ndarray, o: np.ndarray) -> np.ndarray:
        """Which of a batch's rows (times ``t``, serials ``o``) are not late."""
        if not len(t):
            return np.ones(0, bool)
        run = np.maximum.accumulate(t)
        before = np.empty_like(t)
        before[1:] = run[:-1]
        if self.top is None:
            late = np.zeros(len(t), bool)
            late[1:] = t[1:] < before[1:] - self.lateness
            self.top = int(run[-1])
        else:
            before[0] = self.top
            np.maximum(before, self.top, out=before)
            late = t < before - self.lateness
            self.top = max(self.top, int(run[-1]))
        if late.any():
            self.late.append(o[late])
        return ~late

    def serials(self) -> np.ndarray:
        return np.concatenate(self.late) if self.late else np.empty(0, np.int64)


def _admitted(
    b: pa.RecordBatch, o: np.ndarray, time: str, wm: Watermark, dead: list[int]
) -> tuple[pa.RecordBatch, np.ndarray, np.ndarray]:
    """A batch's rows with a time that the watermark ``wm`` admits, their serials and ticks;
    ``dead[0]`` gets the rows with a null time."""
    valid = b.column(time).is_valid().to_numpy(zero_copy_only=False)
    dead[0] += int(len(valid) - valid.sum())
    if not valid.all():
        b, o = b.filter(pa.array(valid)), o[valid]
    t = _ticks(b.column(time))
    alive = wm.admit(t, o)
    if not alive.all():
        b, o, t = b.filter(pa.array(alive)), o[alive], t[alive]
    return b, o, t


def _report(counts: list[int], dead: int, wm: Watermark) -> None:
    """After the filters' counts: the rows with a null time, then the late rows' serials."""
    counts.append(dead)
    counts.extend(wm.serials().tolist())


def _no_windows(keys: list[Spec], aggs: list[Agg]) -> Windows:
    """The windows of a step no admitted row reached."""
    empty = np.empty(0, np.int64)
    vals = [pa.array([], _agg_type(fn, t)) for fn, _, t in aggs]
    return Windows([pa.array([]) for _ in keys], empty, empty, empty, vals, empty)


class Windows(NamedTuple):
    """Tumbling windows folded by :func:`fold_windows`, one entry per window, in the order
    the reference emits them: each key column's values, the start, the first serial,
    the serial of the row that closes the window (-1: none does), each aggregate's values,
    the end."""

    keys: list[pa.Array]
    start: np.ndarray
    first: np.ndarray
    close: np.ndarray
    values: list[pa.Array]
    end: np.ndarray


def fold_windows(
    units: tuple[tuple[Piece, ...], ...],
    keys: list[Spec],
    time: str,
    aggs: list[Agg],
    filters: tuple[Pred, ...],
    size: int,
    lateness: int,
    relative: bool,
    counts: list[int],
    batch_rows: int | None = None,
) -> Windows:
    """The tumbling windows of ``size`` ticks over the rows of ``units`` that pass
    ``filters``, have a time and are not late (the task's own :class:`Watermark`), by
    ``keys``, folded in arrival order. A window starts at ``t - t mod size``; it
    closes at the first admitted row whose time minus ``lateness`` reaches its end (the
    smallest serial among the rows whose ``floor((t - lateness) / size) * size`` is at or
    beyond it); windows closing together by (end, start, first serial), windows no row
    closes after all others in the same order. ``relative``: only the windows' order among
    themselves is wanted, which is that of (end, start, first serial), and no close is
    looked for."""
    need = {time} | {c for _, c in keys} | {c for _, c, _ in aggs if c is not None}
    groups = _Groups(aggs)
    marks = _Groups([])  # per floor((t - lateness) / size) * size: its first admitted serial
    combos = Keys(len(keys)) if keys else None
    base: int | None = None
    wm = Watermark(lateness)
    dead = [0]
    for o, b in filtered(units, need, filters, counts, batch_rows):
        b, o, t = _admitted(b, o, time, wm, dead)
        if not len(o):
            continue
        ws = t - np.mod(t, size)
        kid = np.zeros(len(o), np.int64)
        if combos is not None:
            kid = combos.ids([_column(b, k) for k in keys])
        if base is None:
            base = int(ws[0])
        sid = (ws - base) // size + (1 << 31)  # the window's number, from the first one's
        if len(combos or ()) >= 1 << 31 or sid.min() < 0 or sid.max() >= 1 << 32:
            raise OverflowError("too many keys or windows for one task's fold")
        ids = groups.ids(pa.array((kid << 32) | sid))
        groups.fold(ids, o, {c: b.column(c) for c in need})
        if not relative:
            reach = t - lateness
            marks.fold(marks.ids(pa.array(reach - np.mod(reach, size))), o, {})
    _report(counts, dead[0], wm)
    if groups.keys is None or base is None:
        return _no_windows(keys, aggs)
    codes = groups.keys.to_numpy(zero_copy_only=False).astype(np.int64)
    start = base + ((codes & 0xFFFFFFFF) - (1 << 31)) * size
    first = groups.first
    close = np.full(len(codes), -1, np.int64)
    if not relative and marks.keys is not None:
        v = marks.keys.to_numpy(zero_copy_only=False).astype(np.int64)
        by = np.argsort(v, kind="stable")
        v, co = v[by], marks.first[by]
        suffix = np.minimum.accumulate(co[::-1])[::-1]  # smallest serial at or beyond
        at = np.searchsorted(v, start + size, side="left")
        hit = at < len(v)
        close[hit] = suffix[at[hit]]
    shut = np.where(close < 0, np.iinfo(np.int64).max, close)
    order = np.lexsort((first, start, shut))  # the last key sorts first
    values = [x.take(pa.array(order)) for x in groups.results()]
    kv = [] if combos is None else combos.values(codes[order] >> 32)
    return Windows(kv, start[order], first[order], close[order], values, start[order] + size)


def fold_sessions(
    units: tuple[tuple[Piece, ...], ...],
    keys: list[Spec],
    time: str,
    aggs: list[Agg],
    filters: tuple[Pred, ...],
    gap: int,
    lateness: int,
    counts: list[int],
    batch_rows: int | None = None,
) -> Windows:
    """The session windows of ``gap`` ticks over the rows of ``units`` that pass ``filters``,
    have a time and are not late (:class:`Watermark`), by ``keys``, in order of (end, start,
    first serial):
    the windows' order among themselves (the caller wants no more). A key's sessions are the
    runs of its rows sorted by (time, serial), split where a row is at least ``gap`` after
    the one before, as :func:`.groupby.sessions` finds them; a session is
    ``[first time, last time + gap)``. The aggregates fold each session's rows in that order,
    which is arrival order where no admitted row is behind another (no lateness); with a
    lateness the caller passes no aggregate whose value depends on the order (a float sum,
    a float min / max, whose first of equal zeros would)."""
    need = {time} | {c for _, c in keys} | {c for _, c, _ in aggs if c is not None}
    combos = Keys(len(keys)) if keys else None
    kids: list[np.ndarray] = []
    ts: list[np.ndarray] = []
    os: list[np.ndarray] = []
    cols: dict[str, list[pa.Array]] = {c: [] for _, c, _ in aggs if c is not None}
    wm = Watermark(lateness)
    dead = [0]
    for o, b in filtered(units, need, filters, counts, batch_rows):
        b, o, t = _admitted(b, o, time, wm, dead)
        if not len(o):
            continue
        os.append(o)
        ts.append(t)
        if combos is not None:
            kids.append(combos.ids([_column(b, k) for k in keys]))
        for c in cols:
            cols[c].append(b.column(c))
    _report(counts, dead[0], wm)
    if not os:
        return _no_windows(keys, aggs)
    o = np.concatenate(os)
    t = np.concatenate(ts)
    kid = np.concatenate(kids) if kids else np.zeros(len(o), np.int64)
    by = np.lexsort((o, t, kid))  # by key, time, serial
    o, t, kid = o[by], t[by], kid[by]
    cut = np.ones(len(o), bool)
    cut[1:] = (kid[1:] != kid[:-1]) | (t[1:] - t[:-1] >= gap)
    sid = np.cumsum(cut) - 1
    heads = np.flatnonzero(cut)
    n = len(heads)
    groups = _Groups(aggs)
    groups.grow(n)
    taken = pa.array(by)
    groups.fold(
        sid,
        o,
        {
            c: pa.concat_arrays(
                [x.combine_chunks() if isinstance(x, pa.ChunkedArray) else x for x in parts]
            ).take(taken)
            for c, parts in cols.items()
        },
    )
    start = t[heads]
    ends = np.append(heads[1:], len(o)) - 1
    end = t[ends] + gap
    first = groups.first
    order = np.lexsort((first, start, end))
    values = [x.take(pa.array(order)) for x in groups.results()]
    kv = [] if combos is None else combos.values(kid[heads][order])
    return Windows(kv, start[order], first[order], np.full(n, -1, np.int64), values, end[order])


def _agg_type(fn: str, t: str) -> pa.DataType:
    return pa.float64() if t == "float" and fn != "count" else pa.int64()


def ahead(batches: Iterator[Any], depth: int = 2) -> Iterator[Any]:
    """``batches``, read by a thread of their own up to ``depth`` ahead of the caller: the
    Parquet decoding (which releases the GIL) overlaps the fold. An error of the reader is
    raised here; a caller that stops early stops the reader."""
    import queue
    import threading

    q: queue.Queue[Any] = queue.Queue(depth)
    done = object()
    stop = threading.Event()

    def put(item: Any) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False  # the caller stopped

    def produce() -> None:
        try:
            for b in batches:
                if not put((b, None)):
                    return
            put((done, None))
        except BaseException as e:  # handed to the caller
            put((done, e))

    t = threading.Thread(target=produce, name="streamcell-fold-read", daemon=True)
    t.start()
    try:
        while True:
            b, err = q.get()
            if b is done:
                if err is not None:
                    raise err
                return
            yield b
    finally:
        stop.set()
        t.join()


def direct_fold(low: Any, j: int, s: P.Aggregate) -> Any | None:
    """The final table of ``s`` folded by one task (:func:`fold_table`), as the DataFrame
    :meth:`.backend.Lowering.group_by` returns (its columns and ``_o``), one partition in
    order; None where it does not fit (:func:`fold_fits`)."""
    from .backend import ORDER_DDL, Lowered, ddl, order_array
    from .direct import DIRECT_READS

    lin = low.direct.get(s.inputs[0].step_id)
    if not DIRECT_READS or not fold_fits(s, lin):
        return None
    assert lin is not None
    aggs = fold_aggs(s, lin)
    assert aggs is not None
    out_schema = low.c.schemas[s.step_id]
    specs = [x for k in s.keys if (x := key_spec(lin, k)) is not None]  # all: fits
    names = [n for n, _ in out_schema]
    kinds = {n: t.name for n, t in out_schema}
    units, filters = lin.units, lin.filters

    def table(counts: list[int]) -> list[pa.Array]:
        keys, values, first = fold_table(units, specs, aggs, filters, counts)
        by = dict(zip([n for n, _ in s.aggs], values))
        by.update({k: v.cast(_ARROW[kinds[k]]) for k, v in zip(s.keys, keys)})
        cols = [by[n] for n in names]
        return [*cols, order_array(pa.array(first, pa.int64()))]

    df, rows_in, _ = _one_task(low, j, lin, table, ddl(out_schema, ORDER_DDL))
    low.lowered.append(Lowered(s, "final", None, into=rows_in))
    low.how[s.step_id] = "python fold"
    low.final.add(s.step_id)
    low.in_order.add(s.step_id)
    low.unique_on[s.step_id] = tuple(s.keys)
    return df


_ARROW = {"int": pa.int64(), "str": pa.string(), "bool": pa.bool_()}


def _one_task(
    low: Any,
    j: int,
    lin: Lineage,
    columns: Callable[[list[int]], Any],
    ddl: str,
    side: pa.Schema | None = None,
) -> tuple[Any, Callable[[], int], list[int]]:
    """The rows ``columns`` makes (given a list it fills with the rows that reached the step,
    the rows out of each filter of ``lin``, then anything else it reports) as one task's one
    partition, checkpointed (the task runs once); the rows into the step; what it reported
    after the filters' counts. The filters of the lineage never run in Spark: their rows out
    are the task's counts. ``columns`` makes the columns of ``ddl``, or with ``side``, whose
    ``ddl`` has the side columns (``_o``, ``_k``, ``_b``; ``side``: the batches' Arrow
    schema), Arrow batches of them, which are handed on with their side rows."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    names = [n.replace("``", "`") for n in re.findall(r"`((?:[^`]|``)+)`", ddl)]
    if side is None:
        names.append("_k")
    at = names.index("_o") if side is not None else len(names) - 2  # where the counts go

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for _ in batches:  # the one row of the one partition
            pass
        counts: list[int] = []
        got = columns(counts)
        if side is not None:
            yield from got
            types = [f.type for f in side]
        else:
            n = len(got[0])
            out = pa.RecordBatch.from_arrays([*got, pa.array(np.zeros(n, np.int8))], names=names)
            types = [f.type for f in out.schema]
            yield out
        stats: list[pa.Array] = []
        for i, name in enumerate(names):
            if i == at:
                stats.append(pa.array([counts], pa.list_(pa.int64())))
            elif name == "_k":
                stats.append(pa.array([STATS], pa.int8()))
            else:
                stats.append(pa.nulls(1, types[i]))
        yield pa.RecordBatch.from_arrays(stats, names=names)

    schema = ddl if side is not None else ddl + ", `_k` tinyint"
    df = low.spark.range(0, 1, 1, 1).mapInArrow(run, schema)
    obs = Observation(f"sc{low.uid}_{j}_fold")
    stat = F.col("_k") == F.lit(STATS)
    df = df.observe(obs, F.max(F.when(stat, F.col(names[at]))).alias("counts"))
    df = low.checkpoint(df)
    got = list(obs.get["counts"] or [])
    outs = dict(zip(lin.steps, got[1:]))
    for lw in low.lowered:  # the filters never ran in Spark: their rows out are the fold's
        if lw.step.step_id in outs and lw.kind == "filter":
            lw.observation, lw.out = None, (lambda n=outs[lw.step.step_id]: n)
    low.counted.update({sid: (lambda n=n: n) for sid, n in outs.items()})
    rows_in = got[0] if got else 0
    df = df.filter(~stat)
    return (df if side is not None else df.drop("_k")), lambda: rows_in, got[1 + len(lin.steps) :]


def windows_fit(s: P.Aggregate, lin: Lineage | None) -> bool:
    """Whether :func:`fold_windows` computes tumbling-window step ``s`` over rows of lineage
    ``lin``: no key or one int, string or bool key, a time column as read, the aggregates of
    :func:`fold_aggs`."""
    w = s.window
    if not FOLD or lin is None or not lin.units or w is None:
        return False
    if w.kind == "session":
        # admitted rows behind others: a fold in time order is one in arrival order only
        # for aggregates that do not depend on it
        if P.parse_duration(w.lateness) > 0 and any(
            fn in ("sum", "min", "max") and t == "float" for fn, _, t in fold_aggs(s, lin) or []
        ):
            return False
    elif w.kind != "tumbling" or (w.every is not None and w.every != w.size):
        return False
    specs = [key_spec(lin, k) for k in s.keys]
    if any(x is None for x in specs):
        return False
    if w.time not in lin.columns or lin.types[w.time] not in ("int", "datetime"):
        return False
    aggs = fold_aggs(s, lin)
    if aggs is None:
        return False
    need = {lin.columns[w.time]} | {x[1] for x in specs if x is not None}
    need |= {c for _, c, _ in aggs if c is not None}
    for p in lin.filters:
        _columns(p, need)
    cap = _cap(SESSION_ROWS if w.kind == "session" else FOLD_ROWS, aggs)
    return not any("." in c for c in need) and lin.rows <= cap


class Counted:
    """A step's counts as an ``Observation`` hands them (``get``), where a task counted them."""

    def __init__(self, got: dict[str, int]):
        self.get = got


class Folded(NamedTuple):
    """A window step's windows folded by one task (:func:`direct_windows`), one partition in
    the reference's order, and what the task counted: the rows into the step, those with a
    null time, and the late rows' serials. Where the task also ran the steps after the
    windows (:func:`fused_tail`), ``df`` is the last one's raw output (its side rows
    included), ``tail`` those steps and ``made`` the windows and each filter's rows out."""

    df: Any
    rows_in: Callable[[], int]
    dead: int
    late: list[int]
    tail: Tail | None = None
    made: list[int] = []


class Tail(NamedTuple):
    """The steps after a window step that its fold's task runs too: filters (with their
    predicates over the windows' columns) and the ``top_k`` after them."""

    filters: list[tuple[P.Filter, Pred]]
    top_k: P.TopK


FUSE = True
"""The ablation switch: False leaves the filters and ``top_k`` after folded windows to Spark."""


def fused_tail(low: Any, s: P.Aggregate) -> Tail | None:
    """The filters and the ``top_k`` after window step ``s`` that the fold's task runs on the
    windows it made, where they are all there is between ``s`` and the ``top_k`` (each the
    only consumer of the step before), the filters are predicates pyarrow computes as the
    reference does (:func:`.direct.predicate`) and the native ``top_k`` runs the ``top_k``.
    The windows then never go through Spark: Q1's 700k windows took a second there, on
    their way to a ``top_k`` that keeps 100."""
    from .native_ops import native_refusal

    if not FUSE:
        return None
    consumers = low.c.plan.consumers()
    filters: list[tuple[P.Filter, Pred]] = []
    cur: P.Step = s
    while True:
        nxt = consumers[cur.step_id]
        if len(nxt) != 1:
            return None
        c = nxt[0]
        if isinstance(c, P.Filter) and c.step_id != low.counted_by_sink:
            schema = low.c.schemas[cur.step_id]
            view = Lineage((), {n: n for n, _ in schema}, {n: t.name for n, t in schema})
            p = predicate(c.predicate, view)
            if p is None:
                return None
            filters.append((c, p))
            cur = c
            continue
        if isinstance(c, P.TopK) and native_refusal(c, low.schemas(c)) is None:
            return Tail(filters, c)
        return None


def _mask(p: Pred, b: pa.RecordBatch) -> pa.Array:
    """Predicate ``p`` over batch ``b``, null as false."""
    import pyarrow.compute as pc

    m = _eval(p, b)
    if isinstance(m, pa.Scalar):
        m = pa.array(np.full(b.num_rows, bool(m.as_py())), pa.bool_())
    return pc.fill_null(m, False)


def run_tail(
    got: Windows,
    keys: dict[str, pa.Array],
    aggs: list[str],
    schema: Schema,
    temporal: bool,
    preds: list[Pred],
    top_k: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]],
) -> tuple[list[pa.RecordBatch], list[int]]:
    """The windows ``got`` (relative order; ``keys``: their key columns by name, ``aggs``:
    the names of its aggregates' values) as the
    window step's rows (``schema``, order keys ``[end, start, first serial, 0]`` as Spark's
    path gives them), through the filters ``preds`` and the ``top_k`` (its partition
    function): the ``top_k``'s output batches with its side rows, and the windows' and each
    filter's rows out. Plain values only: the task's closure carries no plan step (whose
    inputs reach back to the source)."""
    by = dict(keys)
    by.update(zip(aggs, got.values))
    bound = {"window_start": got.start, "window_end": got.end}
    cols = []
    for name, _ in schema:
        if name in by:
            cols.append(by[name])
        else:
            v = pa.array(bound[name], pa.int64())
            cols.append(v.cast(pa.timestamp("us")) if temporal else v)
    n = len(got.start)
    flat = np.stack([got.end, got.start, got.first, np.zeros(n, np.int64)], axis=1).ravel()
    offsets = pa.array(np.arange(n + 1, dtype=np.int32) * 4)
    o = pa.ListArray.from_arrays(offsets, pa.array(flat, pa.int64()))
    b = pa.RecordBatch.from_arrays([*cols, o], names=[*[x for x, _ in schema], "_o"])
    made = [n]
    for p in preds:
        b = b.filter(_mask(p, b))
        made.append(b.num_rows)
    step = 1 << 16
    parts = [b.slice(i, step) for i in range(0, b.num_rows, step)]
    return list(top_k(iter(parts))), made


def direct_windows(low: Any, j: int, s: P.Aggregate, relative: bool) -> Folded | None:
    """Window step ``s``'s windows folded by one task (:func:`fold_windows`,
    :func:`fold_sessions`: only where ``relative``), as :func:`.groupby.tumbling` and
    :func:`.groupby.sessions` hand them to their ``finish`` (keys, aggregates, ``_ws``,
    ``_we``, ``_wq`` and, unless ``relative``, the close), one partition in the reference's
    order; None where it does not fit (:func:`windows_fit`). The task finds the dead and late
    rows itself, on its way (:class:`Watermark`). Where the windows' order among themselves
    is all that matters and a ``top_k`` follows them (:func:`fused_tail`), the task runs
    that too and hands on its output."""
    from .backend import SIDE_DDL, ddl
    from .direct import DIRECT_READS
    from .groupby import WINDOW_CLOSE
    from .native_ops import native_keyed_fn
    from .ops import SIDE_FIELDS, arrow_schema

    lin = low.direct.get(s.inputs[0].step_id)
    w = s.window
    if not DIRECT_READS or not windows_fit(s, lin) or w is None:
        return None
    assert lin is not None
    aggs = fold_aggs(s, lin)
    assert aggs is not None
    size, lateness = P.parse_duration(w.size), P.parse_duration(w.lateness)
    out_schema = dict(low.c.schemas[s.step_id])
    specs = [x for k in s.keys if (x := key_spec(lin, k)) is not None]  # all: fits
    time, units, filters = lin.columns[w.time], lin.units, lin.filters
    cols = [(k, out_schema[k]) for k in s.keys] + [(n, out_schema[n]) for n, _ in s.aggs]
    extra = "`_ws` bigint, `_we` bigint, `_wq` array<bigint>"
    if not relative:
        extra += f", `{WINDOW_CLOSE}` array<bigint>"
    tail = fused_tail(low, s) if relative else None
    arrow = None
    if tail is not None:
        tk, tk_out = tail.top_k, low.c.schemas[tail.top_k.step_id]
        top_k = native_keyed_fn(tk, low.steps.index(tk), low.schemas(tk), tk_out)
        temporal = lin.types[w.time] == "datetime"
        preds = [p for _, p in tail.filters]
        task_ddl = ddl(tk_out, SIDE_DDL)
        arrow = arrow_schema(tk_out, SIDE_FIELDS)
    else:
        task_ddl = ddl(tuple(cols), extra)
    key_names, agg_names = list(s.keys), [n for n, _ in s.aggs]
    after = len(lin.steps)  # the filters' counts come first among the task's
    schema = low.c.schemas[s.step_id]

    def windows(counts: list[int]) -> Any:
        from .backend import order_array

        if w.kind == "session":
            got = fold_sessions(units, specs, time, aggs, filters, size, lateness, counts)
        else:
            got = fold_windows(units, specs, time, aggs, filters, size, lateness, relative, counts)
        keys = [k.cast(_ARROW[t.name]) for k, (_, t) in zip(got.keys, cols)]
        if arrow is not None:
            by = dict(zip(key_names, keys))
            out, made = run_tail(got, by, agg_names, schema, temporal, preds, top_k)
            counts[1 + after : 1 + after] = made
            return out
        out = [*keys, *got.values, pa.array(got.start), pa.array(got.end)]
        out.append(order_array(pa.array(got.first, pa.int64())))
        if not relative:
            shut = order_array(pa.array(got.close, pa.int64()))
            out.append(pc_where_null(shut, got.close < 0))
        return out

    df, rows_in, told = _one_task(low, j, lin, windows, task_ddl, side=arrow)
    low.in_order.add(s.step_id)
    made: list[int] = []
    if tail is not None:
        made, told = told[: 1 + len(tail.filters)], told[1 + len(tail.filters) :]
    dead, late = (int(told[0]) if told else 0), [int(x) for x in told[1:]]
    return Folded(df, rows_in, dead, late, tail, [int(x) for x in made])


def pc_where_null(a: pa.Array, null: np.ndarray) -> pa.Array:
    """``a`` with nulls where ``null`` is set."""
    import pyarrow.compute as pc

    return pc.if_else(pa.array(null), pa.scalar(None, a.type), a)
