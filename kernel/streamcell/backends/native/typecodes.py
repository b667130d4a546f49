"""The runtime's column type codes (lt), one byte per column, and the list encoding of
lists.h: list literals as the runtime stores list values.
"""

from __future__ import annotations

import datetime as _dt
import math
from typing import Any

from ... import plan as P
from ...compiler import Compiled
from ...errors import NotSupportedError
from ...types import DType, Schema
from ..evaluate import epoch_days, epoch_us

NAME = "native"

LT = {"null": 0, "int": 1, "float": 2, "bool": 3, "str": 4, "datetime": 5, "date": 6}
_HIDDEN = b"\x01\x01"  # seq, pos


LT_LIST = 16  # list[T] is LT_LIST + lt(T) (lists of lists too): encoded values (lists.h)


def _lt(t: DType) -> int:
    if t.name == "list":
        assert t.inner is not None
        return LT_LIST + _lt(t.inner)
    return LT[t.name]


def _lts(schema: Schema) -> bytes:
    return _HIDDEN + bytes(_lt(t) for _, t in schema)


def _no_lists(step: P.Step, what: str, types: list[DType]) -> None:
    if any(t.name == "list" for t in types):
        raise NotSupportedError(step.step_id, NAME, f"{what} over list columns is not native yet")


def _check_types(c: Compiled) -> None:
    for s in c.plan.steps:
        for _, t in c.schemas[s.step_id]:
            if _lt(t) > 255:  # a type is one byte: depth * 16 + leaf
                raise NotSupportedError(
                    s.step_id, NAME, f"lists nested deeper than 15 levels ({t})"
                )


def _elem(v: Any, inner: DType) -> Any:
    """A list element as a value of the element type ``inner`` (a nested list: its encoding),
    or _NO when no value of that type equals it (Python equality: 1 == 1.0 == True)."""
    if v is None:
        return None
    if inner.name == "list":
        assert inner.inner is not None
        if not isinstance(v, (list, tuple)):
            return _NO
        enc = encode_list(v, inner.inner)
        return _NO if enc is None else enc
    return _scalar_elem(v, inner.name)


def _scalar_elem(v: Any, inner: str) -> Any:
    if inner in ("int", "float", "bool"):
        if not isinstance(v, (bool, int, float)):
            return _NO
        if inner == "float":
            return float(v)
        if isinstance(v, float) and not (math.isfinite(v) and v.is_integer()):
            return _NO
        if inner == "int":
            return int(v) if -(2**63) <= v < 2**63 else _NO
        return bool(v) if v in (0, 1) else _NO
    if inner == "str":
        return v if isinstance(v, str) else _NO
    if inner == "datetime":
        return epoch_us(v) if isinstance(v, _dt.datetime) else _NO
    if inner == "date":
        ok = isinstance(v, _dt.date) and not isinstance(v, _dt.datetime)
        return epoch_days(v) if ok else _NO
    return _NO  # list[null]: only null elements


_NO = object()


def encode_list(values: Any, inner: DType) -> bytes | None:
    """A list literal in the runtime's list encoding (lists.h) with elements of type ``inner``,
    or None when an element has no value of that type (the list equals no such list)."""
    import struct

    out = bytearray()
    for v in values:
        x = _elem(v, inner)
        if x is _NO:
            return None
        if x is None:
            out.append(0)
            continue
        out.append(1)
        if inner.name == "list":
            out += struct.pack("<i", len(x)) + x
        elif inner.name == "float":
            out += struct.pack("<d", x)
        elif inner.name == "bool":
            out.append(int(x))
        elif inner.name == "str":
            b = x.encode()
            out += struct.pack("<i", len(b)) + b
        else:
            out += struct.pack("<q", x)
    return bytes(out)
