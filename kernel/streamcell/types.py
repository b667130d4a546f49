"""The small type system shared by the compiler and every backend.

A column type is a :class:`DType`: ``int`` (int64), ``float`` (float64), ``str``, ``bool``,
``datetime`` (microseconds, naive UTC), ``date``, ``list[T]`` and ``null`` (the type of a bare
``None`` literal). Every column is nullable.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from typing import Any

import polars as pl
import pyarrow as pa

_SCALARS = ("int", "float", "str", "bool", "datetime", "date", "null")


@dataclass(frozen=True)
class DType:
    """A column type. ``inner`` is set for ``list`` only."""

    name: str
    inner: DType | None = None

    def __str__(self) -> str:
        return f"list[{self.inner}]" if self.name == "list" else self.name

    @property
    def is_numeric(self) -> bool:
        return self.name in ("int", "float")

    @property
    def is_temporal(self) -> bool:
        return self.name in ("datetime", "date")

    @property
    def is_orderable(self) -> bool:
        return self.name in ("int", "float", "str", "datetime", "date", "bool")


INT = DType("int")
FLOAT = DType("float")
STR = DType("str")
BOOL = DType("bool")
DATETIME = DType("datetime")
DATE = DType("date")
NULL = DType("null")

Schema = tuple[tuple[str, DType], ...]
"""An ordered, hashable schema: ``((name, dtype), ...)``."""


def list_of(inner: DType) -> DType:
    return DType("list", inner)


def parse_dtype(text: str | type | DType) -> DType:
    """Parse ``"int"``, ``"list[str]"``, a Python type (``int``, ``float``...) or a DType."""
    if isinstance(text, DType):
        return text
    if isinstance(text, type):
        by_type = {
            int: INT,
            float: FLOAT,
            str: STR,
            bool: BOOL,
            _dt.datetime: DATETIME,
            _dt.date: DATE,
        }
        if text in by_type:
            return by_type[text]
        raise ValueError(f"no streamcell type for Python type {text.__name__}")
    t = text.strip()
    aliases = {
        "i64": "int",
        "int64": "int",
        "f64": "float",
        "float64": "float",
        "double": "float",
        "string": "str",
        "utf8": "str",
        "boolean": "bool",
        "timestamp": "datetime",
    }
    t = aliases.get(t, t)
    if t in _SCALARS:
        return DType(t)
    if t.startswith("list[") and t.endswith("]"):
        return list_of(parse_dtype(t[5:-1]))
    raise ValueError(
        f"unknown type {text!r}; known: int, float, str, bool, datetime, date, list[T]"
    )


def unify(a: DType, b: DType) -> DType | None:
    """The common type of two branches (null unifies with anything, int widens to float)."""
    if a == b:
        return a
    if a == NULL:
        return b
    if b == NULL:
        return a
    if {a.name, b.name} == {"int", "float"}:
        return FLOAT
    if a.name == "list" and b.name == "list":  # e.g. list[null] (from []) with list[str]
        assert a.inner is not None and b.inner is not None
        inner = unify(a.inner, b.inner)
        return None if inner is None else list_of(inner)
    return None


def dtype_of_value(v: Any) -> DType:
    if v is None:
        return NULL
    if isinstance(v, bool):
        return BOOL
    if isinstance(v, int):
        return INT
    if isinstance(v, float):
        return FLOAT
    if isinstance(v, str):
        return STR
    if isinstance(v, _dt.datetime):
        return DATETIME
    if isinstance(v, _dt.date):
        return DATE
    if isinstance(v, (list, tuple)):
        inner = NULL
        for x in v:
            u = unify(inner, dtype_of_value(x))
            inner = u if u is not None else STR
        return list_of(inner)
    raise TypeError(f"unsupported value type {type(v).__name__}")


def conform(v: Any, t: DType) -> Any:
    """Return ``v`` as a value of type ``t`` or raise ``TypeError`` (used for row validation)."""
    if v is None:
        return None
    n = t.name
    if n == "int" and isinstance(v, int) and not isinstance(v, bool):
        return v
    if n == "float" and isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    if n == "str" and isinstance(v, str):
        return v
    if n == "bool" and isinstance(v, bool):
        return v
    if n == "datetime" and isinstance(v, _dt.datetime):
        return (
            v.replace(tzinfo=None)
            if v.tzinfo is None
            else v.astimezone(_dt.timezone.utc).replace(tzinfo=None)
        )
    if n == "date" and isinstance(v, _dt.date) and not isinstance(v, _dt.datetime):
        return v
    if n == "list" and isinstance(v, (list, tuple)):
        assert t.inner is not None
        return [conform(x, t.inner) for x in v]
    if n == "null":
        raise TypeError(f"expected null, got {type(v).__name__} {v!r}")
    raise TypeError(f"expected {t}, got {type(v).__name__} {v!r}")


def to_polars(t: DType) -> pl.DataType:
    if t.name == "list":
        assert t.inner is not None
        return pl.List(to_polars(t.inner))
    return {
        "int": pl.Int64(),
        "float": pl.Float64(),
        "str": pl.String(),
        "bool": pl.Boolean(),
        "datetime": pl.Datetime("us"),
        "date": pl.Date(),
        "null": pl.Null(),
    }[t.name]


def from_arrow(t: pa.DataType) -> DType:
    """Map an Arrow type to a streamcell type (raises ValueError for unsupported types)."""
    if pa.types.is_boolean(t):
        return BOOL
    if pa.types.is_integer(t):
        return INT
    if pa.types.is_floating(t) or pa.types.is_decimal(t):
        return FLOAT
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return STR
    if pa.types.is_dictionary(t) and (  # Polars Categorical / Enum: read as strings
        pa.types.is_string(t.value_type)
        or pa.types.is_large_string(t.value_type)
        or pa.types.is_string_view(t.value_type)
    ):
        return STR
    if pa.types.is_timestamp(t):
        return DATETIME
    if pa.types.is_date(t):
        return DATE
    if pa.types.is_null(t):
        return NULL
    if (
        pa.types.is_list(t)
        or pa.types.is_large_list(t)
        or pa.types.is_list_view(t)
        or pa.types.is_large_list_view(t)
        or pa.types.is_fixed_size_list(t)  # Polars Array: read as a list
    ):
        return list_of(from_arrow(t.value_type))
    raise ValueError(f"unsupported Arrow type {t}")


_POLARS_NAMES = (  # how a Polars user knows the Arrow types we refuse
    (pa.types.is_time, "Polars Time"),
    (pa.types.is_duration, "Polars Duration"),
    (lambda t: pa.types.is_binary(t) or pa.types.is_large_binary(t), "Polars Binary"),
    (pa.types.is_binary_view, "Polars Binary"),
    (pa.types.is_struct, "Polars Struct"),
    (pa.types.is_dictionary, "a dictionary that is not of strings"),
)


def schema_from_arrow(s: pa.Schema) -> Schema:
    """The streamcell schema of an Arrow schema; a column of a type streamcell cannot hold
    raises :class:`~streamcell.errors.UnsupportedTypeError` naming the column and type."""
    from .errors import UnsupportedTypeError

    out = []
    for f in s:
        try:
            out.append((f.name, from_arrow(f.type)))
        except ValueError:
            kind = next((name for test, name in _POLARS_NAMES if test(f.type)), "")
            shown = f"{f.type} ({kind})" if kind else str(f.type)
            raise UnsupportedTypeError(
                f.name, shown, "; cast or drop it before streaming (e.g. .cast(pl.String))"
            ) from None
    return tuple(out)


def to_arrow(t: DType) -> pa.DataType:
    """The Arrow type a column of type ``t`` is read as."""
    if t.name == "list":
        assert t.inner is not None
        return pa.list_(to_arrow(t.inner))
    return {
        "int": pa.int64(),
        "float": pa.float64(),
        "str": pa.string(),
        "bool": pa.bool_(),
        "datetime": pa.timestamp("us"),
        "date": pa.date32(),
        "null": pa.null(),
    }[t.name]


def polars_schema(schema: Schema) -> dict[str, pl.DataType]:
    return {name: to_polars(t) for name, t in schema}


def format_schema(schema: Schema) -> str:
    return ", ".join(f"{n}: {t}" for n, t in schema)
