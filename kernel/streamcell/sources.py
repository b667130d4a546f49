"""Source readers: open a :class:`~streamcell.plan.SourceSpec`, report its schema, stream rows.

Every reader streams (files are read batch by batch or line by line, never loaded whole).
Rows that cannot be read (a malformed CSV line, a value of the wrong type, a missing field)
come out as :class:`BadRow` with the reason and the source position, so a backend can send
them to the dead-letter table and keep going.
"""

from __future__ import annotations

import csv as _csv
import datetime as _dt
import itertools
import json
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from .errors import SourceError
from .files import DataFile, data_file, is_folder, shown, source_files, suffix
from .plan import SourceSpec, check_generator_args
from .types import (
    BOOL,
    DATETIME,
    FLOAT,
    INT,
    NULL,
    STR,
    DType,
    Schema,
    conform,
    dtype_of_value,
    parse_dtype,
    schema_from_arrow,
    to_arrow,
    unify,
)


@dataclass(frozen=True)
class BadRow:
    """A row that could not be read: where it came from, why, and its raw text."""

    position: str
    reason: str
    raw: str


class Reader:
    """Base reader. ``schema`` is known after construction; ``rows()`` streams dicts/BadRows."""

    schema: Schema
    label: str
    # rows are always at hand (memory, files, generators): reading never waits for new data
    never_waits = False

    def rows(self) -> Iterator[dict[str, Any] | BadRow]:
        raise NotImplementedError

    def arrow_batches(self) -> Iterator[pa.RecordBatch] | None:
        """Typed Arrow batches when the source is typed (generators, Parquet, frames)."""
        return None


# --------------------------------------------------------------------------- generators

_EPOCH_START = _dt.datetime(2024, 1, 1)
_START_US = int((_EPOCH_START - _dt.datetime(1970, 1, 1)).total_seconds() * 1_000_000)
CHUNK = 65_536
_EVENTS = np.array(["view", "cart", "purchase"], dtype=object)


def _item_price(item: np.ndarray) -> np.ndarray:
    return np.round(1.0 + (item * 7919 % 10_000) / 100.0, 2)


def _ts(
    rng: np.random.Generator, idx: np.ndarray, step_us: int, late_fraction: float
) -> np.ndarray:
    ts = _START_US + idx * step_us + rng.integers(0, step_us, size=len(idx))
    if late_fraction > 0:
        late = rng.random(len(idx)) < late_fraction
        ts = np.where(late, ts - rng.integers(0, 600_000_000, size=len(idx)), ts)
    return ts


def _active_users(rng: np.random.Generator, idx: np.ndarray, users: int) -> np.ndarray:
    """Users visit in bursts: a window of users/8 active users slides through the id space,
    so each user is active for ~20 minutes of event time, then away for hours."""
    active = max(1, users // 8)
    base = (idx * active) // 12_000  # 12,000 rows ≈ 20 minutes at 100 ms per row
    return (base + rng.integers(0, active, size=len(idx))) % users


def _with_nulls(values: np.ndarray, rng: np.random.Generator, fraction: float) -> pa.Array:
    mask = rng.random(len(values)) < fraction
    return pa.array(values, type=pa.int64(), mask=mask)


def clickstream_chunk(spec: SourceSpec, chunk: int, n: int) -> pa.RecordBatch:
    """Rows ``chunk*CHUNK .. +n`` of the clickstream generator (deterministic per chunk)."""
    seed = int(spec.arg("seed", 0))
    rng = np.random.default_rng([seed, 1, chunk])
    idx = np.arange(chunk * CHUNK, chunk * CHUNK + n, dtype=np.int64)
    users, items = int(spec.arg("users", 10_000)), int(spec.arg("items", 1_000))
    item = rng.integers(0, items, size=n)
    ev = _EVENTS[np.searchsorted([0.7, 0.9], rng.random(n), side="right")]
    return pa.RecordBatch.from_arrays(
        [
            pa.array(
                _ts(rng, idx, 100_000, float(spec.arg("late_fraction", 0.01))),
                type=pa.timestamp("us"),
            ),
            _with_nulls(_active_users(rng, idx, users), rng, 0.01),
            pa.array(item, type=pa.int64()),
            pa.array(item % 20, type=pa.int64()),
            pa.array(ev.tolist(), type=pa.string()),
            pa.array(_item_price(item), type=pa.float64()),
        ],
        names=["ts", "user_id", "item_id", "category", "event", "price"],
    )


def store_sales_chunk(spec: SourceSpec, chunk: int, n: int) -> pa.RecordBatch:
    seed = int(spec.arg("seed", 0))
    rng = np.random.default_rng([seed, 2, chunk])
    idx = np.arange(chunk * CHUNK, chunk * CHUNK + n, dtype=np.int64)
    item = rng.integers(0, int(spec.arg("items", 1_000)), size=n)
    qty = rng.integers(1, 11, size=n)
    price = _item_price(item)
    discount = rng.choice(np.array([0.0, 0.1, 0.2]), size=n)
    return pa.RecordBatch.from_arrays(
        [
            pa.array(_ts(rng, idx, 250_000, 0.0), type=pa.timestamp("us")),
            pa.array(idx // 4, type=pa.int64()),
            pa.array(rng.integers(0, int(spec.arg("stores", 50)), size=n), type=pa.int64()),
            pa.array(item, type=pa.int64()),
            _with_nulls(rng.integers(0, int(spec.arg("customers", 10_000)), size=n), rng, 0.01),
            pa.array(item % 20, type=pa.int64()),
            pa.array(qty, type=pa.int64()),
            pa.array(price, type=pa.float64()),
            pa.array(np.round(qty * price * (1 - discount), 2), type=pa.float64()),
        ],
        names=[
            "ts",
            "ticket",
            "store_id",
            "item_id",
            "customer_id",
            "category",
            "quantity",
            "price",
            "net_paid",
        ],
    )


GENERATORS = {"clickstream": clickstream_chunk, "store_sales": store_sales_chunk}


class GeneratorReader(Reader):
    never_waits = True

    def __init__(self, spec: SourceSpec):
        self.spec = spec
        self.label = spec.kind
        self.fn = GENERATORS[spec.kind]
        check_generator_args(spec.kind, dict(spec.args))  # specs not built by sc.clickstream()
        self.schema = schema_from_arrow(self.fn(spec, 0, 1).schema)
        self.total: int | None = spec.arg("rows")

    def arrow_batches(self) -> Iterator[pa.RecordBatch]:
        chunks = (
            itertools.count() if self.total is None else range((self.total + CHUNK - 1) // CHUNK)
        )
        for c in chunks:
            n = CHUNK if self.total is None else min(CHUNK, self.total - c * CHUNK)
            # always draw a whole chunk, then cut: row i depends only on (seed, i), so
            # rows=N is a prefix of rows=M > N and of the unbounded stream
            yield self.fn(self.spec, c, CHUNK).slice(0, n)

    def rows(self) -> Iterator[dict[str, Any] | BadRow]:
        # convert in small slices: a whole 64K chunk to dicts takes long enough to delay
        # the first row and a stop/pause request noticeably
        for b in self.arrow_batches():
            for off in range(0, b.num_rows, 1024):
                yield from b.slice(off, 1024).to_pylist()


# -------------------------------------------------------------------------------- files


class ParquetReader(Reader):
    never_waits = True

    def __init__(self, spec: SourceSpec):
        self.label = f"parquet({shown(spec.arg('path'))!r})"
        self.files = source_files(spec.arg("path"), (".parquet", ".pq"))
        if not self.files:
            raise SourceError(f"{self.label}: no .parquet files")
        self.schema = schema_from_arrow(self.files[0].parquet().schema_arrow)

    def arrow_batches(self) -> Iterator[pa.RecordBatch | BadRow]:  # type: ignore[override]
        """Record batches; a file whose schema differs from the first file's is one BadRow."""
        for f in self.files:
            pf = f.parquet()
            fs = schema_from_arrow(pf.schema_arrow)
            if fs != self.schema:
                yield BadRow(
                    str(f), f"file schema differs from the first file's: {fs} vs {self.schema}", ""
                )
                continue
            for b in pf.iter_batches(batch_size=8192):
                yield _plain_batch(b)

    def rows(self) -> Iterator[dict[str, Any] | BadRow]:
        for b in self.arrow_batches():
            if isinstance(b, BadRow):
                yield b
            else:
                yield from b.to_pylist()


def _parse_scalar(text: str, t: DType) -> Any:
    if text == "":
        return None
    n = t.name
    if n == "int":
        return int(text)
    if n == "float":
        return float(text)
    if n == "bool":
        low = text.strip().lower()
        if low in ("true", "1"):
            return True
        if low in ("false", "0"):
            return False
        raise ValueError(text)
    if n == "datetime":
        return conform(_dt.datetime.fromisoformat(text), DATETIME)
    if n == "date":
        return _dt.date.fromisoformat(text)
    if n == "str":
        return text
    raise ValueError(f"cannot read {t} from text")


def _infer_text_type(values: list[str]) -> DType:
    for t in (INT, FLOAT, BOOL, DATETIME):
        try:
            for v in values:
                if v != "":
                    _parse_scalar(v, t)
            if any(v != "" for v in values):
                return t
        except ValueError:
            continue
    return STR


def _user_schema(spec: SourceSpec) -> Schema | None:
    s = spec.arg("schema")
    if s is None:
        return None
    return tuple((k, parse_dtype(v)) for k, v in s)


class CsvReader(Reader):
    never_waits = True

    def __init__(self, spec: SourceSpec):
        self.label = f"csv({shown(spec.arg('path'))!r})"
        self.files = source_files(spec.arg("path"), (".csv", ".tsv", ".txt"))
        if not self.files:
            raise SourceError(f"{self.label}: no .csv files")
        self.header = spec.arg("header", True) is not False
        with self.files[0].open_text(newline="") as fh:
            sample = list(itertools.islice(_csv.reader(fh), 1001))
        if not sample:
            raise SourceError(f"{self.label}: {self.files[0]} is empty")
        names = sample[0] if self.header else [f"column_{i + 1}" for i in range(len(sample[0]))]
        body = sample[1:] if self.header else sample
        given = _user_schema(spec)
        if given is not None:
            missing = [n for n, _ in given if n not in names]
            if missing:
                raise SourceError(
                    f"{self.label}: schema names columns not in the header: {missing}"
                )
            self.schema = tuple((n, dict(given).get(n, STR)) for n in names)
        else:
            cols = list(zip(*[r for r in body if len(r) == len(names)])) or [()] * len(names)
            self.schema = tuple((n, _infer_text_type(list(c))) for n, c in zip(names, cols))

    def rows(self) -> Iterator[dict[str, Any] | BadRow]:
        for f in self.files:
            with f.open_text(newline="") as fh:
                reader = _csv.reader(fh)
                if self.header:
                    next(reader, None)
                for rec in reader:
                    if rec:
                        yield csv_record(rec, self.schema, f"{f.name}:{reader.line_num}")


class NdjsonReader(Reader):
    never_waits = True

    def __init__(self, spec: SourceSpec):
        self.label = f"ndjson({shown(spec.arg('path'))!r})"
        self.files = source_files(spec.arg("path"), (".json", ".ndjson", ".jsonl"))
        if not self.files:
            raise SourceError(f"{self.label}: no .ndjson/.jsonl/.json files")
        given = _user_schema(spec)
        if given is not None:
            self.schema = given
            return
        types: dict[str, DType] = {}
        with self.files[0].open_text() as fh:
            for line in itertools.islice(fh, 1000):
                try:
                    obj = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(obj, dict):
                    continue
                for k, v in obj.items():
                    try:
                        t = dtype_of_value(v)
                    except TypeError:
                        t = STR
                    u = unify(types.get(k, NULL), t)
                    types[k] = u if u is not None else STR
        if not types:
            raise SourceError(f"{self.label}: could not infer a schema from the first lines")
        self.schema = tuple((k, v if v != NULL else STR) for k, v in types.items())

    def rows(self) -> Iterator[dict[str, Any] | BadRow]:
        for f in self.files:
            with f.open_text() as fh:
                for lineno, line in enumerate(fh, start=1):
                    if line.strip():
                        yield ndjson_line(line.rstrip("\n"), self.schema, f"{f.name}:{lineno}")


def csv_record(rec: list[str], schema: Schema, pos: str) -> dict[str, Any] | BadRow:
    """One CSV record (its fields) as a row of ``schema``, or a BadRow at ``pos``: the
    reference's reading, shared with the Spark engine's executors."""
    if len(rec) != len(schema):
        return BadRow(pos, f"expected {len(schema)} fields, got {len(rec)}", ",".join(rec))
    row: dict[str, Any] = {}
    for (n, t), v in zip(schema, rec):
        try:
            row[n] = _parse_scalar(v, t)
        except ValueError:
            return BadRow(pos, f"column {n}: cannot parse {v!r} as {t}", ",".join(rec))
    return row


def ndjson_line(line: str, schema: Schema, pos: str) -> dict[str, Any] | BadRow:
    """One NDJSON line (without its newline; not blank) as a row of ``schema`` (a missing
    field is null), or a BadRow at ``pos``: shared with the Spark engine's executors."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        return BadRow(pos, f"invalid JSON: {e.msg} at column {e.colno}", line)
    if not isinstance(obj, dict):
        return BadRow(pos, "expected a JSON object", line)
    return _conform_row(obj, schema, pos, line, missing_is_null=True)


def _conform_row(
    obj: dict[str, Any], schema: Schema, pos: str, raw: str, missing_is_null: bool
) -> dict[str, Any] | BadRow:
    row: dict[str, Any] = {}
    for n, t in schema:
        if n not in obj:
            if missing_is_null:
                row[n] = None
                continue
            return BadRow(pos, f"missing field {n!r}", raw)
        v = obj[n]
        if t == DATETIME and isinstance(v, str):
            try:
                v = _dt.datetime.fromisoformat(v)
            except ValueError:
                return BadRow(pos, f"column {n}: cannot parse {v!r} as datetime", raw)
        try:
            row[n] = conform(v, t)
        except TypeError as e:
            return BadRow(pos, f"column {n}: {e}", raw)
    return row


# ---------------------------------------------------------------------- watched folders


def watch(
    path: str,
    *,
    format: str = "parquet",
    schema: dict[str, str] | None = None,
    idle_timeout: float | None = None,
    poll: float = 0.2,
) -> SourceSpec:
    """A folder watched for new files: an unbounded source.

    Files already there are read first, then every new file, each whole, in name order
    within one look at the folder (write a file elsewhere and rename it in, so it is never
    seen half-written). ``format`` is ``parquet``, ``csv`` or ``ndjson``; ``schema`` (column
    to type) is needed when the folder is empty at start. The source ends after
    ``idle_timeout`` seconds without a new file (``None``: it runs until stopped). On the
    Spark engine it is a Structured Streaming query; on the others it polls every ``poll``
    seconds.
    """
    from .plan import FILE_KINDS

    if format not in FILE_KINDS:
        raise SourceError(
            f"watch({shown(str(path))!r}): format must be one of {', '.join(FILE_KINDS)}"
        )
    if not is_folder(str(path)):
        raise SourceError(f"watch({shown(str(path))!r}): not a directory")
    if idle_timeout is not None and idle_timeout <= 0:
        raise SourceError(f"watch({shown(str(path))!r}): idle_timeout must be > 0 seconds or None")
    if poll <= 0:
        raise SourceError(f"watch({shown(str(path))!r}): poll must be > 0 seconds")
    args: list[tuple[str, Any]] = [("path", str(path)), ("watch", True)]
    if schema is not None:
        args.append(("schema", tuple(schema.items())))
    if idle_timeout is not None:
        args.append(("idle_timeout", float(idle_timeout)))
    args.append(("poll", float(poll)))
    return SourceSpec(format, tuple(args))


EXTENSIONS = {
    "parquet": (".parquet", ".pq"),
    "csv": (".csv", ".tsv", ".txt"),
    "ndjson": (".json", ".ndjson", ".jsonl"),
}


def file_spec(spec: SourceSpec, path: str) -> SourceSpec:
    """The spec reading one file of a watched folder with the folder's schema."""
    args = [(k, v) for k, v in spec.args if k not in ("path", "watch", "idle_timeout", "poll")]
    return SourceSpec(spec.kind, (("path", path), *args))


def read_file(
    spec: SourceSpec, schema: Schema, file: DataFile | str
) -> Iterator[pa.RecordBatch | BadRow]:
    """One file of a watched folder as Arrow batches (or BadRows), typed by ``schema``.

    A Parquet file whose schema differs from the folder's is one BadRow; CSV/NDJSON files
    are read with the folder's schema. Used by every engine, so all agree row for row."""
    from .backends.spark.ops import arrow_schema

    target = arrow_schema(schema)
    f = file if isinstance(file, DataFile) else data_file(file)
    path = f.uri
    if spec.kind == "parquet":
        pf = f.parquet()
        fs = schema_from_arrow(pf.schema_arrow)
        if fs != schema:
            yield BadRow(str(f), f"file schema differs from the first file's: {fs} vs {schema}", "")
            return
        yield from pf.iter_batches(batch_size=8192)
        return
    given = tuple((n, t.name) for n, t in schema)
    one = file_spec(spec, path)
    one = SourceSpec(
        one.kind, tuple((k, v) for k, v in one.args if k != "schema") + (("schema", given),)
    )
    yield from row_batches(open_source(one).rows(), target, 8192)


def row_batches(
    items: Iterable[dict[str, Any] | BadRow],
    target: pa.Schema,
    size: int,
    stop: Callable[[], bool] | None = None,
) -> Iterator[pa.RecordBatch | BadRow]:
    """Rows as Arrow record batches of up to ``size`` rows, in order; a BadRow ends the batch
    before it and passes through in its place. When ``items`` raises, the rows read before
    come out as a last batch, then the error. ``stop`` (checked before each row) ends the
    batches early: a slow iterable does not hold up a stop for a whole batch."""
    buf: list[dict[str, Any]] = []
    it = iter(items)
    while stop is None or not stop():
        try:
            item = next(it)
        except StopIteration:
            break
        except Exception:
            if buf:  # the rows read before the source failed are processed
                yield pa.RecordBatch.from_pylist(buf, schema=target)
            raise
        if isinstance(item, BadRow):
            if buf:
                yield pa.RecordBatch.from_pylist(buf, schema=target)
                buf = []
            yield item
            continue
        buf.append(item)
        if len(buf) >= size:
            yield pa.RecordBatch.from_pylist(buf, schema=target)
            buf = []
    if buf:
        yield pa.RecordBatch.from_pylist(buf, schema=target)


class WatchReader(Reader):
    """A watched folder (:func:`watch`): files in name order as they appear."""

    def __init__(self, spec: SourceSpec):
        self.spec = spec
        self.path = str(spec.arg("path"))
        self.label = f"watch({shown(self.path)!r}, format={spec.kind!r})"
        self.exts = EXTENSIONS[spec.kind]
        self.idle_timeout: float | None = spec.arg("idle_timeout")
        self.poll = float(spec.arg("poll", 0.2))
        given = _user_schema(spec)
        if given is not None:
            self.schema = given
        else:
            first = self.pending(set())
            if not first:
                raise SourceError(f"{self.label}: the folder has no files yet; pass schema=")
            static = SourceSpec(spec.kind, (("path", first[0].uri),))
            self.schema = open_source(static).schema

    def pending(self, seen: set[str]) -> list[DataFile]:
        if not is_folder(self.path):
            raise SourceError(f"{self.label}: the folder is gone")
        return [f for f in source_files(self.path, self.exts) if f.name not in seen]

    def arrow_batches(self) -> Iterator[pa.RecordBatch | BadRow]:  # type: ignore[override]
        import time

        seen: set[str] = set()
        last_new = time.monotonic()
        while True:
            new = self.pending(seen)
            for f in new:
                seen.add(f.name)
                yield from read_file(self.spec, self.schema, f)
            if new:
                last_new = time.monotonic()
                continue
            if self.idle_timeout is not None and time.monotonic() - last_new >= self.idle_timeout:
                return
            time.sleep(self.poll)

    def rows(self) -> Iterator[dict[str, Any] | BadRow]:
        for b in self.arrow_batches():
            if isinstance(b, BadRow):
                yield b
            else:
                yield from b.to_pylist()


# ------------------------------------------------------------------------------ objects


_I64_MAX = 2**63 - 1


def _plain(a: pa.Array) -> pa.Array:
    """A column as every engine reads it: dictionaries (Polars Categorical / Enum) decoded to
    their strings, fixed-size lists (Polars Array) as lists, timestamps with a time zone as
    the naive UTC timestamps streamcell's datetimes are (the same instants). Other columns
    pass unchanged."""
    t = a.type
    if pa.types.is_timestamp(t) and t.tz is not None:
        return a.cast(pa.timestamp(t.unit))
    if pa.types.is_dictionary(t):  # take() has no string_view kernel: decode by hand
        values = a.dictionary
        if pa.types.is_string_view(values.type):
            values = values.cast(pa.large_string())
        return values.take(a.indices)
    if pa.types.is_fixed_size_list(t):
        return a.cast(pa.list_(t.value_type))
    return a


def plain_batches(
    batches: Iterable[pa.RecordBatch], first: pa.Schema, schema: Schema, label: str
) -> Iterator[pa.RecordBatch | BadRow]:
    """Arrow batches of a typed source as every engine can read them, and BadRows for the
    rows no engine could hold, in order, with ``row N`` positions counted over the source:

    - a UInt64 value of 2**63 or more (no int64 holds it) is a BadRow naming the column;
    - a batch whose types differ from ``first`` (a RecordBatchReader whose batch types
      change mid-stream) is conformed row by row to ``schema``: the rows that fit go on,
      the others are BadRows with the reason (wrong type, missing column).
    """
    target = pa.schema([(n, to_arrow(t)) for n, t in schema])
    plain = _already_plain(first)  # once: the frame's chunks share this schema
    base = 0
    for b in batches:
        if b.schema.equals(first):
            if plain:
                if b.num_rows:
                    yield b
            else:
                yield from _split_bad(_plain_batch(b), _too_big(b), base, label)
        else:
            yield from _refit(b, schema, target, base)
        base += b.num_rows


def _already_plain(schema: pa.Schema) -> bool:
    """Whether batches of ``schema`` pass :func:`_plain_batch` and :func:`_too_big` as they
    are: no dictionary, fixed-size list or UInt64 column."""
    return not any(
        pa.types.is_dictionary(f.type)
        or pa.types.is_fixed_size_list(f.type)
        or f.type == pa.uint64()
        for f in schema
    )


def _plain_batch(b: pa.RecordBatch) -> pa.RecordBatch:
    cols = [_plain(a) for a in b.columns]
    if all(x is a for x, a in zip(cols, b.columns)):
        return b
    return pa.RecordBatch.from_arrays(cols, names=b.schema.names)


def _too_big(b: pa.RecordBatch) -> dict[int, str]:
    """Rows with a UInt64 value above int64's range: {row in batch: reason}."""
    import pyarrow.compute as pc

    bad: dict[int, str] = {}
    for name, a in zip(b.schema.names, b.columns):
        if a.type != pa.uint64() or a.null_count == len(a):
            continue
        over = pc.greater(a, pa.scalar(_I64_MAX, pa.uint64()))
        if not pc.any(over).as_py():
            continue
        for i in pc.indices_nonzero(pc.fill_null(over, False)).to_pylist():
            bad.setdefault(i, f"column {name}: {a[i].as_py()} does not fit in int (int64)")
    return bad


def _split_bad(
    b: pa.RecordBatch, bad: dict[int, str], base: int, label: str
) -> Iterator[pa.RecordBatch | BadRow]:
    if not bad:
        if b.num_rows:
            yield b
        return
    start = 0
    for i in sorted(bad):
        if i > start:
            yield _int64(b.slice(start, i - start))
        yield BadRow(f"row {base + i}", bad[i], repr(b.slice(i, 1).to_pylist()[0])[:200])
        start = i + 1
    if start < b.num_rows:
        yield _int64(b.slice(start))


def _int64(b: pa.RecordBatch) -> pa.RecordBatch:
    """UInt64 columns as int64 (their values fit: the ones that do not were taken out)."""
    cols = [a.cast(pa.int64()) if a.type == pa.uint64() else a for a in b.columns]
    return pa.RecordBatch.from_arrays(cols, names=b.schema.names)


def _refit(
    b: pa.RecordBatch, schema: Schema, target: pa.Schema, base: int
) -> Iterator[pa.RecordBatch | BadRow]:
    good: list[dict[str, Any]] = []
    for i, obj in enumerate(b.to_pylist()):
        raw = repr(obj)[:200]
        for n, v in obj.items():  # values no streamcell column holds (UInt64 above 2**63)
            if (
                isinstance(v, int)
                and not isinstance(v, bool)
                and not -_I64_MAX - 1 <= v <= _I64_MAX
            ):
                obj = BadRow("", f"column {n}: {v} does not fit in int (int64)", raw)  # type: ignore[assignment]
                break
        row = obj if isinstance(obj, BadRow) else _conform_row(obj, schema, "", raw, False)
        if isinstance(row, BadRow):
            if good:
                yield pa.RecordBatch.from_pylist(good, schema=target)
                good = []
            reason = row.reason
            if reason.startswith("missing field"):
                reason = f"{reason} (the batch's columns changed mid-stream)"
            else:
                reason = f"{reason} (the batch's types changed mid-stream)"
            yield BadRow(f"row {base + i}", reason, raw)
        else:
            good.append(row)
    if good:
        yield pa.RecordBatch.from_pylist(good, schema=target)


POLARS_SLICE_ROWS = 65_536  # a Polars frame is exported a slice of whole chunks at a time
POLARS_WINDOW_ROWS = 1 << 20  # ... or, column by column, a window of about this many rows


def _polars_schema(df: Any) -> pa.Schema:
    """The Arrow schema of a Polars frame in its own layout (strings as string_view)."""
    import polars as pl

    return df.head(0).to_arrow(compat_level=pl.CompatLevel.newest()).schema  # type: ignore[no-any-return]


def _polars_batches(df: Any, schema: pa.Schema | None = None) -> Iterator[pa.RecordBatch]:
    """A Polars frame in its own layout (strings as string_view), zero-copy, as it is read,
    one record batch per chunk. Its __arrow_c_stream__ would first rechunk the frame into one
    (a copy of every row), and one export of the whole frame would delay the first row.

    When every column has the same chunks (a frame built from batches, or read from files),
    each column is exported on its own (``Series.__arrow_c_stream__``: its chunks as they
    are, about 2 us per chunk) over a window of whole chunks, the first of at least
    POLARS_SLICE_ROWS rows and the rest of POLARS_WINDOW_ROWS, and each chunk's columns make
    one batch of ``schema`` (the frame's :func:`_polars_schema`). Otherwise, or when a
    column's export has other types than ``schema`` says, a slice of whole chunks (at least
    POLARS_SLICE_ROWS rows) goes through ``DataFrame.to_arrow``, which aligns the columns'
    chunks (about 25 us per 64K-row slice of six columns: five times the column path)."""
    import polars as pl

    newest = pl.CompatLevel.newest()
    n = df.height
    cols = df.get_columns()
    lengths = cols[0].chunk_lengths() if cols else [n]
    aligned = (
        schema is not None and bool(cols) and all(c.chunk_lengths() == lengths for c in cols[1:])
    )
    start = end = 0
    want = POLARS_SLICE_ROWS
    for m in lengths:
        end += m
        if end - start < want and end < n:
            continue
        window = df.slice(start, end - start)
        batches = _column_batches(window, schema) if aligned else None
        if batches is None:
            aligned = False
            batches = window.to_arrow(compat_level=newest).to_batches()
        yield from batches
        start, want = end, POLARS_WINDOW_ROWS if aligned else POLARS_SLICE_ROWS


def _column_batches(window: Any, schema: pa.Schema) -> list[pa.RecordBatch] | None:
    """The chunks of a Polars frame whose columns share their chunks, one batch each, from
    each column's own Arrow C stream; None when a column's types are not ``schema``'s."""
    try:
        arrays = [pa.chunked_array(c) for c in window.get_columns()]
    except (pa.ArrowException, TypeError, ValueError):
        return None
    if [a.type for a in arrays] != schema.types:
        return None
    chunks = [[len(c) for c in a.chunks] for a in arrays]
    if any(c != chunks[0] for c in chunks[1:]):
        return None
    return [
        pa.RecordBatch.from_arrays([a.chunk(i) for a in arrays], schema=schema)
        for i in range(len(chunks[0]))
    ]


def _is_polars_frame(o: Any) -> bool:
    mod = type(o).__module__
    return type(o).__name__ == "DataFrame" and (mod == "polars" or mod.startswith("polars."))


class ArrowReader(Reader):
    """Polars DataFrame, pyarrow Table / RecordBatchReader, anything with ``__arrow_c_stream__``."""

    def __init__(self, obj: Any, label: str):
        self.obj = obj
        self.label = label
        self.never_waits = not isinstance(obj, pa.RecordBatchReader) and not hasattr(
            obj, "__next__"
        )
        # a Polars frame is exported as it is read (_polars_batches), not here: the schema is
        # that of an empty slice, and the first read reads the frame as it was now (a clone
        # shares its buffers: changing the frame in place later, a rename or an extend, does
        # not change what the run reads)
        self._snap = obj.clone() if _is_polars_frame(obj) else None
        # a Polars frame's buffers cannot change under the run, and the user holds them: a
        # run's outputs may share them (the native engine's sc_extbuf.shared)
        self.shares_buffers = self._snap is not None
        self._first = (
            _polars_schema(self._snap) if self._snap is not None else self._reader().schema
        )
        self.schema = schema_from_arrow(self._first)
        self._used = False

    def _reader(self) -> pa.RecordBatchReader:
        o = self.obj
        if isinstance(o, pa.RecordBatchReader):
            return o
        if isinstance(o, pa.Table):
            return o.to_reader()
        if _is_polars_frame(o):
            df, self._snap = (self._snap if self._snap is not None else o), None
            return pa.RecordBatchReader.from_batches(self._first, _polars_batches(df, self._first))
        # anything else through the C stream interface, zero-copy
        return pa.RecordBatchReader.from_stream(o)

    def column_streams(self, accept: Callable[[pa.Schema], bool]) -> list[Any] | None:
        """A Polars frame not read yet as one Arrow C stream per column, each with the column's
        chunks as they are (``Series.__arrow_c_stream__``), for a reader of C streams that
        takes the columns' chunks in step (the native engine's driver) with no Python object
        per chunk. None, and the frame left to :meth:`arrow_batches`, unless the columns
        share their chunks, export the frame's schema, every batch would pass
        :func:`plain_batches` as it is, and ``accept`` takes the schema; else the frame is
        read now (once, as :meth:`_reader` reads it)."""
        df = self._snap
        if df is None or not _already_plain(self._first) or not accept(self._first):
            return None
        cols = df.get_columns()
        lengths = cols[0].chunk_lengths() if cols else None
        if not cols or any(c.chunk_lengths() != lengths for c in cols[1:]):
            return None
        try:  # the types the columns export (of one row each) are those of the schema
            types = [pa.chunked_array(c.head(1)).type for c in cols]
        except (pa.ArrowException, TypeError, ValueError):
            return None
        if types != self._first.types:
            return None
        self._snap = None
        return [c.__arrow_c_stream__() for c in cols]

    def arrow_batches(self) -> Iterator[pa.RecordBatch | BadRow]:  # type: ignore[override]
        if isinstance(self.obj, pa.RecordBatchReader):
            if self._used:
                raise SourceError(f"{self.label}: a RecordBatchReader can be read only once")
            self._used = True
        yield from plain_batches(self._reader(), self._first, self.schema, self.label)

    def rows(self) -> Iterator[dict[str, Any] | BadRow]:
        for b in self.arrow_batches():
            if isinstance(b, BadRow):
                yield b
            else:
                yield from b.to_pylist()


class IterableReader(Reader):
    """An iterable of dicts; the schema is given or inferred from the first 100 rows.

    An inferred schema has every key of those rows (in first-seen order), each nullable: a
    row without a key has a null there. With a given schema a missing key is a data error
    (the row is dead-lettered)."""

    def __init__(self, obj: Iterable[Any], label: str, schema: Schema | None):
        self.label = label
        self._missing_is_null = schema is None
        self._it = iter(obj)
        self._peeked: list[Any] = list(itertools.islice(self._it, 100))
        if schema is None:
            types: dict[str, DType] = {}
            for r in self._peeked:
                if not isinstance(r, dict):
                    continue
                for k, v in r.items():
                    try:
                        t = dtype_of_value(v)
                    except TypeError:
                        continue
                    u = unify(types.get(k, NULL), t)
                    types[k] = u if u is not None else types.get(k, t)
            if not types:
                raise SourceError(
                    f"{label}: cannot infer a schema (no dict rows at the start); pass schema="
                )
            schema = tuple((k, v if v != NULL else STR) for k, v in types.items())
        self.schema = schema

    def rows(self) -> Iterator[dict[str, Any] | BadRow]:
        for i, r in enumerate(itertools.chain(self._peeked, self._it)):
            pos = f"row {i}"
            if not isinstance(r, dict):
                yield BadRow(pos, f"expected a dict, got {type(r).__name__}", repr(r)[:200])
                continue
            yield _conform_row(
                r, self.schema, pos, repr(r)[:200], missing_is_null=self._missing_is_null
            )


def open_source(spec: SourceSpec) -> Reader:
    """Open a source spec (raises :class:`SourceError` with a clear message)."""
    if spec.kind in GENERATORS:
        return GeneratorReader(spec)
    if spec.arg("watch", False):
        return WatchReader(spec)
    if spec.kind == "parquet":
        return ParquetReader(spec)
    if spec.kind == "csv":
        return CsvReader(spec)
    if spec.kind == "ndjson":
        return NdjsonReader(spec)
    if spec.kind == "object":
        assert spec.obj is not None
        obj, label = spec.obj.obj, spec.obj.label
        schema = spec.arg("schema")
        if isinstance(obj, SourceSpec):
            return open_source(obj)
        if isinstance(obj, (str, os.PathLike)):
            ext = suffix(str(obj))
            kinds = {
                ".parquet": "parquet",
                ".csv": "csv",
                ".json": "ndjson",
                ".ndjson": "ndjson",
                ".jsonl": "ndjson",
            }
            if ext in kinds:
                return open_source(SourceSpec(kinds[ext], (("path", str(obj)),)))
            raise SourceError(
                f"{label}: cannot tell the format of {obj!r}; use parquet()/csv()/ndjson()"
            )
        if isinstance(obj, (pa.Table, pa.RecordBatchReader)) or hasattr(obj, "__arrow_c_stream__"):
            return ArrowReader(obj, label)
        if isinstance(obj, dict):
            raise SourceError(
                f"{label}: a dict is not a stream; pass a list of dicts or a DataFrame"
            )
        if isinstance(obj, Iterable):
            return IterableReader(
                obj,
                label,
                None if schema is None else tuple((k, parse_dtype(v)) for k, v in schema),
            )
        raise SourceError(f"{label}: cannot read a {type(obj).__name__} as a stream")
    raise SourceError(f"unknown source kind {spec.kind!r}")


def merged_serials(base: int, counts: list[int]) -> list[Any]:
    """Serials of each source's rows in a phase of the round-robin merge: round j takes the
    j-th row of every source that has one, in source order (as the reference does)."""
    import numpy as np

    active = [i for i, n in enumerate(counts) if n]
    out: list[Any] = [np.zeros(0, dtype=np.int64) for _ in counts]
    if len({counts[i] for i in active}) == 1:  # every active source has n rows: a stride
        n, m = counts[active[0]], len(active)
        for r, i in enumerate(active):
            out[i] = np.arange(base + r, base + r + n * m, m, dtype=np.int64)
        return out
    for i in active:
        j = np.arange(counts[i], dtype=np.int64)
        s = np.full(counts[i], base, dtype=np.int64)
        for i2 in active:
            s += np.minimum(counts[i2], j)
            if i2 < i:
                s += counts[i2] > j
        out[i] = s
    return out


def locate_serial(base: int, counts: list[int], seq: int) -> tuple[int, int] | None:
    """Which source row has merged serial ``seq`` in a round-robin run starting at ``base``
    (see :func:`merged_serials`): (source index, row index within that run), or None."""
    for i, s in enumerate(merged_serials(base, counts)):
        hit = int(s.searchsorted(seq))
        if hit < len(s) and s[hit] == seq:
            return i, hit
    return None
