"""A window step's (serial, ticks) pairs read straight from its Parquet files by the Python
workers, for the passes of the watermark scan and the window closes.

Those passes read two longs per row of the step (:func:`.groupby._window_rows`). Handed over
by Spark, each row is read by the JVM's Parquet reader, turned into an Arrow row by the JVM
and sent to the Python worker: about 2.3 s of CPU per pass over 10M rows here, where the
Python side of the pass takes 0.1-0.2 s. When the step's rows are a local Parquet source's
rows through filters and projections that cannot fail, a Python worker reads the time column
(and the columns the filters read) itself, with pyarrow, by row groups: the same rows, the
same serials (the file's first serial plus the row's index in the file, as
``_metadata.row_index`` gives them) and the same ticks: a pass over 10M rows here took
0.5-0.7 s (about 1 s of CPU, Spark's part of the job included) against 2.5-3.3 s.

Each task reads one unit (whole row groups of one file, or of consecutive small files, in
order), so each partition holds one run of increasing serials, as
:func:`.groupby.in_place_scan` expects of a scan of the files where they are. A filter is evaluated with pyarrow's compute functions where they give exactly the
reference's answer (:func:`predicate`: comparisons of ints, strings and bools, Kleene
``and`` / ``or``, ``not``, ``is_null``, ``is_in``); any other step or expression keeps the
Spark pass. The lineage also serves :mod:`.fold`, which reads the step's other columns (and
the year / month / day / hour of a datetime column a projection computes) the same way."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pyarrow as pa

from ... import plan as P
from ...expr import IR, Binary, Call, Col, Lit, Unary
from ...types import Schema

DIRECT_READS = True
"""Whether window steps read their (serial, ticks) pairs from the Parquet files themselves
where they can (read on the driver; False: always Spark's pass, which the tests also run)."""

UNIT_ROWS = 1 << 21
"""Rows a unit of the direct read holds at least (a row group is never split); where the
input is smaller, a unit holds the rows over twice the cores, so every core has work."""

BATCH_ROWS = 1 << 20
"""Rows per batch the direct read hands a pass (a unit is read batch by batch)."""

STATS = 9
"""The kind of the output row that carries a task's counters (its second column: rows in; its
third: of them, rows with a null time): observed for the step's counters, then filtered out
of the pass's rows."""

Pred = tuple[Any, ...]
"""A filter as pyarrow evaluates it: ("col", source column) | ("lit", value) | ("cmp", op, a,
b) | ("and" | "or", a, b) | ("not", a) | ("null" | "valid", a) | ("in", a, values)."""


Piece = tuple[str, int, tuple[int, ...]]
"""Row groups of one file: (local path, serial of the first row, row group indexes)."""


@dataclass(frozen=True)
class Lineage:
    """A step's rows as a Parquet source's rows through filters: the source's units (pieces
    of files in serial order, read by one task), the step's columns that are a source column
    as read (step name -> file column) with their streamcell types, and the filters."""

    units: tuple[tuple[Piece, ...], ...]
    columns: dict[str, str]
    types: dict[str, str]
    filters: tuple[Pred, ...] = ()
    steps: tuple[str, ...] = ()  # the filter steps, one per filter
    rows: int = 0  # the source's rows (by the files' footers)
    # the step's columns that are a part of a datetime column as read: name -> (part, column)
    derived: dict[str, tuple[str, str]] = field(default_factory=dict)


def source_lineage(files: list[tuple[str, int, list[int]]], schema: Schema, parts: int) -> Lineage:
    """The lineage of a Parquet source of local ``files`` (path, first serial, row counts of
    its row groups): units of whole row groups, of consecutive files where they are small, at
    least :data:`UNIT_ROWS` rows each or the rows over twice ``parts`` where that is fewer."""
    total = sum(sum(g) for _, _, g in files)
    want = max(1, min(UNIT_ROWS, -(-total // (2 * parts))))
    units: list[tuple[Piece, ...]] = []
    unit: list[Piece] = []
    rows = 0
    for path, base, groups in files:
        first, idx = base, []
        for i, n in enumerate(groups):
            idx.append(i)
            rows += n
            if rows >= want:
                units.append((*unit, (path, first, tuple(idx))))
                first += sum(groups[j] for j in idx)
                unit, rows, idx = [], 0, []
        if idx:
            unit.append((path, first, tuple(idx)))
    if unit:
        units.append(tuple(unit))
    names = {n: n for n, _ in schema}
    return Lineage(tuple(units), names, {n: t.name for n, t in schema}, rows=total)


_CMP = {"==": "equal", "!=": "not_equal", "<": "less", "<=": "less_equal", ">": "greater"}
_CMP[">="] = "greater_equal"
_FAMILIES = ("int", "str", "bool")


def _family(e: IR, lin: Lineage) -> str | None:
    """The type family of an operand: a column's streamcell type, or a literal's."""
    if isinstance(e, Col):
        t = lin.types.get(e.name)
        return t if t in _FAMILIES and e.name in lin.columns else None
    if isinstance(e, Lit):
        v = e.value
        if isinstance(v, bool):
            return "bool"
        if isinstance(v, int) and -(2**63) <= v < 2**63:
            return "int"
        if isinstance(v, str):
            return "str"
    return None


def predicate(e: IR, lin: Lineage) -> Pred | None:  # noqa: C901 - one dispatch over the IR
    """Filter ``e`` over the step's columns as a :data:`Pred` over the file's columns, or None
    where pyarrow might not give the reference's answer: comparisons of two operands of one
    family (int, str, bool; ints of any width, strings by their bytes, as Spark and the
    reference order them), null where either side is; floats are left out (NaN)."""
    if isinstance(e, Col):
        return ("col", lin.columns[e.name]) if _family(e, lin) == "bool" else None
    if isinstance(e, Lit):
        return ("lit", e.value) if isinstance(e.value, bool) else None
    if isinstance(e, Binary) and e.op in ("and", "or"):
        a, b = predicate(e.left, lin), predicate(e.right, lin)
        return None if a is None or b is None else (e.op, a, b)
    if isinstance(e, Binary) and e.op in _CMP:
        fa, fb = _family(e.left, lin), _family(e.right, lin)
        if fa is None or fa != fb or isinstance(e.left, Lit) and isinstance(e.right, Lit):
            return None
        return ("cmp", _CMP[e.op], _operand(e.left, lin), _operand(e.right, lin))
    if isinstance(e, Unary) and e.op == "not":
        a = predicate(e.operand, lin)
        return None if a is None else ("not", a)
    if isinstance(e, Call) and e.fn in ("is_null", "is_not_null") and len(e.args) == 1:
        x = e.args[0]
        if not isinstance(x, Col) or x.name not in lin.columns:
            return None
        return ("null" if e.fn == "is_null" else "valid", ("col", lin.columns[x.name]))
    if isinstance(e, Call) and e.fn == "is_in" and len(e.args) == 2:
        x, vs = e.args
        fam = _family(x, lin)
        if not isinstance(x, Col) or fam is None or not isinstance(vs, Lit):
            return None
        values = tuple(vs.value) if isinstance(vs.value, (tuple, list)) else None
        if values is None or any(_family(Lit(v), lin) != fam for v in values):
            return None
        return ("in", ("col", lin.columns[x.name]), values)
    return None


def _operand(e: IR, lin: Lineage) -> Pred:
    return ("col", lin.columns[e.name]) if isinstance(e, Col) else ("lit", e.value)  # type: ignore[union-attr]


PARTS = {"dt.year": "year", "dt.month": "month", "dt.day": "day", "dt.hour": "hour"}
"""The parts of a datetime a lineage carries as a column (pyarrow's function of each), as the
reference takes them: from the naive UTC datetime, a null where the time is."""


def part_of(fn: str, a: Any) -> Any:
    """Datetime part ``fn`` (:data:`PARTS`) of a timestamp column as read, as int64: of its
    UTC wall time (a column with a time zone is read as UTC, as :mod:`.sources` reads it)."""
    import pyarrow.compute as pc

    if getattr(a.type, "tz", None) is not None:
        a = a.cast(pa.timestamp(a.type.unit))
    return getattr(pc, PARTS[fn])(a).cast(pa.int64())


def _derived(e: IR, lin: Lineage) -> tuple[str, str] | None:
    """``e`` as a part of a datetime column as read, or as a copy of such a part."""
    if isinstance(e, Col):
        return lin.derived.get(e.name)
    if isinstance(e, Call) and e.fn in PARTS and len(e.args) == 1:
        x = e.args[0]
        if isinstance(x, Col) and x.name in lin.columns and lin.types.get(x.name) == "datetime":
            return (e.fn, lin.columns[x.name])
    return None


def through(s: P.Step, kind: str, lin: Lineage) -> Lineage | None:
    """The lineage of stateless step ``s`` over rows of lineage ``lin``, where Spark lowered
    it as a step that cannot fail (``kind``: "filter" or "pass"); None: not one we read."""
    if isinstance(s, P.Filter) and kind == "filter":
        p = predicate(s.predicate, lin)
        if p is None:
            return None
        return replace(lin, filters=(*lin.filters, p), steps=(*lin.steps, s.step_id))
    if isinstance(s, P.WithColumns) and kind == "pass":
        cols = {n: c for n, c in lin.columns.items() if n not in dict(s.exprs)}
        derived = {n: d for n, d in lin.derived.items() if n not in dict(s.exprs)}
        types = dict(lin.types)
        for n, e in s.exprs:
            if isinstance(e, Col) and e.name in lin.columns:
                cols[n], types[n] = lin.columns[e.name], lin.types[e.name]
            elif (d := _derived(e, lin)) is not None:
                derived[n] = d
        return replace(lin, columns=cols, types=types, derived=derived)
    if isinstance(s, P.Select) and kind == "pass":
        pairs = [(n, e.name) for n, e in s.exprs if isinstance(e, Col) and e.name in lin.columns]
        cols = {n: lin.columns[x] for n, x in pairs}
        derived = {n: d for n, e in s.exprs if (d := _derived(e, lin)) is not None}
        types = {n: lin.types[x] for n, x in pairs}
        return replace(lin, columns=cols, types=types, derived=derived)
    return None


def _eval(p: Pred, tbl: pa.RecordBatch) -> Any:
    import pyarrow.compute as pc

    kind = p[0]
    if kind == "col":
        return tbl.column(p[1])
    if kind == "lit":
        return pa.scalar(p[1])
    if kind == "cmp":
        return getattr(pc, p[1])(_eval(p[2], tbl), _eval(p[3], tbl))
    if kind == "and":
        return pc.and_kleene(_eval(p[1], tbl), _eval(p[2], tbl))
    if kind == "or":
        return pc.or_kleene(_eval(p[1], tbl), _eval(p[2], tbl))
    if kind == "not":
        return pc.invert(_eval(p[1], tbl))
    if kind == "null":
        return pc.is_null(_eval(p[1], tbl))
    if kind == "valid":
        return pc.is_valid(_eval(p[1], tbl))
    x = _eval(p[1], tbl)  # "in": null where the value is null, as a comparison
    if pa.types.is_integer(x.type):
        x = x.cast(pa.int64())
    got = pc.is_in(x, value_set=pa.array(list(p[2]), type=x.type))
    return pc.if_else(pc.is_null(x), pa.scalar(None, pa.bool_()), got)


def _columns(p: Pred, out: set[str]) -> None:
    if p[0] == "col":
        out.add(p[1])
    elif p[0] != "lit":
        for x in p[1:]:
            if isinstance(x, tuple):
                _columns(x, out)


def _ticks(col: Any) -> np.ndarray:
    """A time column's values as the engine's ticks (microseconds for a timestamp, the int
    itself), nulls as 0 (masked by the caller)."""
    t = col.type
    if pa.types.is_timestamp(t):
        scale = {"s": 1_000_000, "ms": 1000, "us": 1}[t.unit]  # Spark reads no other unit
        v = col.cast(pa.int64()).fill_null(0).to_numpy() * scale
    else:
        v = col.cast(pa.int64()).fill_null(0).to_numpy()
    return np.asarray(v, dtype=np.int64)


def pairs(
    units: tuple[tuple[Piece, ...], ...],
    ids: list[int],
    time: str,
    filters: tuple[Pred, ...],
    counts: list[int],
    batch_rows: int | None = None,
) -> Iterator[pa.RecordBatch]:
    """The (``o``, ``t``) batches of units ``ids``, in order: each piece's rows of its row
    groups that pass the filters and have a time; ``counts`` gets [rows that pass, of them
    with a null time]."""
    need: set[str] = {time}
    for p in filters:
        _columns(p, need)
    for i in ids:
        for piece in units[i]:
            yield from _piece_pairs(piece, sorted(need), time, filters, counts, batch_rows)


def _piece_pairs(
    piece: Piece,
    need: list[str],
    time: str,
    filters: tuple[Pred, ...],
    counts: list[int],
    batch_rows: int | None,
) -> Iterator[pa.RecordBatch]:
    import pyarrow.parquet as pq

    path, o0, groups = piece
    size = batch_rows or BATCH_ROWS
    with pq.ParquetFile(path) as f:  # a unit of many small files: each closed after
        yield from _batches(f, groups, o0, need, time, filters, counts, size)


def _batches(
    f: Any,
    groups: tuple[int, ...],
    o0: int,
    need: list[str],
    time: str,
    filters: tuple[Pred, ...],
    counts: list[int],
    size: int,
) -> Iterator[pa.RecordBatch]:
    import pyarrow.compute as pc

    for b in f.iter_batches(batch_size=size, row_groups=list(groups), columns=need):
        n = b.num_rows
        o = np.arange(o0, o0 + n, dtype=np.int64)
        o0 += n
        keep = None
        for p in filters:
            m = _eval(p, b)
            keep = m if keep is None else pc.and_kleene(keep, m)
        tc = b.column(time)
        valid = tc.is_valid()
        if keep is not None:
            sel = pc.fill_null(keep, False)
            counts[0] += int(pc.sum(sel).as_py() or 0)
            counts[1] += int(pc.sum(pc.and_(sel, pc.invert(valid))).as_py() or 0)
            sel = pc.and_(sel, valid).to_numpy(zero_copy_only=False)
        else:
            counts[0] += n
            counts[1] += tc.null_count
            sel = valid.to_numpy(zero_copy_only=False)
        t = _ticks(tc)
        if not sel.all():
            o, t = o[sel], t[sel]
        if len(o):
            yield pa.RecordBatch.from_arrays([pa.array(o), pa.array(t)], names=["o", "t"])


def _names(ddl: str) -> list[str]:
    return re.findall(r"`([^`]+)`", ddl)


class DirectPairs:
    """A window step's (``o``, ``t``) rows that are not dead, read by the Python workers
    (:func:`pairs`), with the DataFrame API its passes use: ``mapInArrow(fn, ddl)`` (``fn``
    is handed the pairs of one unit per partition), ``sparkSession``; ``frame``: the same
    rows through Spark, for a scan that needs a shuffle. The first pass observes the
    counters (``obs``: rows into the step ``n``, with a null time ``dead``)."""

    def __init__(self, spark: Any, lin: Lineage, time: str, frame: Any, name: str):
        from pyspark.sql import Observation

        self.sparkSession = spark
        self.lin = lin
        self.time = lin.columns[time]
        self.frame = frame
        self.obs = Observation(name)
        self.passes = 0

    def mapInArrow(self, fn: Callable[..., Iterator[pa.RecordBatch]], ddl: str) -> Any:  # noqa: N802 - Spark's name
        from pyspark.sql import functions as F

        names = _names(ddl)
        units, time, filters = self.lin.units, self.time, self.lin.filters
        size = BATCH_ROWS  # read here: the function goes to the workers with it

        def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            ids = [int(i) for b in batches for i in b.column(0).to_pylist()]
            counts = [0, 0]
            src = pairs(units, ids, time, filters, counts, size)
            yield from fn(src)
            for _ in src:  # a pass that stopped early: its counters still count every row
                pass
            k = pa.array([STATS], pa.int8())
            rest = [pa.array([c], pa.int64()) for c in (*counts, *[0] * (len(names) - 3))]
            yield pa.RecordBatch.from_arrays([k, *rest], names=names)

        n = len(units)
        out = self.sparkSession.range(0, n, 1, max(1, n)).mapInArrow(run, ddl)
        k = F.col(names[0])
        if self.passes == 0:
            stat = k == F.lit(STATS)
            out = out.observe(
                self.obs,
                F.sum(F.when(stat, F.col(names[1])).otherwise(0)).alias("n"),
                F.sum(F.when(stat, F.col(names[2])).otherwise(0)).alias("dead"),
            )
        self.passes += 1
        return out.filter(k != F.lit(STATS))


def direct_pairs(low: Any, s: P.Aggregate, frame: Any, name: str) -> DirectPairs | None:
    """The direct read of window step ``s``'s pairs, where its input's lineage allows it."""
    w = s.window
    if not DIRECT_READS or w is None:
        return None
    lin = low.direct.get(s.inputs[0].step_id)
    if lin is None or not lin.units or w.time not in lin.columns:
        return None
    if lin.types.get(w.time) not in ("int", "datetime"):
        return None
    need = {lin.columns[w.time]}
    for p in lin.filters:
        _columns(p, need)
    if any("." in c for c in need):  # pyarrow reads a dotted name as a nested field's path
        return None
    return DirectPairs(low.spark, lin, w.time, frame, name)
