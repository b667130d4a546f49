"""Arrow in and out: the Arrow types of the plan's types, exported runtime batches decoded
into frames (list columns from the runtime's encoding), and source batches conformed to the
types the runtime reads.
"""

from __future__ import annotations

import functools
from typing import Any

import polars as pl
import pyarrow as pa

from ...stores import uninterrupted
from ...types import DATE, NULL, DType, Schema, polars_schema
from .typecodes import _lt

_ARROW = {
    "int": pa.int64(),
    "float": pa.float64(),
    "bool": pa.bool_(),
    "str": pa.large_string(),
    "datetime": pa.timestamp("us"),
    "date": pa.date32(),
    "null": pa.null(),
}


def _arrow_type(t: DType) -> pa.DataType:
    if t.name == "list":
        assert t.inner is not None
        return pa.large_list(_arrow_type(t.inner))
    return _ARROW[t.name]


def _arrow_target(schema: Schema) -> pa.Schema:
    return pa.schema([pa.field(n, _arrow_type(t)) for n, t in schema])


def _decode_list(a: pa.Array, t: DType) -> pa.Array:
    """An exported list column (encoded values, lists.h) as a large-list array."""
    from ... import _runtime as R

    assert t.inner is not None
    inner = _arrow_type(t.inner)
    n, valid, offs, m, evalid, values, soffs, sdata = R.decode_list(a, _lt(t.inner))
    vb = pa.py_buffer(evalid)
    if t.inner.name == "null":
        child = pa.nulls(m)
    elif t.inner.name == "list":  # the elements are encoded lists: decode them in turn
        enc = pa.Array.from_buffers(
            pa.large_binary(), m, [vb, pa.py_buffer(soffs), pa.py_buffer(sdata or b"")]
        ).cast(pa.binary())
        child = _decode_list(enc, t.inner)
    elif t.inner.name == "str":
        child = pa.Array.from_buffers(
            inner, m, [vb, pa.py_buffer(soffs), pa.py_buffer(sdata or b"")]
        )
    else:
        child = pa.Array.from_buffers(inner, m, [vb, pa.py_buffer(values or b"")])
    return pa.Array.from_buffers(
        pa.large_list(inner),
        n,
        [None if valid is None else pa.py_buffer(valid), pa.py_buffer(offs)],
        children=[child],
    )


def to_frame(rb: pa.RecordBatch | list[pa.RecordBatch], schema: Schema) -> pl.DataFrame:
    """Exported runtime batches (hidden columns first) as one frame of ``schema``."""
    data: Any = rb
    if isinstance(rb, list):
        data = rb[0] if len(rb) == 1 else pa.Table.from_batches(rb)
    cols = []
    for k, (_, t) in enumerate(schema):
        a = data.column(k + 2)
        if t.name == "list":
            chunks = a.chunks if isinstance(a, pa.ChunkedArray) else [a]
            a = pa.chunked_array([_decode_list(x, t) for x in chunks], type=_arrow_type(t))
        elif t == DATE:
            a = a.cast(pa.int32()).cast(pa.date32())
        elif t == NULL:
            a = pa.nulls(len(a))
        cols.append(a)
    if not schema:
        return pl.DataFrame()
    tbl = pa.Table.from_arrays(cols, names=[f"c{k}" for k in range(len(cols))])
    # the runtime's chunks become the frame's chunks: adopted, not copied into one. Polars
    # reads an Arrow C stream in one call (its from_arrow imports chunk by chunk through
    # Python, ~4x the CPU: ~6 us per chunk and column). The names are set afterwards: a C
    # stream's names are C strings, which would cut a name at a NUL
    return _named(pl.DataFrame(_CStream(tbl)), schema)


_DIRECT = frozenset({"int", "float", "bool", "str", "datetime"})


def direct_frames(schema: Schema) -> bool:
    """Whether frames of ``schema`` can be read from the runtime's batches as they are
    (:func:`stream_frame`): every column int, float, bool, str or datetime."""
    return bool(schema) and all(t.name in _DIRECT for _, t in schema)


def stream_frame(batches: Any, schema: Schema) -> pl.DataFrame:
    """Runtime output batches kept in C (an ``OutBatches``) as one frame of ``schema``
    (:func:`direct_frames`): Polars reads their visible columns as one Arrow C stream, each
    batch a chunk, with no pyarrow object in between."""
    df = pl.DataFrame(batches)  # moves them out of C
    # off the main thread a SIGINT's abort of the naming and cast runs them again rather
    # than lose the rows just imported
    return uninterrupted(lambda: _named(df, schema))


def _named(df: pl.DataFrame, schema: Schema) -> pl.DataFrame:
    """A frame read from a C stream (columns c0, c1, ...) with ``schema``'s names and types."""
    names, want = _polars_target(schema)
    df.columns = names
    return df if df.dtypes == want else df.cast(dict(zip(names, want)))  # type: ignore[arg-type]


@functools.lru_cache(maxsize=256)
def _polars_target(schema: Schema) -> tuple[list[str], list[pl.DataType]]:
    """``schema``'s column names and Polars types (once per schema: a run builds a frame per
    few hundred thousand rows, each checked against them)."""
    return [n for n, _ in schema], list(polars_schema(schema).values())


class _CStream:
    """A table seen only through ``__arrow_c_stream__``."""

    __slots__ = ("tbl",)

    def __init__(self, tbl: pa.Table):
        self.tbl = tbl

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        return self.tbl.__arrow_c_stream__(requested_schema)


def _conform_batch(
    b: pa.RecordBatch, target: pa.Schema, plan: tuple[pa.DataType | None, ...] | None
) -> pa.RecordBatch:
    """``b`` with the column types the runtime reads for ``target``, by ``plan``: the
    :func:`_conform_plan` of ``b``'s schema, which the caller keeps (a frame's chunks share one
    schema, and checking each column of every chunk costs more than the runtime's import)."""
    if plan is None:
        return b
    arrays = [b.column(k) if t is None else b.column(k).cast(t) for k, t in enumerate(plan)]
    return pa.RecordBatch.from_arrays(arrays, names=target.names)


def _conform_plan(have: pa.Schema, target: pa.Schema) -> tuple[pa.DataType | None, ...] | None:
    """Per column of ``target``: None where the column of ``have`` is read as it is, else the
    type to cast it to; None for the whole when every column is read as it is."""
    plan: list[pa.DataType | None] = []
    for f, h in zip(target, have):
        t = h.type
        as_is = (
            t == f.type
            or (f.type == pa.large_string() and t in (pa.string(), pa.string_view()))  # u / vu
            or (pa.types.is_timestamp(t) and pa.types.is_timestamp(f.type) and t.unit == "us")
            or (pa.types.is_large_list(f.type) and _list_readable(t, f.type.value_type))
        )
        plan.append(None if as_is else f.type)
    if len(have) == len(target) and all(x is None for x in plan):
        return None
    return tuple(plan)


def _list_readable(t: pa.DataType, value: pa.DataType) -> bool:
    if not (pa.types.is_list(t) or pa.types.is_large_list(t)):
        return False
    v = t.value_type
    if pa.types.is_large_list(value):
        return _list_readable(v, value.value_type)
    if value == pa.large_string():
        return v in (pa.string(), pa.large_string(), pa.string_view())
    if pa.types.is_timestamp(value):
        return pa.types.is_timestamp(v) and v.unit == "us"
    return bool(v == value)
