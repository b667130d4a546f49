"""Sources read and sinks written by Spark's executors: rows never pass through the driver.

Sources (finite runs):

- ``parquet(...)``: ``spark.read.parquet`` on the executors. A row's order key is its
  position in the data: the files in name order (as the reference reads them), then Spark's
  ``_metadata.row_index`` within the file; serials are made global by each file's row count,
  read from the Parquet footers (metadata, not rows). Up to ``PER_FILE_READS`` files are
  read one ``spark.read`` each, so a file's first serial is a literal in its scan. A file whose schema differs from the
  first file's takes one serial and is a dead letter, as on the reference.
- ``clickstream(rows=N)`` / ``store_sales(rows=N)``: ``spark.range`` over the generator's
  chunks and ``mapInArrow`` calling the same chunk function on the executors: row ``i`` is
  the reference's row ``i``, serial ``i``.

Everything else (notebook frames, iterables, CSV / NDJSON files, throttled sources) comes
from the driver (:func:`.backend.source_table`).

Sinks: ``parquet`` sinks are written by ``DataFrame.write.parquet`` (range-partitioned and
sorted on the order key, so the part files in name order hold the rows in order); ``table``
sinks stay in Spark as a checkpointed DataFrame (:class:`SparkTable`), brought to Polars
only when asked (``run.table(limit=...)``); ``none`` sinks run the job on Spark's ``noop``
writer. Output modes ``complete`` / ``update`` keep the latest row per key, at the key's first
position, by a distributed ``groupBy`` on the key.
"""

from __future__ import annotations

import itertools
import os
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import polars as pl
import pyarrow as pa

from ... import plan as P
from ...errors import StreamcellError
from ...files import DataFile, local_path, scheme, shown, spark_path
from ...sources import CHUNK, GENERATORS, BadRow, ParquetReader, csv_record, ndjson_line
from ...types import Schema, schema_from_arrow
from .expr import qcol, spark_type

PER_FILE_READS = 64
"""Up to this many Parquet files are read one ``spark.read`` each (unioned), so each file's
first serial is a literal; more are read together and a row's file is found from its path."""

LARGE_TABLE_ROWS = 1_000_000
"""``run.table()`` of a Spark table with more rows than this warns (use ``limit=``)."""


@dataclass
class SparkSource:
    """A finite source as a DataFrame of its good rows with their order key ``_o`` =
    ``[serial]``, what the driver knows of it without its rows, and its bad rows.

    A text source learns its bad rows while the job runs: ``observation`` then gathers them
    (side rows ``_k``/``_o``/``_b`` as the operators' are) with the serial of the last good
    row (``last``), and ``bad`` / ``last_good`` are filled from it after the job."""

    df: Any
    count: int  # rows, good and bad: the serials 0 .. count-1
    bad: list[tuple[int, BadRow]]  # (serial, row)
    last_good: int | None  # serial of the last good row
    observation: Any = None
    # the partitions are the files' splits, files in name order and splits in offset order:
    # the rows are in order as they are, with no sort and no shuffle (:func:`_parquet`)
    by_file: bool = False
    scans: int = 0  # by_file: the files, each its own scan (:func:`file_splits`)
    # a Parquet source of local files: (path, first serial, row counts of its row groups) of
    # each good file in order, which the Python workers may read themselves (:mod:`.direct`)
    local: list[tuple[str, int, list[int]]] | None = None


# Arrow types Spark's Parquet reader reads as the streamcell type (others: from the driver)
def _spark_readable(t: pa.DataType) -> bool:
    return (
        pa.types.is_integer(t)
        and t != pa.uint64()
        or pa.types.is_floating(t)
        and t != pa.float16()
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_boolean(t)
        or pa.types.is_date32(t)
        or (pa.types.is_timestamp(t) and t.unit in ("ms", "us"))
    )


def spark_source(
    spark: Any, c: Any, src: P.Source, spec: P.SourceSpec, ordered: bool = False
) -> SparkSource | None:
    """The source read by the executors, or None when it must come from the driver.
    ``ordered``: the rows reach their sinks unshuffled, so a Parquet source's partitions may
    stand in serial order (``SparkSource.by_file``)."""
    if src.rate is not None:  # throttling paces rows the driver hands out
        return None
    if spec.kind in GENERATORS and spec.arg("rows") is not None:
        return _generator(spark, c.schemas[src.step_id], spec)
    path = str(spec.arg("path"))
    if spec.kind in P.FILE_KINDS and not spec.arg("watch", False) and not spark_reads(spark, path):
        warnings.warn(
            f"{spec.kind}({shown(path)!r}): Spark has no filesystem for {scheme(path)}:// "
            f"({NO_FS_HINT}); the notebook process reads these rows (through pyarrow) and "
            "hands them to Spark",
            stacklevel=2,
        )
        return None
    if spec.kind == "parquet" and not spec.arg("watch", False):
        reader = c.readers[src.step_id]
        assert isinstance(reader, ParquetReader)
        return _parquet(spark, c.schemas[src.step_id], reader, ordered)
    if spec.kind in ("csv", "ndjson") and not spec.arg("watch", False):
        reader = c.readers[src.step_id]
        return _text(spark, c.schemas[src.step_id], reader, spec.kind)
    return None


_readable: dict[str, bool] = {}

NO_FS_HINT = "for S3: hadoop-aws in spark.jars.packages and spark.hadoop.fs.s3a.*"
"""What a Spark session needs to read and write a URI scheme it has no filesystem for."""


def spark_reads(spark: Any, path: str) -> bool:
    """Whether Spark has a filesystem for ``path``'s scheme (a plain path: always)."""
    s = scheme(path)
    if s is None or s == "file":
        return True
    key = f"{id(spark.sparkContext)}:{s}"  # a reconfigured session may have other jars
    if key not in _readable:
        jvm = spark.sparkContext._jvm
        try:
            jvm.org.apache.hadoop.fs.FileSystem.getFileSystemClass(
                s, spark.sparkContext._jsc.hadoopConfiguration()
            )
            _readable[key] = True
        except Exception:  # py4j's error: "No FileSystem for scheme"
            _readable[key] = False
    return _readable[key]


def _decoded_name() -> Any:
    """The file name of a row read by a Spark file source (Spark's paths are URL-encoded:
    'a b' as 'a%20b'; a '+' is not an encoded space)."""
    from pyspark.sql import functions as F

    path = F.url_decode(F.replace(F.col("_metadata.file_path"), F.lit("+"), F.lit("%2B")))
    return F.element_at(F.split(path, "/"), -1)


_obs_ids = itertools.count()


def _text(spark: Any, schema: Schema, reader: Any, kind: str) -> SparkSource | None:
    """CSV / NDJSON files read as lines by ``spark.read.text`` on the executors and parsed
    there by the reference's own functions (:func:`streamcell.sources.csv_record`,
    :func:`~streamcell.sources.ndjson_line`), so rows and dead letters (file:line, reason,
    raw text) are the reference's exactly.

    Positions are computed distributedly in two passes. A first, small job counts the lines
    of each file block (Spark's split of a file: ``_metadata.file_block_start``), its data
    lines (not blank, not the header) and whether its first line is blank; the driver turns
    these counts into each block's first line number and first serial (files in name order,
    blocks by start). The second pass (``mapInArrow`` over the unshuffled scan, where a
    block's lines arrive in order) numbers each line from its block's start."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    from .backend import SIDE_DDL, ddl
    from .ops import DEAD, LIVE, SIDE_FIELDS, STATS, arrow_schema

    files = list(reader.files)
    if len({f.name for f in files}) != len(files):
        return None
    header = kind == "csv" and bool(reader.header)
    rank = {f.name: r for r, f in enumerate(files)}
    lines = spark.read.text([f.spark_uri for f in files]).select(
        "value", _decoded_name().alias("_f"), F.col("_metadata.file_block_start").alias("_bs")
    )
    blank = (
        F.col("value") == F.lit("")
        if kind == "csv"
        else F.length(F.regexp_replace("value", r"\s", "")) == 0
    )
    counts = (
        lines.withColumn("_m", F.monotonically_increasing_id())
        .withColumn("_nb", (~blank).cast("int"))
        .groupBy("_f", "_bs")
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.sum("_nb").alias("nb"),
            F.min_by("_nb", "_m").alias("first_nb"),
        )
        .collect()
    )
    if any(r["_f"] not in rank for r in counts):
        return None
    blocks: dict[tuple[str, int], tuple[int, int]] = {}  # block -> (first line, first serial)
    seq = 0
    line_of: dict[str, int] = {}
    for r in sorted(counts, key=lambda r: (rank[r["_f"]], r["_bs"])):
        f = r["_f"]
        line = line_of.get(f, 0)
        blocks[(f, int(r["_bs"]))] = (line, seq)
        line_of[f] = line + int(r["n"])
        data = int(r["nb"])
        if header and line == 0 and r["first_nb"]:
            data -= 1
        seq += data
    out_schema = arrow_schema(schema, SIDE_FIELDS)

    def fn(batches: Any) -> Any:
        import csv
        import pickle

        at: tuple[str, int] | None = None
        line = serial = 0
        good = bad = 0
        for b in batches:
            live: list[dict[str, Any]] = []
            side: list[dict[str, Any]] = []
            values = b.column(0).to_pylist()
            for text, f, bs in zip(values, b.column(1).to_pylist(), b.column(2).to_pylist()):
                if at != (f, bs):
                    at = (f, bs)
                    line, serial = blocks[at]
                line += 1
                if (header and line == 1) or (text == "" if kind == "csv" else not text.strip()):
                    continue
                pos = f"{f}:{line}"
                if kind == "csv":
                    row = csv_record(next(csv.reader([text])), schema, pos)
                else:
                    row = ndjson_line(text, schema, pos)
                if isinstance(row, BadRow):
                    side.append({"_o": [serial], "_k": DEAD, "_b": pickle.dumps(row)})
                    bad += 1
                else:
                    row["_o"] = [serial]
                    row["_k"] = LIVE
                    live.append(row)
                    good += 1
                serial += 1
            if live or side:
                yield pa.RecordBatch.from_pylist(live + side, schema=out_schema)
        stats = {"rows_in": 0, "rows_out": good, "filtered": 0, "late": 0, "dead": bad}
        yield pa.RecordBatch.from_pylist(
            [{"_o": [], "_k": STATS, "_b": pickle.dumps(stats)}], schema=out_schema
        )

    parsed = lines.mapInArrow(fn, ddl(schema, SIDE_DDL))
    obs = Observation(f"sc_text{next(_obs_ids)}")
    parsed = parsed.observe(
        obs,
        F.collect_list(F.when(F.col("_k") != F.lit(LIVE), F.struct("_k", "_o", "_b"))).alias(
            "side"
        ),
        F.max(F.when(F.col("_k") == F.lit(LIVE), F.col("_o")[0])).alias("last"),
    )
    df = parsed.filter(F.col("_k") == F.lit(LIVE)).drop("_k", "_b")
    return SparkSource(df, seq, [], None, obs)


def _generator(spark: Any, schema: Schema, spec: P.SourceSpec) -> SparkSource:
    from .backend import conform_to_spark, ddl, order_array
    from .ops import arrow_schema

    total = int(spec.arg("rows"))
    chunks = (total + CHUNK - 1) // CHUNK
    target = arrow_schema(schema)
    fn = GENERATORS[spec.kind]

    def gen(batches: Any) -> Any:
        for b in batches:
            for c in b.column(0).to_pylist():
                n = min(CHUNK, total - c * CHUNK)
                rows = conform_to_spark(fn(spec, c, CHUNK).slice(0, n), target)
                seqs = pa.array(range(c * CHUNK, c * CHUNK + n), type=pa.int64())
                yield pa.RecordBatch.from_arrays(
                    [*rows.columns, order_array(seqs)], names=[*target.names, "_o"]
                )

    parts = max(1, min(chunks, spark.sparkContext.defaultParallelism * 2))
    ids = spark.range(0, chunks, 1, parts) if chunks else spark.range(0)
    df = ids.mapInArrow(gen, ddl(schema, "`_o` array<bigint>"))
    return SparkSource(df, total, [], total - 1 if total else None)


def keep_bounded(cache: dict[Any, Any], key: Any, value: Any, most: int) -> None:
    """``cache[key] = value`` in a kernel-wide cache of at most ``most`` entries (all dropped
    when it is full: the entries are cheap to remake and a notebook uses few at a time)."""
    if len(cache) >= most:
        cache.clear()
    cache[key] = value


_SPARK_SCHEMAS: dict[tuple[Any, ...], Any] = {}
"""Spark's schema of a Parquet file, by what Spark infers it from: inferring it reads a
footer in a Spark job (~80 ms), once per physical schema in the kernel, not once per run."""
_SCHEMA_CONF = (
    "spark.sql.parquet.binaryAsString",
    "spark.sql.parquet.int96AsTimestamp",
    "spark.sql.parquet.inferTimestampNTZ.enabled",
    "spark.sql.timestampType",
    "spark.sql.parquet.fieldId.read.enabled",
)


def _physical(meta: Any) -> tuple[Any, ...]:
    """What Spark infers a Parquet file's schema from (``meta``: a ``pq.ParquetFile``)."""
    kv = meta.metadata.metadata or {}
    columns = tuple(
        (
            c.path,
            c.physical_type,
            str(c.logical_type),
            c.converted_type,
            c.max_definition_level,
            c.max_repetition_level,
        )
        for c in meta.schema
    )
    ids = tuple(
        f.metadata.get(b"PARQUET:field_id") if f.metadata else None for f in meta.schema_arrow
    )
    return (meta.schema_arrow, columns, ids, kv.get(b"org.apache.spark.sql.parquet.row.metadata"))


def _read_parquet(spark: Any, f: DataFile, key: tuple[Any, ...]) -> Any:
    """``spark.read.parquet`` of one file, with the Spark schema known for its physical schema
    and the session's settings (``key``) when a file like it was read before (no inference)."""
    known = _SPARK_SCHEMAS.get(key)
    if known is not None:
        return spark.read.schema(known).parquet(f.spark_uri)
    read = spark.read.parquet(f.spark_uri)
    keep_bounded(_SPARK_SCHEMAS, key, read.schema, 257)
    return read


_SOURCE_FRAMES: dict[tuple[Any, ...], Any] = {}
"""A Parquet source's DataFrame (the union of its per-file scans, ``_o`` included) by its
session, files and their sizes and modification times, schema and read settings: building it
costs one ``spark.read`` and a few dozen JVM calls per file (~40 ms a file here), on every run
of a cell, while re-running a cell over the same files is the notebook's common case. A file
that changed (size or time) makes a new key; the session is compared by identity (the
frame's own ``sparkSession``)."""


def _stamp(f: DataFile) -> tuple[int, int] | None:
    """A file's size and modification time (ns), or None when its filesystem gives no time."""
    try:
        if f.fs is None:
            st = os.stat(f.path)
            return st.st_size, st.st_mtime_ns
        info = f.fs.get_file_info(f.path)
    except Exception:  # no stamp, no reuse: the run reads the files as before
        return None
    if info.mtime_ns is None or info.size is None:
        return None
    return info.size, info.mtime_ns


def _frame_key(
    spark: Any,
    files: list[DataFile],
    bases: dict[str, int],
    physical: dict[DataFile, tuple[Any, ...]],
    schema: Schema,
    conf: tuple[Any, ...],
) -> tuple[Any, ...] | None:
    stamps = []
    for f in files:
        st = _stamp(f)
        if st is None:
            return None
        stamps.append((f.spark_uri, bases[f.name], st, physical[f]))
    return (id(spark), tuple(stamps), tuple(schema), conf)


def _source_frame(spark: Any, key: tuple[Any, ...] | None) -> Any:
    got = _SOURCE_FRAMES.get(key) if key is not None else None
    return got if got is not None and got.sparkSession is spark else None


def _parquet(
    spark: Any, schema: Schema, reader: ParquetReader, ordered: bool = False
) -> SparkSource | None:
    """Files in name order; a file's rows get serials ``base + _metadata.row_index``. With
    ``ordered``, the partitions are in serial order and each partition's rows too
    (``SparkSource.by_file``): each file is its own scan, the union lists the scans'
    partitions in file order, a scan's partitions are the file's splits in offset order (Spark
    sorts splits by length, stably, and every split but the last has the same length), and a
    split's rows are read in order."""
    from pyspark.sql import functions as F

    groups: dict[pa.Schema, list[DataFile]] = {}  # files of one physical schema, read together
    good: set[DataFile] = set()
    physical: dict[DataFile, tuple[Any, ...]] = {}
    bases: dict[str, int] = {}
    bad: list[tuple[int, BadRow]] = []
    local: list[tuple[str, int, list[int]]] = []
    seq = 0
    last_good: int | None = None
    for f in reader.files:
        meta = f.parquet()
        arrow = meta.schema_arrow
        if not all(_spark_readable(x.type) for x in arrow):
            return None
        fs = schema_from_arrow(arrow)
        if fs != schema:
            reason = f"file schema differs from the first file's: {fs} vs {schema}"
            bad.append((seq, BadRow(str(f), reason, "")))
            seq += 1
            continue
        if f.name in bases or "/" in f.name:
            return None
        groups.setdefault(arrow, []).append(f)
        good.add(f)
        physical[f] = _physical(meta)
        bases[f.name] = seq
        n = meta.metadata.num_rows
        if f.fs is None:
            md = meta.metadata
            sizes = [md.row_group(i).num_rows for i in range(md.num_row_groups)]
            local.append((os.path.abspath(f.path), seq, sizes))
        seq += n
        if n:
            last_good = seq - 1
    cols = [qcol(n).cast(spark_type(t)).alias(n) for n, t in schema]
    if not groups:
        from .backend import ddl

        return SparkSource(
            spark.createDataFrame([], ddl(schema, "`_o` array<bigint>")), seq, bad, None
        )
    if len(bases) <= PER_FILE_READS:  # each file's base a literal: no per-row path parsing
        files = [f for f in reader.files if bases.get(f.name) is not None and f in good]
        conf = tuple(spark.conf.get(k, None) for k in _SCHEMA_CONF)
        key = _frame_key(spark, files, bases, physical, schema, conf)
        df = _source_frame(spark, key)
        if df is None:
            for f in files:  # in name order: the union's partitions follow the files
                o = F.array((F.lit(bases[f.name]) + F.col("_metadata.row_index")).cast("bigint"))
                part = _read_parquet(spark, f, (*physical[f], conf)).select(*cols, o.alias("_o"))
                df = part if df is None else df.unionByName(part)
            if key is not None:
                keep_bounded(_SOURCE_FRAMES, key, df, 32)
        direct = local if len(local) == len(files) else None
        return SparkSource(df, seq, bad, last_good, by_file=ordered, scans=len(files), local=direct)
    base_of = F.create_map(*[x for k, v in bases.items() for x in (F.lit(k), F.lit(v))])
    name = _decoded_name()
    base = F.element_at(base_of, name)
    checked = F.when(base.isNotNull(), base).otherwise(
        F.raise_error(F.concat(F.lit("streamcell: unexpected Parquet file "), name))
    )
    order = F.array((checked + F.col("_metadata.row_index")).cast("bigint")).alias("_o")
    df = None
    for files in groups.values():
        part = spark.read.parquet(*[f.spark_uri for f in files]).select(*cols, order)
        df = part if df is None else df.unionByName(part)
    return SparkSource(df, seq, bad, last_good, local=local if len(local) == len(good) else None)


MIN_SPLITS = "spark.sql.files.minPartitionNum"
_split_lock = threading.Lock()
_split_users = 0  # file-by-file jobs in their action now
_split_ours = False  # MIN_SPLITS was set by file_splits (not the user's)


@contextmanager
def file_splits(spark: Any, scans: int) -> Iterator[None]:
    """While a job over ``scans`` per-file scans (``SparkSource.by_file``) is planned and run,
    each file is cut into about ``parallelism / scans`` splits, at least one.

    Spark sizes a scan's splits as if it were the job's only scan: each file read alone is cut
    into about ``defaultParallelism`` splits. A union of per-file scans then runs files x cores
    small tasks (4 files on 2 cores: 8 tasks, each reading a footer and a file's half) where
    one scan of the folder runs 2; the job was ~12% slower for it here. ``MIN_SPLITS`` is read
    when the scan's partitions are made, in the action: set while such jobs run and unset
    when the last one ends (a user's own setting is left alone). It is the session's setting:
    other jobs planned meanwhile get fewer splits too (speed, not results)."""
    global _split_users, _split_ours
    if scans <= 0:
        yield
        return
    conf = spark.conf
    with _split_lock:  # runs on threads: the first sets it, the last one out unsets it
        if _split_users == 0:
            _split_ours = conf.get(MIN_SPLITS, None) is None
            if _split_ours:
                cores = spark.sparkContext.defaultParallelism
                conf.set(MIN_SPLITS, str(max(1, -(-cores // scans))))
        _split_users += 1
    try:
        yield
    finally:
        with _split_lock:
            _split_users -= 1
            if _split_users == 0 and _split_ours:
                try:
                    conf.unset(MIN_SPLITS)
                except Exception:  # the session is gone: nothing to put back
                    pass


def merged_order(df: Any, i: int, counts: list[int]) -> Any:
    """``_o`` of source ``i``'s rows in the round-robin merge of the sources (the serials of
    :func:`streamcell.sources.merged_serials`, computed by Spark per row)."""
    from pyspark.sql import functions as F

    j = F.col("_o")[0]
    s = F.lit(0).cast("bigint")
    for i2, n in enumerate(counts):
        if not n:
            continue
        s = s + F.least(F.lit(n).cast("bigint"), j)
        if i2 < i:
            s = s + F.when(j < F.lit(n), 1).otherwise(0)
    return df.withColumn("_o", F.array(s))


def merged_serial(i: int, j: int, counts: list[int]) -> int:
    """The merged serial of source ``i``'s row ``j`` (one row: :func:`merged_order`)."""
    return sum(min(n, j) + (1 if i2 < i and j < n else 0) for i2, n in enumerate(counts) if n)


# --------------------------------------------------------------------------------- sinks


def latest_per_key(df: Any, key: tuple[str, ...] | None, names: list[str]) -> Any:
    """What an upsert table holds (``TableStore``): each key's last row, at the key's first
    position (its order key becomes the key's first ``_o``). Without a key: every row."""
    from pyspark.sql import functions as F

    if key is None:
        return df
    if not key:  # one row: the last (none when no row came)
        one = df.select(
            F.min("_o").alias("_o"), F.max_by(F.struct(*[qcol(n) for n in names]), "_o").alias("_r")
        ).filter(F.col("_o").isNotNull())
        return one.select(*[F.col("_r")[n].alias(n) for n in names], "_o")
    rest = [n for n in names if n not in key]
    agg = [F.min("_o").alias("_o")]
    if rest:
        agg.append(F.max_by(F.struct(*[qcol(n) for n in rest]), "_o").alias("_r"))
    dtypes = dict(df.dtypes)
    floats = [k for k in key if dtypes.get(k) in ("double", "float")]
    if floats:  # the key's first row's values: Spark's groupBy writes every zero key as 0.0
        agg.append(F.min_by(F.struct(*[qcol(k) for k in floats]), "_o").alias("__sc_key"))
    out = df.groupBy(*[qcol(k) for k in key]).agg(*agg)

    def col(n: str) -> Any:
        if n in floats:
            return F.col("__sc_key")[n].alias(n)
        return qcol(n) if n in key else F.col("_r")[n].alias(n)

    return out.select(*[col(n) for n in names], "_o")


def in_order(df: Any, parts: int) -> Any:
    """Rows range-partitioned and sorted on ``_o``: partition ``p`` holds rows before those
    of partition ``p + 1``, each partition in order (a distributed sort)."""
    from pyspark.sql import functions as F

    # the first element leads: a long sort prefix, so rows rarely compare whole arrays
    o0 = F.col("_o")[0]
    return df.repartitionByRange(parts, o0, "_o").sortWithinPartitions(o0, "_o")


def spark_writes(schema: Schema, path: str, spark: Any) -> bool:
    """Whether Spark writes a Parquet sink at ``path`` as streamcell would: Spark has no
    Parquet form of a column of nulls, and may have no filesystem for the URI's scheme (then
    a warning says that the notebook process writes it, through pyarrow)."""
    if any(t.name == "null" for _, t in schema):
        return False
    if spark_reads(spark, path):
        return True
    warnings.warn(
        f"parquet sink {shown(path)!r}: Spark has no filesystem for {scheme(path)}:// "
        f"({NO_FS_HINT}); the notebook process writes it (through pyarrow)",
        stacklevel=2,
    )
    return False


def write_parquet(df: Any, path: str, names: list[str]) -> None:
    """Write ``df`` (sorted as :func:`in_order` leaves it) as the directory's part files,
    replacing what a previous write put there."""
    df.select(*[qcol(n) for n in names]).write.mode("overwrite").parquet(spark_path(path))


def written_rows(path: str, spark: Any) -> int:
    """The rows of the Parquet part files in the local folder ``path`` (their footers), as
    :func:`write_parquet` left it: a relative path is the JVM's, from its working directory
    (which a notebook's ``os.chdir`` does not move)."""
    import pyarrow.parquet as pq

    local = local_path(path)
    assert local is not None
    if not os.path.isabs(local):
        local = os.path.join(
            spark.sparkContext._jvm.java.lang.System.getProperty("user.dir"), local
        )
    return sum(
        pq.ParquetFile(os.path.join(local, name)).metadata.num_rows
        for name in os.listdir(local)
        if name.endswith(".parquet") and not name.startswith(("_", "."))
    )


class SparkTable:
    """A table sink's rows kept in Spark (a checkpointed DataFrame in the sink's order), for
    :class:`streamcell.stores.TableStore`: the notebook receives rows only when it asks."""

    def __init__(self, ordered: Any, schema: Schema, height: int, name: str):
        # the rows with their order key ``_o`` (for the first rows in order), and the
        # table's columns alone (Spark SQL reads them: ``sc.sql``)
        self.ordered = ordered
        self.df = ordered.select(*[qcol(n) for n, _ in schema])
        self.schema = schema
        self.height = height
        self.name = name
        self._lock = threading.Lock()
        self._full: pl.DataFrame | None = None

    def to_polars(self, limit: int | None = None) -> pl.DataFrame:
        """The first ``limit`` rows (all when None) as a Polars DataFrame."""
        from .backend import to_polars

        if self._full is not None:  # brought to the notebook once already
            return self._full if limit is None else self._full.head(max(0, limit))
        from .session import alive

        if not alive(self.df.sparkSession):
            raise StreamcellError(
                f"table {self.name!r} was kept in a Spark session that has since stopped "
                "(configure_spark or a restarted session); run the cell again"
            )
        if limit is not None and limit < self.height:
            # the first rows by order key: a limit alone gathers each partition's first rows
            # in whatever order they arrive (on a cluster, not the partitions' order)
            names = [qcol(n) for n, _ in self.schema]
            first = self.ordered.orderBy("_o").limit(max(0, limit)).select(*names)
            return to_polars(first.toArrow(), self.schema)
        with self._lock:
            if self._full is None:
                if self.height > LARGE_TABLE_ROWS:
                    warnings.warn(
                        f"table {self.name!r} holds {self.height:,} rows in Spark; bringing "
                        "them all into the notebook (pass limit= to take the first rows)",
                        ResourceWarning,
                        stacklevel=4,
                    )
                self._full = to_polars(self.df.toArrow(), self.schema)
            return self._full


def reads_on_spark(spec: P.SourceSpec) -> bool:
    """Whether a source of this spec is read by Spark's executors in a finite run."""
    if spec.kind in GENERATORS:
        return spec.arg("rows") is not None
    return spec.kind == "parquet" and not spec.arg("watch", False)


__all__ = [
    "LARGE_TABLE_ROWS",
    "SparkSource",
    "SparkTable",
    "in_order",
    "file_splits",
    "written_rows",
    "latest_per_key",
    "merged_order",
    "merged_serial",
    "reads_on_spark",
    "spark_source",
    "spark_writes",
    "write_parquet",
]
