"""Sketches of a Spark DataFrame column: streamcell's native sketches, built per partition.

:func:`sketch_column` runs ``mapInArrow`` over the column: each partition builds one of
streamcell's sketches (Θ, HLL, KLL, frequent items) from its Arrow batches and ships the
serialized bytes (Apache DataSketches binary formats) to the driver, which merges the partial
sketches into one. The result is streamcell's own sketch object; its ``to_bytes()`` can be
handed to Spark 4's DataSketches-backed SQL functions (``theta_union``, ``hll_union``,
``kll_sketch_merge_double``, ``theta_sketch_estimate``...), and Spark's sketch bytes can be
read back with the sketch class's ``from_bytes`` (see ``tests/spark/test_spark_sketch.py``).

Hashing follows DataSketches (MurmurHash3, seed 9001; int64 values hashed as 8 bytes, strings
as UTF-8), so a value counted by Spark and by streamcell is the same item. Spark's sketch
functions hash ``bigint`` and ``string`` columns that way; cast narrower ints to ``bigint``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa

KINDS = ("theta", "hll", "kll", "frequent")


def new_sketch(kind: str, params: dict[str, Any], arrow_type: pa.DataType) -> Any:
    from streamcell import sketches as S

    if kind == "theta":
        return S.ThetaSketch(int(params.get("lg_k", 12)))
    if kind == "hll":
        return S.HllSketch(int(params.get("lg_k", 12)))
    if kind == "kll":
        cls = S.KllFloatsSketch if params.get("type", "double") == "float" else S.KllDoublesSketch
        return cls(int(params.get("k", 200)))
    if kind == "frequent":
        lg = int(params.get("lg_max_map_size", 10))
        is_str = pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type)
        return (S.FrequentStringsSketch if is_str else S.FrequentItemsSketch)(lg)
    raise ValueError(kind)


def _load(kind: str, params: dict[str, Any], arrow_type: pa.DataType, blob: bytes) -> Any:
    from streamcell import sketches as S

    if kind == "theta":
        return S.CompactThetaSketch.from_bytes(blob)
    if kind == "hll":
        return S.HllSketch.from_bytes(blob)
    return type(new_sketch(kind, params, arrow_type)).from_bytes(blob)  # type: ignore[union-attr]


def _check(df: Any, col: str, kind: str, params: dict[str, Any]) -> pa.DataType:
    from pyspark.sql import types as T

    if kind not in KINDS:
        raise ValueError(f"sketch_column: kind must be one of {', '.join(KINDS)}, not {kind!r}")
    if col not in df.columns:
        raise ValueError(f"sketch_column: no column {col!r}; columns: {', '.join(df.columns)}")
    allowed = {
        "theta": {"lg_k"},
        "hll": {"lg_k"},
        "kll": {"k", "type"},
        "frequent": {"lg_max_map_size"},
    }[kind]
    extra = set(params) - allowed
    if extra:
        raise ValueError(
            f"sketch_column({kind!r}): unknown parameter(s) {sorted(extra)}; "
            f"allowed: {sorted(allowed)}"
        )
    t = df.schema[col].dataType
    numeric = (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType, T.DoubleType)
    if kind == "kll" and not isinstance(t, numeric):
        raise ValueError(f"sketch_column('kll'): column {col!r} is {t.simpleString()}, not numeric")
    if kind == "frequent" and not isinstance(
        t, (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.StringType)
    ):
        raise ValueError(
            f"sketch_column('frequent'): column {col!r} is {t.simpleString()}; "
            "frequent items count integers or strings"
        )
    if not isinstance(t, (*numeric, T.StringType, T.BinaryType)):
        raise ValueError(
            f"sketch_column({kind!r}): column {col!r} is {t.simpleString()}; "
            "sketch numbers, strings or binary"
        )
    if isinstance(t, (T.ByteType, T.ShortType, T.IntegerType)):
        return pa.int64()  # hashed as int64, like Spark's bigint
    if isinstance(t, T.FloatType) and kind != "kll":
        return pa.float64()
    from pyspark.sql.pandas.types import to_arrow_type

    return to_arrow_type(t)


def sketch_column(df: Any, col: str, kind: str, **params: Any) -> Any:
    """Sketch ``df[col]`` with one of streamcell's sketches, built per Spark partition.

    ``kind``: ``"theta"`` (``lg_k=12``), ``"hll"`` (``lg_k=12``, HLL_8), ``"kll"``
    (``k=200``, ``type="double"|"float"``) or ``"frequent"`` (``lg_max_map_size=10``; int or
    string column). Nulls are skipped (as Spark's sketch aggregates do). Returns the merged
    sketch: a ``CompactThetaSketch``, ``HllSketch``, ``KllDoublesSketch`` /
    ``KllFloatsSketch`` or ``FrequentItemsSketch`` / ``FrequentStringsSketch``.
    """
    arrow_type = _check(df, col, kind, params)
    from pyspark.sql import functions as F

    from .expr import qcol

    kll_float = kind == "kll" and params.get("type", "double") == "float"
    if pa.types.is_integer(arrow_type):
        c = qcol(col).cast("bigint")
    elif pa.types.is_floating(arrow_type):
        c = qcol(col).cast("float" if kll_float else "double")
    else:
        c = qcol(col)
    if kind == "kll" and not kll_float:
        c = qcol(col).cast("double")
        arrow_type = pa.float64()
    elif kll_float:
        arrow_type = pa.float32()

    def per_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        sk = new_sketch(kind, params, arrow_type)
        for b in batches:
            values = b.column(0).drop_null()
            if len(values):
                if kind == "frequent" and not pa.types.is_string(values.type):
                    sk.update_batch(values.cast(pa.int64()).to_numpy())
                else:
                    sk.update_batch(values)
        yield pa.RecordBatch.from_arrays([pa.array([sk.to_bytes()], pa.binary())], ["sketch"])

    parts = df.select(c.alias("v")).where(F.col("v").isNotNull())
    blobs = [r[0] for r in parts.mapInArrow(per_partition, "sketch binary").collect()]
    return merge_bytes(kind, blobs, arrow_type, **params)


def merge_bytes(kind: str, blobs: list[bytes], arrow_type: Any = None, **params: Any) -> Any:
    """Merge serialized partial sketches of one kind (on the driver)."""
    from streamcell import sketches as S

    arrow_type = arrow_type if arrow_type is not None else pa.int64()
    if kind == "theta":
        return S.theta_union(
            [S.CompactThetaSketch.from_bytes(b) for b in blobs], lg_k=int(params.get("lg_k", 12))
        )
    if kind == "hll":
        lg_k = int(params.get("lg_k", 12))
        if not blobs:
            return S.HllSketch(lg_k)
        return S.hll_union([S.HllSketch.from_bytes(b) for b in blobs], lg_k=lg_k)
    out = new_sketch(kind, params, arrow_type)
    for b in blobs:
        out.merge(_load(kind, params, arrow_type, b))
    return out
