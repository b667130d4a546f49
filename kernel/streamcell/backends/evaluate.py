"""Row-at-a-time expression evaluation for the reference backend (the semantics oracle).

``compile_row_expr(ir)`` turns an expression into a Python closure over a row dict.
Semantics (Polars-compatible, and what every backend must reproduce):

- null propagates through arithmetic, comparisons and functions; ``filter`` treats null
  as false; ``and``/``or`` use three-valued (Kleene) logic;
- ``/`` is float division (x/0 gives ±inf or nan); ``//`` and ``%`` floor like Python and
  give null when dividing by zero; int results wrap around at 64 bits;
- a failed ``cast``, and ``int ** negative int``, are data errors: the row goes to the
  dead-letter table;
- lists compare as Python lists (``==`` / ``!=``: same length and equal elements, null
  equal to null; ordering: by the first differing element, else by length); ordering lists
  whose first differing elements include a null is a data error.
"""

from __future__ import annotations

import datetime as _dt
import math
import operator
from collections.abc import Callable
from typing import Any

from ..expr import IR, Binary, Call, Col, Lit, Shapes, Unary, When
from ..types import parse_dtype
from ..udf import UDF_PREFIX
from ..udf import lookup as udf_lookup

Row = dict[str, Any]
Fn = Callable[[Row], Any]

_EPOCH = _dt.datetime(1970, 1, 1)
_EPOCH_DATE = _dt.date(1970, 1, 1)
_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1


class RowError(Exception):
    """A data error for one row (it goes to the dead-letter table with this reason)."""


def wrap64(v: int) -> int:
    if _I64_MIN <= v <= _I64_MAX:
        return v
    return ((v - _I64_MIN) % 2**64) + _I64_MIN


def epoch_us(v: _dt.datetime | _dt.date) -> int:
    if isinstance(v, _dt.datetime):
        d = v - _EPOCH
        return (d.days * 86_400 + d.seconds) * 1_000_000 + d.microseconds
    return (v - _EPOCH_DATE).days * 86_400_000_000


def epoch_days(v: _dt.date) -> int:
    return (v - _EPOCH_DATE).days


def from_epoch_us(us: int) -> _dt.datetime:
    return _EPOCH + _dt.timedelta(microseconds=us)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _div(a: Any, b: Any) -> float:
    a, b = float(a), float(b)
    if b == 0.0:
        if a == 0.0 or math.isnan(a):
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


def _floordiv(a: Any, b: Any) -> Any:
    if b == 0:
        return None
    if _is_int(a) and _is_int(b):
        return wrap64(a // b)
    q = a / b  # a float result: floor(q) as a float; inf/nan (e.g. x // nan) pass through
    return float(math.floor(q)) if math.isfinite(q) else q


def _mod(a: Any, b: Any) -> Any:
    if b == 0:
        return None
    r = a % b
    return wrap64(r) if _is_int(r) else r


def python_pow(a: Any, b: Any) -> Any:
    if _is_int(a) and _is_int(b):
        if b < 0:  # int ** int is typed int: a negative exponent has no int result (as in Polars)
            raise RowError(f"integer {a} ** negative exponent {b}; cast to float first")
        return wrap64(pow(a, b, 2**64))  # wraps at 64 bits without computing a huge a**b
    try:
        r = float(a) ** float(b)
    except ZeroDivisionError:
        return math.inf
    except OverflowError:
        return math.inf
    return r.real if isinstance(r, complex) else r


ARITHMETIC: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
}
"""The binary operators that are Python's own on numbers (the Spark translation's too)."""


def _arith(op: str) -> Callable[[Any, Any], Any]:
    base = ARITHMETIC.get(op)
    if base is not None:

        def f(a: Any, b: Any) -> Any:
            if isinstance(a, str):
                return a + b
            r = base(a, b)
            return wrap64(r) if _is_int(r) else r

        return f
    return {"/": _div, "//": _floordiv, "%": _mod, "**": python_pow}[op]


COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
"""The comparison operators by name (the Spark translation's too)."""


def _num_cmp(f: Callable[[Any, Any], bool]) -> Callable[[Any, Any], bool]:
    # Polars orders NaN above every number and NaN == NaN. Lists compare as Python lists;
    # ordering two lists whose first differing elements include a null is a row error.
    def g(a: Any, b: Any) -> bool:
        if isinstance(a, list):
            try:
                return f(a, b)
            except TypeError:
                raise RowError(
                    "lists with a null element where they differ cannot be ordered"
                ) from None
        if isinstance(a, float) and math.isnan(a) or isinstance(b, float) and math.isnan(b):
            ka = (1, 0.0) if isinstance(a, float) and math.isnan(a) else (0, a)
            kb = (1, 0.0) if isinstance(b, float) and math.isnan(b) else (0, b)
            return f(ka, kb)
        return f(a, b)

    return g


def cast_value(v: Any, target: str) -> Any:  # noqa: C901 - one table of conversions
    if v is None:
        return None
    t = target
    try:
        if t == "int":
            if isinstance(v, bool):
                return int(v)
            if _is_int(v):
                return v
            if isinstance(v, float):
                if math.isnan(v) or math.isinf(v) or not _I64_MIN <= v <= _I64_MAX:
                    raise ValueError
                return int(v)
            if isinstance(v, str):
                return wrap64(int(v.strip()))
            if isinstance(v, _dt.datetime):
                return epoch_us(v)
            if isinstance(v, _dt.date):
                return epoch_days(v)
        elif t == "float":
            if isinstance(v, (bool, int, float)):
                return float(v)
            if isinstance(v, str):
                return float(v.strip())
            if isinstance(v, (_dt.datetime, _dt.date)):
                return float(epoch_us(v))
        elif t == "str":
            if isinstance(v, bool):
                return "true" if v else "false"
            if isinstance(v, _dt.datetime):
                return v.isoformat(sep=" ", timespec="microseconds")
            if isinstance(v, float):
                return float_text(v)
            if isinstance(v, (int, str, _dt.date)):
                return str(v)
        elif t == "bool":
            if isinstance(v, (bool, int, float)):
                return bool(v)
            if isinstance(v, str) and v.strip().lower() in ("true", "false"):
                return v.strip().lower() == "true"
        elif t == "datetime":
            if isinstance(v, _dt.datetime):
                return v
            if isinstance(v, _dt.date):
                return _dt.datetime(v.year, v.month, v.day)
            if _is_int(v):
                return from_epoch_us(v)
            if isinstance(v, str):
                return _dt.datetime.fromisoformat(v.strip())
        elif t == "date":
            if isinstance(v, _dt.datetime):
                return v.date()
            if isinstance(v, _dt.date):
                return v
            if isinstance(v, str):
                return _dt.date.fromisoformat(v.strip())
    except (ValueError, OverflowError):
        pass
    raise RowError(f"cannot cast {v!r} to {target}")


def float_text(v: float) -> str:
    """Polars' ``cast(pl.String)`` of a float: Python's shortest round-trip digits, but
    ``NaN``, decimal notation down to 1e-5 (``0.000015``, Python ``1.5e-05``) and exponents
    without padding (``1e-7``, Python ``1e-07``); 1e16 and up are ``1e+16`` in both."""
    if v != v:
        return "NaN"
    r = repr(v)
    if "e" not in r:
        return r  # also inf, -inf
    mant, exp = r.split("e")
    e = int(exp)
    if e == -5:  # Python switches to exponents at 1e-4, Polars below 1e-5
        sign = "-" if mant.startswith("-") else ""
        return f"{sign}0.0000{mant.lstrip('-').replace('.', '')}"
    return f"{mant}e{'-' if e < 0 else '+'}{abs(e)}"


def powi(base: float, n: int) -> float:
    """``base ** n`` by binary powering, as Rust's ``f64::powi`` (LLVM's ``__powidf2``)
    computes it for Polars' ``round`` (beyond 10**22 it can differ from ``pow`` in the
    last bit, so we repeat its steps)."""
    recip = n < 0
    n = -n if recip else n
    r = 1.0
    while True:
        if n & 1:
            r *= base
        n >>= 1
        if n == 0:
            break
        base *= base
    return 1.0 / r if recip else r


def _rint(t: float) -> float:
    """``t`` rounded to an integer, ties to even, keeping the sign of zero (``-0.4`` gives
    ``-0.0``) like Rust's ``round_ties_even``; ``t`` is finite."""
    return math.copysign(float(round(t)), t)


def round_float(v: float, d: int) -> float:
    """Polars' ``round(d)`` of a float (half to even): ``round_ties_even(v * 10**d) / 10**d``,
    ``v`` itself when that is not finite (overflow, nan, inf); 10**d is split into 2**d * 5**d
    from 300 digits and ``v`` is returned unchanged from 326 (finer than any double)."""
    if d == 0:
        return _rint(v) if math.isfinite(v) else v
    if d >= 326:
        return v
    if not math.isfinite(v):
        return v
    if d >= 300:
        mul2 = math.ldexp(1.0, d)
        mul5 = powi(5.0, d)
        t = v * mul2 * mul5
        ret = _rint(t) / mul5 * (1.0 / mul2) if math.isfinite(t) else math.inf
    else:
        m = powi(10.0, d)
        t = v * m
        ret = _rint(t) / m if math.isfinite(t) else math.inf
    return ret if math.isfinite(ret) else v


def _round(v: Any, d: int = 0) -> Any:
    if _is_int(v):
        return v
    return round_float(v, d)


_WEEKDAY = lambda d: d.isoweekday()  # noqa: E731

_FUNCS: dict[str, Callable[..., Any]] = {
    "abs": lambda v: wrap64(abs(v)) if _is_int(v) else abs(v),  # abs(-2**63) wraps
    "round": _round,
    "str.contains": lambda s, p: p in s,
    "str.starts_with": lambda s, p: s.startswith(p),
    "str.ends_with": lambda s, p: s.endswith(p),
    "str.to_lowercase": lambda s: s.lower(),
    "str.to_uppercase": lambda s: s.upper(),
    "str.len_chars": len,
    "dt.year": lambda d: d.year,
    "dt.month": lambda d: d.month,
    "dt.day": lambda d: d.day,
    "dt.hour": lambda d: d.hour,
    "dt.minute": lambda d: d.minute,
    "dt.second": lambda d: d.second,
    "dt.weekday": _WEEKDAY,
    "dt.date": lambda d: d.date() if isinstance(d, _dt.datetime) else d,
    "dt.epoch_us": epoch_us,
}


def _as_lists(v: Any) -> Any:
    """A literal's value with its (nested) tuples as lists: a list literal is a list."""
    return [_as_lists(x) for x in v] if isinstance(v, (tuple, list)) else v


def compile_row_expr(e: IR) -> Fn:
    """Compile an expression to ``f(row) -> value`` (may raise :class:`RowError`).

    A subexpression that occurs more than once (:class:`~streamcell.expr.Shapes`) is compiled
    once and evaluated at most once per call of ``f``: where it is first needed, as Python
    would evaluate it there, and read back where it is needed again. Evaluation is pure, so
    this is the value the second evaluation would give; a failure at the first use ends the
    row, as it would unshared. Without it ``e = f(e, e)`` written k times is 2^k evaluations
    of the first ``e`` per row (and 2^k closures to build). ``f`` keeps the current call's
    values in its closure: one thread calls it at a time (each operator compiles its own)."""
    shapes = Shapes()
    repeated = shapes.repeated([e])
    call = [0]  # which call of the compiled expression is running
    built: dict[int, Fn] = {}

    def sub(x: IR) -> Fn:
        k = shapes.of(x)
        f = built.get(k)
        if f is None:
            f = _compile_node(x, sub)
            if k in repeated:
                f = _once_per_call(f, call)
            built[k] = f
        return f

    root = sub(e)
    if not repeated:
        return root

    def top(r: Row) -> Any:
        call[0] += 1
        return root(r)

    return top


def _once_per_call(f: Fn, call: list[int]) -> Fn:
    memo: list[Any] = [0, None]  # the call it was computed in, its value

    def once(r: Row) -> Any:
        if memo[0] == call[0]:
            return memo[1]
        v = f(r)
        memo[0], memo[1] = call[0], v
        return v

    return once


def _compile_node(e: IR, sub: Callable[[IR], Fn]) -> Fn:  # noqa: C901 - one dispatch over the IR
    """One node's closure; ``sub`` compiles its children."""
    if isinstance(e, Col):
        name = e.name
        return lambda r: r[name]
    if isinstance(e, Lit):
        v = _as_lists(e.value)
        return lambda r: v
    if isinstance(e, Unary):
        f = sub(e.operand)
        if e.op == "neg":

            def neg(r: Row) -> Any:
                v = f(r)
                return None if v is None else (wrap64(-v) if _is_int(v) else -v)

            return neg

        def not_(r: Row) -> Any:
            v = f(r)
            return None if v is None else not v

        return not_
    if isinstance(e, Binary):
        lf, rf = sub(e.left), sub(e.right)
        if e.op == "and":

            def and_(r: Row) -> Any:
                a = lf(r)
                if a is False:
                    return False
                b = rf(r)
                if b is False:
                    return False
                return None if a is None or b is None else True

            return and_
        if e.op == "or":

            def or_(r: Row) -> Any:
                a = lf(r)
                if a is True:
                    return True
                b = rf(r)
                if b is True:
                    return True
                return None if a is None or b is None else False

            return or_
        fn = _num_cmp(COMPARE[e.op]) if e.op in COMPARE else _arith(e.op)

        def binop(r: Row) -> Any:
            a = lf(r)
            if a is None:
                return None
            b = rf(r)
            if b is None:
                return None
            return fn(a, b)

        return binop
    if isinstance(e, When):
        branches = [(sub(c), sub(v)) for c, v in e.branches]
        other = sub(e.otherwise)

        def when(r: Row) -> Any:
            for c, v in branches:
                if c(r) is True:
                    return v(r)
            return other(r)

        return when
    if isinstance(e, Call):
        return _compile_call(e, sub)
    raise TypeError(f"cannot evaluate {e!r}")


def _compile_call(e: Call, sub: Callable[[IR], Fn]) -> Fn:
    args = [sub(a) for a in e.args]
    subject = args[0]
    fn = e.fn
    if fn.startswith(UDF_PREFIX):
        spec = udf_lookup(fn[len(UDF_PREFIX) :])
        if spec is None:
            raise TypeError(f"unknown native function {fn[len(UDF_PREFIX) :]!r}")
        row = spec.row

        def udf(r: Row) -> Any:
            vals = [a(r) for a in args]  # every argument, as Python evaluates a call's
            if any(v is None for v in vals):
                return None
            return row(*vals)

        return udf
    if fn == "is_null":
        return lambda r: subject(r) is None
    if fn == "is_not_null":
        return lambda r: subject(r) is not None
    if fn == "fill_null":
        other = args[1]
        return lambda r: other(r) if (v := subject(r)) is None else v
    if fn == "cast":
        lit = e.args[1]
        assert isinstance(lit, Lit)
        target = str(parse_dtype(lit.value))
        return lambda r: cast_value(subject(r), target)
    if fn == "is_in":
        lit = e.args[1]
        assert isinstance(lit, Lit)
        values = _as_lists(lit.value)
        has_null = None in values

        def is_in(r: Row) -> Any:
            v = subject(r)
            if v is None:
                return has_null or None
            return v in values

        return is_in
    impl = _FUNCS[fn]
    rest = args[1:]

    def call(r: Row) -> Any:
        v = subject(r)
        if v is None:
            return None
        extra = [a(r) for a in rest]
        if any(x is None for x in extra):
            return None
        return impl(v, *extra)

    return call
