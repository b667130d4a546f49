"""Keyed aggregates as Spark's own ``groupBy``, where it gives exactly the reference's answer.

The reference folds each key's rows in arrival order. Most aggregates do not depend on that
order (count, min, max, integer sums, count_distinct), or depend on it only through the order
key, which every row carries (first / last: the value at the smallest / largest ``_o``). A
float sum does: ``(1e16 + 1.0) + 1.0`` is not ``1e16 + (1.0 + 1.0)``. Spark's ``sum`` adds
partial sums in whatever order the shuffle delivers them, so a float sum here is a running
sum over the group's rows sorted by order key (a window frame from the first row to the
current one: Spark adds row after row, in order) read at the group's last row
(:func:`grouped`, :func:`agg_columns`). All of it stays in Catalyst: no Python on the
executors.

Used by the final table of an unwindowed ``agg`` (``Lowering.group_by``) and by tumbling
windows over finite sources (:func:`tumbling`). The same window, read at every row instead of
a group's last, is a ``running`` step or an ``agg``'s per-row changelog
(:func:`running_columns`, ``Lowering.running``).
"""

from __future__ import annotations

import functools
import shutil
import tempfile
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa

from ... import plan as P
from ...expr import Col
from ...types import Schema
from .direct import DirectPairs, direct_pairs
from .expr import qcol
from .fold import direct_windows, sorted_unique

FNS = ("count", "min", "max", "sum", "count_distinct", "first", "last")
"""The aggregate functions :func:`agg_columns` computes exactly."""


def exact_aggs(s: P.Aggregate, types: dict[str, Any]) -> bool:
    """Whether :func:`agg_columns` gives the reference's values for ``s``: aggregates of
    :data:`FNS` over columns (or ``count()``), keys that are not floats (a table keeps a
    float key as the key's first row has it, -0.0 or 0.0, where Spark's groupBy writes every
    zero key as 0.0)."""
    if any(types[k].name in ("null", "list", "float") for k in s.keys):
        return False
    return column_aggs(s.aggs, types, FNS)


def column_aggs(
    aggs: tuple[tuple[str, Any], ...], types: dict[str, Any], fns: tuple[str, ...]
) -> bool:
    """Whether every aggregate is one of ``fns`` over a column (or ``count()``) of a type
    Spark computes it on as the reference does: no null or list column, sums of numbers or
    bools, means of floats (the mean of an int column divides a wrapped 64-bit sum by the
    count exactly rounded, which a double division of the sum does not for sums beyond
    2^53)."""
    for _, a in aggs:
        if a.fn not in fns:
            return False
        if a.arg is None:
            if a.fn != "count":
                return False
            continue
        if not isinstance(a.arg, Col):
            return False
        t = types[a.arg.name].name
        if t in ("null", "list"):
            return False
        if a.fn == "sum" and t not in ("int", "bool", "float"):
            return False
        if a.fn == "mean" and t != "float":
            return False
    return True


def _float_sum(a: Any, types: dict[str, Any]) -> bool:
    return a.fn == "sum" and a.arg is not None and types[a.arg.name].name == "float"


def _running(i: int) -> str:
    """The column of aggregate ``i``'s running sum (:func:`grouped`)."""
    return f"__sc_run{i}"


ORDER = "__sc_order"
"""The column of the row's order key that a running sum's last row is found by."""

WINDOW_CLOSE = "__sc_close"
"""The column of a window's close: the order key of the row whose watermark closes it (null:
none does; it closes at the end of the input). Joined to the windows, whose aggregates may be
named anything but the engine's own names (an OHLC ``close``, say)."""


def grouped(
    df: Any,
    by: list[Any],
    aggs: tuple[tuple[str, Any], ...],
    types: dict[str, Any],
    flat: bool,
) -> Any:
    """``df.groupBy(*by)``, ready for :func:`agg_columns`. With a float sum, each row first
    gets the running sum of the value over its group's rows up to it in arrival order (a
    window partitioned by the group and ordered by order key, framed from the first row to
    the current one: Spark's hash-partitioning exchange and sort, then one addition per row
    in order, exactly the reference's left fold), and its order key in ``ORDER``; the
    ``groupBy`` then reuses the window's partitioning (no second exchange)."""
    from pyspark.sql import functions as F

    floats = [i for i, (_, a) in enumerate(aggs) if _float_sum(a, types)]
    if flat and ORDER not in df.columns:
        # the serial as a long: what the window sorts by and first_order(grouped=True) takes
        df = df.withColumn(ORDER, F.col("_o")[0])
    if floats:
        from pyspark.sql import Window

        o = F.col(ORDER) if flat else F.col("_o")
        upto = (
            Window.partitionBy(*by)
            .orderBy(o)
            .rowsBetween(Window.unboundedPreceding, Window.currentRow)
        )
        runs = {_running(i): F.sum(qcol(aggs[i][1].arg.name)).over(upto) for i in floats}
        df = df.withColumns(runs) if flat else df.withColumns({**runs, ORDER: o})
    return df.groupBy(*by)


def first_order(flat: bool, grouped: bool = False) -> Any:
    """The aggregate ``min(_o)``: with one serial per order key (``flat``), as the array of
    the smallest serial, which Spark's hash aggregate keeps in a fixed-width buffer (the
    smallest array needs a sort-based aggregate); of the rows of :func:`grouped`, from its
    serial column (the order key arrays then stay out of the shuffle)."""
    from pyspark.sql import functions as F

    if flat:
        return F.array(F.min(F.col(ORDER) if grouped else F.col("_o")[0]))
    return F.min("_o")


def agg_columns(
    aggs: tuple[tuple[str, Any], ...], types: dict[str, Any], sets: bool = False
) -> list[Any]:
    """The aggregates as Spark aggregate columns (``exact_aggs`` said they can be). Integer
    sums wrap around at 64 bits as the reference's do; count_distinct counts null as a value,
    as the reference does (and NaN as one value); first / last are the values at the
    smallest / largest order key (null included, as the reference keeps them); a float sum is
    read off the running sums of :func:`grouped`.

    With ``sets`` (sessions: groups of one key's nearby rows), a count_distinct of a column
    that is not a float is the size of the group's set of values: Spark's distinct aggregate
    hashes every (group, value) pair twice over, where a set per group is one pass (Q2's
    sessions at 10M rows: 5.3-5.7 s against 7.4-8.1 s). A group's set holds its distinct
    values, as the reference's and the C operator's state does; Spark aggregates group after
    group once there are many, so one group's set is in memory at a time. Floats keep the
    distinct aggregate, which groups NaN as one value and -0.0 with 0.0, as the reference
    does."""
    from pyspark.sql import functions as F

    out = []
    two63 = F.lit(str(2**63)).cast("decimal(38,0)")
    for i, (name, a) in enumerate(aggs):
        if a.arg is None:
            out.append(F.count(F.lit(1)).alias(name))
            continue
        assert isinstance(a.arg, Col)
        c = qcol(a.arg.name)
        if a.fn == "count":
            e = F.count(c)
        elif a.fn == "min":
            e = F.min(c)
        elif a.fn == "max":
            e = F.max(c)
        elif a.fn == "first":
            e = F.min_by(c, "_o")
        elif a.fn == "last":
            e = F.max_by(c, "_o")
        elif _float_sum(a, types):
            e = _ordered_sum(c, _running(i))
        elif a.fn == "sum":
            e = _wrapped_sum(c, two63)
        else:
            has_null = F.max(F.when(c.isNull(), F.lit(1)).otherwise(F.lit(0)))
            if sets and types[a.arg.name].name != "float":
                e = F.size(F.collect_set(c)) + has_null
            else:
                e = F.count_distinct(c) + has_null
        out.append(e.alias(name))
    return out


def _wrapped_sum(c: Any, two63: Any) -> Any:
    """The sum of an int (or bool) column wrapping around at 64 bits, as the reference's
    (0 when no value is set). Each value is cut into 21-bit parts, ``v = a * 2^42 + b * 2^21 +
    c`` (``a`` signed), and the parts are summed as longs: no part sum can overflow below 2^42
    rows in a group, so Spark's ANSI overflow check never fires and the aggregation stays on
    longs (one decimal(38,0) sum per row was 0.6-0.9 s slower on 10M rows here). Per group
    the parts are put together in decimal and wrapped; the shifts wrap at 64 bits, which
    changes nothing modulo 2^64."""
    from pyspark.sql import functions as F

    v = c.cast("bigint")
    low = F.lit((1 << 21) - 1).cast("bigint")
    dec = "decimal(38,0)"
    total = (
        F.shiftleft(F.sum(F.shiftright(v, 42)), 42).cast(dec)
        + F.shiftleft(F.sum(F.shiftright(v, 21).bitwiseAND(low)), 21).cast(dec)
        + F.sum(v.bitwiseAND(low)).cast(dec)
    )
    wrapped = F.pmod(total + two63, two63 * F.lit(2)) - two63
    return F.coalesce(wrapped.cast("bigint"), F.lit(0).cast("bigint"))


def _ordered_sum(c: Any, run: str) -> Any:
    """The reference's float sum of ``c`` from the running sums of :func:`grouped`: the one
    at the group's last row (0.0 when no value is set). Spark's running sum starts from 0.0
    where the reference starts from the first value; the two differ only when every value is
    -0.0 (``0.0 + -0.0`` is 0.0), which the reference keeps as -0.0."""
    from pyspark.sql import functions as F

    neg_zero = (c == F.lit(0.0)) & c.cast("string").startswith("-")
    only_neg_zeros = (F.count(c) > 0) & (F.count(F.when(~neg_zero, F.lit(1))) == 0)
    last = F.coalesce(F.max_by(F.col(run), F.col(ORDER)), F.lit(0.0))
    return F.when(only_neg_zeros, F.lit(-0.0)).otherwise(last)


# --------------------------------------------------------------------------- running aggregates

RUNNING_FNS = ("count", "min", "max", "sum", "mean", "first", "last")
"""The aggregate functions :func:`running_columns` computes exactly, row by row."""


def running_fits(s: P.Running | P.Aggregate, types: dict[str, Any]) -> bool:
    """Whether :func:`running_columns` gives the reference's value at every row of ``s`` (a
    ``running``, or the per-row changelog of an unwindowed ``agg``): keys (of any type but
    lists: Spark's window partitions group NaN as one value and 0.0 with -0.0, as the
    reference's keys do, and each output row keeps its own key values), aggregates of
    :data:`RUNNING_FNS` that :func:`column_aggs` allows."""
    if not s.keys or any(types[k].name == "list" for k in s.keys):
        return False
    return column_aggs(s.aggs, types, RUNNING_FNS)


def running_columns(
    keys: tuple[str, ...], aggs: tuple[tuple[str, Any], ...], types: dict[str, Any], order: Any
) -> dict[str, Any]:
    """Each aggregate of :func:`running_fits` as a Spark window function over its key's rows
    up to the current one in arrival order (``order``: the order key): Spark's window frame
    from the first row to the current one folds row after row, in order, as the reference
    does. Counts count rows or non-null values; integer sums wrap at 64 bits (Spark's long
    addition outside ANSI mode) and bools sum as ints; a float sum is the left fold from the
    first value (:func:`_running_float_sum`), 0 while no value is set; a mean is that sum over
    the count (null while none); min / max keep the first of equal values (a signed zero
    stays as it came) and take NaN as the largest, as the reference does; first is the
    key's first row's value and last the current row's, nulls included."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    w = (
        Window.partitionBy(*[qcol(k) for k in keys])
        .orderBy(order)
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    out: dict[str, Any] = {}
    for name, a in aggs:
        if a.arg is None:
            out[name] = F.count(F.lit(1)).over(w)
            continue
        c = qcol(a.arg.name)
        fn = a.fn
        if fn == "count":
            e = F.count(c).over(w)
        elif fn == "min":
            e = F.min(c).over(w)
        elif fn == "max":
            e = F.max(c).over(w)
        elif fn == "first":
            e = F.first(c, ignorenulls=False).over(w)
        elif fn == "last":
            e = c
        elif types[a.arg.name].name == "float":
            e = _running_float_sum(c, w)
            if fn == "mean":
                n = F.count(c).over(w)
                e = F.when(n > F.lit(0), e / n)
        else:  # an int or bool sum
            e = F.coalesce(F.sum(c.cast("bigint")).over(w), F.lit(0).cast("bigint"))
        out[name] = e
    return out


def _running_float_sum(c: Any, w: Any) -> Any:
    """The reference's running float sum of ``c`` over window ``w``: Spark's running sum, which
    starts from 0.0 where the reference starts from the first value. The two differ only
    while every value so far is -0.0 (``0.0 + -0.0`` is 0.0), which the reference keeps as
    -0.0 (see :func:`_ordered_sum`)."""
    from pyspark.sql import functions as F

    neg_zero = (c == F.lit(0.0)) & c.cast("string").startswith("-")
    other = F.max(F.when(c.isNotNull() & ~neg_zero, F.lit(1)).otherwise(F.lit(0))).over(w)
    only_neg_zeros = (F.count(c).over(w) > F.lit(0)) & (other == F.lit(0))
    return F.when(only_neg_zeros, F.lit(-0.0)).otherwise(F.coalesce(F.sum(c).over(w), F.lit(0.0)))


# --------------------------------------------------------------------------- late rows

BLOCK = 1 << 16
"""Serials per block of the watermark scan (:func:`late_serials`); read on the driver when a
plan is lowered (the tests make it small, so that rows fall out of order across blocks)."""

_MIN = np.iinfo(np.int64).min


def late_scan_fn(
    lateness: int, before: dict[int, int], block_rows: int = BLOCK
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function of the watermark scan over (serial ``o``, ticks ``t``) of
    the admitted-or-late rows, each block of ``block_rows`` serials whole in one partition and
    sorted by serial. A row is late when ``t`` is below the largest earlier ``t`` minus the
    lateness (the reference's watermark); the largest ``t`` of the blocks before a block is
    ``before[block]`` (absent: not known, the scan then decides on the block's own rows).
    Emits the late rows' serials (kind 0) and, per block, its largest and smallest ``t``
    (kind 1)."""

    def fn(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        block: int | None = None
        run = run_max = lo = _MIN
        summary: list[tuple[int, int, int]] = []
        for b in batches:
            o = b.column(0).to_numpy(zero_copy_only=False).astype(np.int64)
            t = b.column(1).to_numpy(zero_copy_only=False).astype(np.int64)
            if len(o) == 0:
                continue
            blocks = o // block_rows
            cuts = np.flatnonzero(np.r_[True, blocks[1:] != blocks[:-1]])
            late_o = []
            for i, start in enumerate(cuts):
                stop = cuts[i + 1] if i + 1 < len(cuts) else len(o)
                k = int(blocks[start])
                if k != block:
                    if block is not None:
                        summary.append((block, run_max, lo))
                    block, run, lo, run_max = k, before.get(k, _MIN), int(t[start]), _MIN
                seg = t[start:stop]
                prev = np.maximum.accumulate(np.r_[run, seg[:-1]])
                prev = np.maximum(prev, run)
                late = (prev != _MIN) & (seg < prev - lateness)
                late_o.append(o[start:stop][late])
                run = max(run, int(seg.max()))
                run_max = max(run_max, int(seg.max()))
                lo = min(lo, int(seg.min()))
            gone = np.concatenate(late_o) if late_o else np.zeros(0, np.int64)
            if len(gone):
                yield _scan_batch(np.zeros(len(gone), np.int8), gone, gone, gone)
        if block is not None:
            summary.append((block, run_max, lo))
        if summary:
            arr = np.array(summary, dtype=np.int64)
            yield _scan_batch(np.ones(len(arr), np.int8), arr[:, 0], arr[:, 1], arr[:, 2])

    return fn


SCAN_DDL = "`k` tinyint, `o` bigint, `hi` bigint, `lo` bigint"


def _kind_batch(names: list[str], k: np.ndarray, *cols: np.ndarray) -> pa.RecordBatch:
    """A batch of a scan's output rows: their kind ``k`` (tinyint) and long columns."""
    arrays = [pa.array(np.asarray(k).astype(np.int8)), *(pa.array(c) for c in cols)]
    return pa.RecordBatch.from_arrays(arrays, names=names)


def _scan_batch(k: np.ndarray, o: np.ndarray, hi: np.ndarray, lo: np.ndarray) -> pa.RecordBatch:
    return _kind_batch(["k", "o", "hi", "lo"], k, o, hi, lo)


SCAN_IN_PLACE = True
"""Whether :func:`late_serials` first scans the partitions where they are (read on the driver;
False: always the blocked scan, which the tests also run on its own)."""

MAX_SEGMENTS = 4096
"""Runs of increasing serials one partition may hold before the in-place scan gives up (its
rows are then not in arrival order: they came out of a shuffle)."""

MAX_MARKS = 200_000
"""Window-end marks the in-place scan brings to the driver at most; beyond, Spark finds them."""


class Scan(NamedTuple):
    """What the watermark scan found: the late rows' serials; the marks (None: not found);
    the runs of the in-place scan: first serial -> (last serial, the largest ``t`` before the
    run) (None: the blocked scan ran)."""

    late: list[int]
    marks: dict[int, int] | None
    runs: dict[int, tuple[int, int]] | None


def late_serials(
    narrow: Any,
    lateness: int,
    parts: int,
    action: Callable[..., Any],
    block_rows: int | None = None,
    mark_size: int | None = None,
    first: list[Any] | None = None,
) -> Scan:
    """The serials of the late rows among ``narrow`` (columns ``o``: the serial, ``t``: the
    ticks; the rows that are not dead), exactly as the reference's watermark decides in
    arrival order, without a global sort; and, with ``mark_size``, the marks of the admitted
    rows: for each ``v = floor((t - lateness) / mark_size) * mark_size``, the smallest serial
    of an admitted row with that ``v`` (None: not found here, see :func:`in_place_scan`).

    First :func:`in_place_scan` (``first``: the rows of its first pass, which a pass of
    :func:`scan_and_close` gives too); where the partitions are not runs of increasing
    serials (they came out of a shuffle) or the runs overlap, :func:`blocked_scan`."""
    if SCAN_IN_PLACE:
        got = in_place_scan(narrow, lateness, action, mark_size, first)
        if got is not None:
            return got
    frame = narrow.frame if isinstance(narrow, DirectPairs) else narrow  # a shuffle: Spark's
    return Scan(blocked_scan(frame, lateness, parts, action, block_rows), None, None)


def blocked_scan(
    narrow: Any,
    lateness: int,
    parts: int,
    action: Callable[..., Any],
    block_rows: int | None = None,
) -> list[int]:
    """:func:`late_serials` for rows in any order: blocks of consecutive serials are scanned
    in parallel, each in serial order (a shuffle of two longs per row), first on its own rows.
    A block whose smallest ``t`` is not below the largest ``t`` of every block before it
    (minus the lateness) is then decided: its rows are late exactly when late within the
    block. The other blocks (rows out of order across blocks) are scanned again knowing
    what came before them."""
    from pyspark.sql import functions as F

    size = block_rows or BLOCK
    block_of = F.floor(F.col("o") / F.lit(size))
    blocks = narrow.repartition(parts, block_of)
    blocks = blocks.sortWithinPartitions("o")

    def scan(df: Any, before: dict[int, int]) -> list[Any]:
        fn = late_scan_fn(lateness, before, size)
        return action(lambda: df.mapInArrow(fn, SCAN_DDL).collect())

    rows = scan(blocks, {})
    late = [r["o"] for r in rows if r["k"] == 0]
    summary = sorted((r["o"], r["hi"], r["lo"]) for r in rows if r["k"] == 1)
    before, dirty = _dirty(summary, lateness)
    if not dirty:
        return late
    again = blocks.filter(block_of.isin(dirty))
    redo = {k: before[k] for k in dirty}
    rows = scan(again, redo)
    keep = set(dirty)
    late = [o for o in late if o // size not in keep]
    return late + [r["o"] for r in rows if r["k"] == 0]


def _dirty(summary: list[tuple[int, int, int]], lateness: int) -> tuple[dict[int, int], list[int]]:
    """Over parts ``(id, largest t, smallest t)`` in arrival order: the largest ``t`` before
    each part, and the parts some row of which is late because of a row of an earlier part
    (its smallest ``t`` is below that largest ``t`` minus the lateness)."""
    before: dict[int, int] = {}
    dirty: list[int] = []
    top = None
    for k, hi, lo in summary:
        if top is not None:
            before[k] = top
            if lo < top - lateness:
                dirty.append(k)
        top = hi if top is None else max(top, hi)
    return before, dirty


# the in-place scan's output rows: a late row's serial (k=LATE_ROW: o); a run of increasing
# serials (k=RUN: o its first serial, x its last, hi / lo its largest / smallest t); a window
# end mark of a run's admitted rows (k=MARK: o the run, hi the mark v, lo the smallest serial);
# a partition whose rows are not in runs (k=GAVE_UP)
LATE_ROW, RUN, MARK, GAVE_UP = 0, 1, 2, 3
IN_PLACE_DDL = "`k` tinyint, `o` bigint, `x` bigint, `hi` bigint, `lo` bigint"


def _pieces(
    batches: Iterator[pa.RecordBatch],
) -> Iterator[tuple[np.ndarray, np.ndarray, bool]]:
    """A partition's (``o``, ``t``) batches as pieces ``(o, t, starts_a_run)``: cut where the
    serial does not increase, so the pieces form runs of increasing serials."""
    last = None
    for b in batches:
        o = b.column(0).to_numpy(zero_copy_only=False).astype(np.int64)
        t = b.column(1).to_numpy(zero_copy_only=False).astype(np.int64)
        if len(o) == 0:
            continue
        new = set((np.flatnonzero(o[1:] <= o[:-1]) + 1).tolist())
        if last is None or o[0] <= last:
            new.add(0)
        bounds = sorted({0, len(o)} | new)
        for a, z in zip(bounds[:-1], bounds[1:], strict=True):
            yield o[a:z], t[a:z], a in new
        last = int(o[-1])


def in_place_scan_fn(
    lateness: int, before: dict[int, int] | None, mark_size: int | None
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function of :func:`in_place_scan` over (``o``, ``t``) as a partition
    holds them: cut into runs of increasing serials (:func:`_pieces`), each scanned in order
    from the largest ``t`` before it (``before[first serial]``; None: every run from nothing;
    a dict: only the runs it names, the others are skipped)."""

    def fn(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        runs = 0
        first = last = None  # the current run's first and last serial
        run = hi = lo = _MIN
        skip = False
        marks: dict[int, int] = {}
        out: list[tuple[int, int, int, int, int]] = []

        def close() -> None:
            if first is None or skip:
                return
            out.append((RUN, first, last, hi, lo))  # type: ignore[arg-type]
            out.extend((MARK, first, 0, v, m) for v, m in marks.items())  # type: ignore[misc]

        for so, seg, starts in _pieces(batches):
            if starts:
                close()
                runs += 1
                if runs > MAX_SEGMENTS:  # not in arrival order: give up, drain unscanned
                    yield _in_place_batch([(GAVE_UP, 0, 0, 0, 0)])
                    for _ in batches:
                        pass
                    return
                first, marks, hi, lo = int(so[0]), {}, _MIN, int(seg[0])
                skip = before is not None and first not in before
                run = _MIN if before is None else before.get(first, _MIN)
            last = int(so[-1])
            if skip:
                continue
            prev = np.maximum(np.maximum.accumulate(np.r_[run, seg[:-1]]), run)
            late = (prev != _MIN) & (seg < prev - lateness)
            if late.any():
                gone = so[late]
                zero = np.zeros(len(gone), np.int64)
                yield _in_place_columns(zero + LATE_ROW, gone, zero, zero, zero)
            top = int(seg.max())
            run, hi, lo = max(run, top), max(hi, top), min(lo, int(seg.min()))
            if mark_size is not None:
                keep = ~late
                reach = seg[keep] - lateness
                v = reach - np.mod(reach, mark_size)
                vs, idx = np.unique(v, return_index=True)
                for x, i in zip(vs.tolist(), so[keep][idx].tolist(), strict=True):
                    marks.setdefault(x, i)  # an earlier piece of the run came first
        close()
        if out:
            yield _in_place_batch(out)

    return fn


def record_closes_fn(
    ends: np.ndarray | str, lateness: int, runs: dict[int, tuple[int, int]]
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function that closes windows by their ends (``ends``: sorted and
    distinct, or the local folder of the Parquet file that holds them) over (``o``, ``t``) as
    the in-place scan found them (``runs``: first serial -> (last serial, largest ``t`` before
    the run)). A window ending at ``e`` closes at the first admitted row with
    ``t - lateness >= e``: the first row of all with ``t >= e + lateness`` (a late row is
    below an earlier row's ``t`` minus the lateness, so never the first), and so the record of
    the running maximum that first reaches ``e + lateness``. Each record closes the ends
    between the maximum before it and its ``t``. Emits (k=0: ``e``, ``o`` the closing serial)
    and, per run scanned, (k=RUN: ``e`` its first serial, ``o`` its last), or (k=GAVE_UP)
    where a run is not one the scan found."""

    def fn(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        e = _ends_at(ends) if isinstance(ends, str) else ends
        ys = e + lateness
        spans: list[tuple[int, int]] = []
        run = _MIN
        for so, seg, starts in _pieces(batches):
            if starts:
                first = int(so[0])
                if first not in runs:
                    yield _closes_batch(
                        np.array([GAVE_UP]), np.zeros(1, np.int64), np.zeros(1, np.int64)
                    )
                    for _ in batches:
                        pass
                    return
                run = runs[first][1]
                spans.append((first, first))
            spans[-1] = (spans[-1][0], int(so[-1]))
            top = np.maximum.accumulate(np.r_[run, seg])
            before = top[:-1]
            rec = seg > before
            run = int(top[-1])
            if not rec.any():
                continue
            at, shut = _closed(ys, e, before[rec], seg[rec], so[rec])
            if len(at):
                yield _closes_batch(np.zeros(len(at), np.int64), shut, at)
        if spans:
            a = np.array(spans, dtype=np.int64)
            yield _closes_batch(np.full(len(a), RUN), a[:, 0], a[:, 1])

    return fn


def _closed(
    ys: np.ndarray, e: np.ndarray, lo: np.ndarray, hi: np.ndarray, at: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The window ends that records of a running maximum close: record ``i`` (serial
    ``at[i]``, value ``hi[i]``, the maximum before it ``lo[i]``; both increasing) closes each
    end ``e[j]`` whose ``ys[j]`` (the end plus the lateness; sorted) is in ``(lo[i], hi[i]]``.
    Returned as (closing serial, end) per closed end. The ends are searched within the slice
    the batch spans, which stays in cache where the whole of ``ys`` would not."""
    a0 = int(np.searchsorted(ys, lo[0], side="right"))
    z0 = int(np.searchsorted(ys, hi[-1], side="right"))
    part = ys[a0:z0]
    a = np.searchsorted(part, lo, side="right") + a0
    n = np.searchsorted(part, hi, side="right") + a0 - a
    total = int(n.sum())
    idx = np.repeat(a - (np.cumsum(n) - n), n) + np.arange(total)
    return np.repeat(at, n), e[idx]


CLOSES_DDL = "`k` tinyint, `e` bigint, `o` bigint"


def _closes_batch(k: np.ndarray, e: np.ndarray, o: np.ndarray) -> pa.RecordBatch:
    return _kind_batch(["k", "e", "o"], k, e, o)


@functools.lru_cache(maxsize=2)
def _ends_at(path: str) -> np.ndarray:
    """The window ends in the Parquet file(s) of folder ``path``, sorted and distinct (read once
    per Python worker)."""
    import pyarrow.parquet as pq

    col = pq.read_table(path).column(0)
    return sorted_unique(col.to_numpy().astype(np.int64))


MAX_SHIPPED_ENDS = 200_000
"""Window ends :func:`record_closes` ships to the executors with its function at most, where
they cannot read a local file; beyond, Spark finds the closes itself."""


def record_closes(
    narrow: Any,
    ends: Any,
    lateness: int,
    scan: Scan,
    action: Callable[..., Any],
    checkpoint: Callable[[Any], Any],
) -> Any | None:
    """The close of each window end in ``ends`` (a one-column DataFrame of ends, repeats
    allowed) as a DataFrame (``_we``, ``close``: the closing row's order key), found by one
    pass over ``narrow`` where the in-place scan found its runs (:func:`record_closes_fn`);
    ends no row reaches are absent. On a local master the ends go to the executors as Parquet
    files in a local folder, written as the windows' partitions hold them (each Python worker
    sorts them and drops repeats when it reads them: no shuffle, and the notebook process
    never holds them); elsewhere, up to :data:`MAX_SHIPPED_ENDS` distinct ends with the
    function. None: the scan was not in place, there are too many ends to ship, or the
    partitions came back other than the scan found them."""
    from pyspark.sql import functions as F

    if scan.runs is None:
        return None
    source, folder = _ends_source(narrow, ends, action)
    try:
        if source is None:
            return None
        fn = record_closes_fn(source, lateness, scan.runs)
        out = checkpoint(narrow.mapInArrow(fn, CLOSES_DDL))
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
    spans = action(lambda: out.filter(F.col("k") != F.lit(0)).collect())
    if {(r["e"], r["o"]) for r in spans if r["k"] == RUN} != {
        (f, x) for f, (x, _) in scan.runs.items()
    } or any(r["k"] == GAVE_UP for r in spans):
        return None
    return out.filter(F.col("k") == F.lit(0)).select(
        F.col("e").alias("_we"), F.array(F.col("o")).alias(WINDOW_CLOSE)
    )


def _in_place_batch(rows: list[tuple[int, int, int, int, int]]) -> pa.RecordBatch:
    a = np.array(rows, dtype=np.int64).reshape(-1, 5)
    return _in_place_columns(*(a[:, i] for i in range(5)))


def _in_place_columns(*cols: np.ndarray) -> pa.RecordBatch:
    return _kind_batch(["k", "o", "x", "hi", "lo"], *cols)


# the fused pass's further output rows: a close candidate (k=CLOSE: o the closing serial, hi
# the end) and a run's first row (k=OPEN: o its serial, hi its t)
CLOSE, OPEN = 4, 5

CLOSE_AT = "__sc_close_at"
"""The column of :class:`Fused`'s ends that holds their smallest enumerated close."""

MAX_OPENS = 256
"""Runs the fused pass may find before its caller scans and closes in two passes instead (each
run's first row becomes one branch of the close expression)."""

RELATIVE_ORDER = True
"""Whether a window step whose rows only need their order among themselves
(``Lowering.relative_order``) orders them by (end, start, opening row) instead of finding the
row that closes each window (the same order; False: always find the closing rows, which the
tests compare it with)."""

FUSED_SESSIONS = False
"""Whether :func:`sessions` first tries :func:`scan_and_close` (one pass over the rows for the
late rows and the closes, on the hope that no row is late; False: always the two passes).
Off by default: at 10M rows it took about 3 s off sessions in arrival order (17 -> 14 s), but
where 0.1% of the rows were late it cost 8-10 s more (32-36 against 24-26 s), and nothing
cheaper than a pass over the rows tells the two apart beforehand."""


def scan_and_close_fn(
    ends: np.ndarray | str, lateness: int
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function of :func:`scan_and_close` over (``o``, ``t``) as a partition
    holds them: per run of increasing serials (:func:`_pieces`), scanned from nothing before
    it, the late rows and the run (as :func:`in_place_scan_fn`), the run's first row (OPEN),
    and the window ends (sorted and distinct, or the local folder of the Parquet files that hold
    them) each later record of the run's running maximum closes (as :func:`record_closes_fn`:
    the ends between the maximum before the record and its ``t``, lateness added). The ends
    the first row reaches (plus the lateness, at or below its ``t``) are the OPEN row's: the
    caller closes them at the earliest run's first row that reaches them."""

    def fn(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        e = _ends_at(ends) if isinstance(ends, str) else ends
        ys = e + lateness
        runs = 0
        first = last = None  # the current run's first and last serial
        run = hi = lo = _MIN
        out: list[tuple[int, int, int, int, int]] = []
        for so, seg, starts in _pieces(batches):
            if starts:
                if first is not None:
                    out.append((RUN, first, last, hi, lo))  # type: ignore[arg-type]
                runs += 1
                if runs > MAX_SEGMENTS:  # not in arrival order: give up, drain unscanned
                    yield _in_place_batch([(GAVE_UP, 0, 0, 0, 0)])
                    for _ in batches:
                        pass
                    return
                first, run, hi, lo = int(so[0]), _MIN, _MIN, int(seg[0])
                out.append((OPEN, first, 0, int(seg[0]), 0))
            last = int(so[-1])
            top = np.maximum.accumulate(np.r_[run, seg])
            before = top[:-1]
            late = (before != _MIN) & (seg < before - lateness)
            if late.any():
                gone = so[late]
                zero = np.zeros(len(gone), np.int64)
                yield _in_place_columns(zero + LATE_ROW, gone, zero, zero, zero)
            rec = seg > before
            if starts:
                rec[0] = False  # the run's first row: its ends are the OPEN row's
            run, hi, lo = int(top[-1]), max(hi, int(top[-1])), min(lo, int(seg.min()))
            if not rec.any():
                continue
            at, shut = _closed(ys, e, before[rec], seg[rec], so[rec])
            if len(at):
                zero = np.zeros(len(at), np.int64)
                yield _in_place_columns(zero + CLOSE, at, zero, shut, zero)
        if first is not None:
            out.append((RUN, first, last, hi, lo))  # type: ignore[arg-type]
        if out:
            yield _in_place_batch(out)

    return fn


class Fused(NamedTuple):
    """What :func:`scan_and_close` found where no row is late: per end, the smallest closing
    serial among the runs' records (``enum``: ``_we``, ``__sc_close_at``; ends no record closes are
    absent), and the runs' first rows as (largest end they close, smallest first serial of
    the runs reaching at least that far), by end ascending."""

    enum: Any
    opens: list[tuple[int, int]]

    def close(self, c: Any, we: Any) -> Any:
        """The order key of the row that closes end ``we`` (array<bigint>; null: none does),
        given the enumerated close ``c`` (null: none)."""
        from pyspark.sql import functions as F

        step = F.lit(None).cast("bigint")
        for y, o in reversed(self.opens):  # the first branch that holds: the smallest y
            step = F.when(we <= F.lit(y), F.lit(o)).otherwise(step)
        best = F.least(c, step)
        return F.when(best.isNull(), F.lit(None).cast("array<bigint>")).otherwise(F.array(best))


def _ends_source(
    narrow: Any, ends: Any, action: Callable[..., Any]
) -> tuple[np.ndarray | str | None, str | None]:
    """Where the executors read the window ends from: a local folder of Parquet files (local
    master; returned twice, the second to remove) or the distinct ends with the function (up
    to :data:`MAX_SHIPPED_ENDS`; None: more)."""
    from .session import is_local

    if is_local(str(narrow.sparkSession.sparkContext.master)):
        folder = tempfile.mkdtemp(prefix="streamcell-ends-")
        action(lambda: ends.write.mode("overwrite").parquet(folder))
        return folder, folder
    got = action(lambda: ends.distinct().limit(MAX_SHIPPED_ENDS + 1).toArrow())
    if got.num_rows > MAX_SHIPPED_ENDS:
        return None, None
    return sorted_unique(got.column(0).to_numpy(zero_copy_only=False).astype(np.int64)), None


def scan_and_close(
    narrow: Any,
    ends: Any,
    lateness: int,
    action: Callable[..., Any],
    checkpoint: Callable[[Any], Any],
) -> tuple[Fused | None, list[Any] | None]:
    """The watermark scan and the closes of window ends ``ends`` (a one-column DataFrame,
    repeats allowed) in one pass over ``narrow`` (``o``, ``t``: the rows that are not dead)
    where its partitions hold runs of increasing serials (:func:`scan_and_close_fn`), for a
    caller that computed its windows as if no row were late. Each run is scanned from nothing
    before it, so a close it finds may be a later one than another run's: the smallest per
    end is the first row of all reaching it, as :func:`record_closes` finds it. None: a row
    is late, a run may hold rows that an earlier run makes late (the caller then scans, and
    admits, in two passes), the runs interleave or are too many, or the ends too many to
    ship. Returned with the rows of the pass that are not closes (late rows, runs, their first
    rows: what :func:`in_place_scan`'s first pass gives), or None where it did not run."""
    from pyspark.sql import functions as F

    source, folder = _ends_source(narrow, ends, action)
    try:
        if source is None:
            return None, None
        out = checkpoint(narrow.mapInArrow(scan_and_close_fn(source, lateness), IN_PLACE_DDL))
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
    k = F.col("k")
    rows = action(lambda: out.filter(k != F.lit(CLOSE)).collect())
    if any(r["k"] in (GAVE_UP, LATE_ROW) for r in rows):
        return None, rows
    runs = sorted((r["o"], r["x"], r["hi"], r["lo"]) for r in rows if r["k"] == RUN)
    if any(a[1] >= b[0] for a, b in zip(runs, runs[1:])) or len(runs) > MAX_OPENS:
        return None, rows
    if _dirty([(f, hi, lo) for f, _, hi, lo in runs], lateness)[1]:
        return None, rows
    firsts = sorted((r["hi"] - lateness, r["o"]) for r in rows if r["k"] == OPEN)
    if len(firsts) != len(runs):
        return None, rows
    opens: list[tuple[int, int]] = []
    best = None
    for y, o in reversed(firsts):  # the smallest first serial of the runs reaching y or more
        best = o if best is None else min(best, o)
        if y >= _MIN:
            opens.append((y, best))
    opens.reverse()
    enum = (
        out.filter(k == F.lit(CLOSE))
        .groupBy(F.col("hi").alias("_we"))
        .agg(F.min("o").alias(CLOSE_AT))
    )
    return Fused(enum, opens), rows


def in_place_scan(
    narrow: Any,
    lateness: int,
    action: Callable[..., Any],
    mark_size: int | None = None,
    first: list[Any] | None = None,
) -> Scan | None:
    """:func:`late_serials` with no shuffle, where each partition of ``narrow`` holds runs of
    increasing serials that do not overlap one another (rows read file by file, then filtered
    or mapped): each run is scanned where it is, in order; runs whose rows some earlier run
    makes late are scanned again knowing the largest ``t`` before them. Marks come from the
    same pass (None: more than :data:`MAX_MARKS`). None: the partitions are not such runs."""
    import bisect

    def scan(before: dict[int, int] | None) -> list[Any] | None:
        fn = in_place_scan_fn(lateness, before, mark_size)
        rows = action(lambda: narrow.mapInArrow(fn, IN_PLACE_DDL).collect())
        return None if any(r["k"] == GAVE_UP for r in rows) else rows

    if first is not None and mark_size is None:  # the first pass ran already
        rows = None if any(r["k"] == GAVE_UP for r in first) else first
    else:
        rows = scan(None)
    if rows is None:
        return None
    runs = sorted((r["o"], r["x"], r["hi"], r["lo"]) for r in rows if r["k"] == RUN)
    if any(a[1] >= b[0] for a, b in zip(runs, runs[1:])):
        return None  # runs of different partitions interleave
    before, dirty = _dirty([(f, hi, lo) for f, _, hi, lo in runs], lateness)
    firsts = [f for f, *_ in runs]

    def run_of(o: int) -> int:
        return firsts[bisect.bisect_right(firsts, o) - 1]

    late = [r["o"] for r in rows if r["k"] == LATE_ROW]
    marks = [(r["o"], r["hi"], r["lo"]) for r in rows if r["k"] == MARK]
    if dirty:
        again = scan({f: before[f] for f in dirty})
        if again is None:
            return None
        span = {f: x for f, x, *_ in runs}
        seen = {(r["o"], r["x"]) for r in again if r["k"] == RUN}
        if seen != {(f, span[f]) for f in dirty}:
            return None  # the partitions came back different: not a scan we can trust
        keep = set(dirty)
        late = [o for o in late if run_of(o) not in keep]
        late += [r["o"] for r in again if r["k"] == LATE_ROW]
        marks = [m for m in marks if m[0] not in keep]
        marks += [(r["o"], r["hi"], r["lo"]) for r in again if r["k"] == MARK]
    runs_before = {f: (x, before.get(f, _MIN)) for f, x, *_ in runs}
    if mark_size is None or len(marks) > MAX_MARKS:
        return Scan(late, None, runs_before)
    first_at: dict[int, int] = {}
    for _, v, o in marks:
        if v not in first_at or o < first_at[v]:
            first_at[v] = o
    return Scan(late, first_at, runs_before)


__all__ = [
    "BLOCK",
    "FNS",
    "WINDOW_CLOSE",
    "agg_columns",
    "exact_aggs",
    "session_fits",
    "sessions",
    "tumbling",
    "tumbling_fits",
    "first_order",
    "grouped",
    "in_place_scan",
    "late_scan_fn",
    "late_serials",
    "scan_and_close",
]


# --------------------------------------------------------------------------- tumbling windows


def tumbling_fits(s: P.Aggregate, schema: Schema) -> bool:
    """Whether :func:`tumbling` runs ``s``: a tumbling window over an int or datetime column
    with aggregates ``exact_aggs`` accepts."""
    w = s.window
    if w is None or w.kind != "tumbling" or (w.every is not None and w.every != w.size):
        return False
    types = dict(schema)
    if types[w.time].name not in ("int", "datetime"):
        return False
    return exact_aggs(s, types)


def tumbling(low: Any, j: int, s: P.Aggregate, df: Any) -> Any:
    """A tumbling-window ``agg`` of a finite run as Spark SQL, row for row the reference's.

    - a row with a null time is a dead letter; a row earlier than the watermark (the largest
      earlier time minus the lateness, in arrival order) is late: :func:`late_serials`
      finds them without a global sort, and only they (and dead rows) come to the driver;
    - each window is a ``groupBy`` of the admitted rows on the keys and the window start
      (the reference's ``floor(t / size) * size``), its aggregates by :func:`agg_columns`;
    - its order key is where the reference emits it: at the first admitted row whose time
      reaches the window's end plus the lateness (the watermark only grows), windows closing
      together by (end, start, the order key of the row that opened the window); windows
      still open at the end of the input after every row, in the same order. That row's
      serial grows with the end (the watermark only grows), so the windows' order among
      themselves is that of (end, start, opening row): where only that order matters
      (``Lowering.relative_order``), the order key is that triple, and no pass finds the
      closing rows.

    Where one worker can read and fold the step's rows from the files (:mod:`.fold`), it
    does all of the above in arrival order, and only the dead and late rows pass through
    Spark, for the side outputs.

    ``df``'s order keys are one serial per row (``Lowering.flat``)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    w = s.window
    assert w is not None
    types = dict(low.in_schema(s))
    size = P.parse_duration(w.size)
    lateness = P.parse_duration(w.lateness)
    relative = low.relative_order(s)
    folded = _folded(low, j, s, df, relative)
    if folded is not None:  # read and folded in arrival order by one worker (.fold)
        return folded
    admitted, finish, seen = _admitted(low, j, s, df, lateness, None if relative else size)
    found = seen.scan.marks
    t = F.col("_t")
    start = t - F.pmod(t, F.lit(size))
    by = [qcol(k) for k in s.keys] + [F.col("_ws")]
    wins = (
        grouped(admitted.withColumn("_ws", start), by, s.aggs, types, True)
        .agg(*agg_columns(s.aggs, types), first_order(True, grouped=True).alias("_wq"))
        .withColumn("_we", F.col("_ws") + F.lit(size))
    )
    if relative:  # the windows in order of their ends: as they close (see above)
        return finish(wins)
    # the largest window end each admitted row's watermark reaches, and its first such row
    if found is not None:  # the watermark scan found them on its way
        marks = low.spark.createDataFrame(
            [(v, [o]) for v, o in found.items()], "`v` bigint, `co` array<bigint>"
        )
    else:
        reach = t - F.lit(lateness)
        marks = admitted.groupBy((reach - F.pmod(reach, F.lit(size))).alias("v")).agg(
            first_order(True).alias("co")
        )
    wins = low.checkpoint(wins)  # one row per window: the ends below come from it, not a rerun
    ends = wins.select(F.col("_we").alias("v")).distinct()
    u = ends.select("v", F.lit(0).alias("tag"), F.lit(None).cast("array<bigint>").alias("co"))
    u = u.unionByName(marks.select("v", F.lit(1).alias("tag"), "co"))
    ahead = Window.orderBy(F.col("v").desc(), F.col("tag").desc()).rowsBetween(
        Window.unboundedPreceding, Window.currentRow
    )
    closes = (
        u.withColumn(WINDOW_CLOSE, F.min("co").over(ahead))
        .filter(F.col("tag") == 0)
        .select(F.col("v").alias("_we"), WINDOW_CLOSE)
    )
    return finish(wins.join(F.broadcast(closes), on="_we", how="left"))


def _folded(
    low: Any, j: int, s: P.Aggregate, df: Any, relative: bool, rows: Any = None
) -> Any | None:
    """Window step ``s``'s output where one worker folds its windows (:mod:`.fold`): the task
    also finds the dead and late rows, in arrival order, so no scan runs; their rows come
    through Spark (only they) for the side outputs. None where the fold does not fit."""
    from .backend import Lowered
    from .fold import Counted

    got = direct_windows(low, j, s, relative)
    if got is None:
        return None
    rows = rows if rows is not None else _window_rows(low, j, s, df)
    counted = Counted({"n": got.rows_in(), "dead": got.dead})
    _, finish = _admit(low, j, s, rows._replace(obs=counted), got.late)
    if got.tail is None:
        out = finish(got.df)
    else:  # the task ran the filters and the top_k after the windows too
        finish(None, made=got.made[0])
        into = low.count_of[s.step_id]
        for (f, _), n in zip(got.tail.filters, got.made[1:]):
            out_n = lambda n=n: n  # noqa: E731
            low.lowered.append(Lowered(f, "filter", None, into=into, out=out_n))
            low.count_of[f.step_id] = into = out_n
            low.fused_away.add(f.step_id)
        low.fused[got.tail.top_k.step_id] = got.df
        out = got.df  # passed on by the filters to the top_k, which takes its own output
    low.how[s.step_id] = "python fold"
    return out


class WindowRows(NamedTuple):
    """A window step's rows with their ticks (``x``: ``_t``), their (serial ``o``, ticks ``t``)
    where not dead, observed for the step's counters (``seen``: the first pass over them reads
    this one) and not (``narrow``: the later passes), and the observation."""

    x: Any
    seen: Any
    narrow: Any
    obs: Any


def _window_rows(low: Any, j: int, s: P.Aggregate, df: Any) -> WindowRows:
    """The rows of window step ``s`` (``df``) as the scans and the windows read them."""
    from pyspark.sql import functions as F

    w = s.window
    assert w is not None
    temporal = dict(low.in_schema(s))[w.time].name == "datetime"
    tcol = qcol(w.time)
    ticks = F.unix_micros(tcol.cast("timestamp")) if temporal else tcol.cast("bigint")
    x = df.withColumn("_t", ticks)
    into = low.count_of.get(s.inputs[0].step_id)
    # the scans read two longs per row: the counters are observed on those two columns, not
    # on the step's whole rows, so Spark reads only the columns they come from
    pair = x.select(F.col("_o")[0].alias("o"), F.col("_t").alias("t"))
    tn = F.col("t")
    narrow = pair.filter(tn.isNotNull())
    direct = direct_pairs(low, s, narrow, f"sc{low.uid}_{j}_pairs")
    if direct is not None:  # the Python workers read the pairs from the files themselves
        return WindowRows(x, direct, direct, direct.obs)
    metrics = [F.sum(F.when(tn.isNull(), 1).otherwise(0)).alias("dead")]
    if into is None:
        metrics.append(F.count(F.lit(1)).alias("n"))
    seen, obs = low.observe(pair, j, *metrics)
    return WindowRows(x, seen.filter(tn.isNotNull()), narrow, obs)


def _admitted(
    low: Any, j: int, s: P.Aggregate, df: Any, lateness: int, mark_size: int | None = None
) -> tuple[Any, Callable[[Any], Any], Admitted]:
    """The rows of a window step that the reference admits (``_t``: their ticks), after
    filing the dead ones (null time) and the late ones (:func:`late_serials`); the scan
    (with the marks of the admitted rows by ``mark_size`` where it found them); and the
    function that turns the step's windows (``_ws``, ``_we``, ``_wq``, ``close``, the
    aggregates) into its output rows with their order keys and files its counters."""
    rows = _window_rows(low, j, s, df)
    scan = late_serials(rows.seen, lateness, low.partitions, low.action, BLOCK, mark_size)
    admitted, finish = _admit(low, j, s, rows, scan.late)
    return admitted, finish, Admitted(scan, rows.narrow)


def _admit(
    low: Any, j: int, s: P.Aggregate, rows: WindowRows, late: list[int]
) -> tuple[Any, Callable[..., Any]]:
    """:func:`_admitted` once the observed pass over ``rows`` ran and the late rows' serials
    are known."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    from .backend import Lowered
    from .expr import spark_type
    from .ops import DEAD, END, LATE

    w = s.window
    assert w is not None
    schema = low.in_schema(s)
    out_schema = low.c.schemas[s.step_id]
    names = [n for n, _ in schema]
    temporal = dict(schema)[w.time].name == "datetime"
    x, obs = rows.x, rows.obs
    t, o0 = F.col("_t"), F.col("_o")[0]
    into = low.count_of.get(s.inputs[0].step_id)
    n_dead = int(obs.get["dead"] or 0)
    side: list[tuple[list[int], int, str, Any]] = []
    if n_dead:
        why = f"null event time in column {w.time!r}"
        for r in low.action(lambda: x.filter(t.isNull()).select(*names, "_o").collect()):
            d = r.asDict()
            side.append((list(d.pop("_o")), DEAD, s.step_id, (why, repr(d)[:500])))
    admitted = x.filter(t.isNotNull())
    if late:
        gone = _among(low, o0, late)
        for r in low.action(lambda: x.filter(gone).select(*names, "_o").collect()):
            d = r.asDict()
            side.append((list(d.pop("_o")), LATE, s.step_id, d))
        admitted = admitted.filter(~gone)

    def apply(made: Callable[[], int], cnt: Any, filed: list[Any]) -> None:
        n = into() if into is not None else int(obs.get["n"] or 0)
        cnt.rows_in += n
        cnt.dead += n_dead
        cnt.late += len(late)
        cnt.rows_out += made()
        filed.extend(side)

    def finish(wins: Any, made: int | None = None) -> Any:
        """The window step's rows from the windows ``wins``; or where the fold's task took
        them on to the steps after (``made``: how many there were), only its counters."""
        if made is not None:
            told = lambda: made  # noqa: E731
            low.lowered.append(Lowered(s, "applied", None, apply=functools.partial(apply, told)))
            low.count_of[s.step_id] = told
            low.how[s.step_id] = "spark groupBy"
            return None
        end_key = F.array(F.lit(END).cast("bigint"), F.lit(j).cast("bigint"))
        tail = [F.array(F.col("_we"), F.col("_ws")), F.col("_wq"), F.array(F.lit(0).cast("bigint"))]
        if WINDOW_CLOSE in wins.columns:
            order = F.concat(F.coalesce(F.col(WINDOW_CLOSE), end_key), *tail)
        else:  # only the windows' order among themselves matters (Lowering.relative_order)
            order = F.concat(*tail)
        bound = {"window_start": F.col("_ws"), "window_end": F.col("_we")}
        cols = []
        for n, ty in out_schema:
            if n in bound and n not in s.keys and n not in dict(s.aggs):
                v = bound[n]
                v = F.timestamp_micros(v) if temporal else v
                cols.append(v.cast(spark_type(ty)).alias(n))
            else:
                cols.append(qcol(n))
        out = wins.select(*cols, order.alias("_o"))
        windows = Observation(f"sc{low.uid}_{j}_windows")
        out = out.observe(windows, F.count(F.lit(1)).alias("n"))
        made_n = lambda: int(windows.get["n"] or 0)  # noqa: E731 - read after the job
        low.lowered.append(Lowered(s, "applied", None, apply=functools.partial(apply, made_n)))
        low.count_of[s.step_id] = made_n
        low.unique_on[s.step_id] = (*s.keys, "window_start", "window_end")
        low.how[s.step_id] = "spark groupBy"
        return out

    return admitted, finish


class Admitted(NamedTuple):
    """What the watermark scan of a window step found, and the (serial ``o``, ticks ``t``) of
    its rows that are not dead, which it scanned."""

    scan: Scan
    narrow: Any


def _among(low: Any, o0: Any, serials: list[int]) -> Any:
    """A condition: the row's serial is one of ``serials``."""
    return o0.isin(serials)


# --------------------------------------------------------------------------- sessions


def session_fits(s: P.Aggregate, schema: Schema) -> bool:
    """Whether :func:`sessions` runs ``s``: a session window over an int or datetime column
    with aggregates ``exact_aggs`` accepts; with a lateness, none of them a float sum. A row
    admitted behind the watermark can bridge two sessions of its key, and the reference then
    adds the two sessions' sums (``(1.0 + 1e16) + (1.0 + 0.0)``), where a sum over the
    merged session's rows in arrival order gives ``((1.0 + 1e16) + 1.0) + 0.0``. Without a
    lateness no admitted row is behind another, so none bridges two sessions."""
    w = s.window
    if w is None or w.kind != "session":
        return False
    types = dict(schema)
    if P.parse_duration(w.lateness) > 0 and any(_float_sum(a, types) for _, a in s.aggs):
        return False
    return types[w.time].name in ("int", "datetime") and exact_aggs(s, types)


def sessions(low: Any, j: int, s: P.Aggregate, df: Any) -> Any:
    """A session-window ``agg`` of a finite run as Spark SQL, row for row the reference's.

    Dead and late rows as for :func:`tumbling`. The reference grows a key's session by every
    admitted row closer than the gap to it (``start - gap < t < last + gap``), merging the
    sessions a row bridges, and closes a session only when the watermark has passed its last
    row by the gap, so no admitted row can reach it later: the sessions are the runs of the
    key's admitted rows sorted by time, split where a row is at least the gap after the one
    before (a window function over the rows partitioned by key). A session's creation order
    is its first row in arrival order. It closes at the first admitted row whose time reaches
    its end plus the lateness: that row is the smallest order key among the rows at or
    beyond that time, found per block of ``gap`` ticks (a window over the block's rows and
    session ends, sorted by time) and, beyond the block, from the blocks after it (a small
    suffix minimum).

    Where the rows come in runs of increasing serials (:func:`in_place_scan`), the sessions
    are first those of every row that is not dead, and :func:`scan_and_close` finds in one
    pass that no row is late and where each session closes; a late row after all sends the
    step to the scan, the sessions without the late rows, and :func:`record_closes`. Sessions
    whose order among themselves is all that matters are folded by one worker where it can
    read their rows from the files (:mod:`.fold`)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    w = s.window
    assert w is not None
    types = dict(low.in_schema(s))
    gap = P.parse_duration(w.size)
    lateness = P.parse_duration(w.lateness)
    t, order = F.col("_t"), F.col(ORDER)
    keys = [qcol(k) for k in s.keys]

    def session_wins(admitted: Any, keep: bool = True) -> Any:
        # both window functions sort by the same column, the serial as a long, so Spark sorts
        # once (with ``_o[0]`` in each spec it aliases each apart and sorts twice), and the
        # order key arrays stay out of the shuffle unless an aggregate needs them
        by_time = Window.partitionBy(*keys).orderBy(t, order)
        cut = F.when((t - F.lag(t).over(by_time)) >= F.lit(gap), 1).otherwise(0)
        upto = by_time.rowsBetween(Window.unboundedPreceding, Window.currentRow)
        rows = admitted.withColumn(ORDER, F.col("_o")[0])
        rows = rows.withColumn("_sid", F.sum(cut).over(upto))
        wins = (
            grouped(rows, [*keys, F.col("_sid")], s.aggs, types, True)
            .agg(
                *agg_columns(s.aggs, types, sets=True),
                first_order(True, grouped=True).alias("_wq"),
                F.min(t).alias("_ws"),
                (F.max(t) + F.lit(gap)).alias("_we"),
            )
            .drop("_sid")
        )
        return low.checkpoint(wins) if keep else wins  # kept: the ends come from it

    rows = _window_rows(low, j, s, df)
    scanned = rows.seen  # the first pass over the rows files the step's counters
    first = None
    if low.relative_order(s):  # in order of their ends, as they close (see tumbling)
        folded = _folded(low, j, s, df, True, rows)
        if folded is not None:  # read and folded by one worker (.fold)
            return folded
        scan = late_serials(scanned, lateness, low.partitions, low.action, BLOCK)
        admitted, finish = _admit(low, j, s, rows, scan.late)
        return finish(session_wins(admitted, keep=False))
    if SCAN_IN_PLACE and FUSED_SESSIONS:
        # hope that no row is late: the sessions of every row that is not dead, then one pass
        # finds the late rows and the sessions' closes; where a row is late after all, the
        # sessions are found again without it, and closed by a second pass
        wins = session_wins(rows.x.filter(t.isNotNull()))
        ends = wins.select(F.col("_we").alias("v"))
        fused, first = scan_and_close(rows.seen, ends, lateness, low.action, low.checkpoint)
        if fused is not None:
            _, finish = _admit(low, j, s, rows, [])
            wins = wins.join(fused.enum, on="_we", how="left")
            close = fused.close(F.col(CLOSE_AT), F.col("_we"))
            return finish(wins.withColumn(WINDOW_CLOSE, close).drop(CLOSE_AT))
        if first is not None:  # the pass ran: the scan starts from what it found
            scanned = rows.narrow
    scan = late_serials(scanned, lateness, low.partitions, low.action, BLOCK, None, first)
    admitted, finish = _admit(low, j, s, rows, scan.late)
    wins = session_wins(admitted)
    ends = wins.select(F.col("_we").alias("v"))
    found = record_closes(rows.narrow, ends, lateness, scan, low.action, low.checkpoint)
    if found is not None:
        return finish(wins.join(found, on="_we", how="left"))
    # close(e) = the smallest order key among admitted rows with t - lateness >= e: within
    # e's block of `gap` ticks by a window over the block, beyond it by a suffix minimum
    size = F.lit(max(1, gap))
    ends = ends.distinct()  # one close per end: the join below must not repeat a session
    marks = admitted.select((t - F.lit(lateness)).alias("v"), first_order_row().alias("co"))
    u = ends.select("v", F.lit(0).alias("tag"), F.lit(None).cast("array<bigint>").alias("co"))
    u = u.unionByName(marks.select("v", F.lit(1).alias("tag"), "co"))
    u = u.withColumn("b", F.floor(F.col("v") / size))
    heads = u.groupBy("b").agg(F.min("co").alias("co"))
    after = Window.orderBy(F.col("b").desc()).rowsBetween(Window.unboundedPreceding, -1)
    beyond = heads.select("b", F.min("co").over(after).alias("later"))
    ahead = (
        Window.partitionBy("b")
        .orderBy(F.col("v").desc(), F.col("tag").desc())
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    here = u.withColumn("here", F.min("co").over(ahead)).filter(F.col("tag") == 0)
    here = here.join(F.broadcast(beyond), on="b", how="left")
    closes = here.select(
        F.col("v").alias("_we"), F.least(F.col("here"), F.col("later")).alias(WINDOW_CLOSE)
    )
    return finish(wins.join(F.broadcast(low.checkpoint(closes)), on="_we", how="left"))


def first_order_row() -> Any:
    """A row's order key as a one-serial array (for ``min`` over rows, as ``first_order``)."""
    from pyspark.sql import functions as F

    return F.array(F.col("_o")[0])
