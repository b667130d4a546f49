"""Run-time stores shared by every backend: live tables, late rows, dead letters, counters.

All stores are written by the run's driver and read from any thread (other cells, the
status display); every read takes a consistent snapshot under a lock.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from .files import folder, write_file
from .types import Schema, polars_schema, to_polars


def _pl_frame(rows: list[dict[str, Any]], schema: Schema) -> pl.DataFrame:
    if not rows:
        return pl.DataFrame(schema=polars_schema(schema))
    return pl.DataFrame(rows, schema=polars_schema(schema), orient="row")


class Deferred(Protocol):
    """Rows an engine keeps until they are read (the native runtime's output batches, held
    in C): their count now, their frame when a reader asks (:class:`TableStore`)."""

    height: int

    def frame(self) -> pl.DataFrame:
        """The rows as a frame (built once; later calls return the same frame)."""
        ...

    def join(self, later: Deferred) -> bool:
        """Take ``later``'s rows after this one's, if both are still unbuilt and alike."""
        ...


class TableStore:
    """A live table: append-only, or upsert by key (a row replaces the row with its key,
    keeping the key's first position).

    Written either row by row (``write``: the reference backend) or in columnar chunks
    (``write_frame``: the native backend), not both in one run. Chunks may come
    :class:`Deferred`: the table then builds their frame when it is read, on the reader's
    thread, so a run's driver spends no time on frames nobody has asked for yet."""

    takes_deferred = True

    def __init__(self, name: str, schema: Schema, key: tuple[str, ...] | None):
        self.name = name
        self.schema = schema
        self.key = key
        self._lock = threading.Lock()
        self._rows: list[dict[str, Any]] = []
        self._by_key: dict[tuple[Any, ...], dict[str, Any]] = {}
        self._frames: list[pl.DataFrame | Deferred] = []
        self._frame_rows = 0
        self._compacted_rows = 0
        self._is_compact = False  # _frames is one frame, already compacted
        self._remote: Any = None  # rows kept by an engine (Spark): see adopt()

    def adopt(self, remote: Any) -> None:
        """Hold an engine's finished table instead of rows: ``remote`` has ``height`` and
        ``to_polars(limit)`` (a Spark DataFrame kept on the executors)."""
        with self._lock:
            self._remote = remote

    def write_frame(self, df: pl.DataFrame | Deferred) -> None:
        with self._lock:
            self._is_compact = False
            last = self._frames[-1] if self._frames else None
            if (
                isinstance(df, pl.DataFrame)
                or last is None
                or isinstance(last, pl.DataFrame)
                or not last.join(df)
            ):
                self._frames.append(df)
            self._frame_rows += df.height
            # an upsert table keeps at most ~5x its compacted rows + 256K rows of changelog:
            # bounded memory, and each row is folded in about 1.25 times on average
            if len(self._frames) > 256 or (
                self.key is not None and self._frame_rows > 4 * self._compacted_rows + 262_144
            ):
                self._compact()

    def replace_frame(self, df: pl.DataFrame) -> None:
        """The whole table is ``df`` (for an upsert table: one row per key, in the order of
        each key's first row), replacing every frame written before."""
        with self._lock:
            self._frames = [df]
            self._frame_rows = self._compacted_rows = df.height
            self._is_compact = True

    def _compact(self) -> None:
        """Merge the chunks (under the lock); for upsert tables keep each key's last row at
        the key's first position."""
        if not self._frames or self._is_compact:
            return
        # deferred chunks are built one by one, each replacing itself in the list: a read
        # that is interrupted leaves the table whole
        for k, f in enumerate(self._frames):
            if not isinstance(f, pl.DataFrame):
                self._frames[k] = f.frame()
        frames: list[pl.DataFrame] = self._frames  # type: ignore[assignment]
        df = pl.concat(frames, how="vertical") if len(frames) > 1 else frames[0]
        if self.key is not None and len(self._frames) > 0:
            cols, key = df.columns, list(self.key)
            df = uninterrupted(
                lambda: (
                    df.group_by(key, maintain_order=True)
                    .agg(pl.all().exclude(key).last())
                    .select(cols)
                )
            )
        self._frames = [df]
        self._frame_rows = self._compacted_rows = df.height
        self._is_compact = True

    def write(self, rows: list[dict[str, Any]]) -> None:
        with self._lock:
            if self.key is None:
                self._rows.extend(rows)
            else:
                k = self.key
                by_key = self._by_key
                for r in rows:
                    key = tuple(key_part(r[c]) for c in k)
                    old = by_key.get(key)
                    # the key's first row gives the key's values (0.0 or -0.0), as the columnar
                    # compaction's group_by does; the latest row gives the rest
                    by_key[key] = r if old is None else {**r, **{c: old[c] for c in k}}

    def _build_deferred(self) -> None:
        """Build the deferred chunks written so far without the lock, so the run's driver
        goes on writing meanwhile (a chunk written after this is built under the lock)."""
        with self._lock:
            pending = [f for f in self._frames if not isinstance(f, pl.DataFrame)]
        for f in pending:
            f.frame()

    def __len__(self) -> int:
        if self._remote is not None:
            return int(self._remote.height)
        if self._frames:
            if self.key is None:  # append-only: no need to build deferred chunks
                with self._lock:
                    return self._frame_rows
            self._build_deferred()
            with self._lock:
                self._compact()
                return self._frames[0].height
        return len(self._rows) if self.key is None else len(self._by_key)

    def snapshot(self, limit: int | None = None) -> pl.DataFrame:
        """The table now (its first ``limit`` rows when given)."""
        remote = self._remote
        if remote is not None:
            return remote.to_polars(limit)  # type: ignore[no-any-return]
        self._build_deferred()
        with self._lock:
            if self._frames:
                self._compact()
                df = self._frames[0]
                assert isinstance(df, pl.DataFrame)  # compacted
                return df if limit is None else df.head(limit)
            rows = list(self._rows) if self.key is None else list(self._by_key.values())
        if limit is not None:
            rows = rows[: max(0, limit)]
        return _pl_frame(rows, self.schema)


def uninterrupted(query: Callable[[], pl.DataFrame]) -> pl.DataFrame:
    """Run a Polars query off the main thread (a run's driver, a table's builder), immune to
    kernel interrupts.

    Polars aborts every running query with KeyboardInterrupt on SIGINT, in whichever thread
    runs it; a kernel interrupt (meant for the cell the user runs) must not break a run
    in the background, so the driver runs the query again. On the main thread the
    interrupt is the user's and propagates."""
    if threading.current_thread() is threading.main_thread():
        return query()
    for _ in range(100):
        try:
            return query()
        except KeyboardInterrupt:
            time.sleep(0.001)
    return query()


NAN_KEY = float("nan")
"""The one NaN object every NaN key value becomes (:func:`key_part`)."""


def key_part(v: Any) -> Any:
    """A key value as a dict key that groups as Polars' ``group_by`` does: every NaN one value
    (a dict tells NaN objects apart by identity), 0.0 and -0.0 one value (equal already), a
    list as a tuple of such values. Used by the reference's operators and tables alike."""
    if isinstance(v, list):
        return tuple(key_part(x) for x in v)
    if isinstance(v, float) and v != v:
        return NAN_KEY
    return v


class ParquetWriter:
    """Writes a sink's rows as ``part-NNNNN.parquet`` files into a directory, in one of the
    output modes (:data:`streamcell.plan.OUTPUT_MODES`):

    - ``append``: every row, in order, one file per 64K rows;
    - ``complete``: the table (the latest row per ``key`` at the key's first position, as an
      upsert :class:`TableStore` holds it; without a key every row), written at ``close``
      and, with ``epoch_s``, rewritten every ``epoch_s`` seconds while rows arrive: the
      directory then holds exactly the table as of the last write;
    - ``update``: per write (at ``close``, and every ``epoch_s`` seconds with it), the rows
      changed since the previous write, as the next part files: reading the files in name
      order and keeping the last row per key gives the complete table.
    """

    PART_ROWS = 65_536

    def __init__(
        self,
        path: str,
        schema: Schema,
        mode: str = "append",
        key: tuple[str, ...] | None = None,
        epoch_s: float | None = None,
        create: bool = True,
    ):
        self.path = path
        self._where: tuple[Any, str] | None = None
        if create:  # not a URI that Spark's executors may write themselves
            fs, where = self.where
            fs.create_dir(where, recursive=True)
        self.schema = schema
        self.mode = mode
        self.key = key
        self.epoch_s = epoch_s
        self._buf: list[dict[str, Any]] = []
        self._part = 0
        self.files: list[str] = []
        self.delegated = False  # an engine wrote the directory itself (Spark's executors)
        self._table = TableStore("", schema, key) if mode != "append" else None
        self._changed = False
        self._epoch_at = time.monotonic() + (epoch_s or 0.0)

    @property
    def where(self) -> tuple[Any, str]:
        """The pyarrow filesystem and the folder in it (a local folder for a path or a
        ``file://`` URI), resolved when first written."""
        if self._where is None:
            self._where = folder(self.path)
        return self._where

    def write(self, rows: list[dict[str, Any]]) -> None:
        if self._table is not None:
            self._table.write(rows)
            self._epoch(bool(rows))
            return
        self._buf.extend(rows)
        while len(self._buf) >= self.PART_ROWS:
            self._flush(self._buf[: self.PART_ROWS])
            self._buf = self._buf[self.PART_ROWS :]

    def write_frame(self, df: pl.DataFrame) -> None:
        if self._table is not None:
            self._table.write_frame(df)
            self._epoch(df.height > 0)
            return
        self.write(df.to_dicts())

    def _epoch(self, changed: bool) -> None:
        self._changed = self._changed or changed
        if self.epoch_s is not None and time.monotonic() >= self._epoch_at:
            self._epoch_at = time.monotonic() + self.epoch_s
            if self._changed:
                self._emit()

    def _emit(self) -> None:
        """One write of a complete / update sink."""
        assert self._table is not None
        frame = self._table.snapshot()
        self._changed = False
        if self.mode == "complete":
            self._replace(frame)
            return
        if frame.height or not self.files:  # update: what changed, then start afresh
            for off in range(0, max(frame.height, 1), self.PART_ROWS):
                self._write_part(frame.slice(off, self.PART_ROWS).to_arrow())
        self._table = TableStore("", self.schema, self.key)

    def _replace(self, frame: pl.DataFrame) -> None:
        """The directory's part files become ``frame`` (each file replaced atomically)."""
        old, self.files, self._part = self.files, [], 0
        for off in range(0, max(frame.height, 1), self.PART_ROWS):
            self._write_part(frame.slice(off, self.PART_ROWS).to_arrow())
        for f in old[len(self.files) :]:
            try:
                self.where[0].delete_file(f)
            except FileNotFoundError:
                pass

    def close(self) -> None:
        if self.delegated:
            return
        if self._table is not None:
            if self._changed or not self.files:
                self._emit()
            return
        if self._buf or not self.files:
            self._flush(self._buf)
            self._buf = []

    def _flush(self, rows: list[dict[str, Any]]) -> None:
        self._write_part(_pl_frame(rows, self.schema).to_arrow())

    def _write_part(self, table: pa.Table) -> None:
        fs, where = self.where
        name = f"part-{self._part:05d}.parquet"
        f = f"{where}/{name}"
        write_file(fs, f, f"{where}/.{name}.tmp", lambda out: pq.write_table(table, out))
        self.files.append(f)
        self._part += 1


class RowLog:
    """Late rows or dead letters: bounded in memory (the most recent ``cap`` rows are kept);
    ``total`` counts every row ever added."""

    def __init__(self, cap: int = 100_000):
        self._lock = threading.Lock()
        self._rows: deque[dict[str, Any]] = deque(maxlen=cap)
        self.total = 0

    def add(self, row: dict[str, Any]) -> None:
        with self._lock:
            self._rows.append(row)
            self.total += 1

    def rows(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._rows)


DEAD_LETTER_SCHEMA = {
    "step": pl.String,
    "position": pl.String,
    "reason": pl.String,
    "row": pl.String,
}


def dead_letter_frame(log: RowLog) -> pl.DataFrame:
    rows = log.rows()
    return (
        pl.DataFrame(rows, schema=DEAD_LETTER_SCHEMA, orient="row")
        if rows
        else pl.DataFrame(schema=DEAD_LETTER_SCHEMA)
    )


def late_frame(log: RowLog, schemas: dict[str, Schema], step: str | None) -> pl.DataFrame:
    """Late rows as they arrived at their step, plus ``_step`` and ``_position``.

    ``schemas`` maps a step id to the schema of the rows *entering* that step.
    """
    frames = []
    by_step: dict[str, list[dict[str, Any]]] = {}
    for r in log.rows():
        by_step.setdefault(r["_step"], []).append(r)
    for sid, rows in by_step.items():
        if step is not None and sid != step:
            continue
        sch = dict(polars_schema(schemas[sid]))
        sch.update({"_step": pl.String(), "_position": pl.String()})
        frames.append(pl.DataFrame(rows, schema=sch, orient="row"))
    if not frames:
        return pl.DataFrame(schema={"_step": pl.String, "_position": pl.String})
    return pl.concat(frames, how="diagonal_relaxed")


@dataclass
class StepCounters:
    """Conservation counts of one step:
    ``rows_in == consumed + filtered + late + dead + unprocessed``.

    ``consumed`` rows went on (stateless steps), into state (stateful steps) or were written
    (sinks); ``rows_out`` counts what the step emitted (explode and aggregates change the
    count). ``unprocessed`` rows had reached the step but were not finished when the run
    ended (stopped or failed: in flight, or waiting in a sink's buffer); a finished run has
    none. It is settled when the run ends (:meth:`streamcell.run.Run.counts`).
    """

    rows_in: int = 0
    rows_out: int = 0
    filtered: int = 0
    late: int = 0
    dead: int = 0
    unprocessed: int = 0
    ns: int = 0

    @property
    def consumed(self) -> int:
        return self.rows_in - self.filtered - self.late - self.dead - self.unprocessed


@dataclass
class Progress:
    """Throughput and latency bookkeeping for the status displays."""

    started: float = field(default_factory=time.monotonic)
    rows_read: int = 0
    latencies_ns: deque[int] = field(default_factory=lambda: deque(maxlen=4096))
    _last: tuple[float, int] = (0.0, 0)
    _rate: float = 0.0
    _out_last: tuple[float, int] = (0.0, 0)
    _out_rate: float = 0.0

    def rate(self) -> float:
        """Rows read per second over the last ~second (the average while starting)."""
        self._last, self._rate, r = self._window(self.rows_read, self._last, self._rate)
        return r

    def out_rate(self, rows_out: int) -> float:
        """Rows out (into the sinks) per second, ``rows_out`` being the running total."""
        self._out_last, self._out_rate, r = self._window(rows_out, self._out_last, self._out_rate)
        return r

    def _window(
        self, n: int, last: tuple[float, int], rate: float
    ) -> tuple[tuple[float, int], float, float]:
        now = time.monotonic()
        t0, n0 = last
        if t0 == 0.0:
            el = now - self.started
            return (now, n), rate, n / el if el > 0 else 0.0
        if now - t0 >= 0.5:
            rate = (n - n0) / (now - t0)
            return (now, n), rate, rate
        return last, rate, rate

    def latency_ms(self, q: float) -> float | None:
        lat = sorted(self.latencies_ns)
        if not lat:
            return None
        return lat[min(len(lat) - 1, int(q * len(lat)))] / 1e6


def arrow_type(schema: Schema) -> pa.Schema:
    return pl.DataFrame(schema={n: to_polars(t) for n, t in schema}).to_arrow().schema
