"""Expressions: the inert IR nodes, the Polars-like fluent wrapper, and the printer.

IR nodes (:class:`Col`, :class:`Lit`, :class:`Binary`, :class:`Unary`, :class:`Call`,
:class:`When`, :class:`AggCall`) are frozen dataclasses compared structurally. Source
positions (for error messages) ride along in ``pos`` and never take part in equality.

The user-facing :class:`Expr` wraps an IR node and overloads Python operators the way Polars
does (``sc.col("price") * 2 > 10``); it is what ``sc.col`` / ``sc.lit`` / ``sc.when`` return.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from typing import Any

from .types import DType, parse_dtype


@dataclass(frozen=True)
class Pos:
    """Where a piece of DSL text came from (1-based line/column within the cell body)."""

    line: int
    column: int
    length: int = 1
    text: str = ""


def _pos() -> Any:
    return field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Col:
    name: str
    pos: Pos | None = _pos()


@dataclass(frozen=True)
class Lit:
    value: Any
    pos: Pos | None = _pos()


@dataclass(frozen=True)
class Binary:
    op: str  # + - * / // % ** == != < <= > >= and or
    left: IR
    right: IR
    pos: Pos | None = _pos()


@dataclass(frozen=True)
class Unary:
    op: str  # neg, not
    operand: IR
    pos: Pos | None = _pos()


@dataclass(frozen=True)
class Call:
    """A scalar function applied to ``args[0]`` (the subject) and further arguments."""

    fn: str
    args: tuple[IR, ...]
    pos: Pos | None = _pos()


@dataclass(frozen=True)
class When:
    branches: tuple[tuple[IR, IR], ...]
    otherwise: IR
    pos: Pos | None = _pos()


@dataclass(frozen=True)
class AggCall:
    """An aggregate function (only valid in ``agg`` / ``running`` stages)."""

    fn: str
    arg: IR | None
    pos: Pos | None = _pos()


IR = Col | Lit | Binary | Unary | Call | When | AggCall

MAX_EXPR_DEPTH = 100
"""How deeply an expression may nest (``-(-(-x))`` is 4 deep). Every engine walks
expressions recursively; a limit here turns what would be a ``RecursionError`` somewhere
in an engine into one positioned error before anything runs."""

ARITH_OPS = ("+", "-", "*", "/", "//", "%", "**")
CMP_OPS = ("==", "!=", "<", "<=", ">", ">=")
LOGIC_OPS = ("and", "or")

# Scalar functions: name -> (min args incl. subject, max args). "str."/"dt." namespaces.
FUNCTIONS: dict[str, tuple[int, int]] = {
    "is_null": (1, 1),
    "is_not_null": (1, 1),
    "fill_null": (2, 2),
    "cast": (2, 2),
    "abs": (1, 1),
    "round": (1, 2),
    "is_in": (2, 2),
    "str.contains": (2, 2),
    "str.starts_with": (2, 2),
    "str.ends_with": (2, 2),
    "str.to_lowercase": (1, 1),
    "str.to_uppercase": (1, 1),
    "str.len_chars": (1, 1),
    "dt.year": (1, 1),
    "dt.month": (1, 1),
    "dt.day": (1, 1),
    "dt.hour": (1, 1),
    "dt.minute": (1, 1),
    "dt.second": (1, 1),
    "dt.weekday": (1, 1),
    "dt.date": (1, 1),
    "dt.epoch_us": (1, 1),
}
# Friendly aliases accepted by the DSL and the fluent API.
FUNCTION_ALIASES = {
    "str.lower": "str.to_lowercase",
    "str.upper": "str.to_uppercase",
    "str.length": "str.len_chars",
    "str.len": "str.len_chars",
    "str.startswith": "str.starts_with",
    "str.endswith": "str.ends_with",
}
AGG_FUNCTIONS = ("count", "sum", "min", "max", "mean", "first", "last", "count_distinct")


# --------------------------------------------------------------------------- printing

# Python precedence (higher binds tighter).
_PREC = {
    "or": 1,
    "and": 2,
    "not": 3,
    "cmp": 4,
    "+": 7,
    "-": 7,
    "*": 8,
    "/": 8,
    "//": 8,
    "%": 8,
    "neg": 9,
    "**": 10,
    "atom": 12,
}


def _prec(e: IR) -> int:
    if isinstance(e, Binary):
        return _PREC["cmp"] if e.op in CMP_OPS else _PREC[e.op]
    if isinstance(e, Unary):
        return _PREC[e.op]
    if isinstance(e, Lit) and isinstance(e.value, (int, float)) and not isinstance(e.value, bool):
        if e.value < 0 or (isinstance(e.value, float) and str(e.value).startswith("-")):
            return _PREC["neg"]
    return _PREC["atom"]


def _lit_text(v: Any) -> str:
    if isinstance(v, float):
        if v != v:
            return 'float("nan")'
        if v in (float("inf"), float("-inf")):
            return 'float("inf")' if v > 0 else '-float("inf")'
        return repr(v)
    if isinstance(v, _dt.datetime):
        return f'datetime("{v.isoformat()}")'
    if isinstance(v, _dt.date):
        return f'date("{v.isoformat()}")'
    if isinstance(v, tuple):
        return "[" + ", ".join(_lit_text(x) for x in v) + "]"
    return repr(v)


def to_text(e: IR) -> str:
    """Render an expression in the DSL's (Python) syntax; parsing it back gives ``e``."""
    if isinstance(e, Col):
        return e.name if e.name.isidentifier() and e.name not in _RESERVED else f"col({e.name!r})"
    if isinstance(e, Lit):
        return _lit_text(e.value)
    if isinstance(e, Binary):
        p = _prec(e)
        op = e.op
        if op == "**":  # right-associative
            left = _wrap(e.left, p + 1)
            right = _wrap(e.right, p)
        else:
            left = _wrap(e.left, p)
            right = _wrap(e.right, p + 1)
        return f"{left} {op} {right}"
    if isinstance(e, Unary):
        p = _prec(e)
        if e.op == "neg":
            return f"-{_wrap(e.operand, p)}"
        return f"not {_wrap(e.operand, p)}"
    if isinstance(e, Call):
        if e.fn.startswith("udf:"):  # a native user function: name(arg, ...)
            return f"{e.fn[4:]}({', '.join(to_text(a) for a in e.args)})"
        subject = _wrap(e.args[0], _PREC["atom"])
        rest = ", ".join(_type_arg(a) if e.fn == "cast" else to_text(a) for a in e.args[1:])
        return f"{subject}.{e.fn}({rest})"
    if isinstance(e, When):
        parts = [f"when({to_text(c)}).then({to_text(v)})" for c, v in e.branches]
        return ".".join(parts) + f".otherwise({to_text(e.otherwise)})"
    if isinstance(e, AggCall):
        return f"{e.fn}({to_text(e.arg) if e.arg is not None else ''})"
    raise TypeError(f"not an expression: {e!r}")


def _type_arg(a: IR) -> str:
    return repr(a.value) if isinstance(a, Lit) else to_text(a)


def _wrap(e: IR, min_prec: int) -> str:
    s = to_text(e)
    return f"({s})" if _prec(e) < min_prec else s


_RESERVED = {
    "True",
    "False",
    "None",
    "and",
    "or",
    "not",
    "in",
    "is",
    "if",
    "else",
    "lambda",
    "col",
    "lit",
    "when",
    "datetime",
    "date",
}


def children(x: IR) -> tuple[IR, ...]:
    """The sub-expressions of one IR node."""
    if isinstance(x, Binary):
        return (x.left, x.right)
    if isinstance(x, Unary):
        return (x.operand,)
    if isinstance(x, Call):
        return x.args
    if isinstance(x, When):
        return (*(e for b in x.branches for e in b), x.otherwise)
    if isinstance(x, AggCall):
        return () if x.arg is None else (x.arg,)
    return ()


UDF_PREFIX = "udf:"
"""The function name of a call of a registered user function: ``udf:<name>`` (udf.py)."""


class Shapes:
    """Numbers the distinct subexpressions of the expressions it is shown: two nodes get the
    same number exactly when they compute the same thing (common subexpression elimination,
    as Polars' ``comm_subexpr_elim``). Position is left out; a literal keeps its type
    (``1`` and ``1.0`` differ, as do ``0.0`` and ``-0.0``: by ``repr``). A call of a user
    function is one computation per call written: two calls written apart stay two calls
    (the function may not be pure), and only one call object reused (``y = f(x); y + y``,
    as a Python variable reads) is one subexpression. Each node object is
    numbered once (by identity, and held, so its id stays its own), so a tree that reuses
    one node twice at every level (``e = f(e, e)``, k times: 2^k paths) costs its distinct
    nodes, not its size."""

    def __init__(self) -> None:
        self._of: dict[int, tuple[IR, int]] = {}
        self._canon: dict[tuple[Any, ...], int] = {}

    def of(self, e: IR) -> int:
        got = self._of.get(id(e))
        if got is not None:
            return got[1]
        sig: tuple[Any, ...]
        if isinstance(e, Col):
            sig = ("col", e.name)
        elif isinstance(e, Lit):
            sig = ("lit", type(e.value).__name__, repr(e.value))
        elif isinstance(e, Unary):
            sig = ("unary", e.op, self.of(e.operand))
        elif isinstance(e, Binary):
            sig = ("binary", e.op, self.of(e.left), self.of(e.right))
        elif isinstance(e, Call) and e.fn.startswith(UDF_PREFIX):
            sig = ("node", id(e))
        elif isinstance(e, Call):
            sig = ("call", e.fn, *(self.of(a) for a in e.args))
        elif isinstance(e, When):
            sig = ("when", len(e.branches), *(self.of(c) for c in children(e)))
        else:
            sig = ("node", id(e))
        n = self._canon.setdefault(sig, len(self._canon))
        self._of[id(e)] = (e, n)
        return n

    def repeated(self, roots: list[IR]) -> set[int]:
        """The numbers of the subexpressions (columns and literals aside) that ``roots``
        compute more than once. One counts once however often it appears inside a repeated
        one (that one is computed once): each distinct node's children are walked once."""
        seen: set[int] = set()
        out: set[int] = set()
        stack = list(reversed(roots))
        while stack:
            e = stack.pop()
            k = self.of(e)
            if k not in seen:
                seen.add(k)
                stack.extend(reversed(children(e)))
            elif not isinstance(e, (Col, Lit)):
                out.add(k)
        return out


def too_deep(e: IR, limit: int = MAX_EXPR_DEPTH) -> IR | None:
    """A node nested deeper than ``limit`` (the one at depth ``limit + 1`` on the deepest
    path), or None. Iterative, so any depth is safe; each node is measured once, by identity,
    so a node reused at several places (``e = f(e, e)``, k times: 2^k paths) is not walked
    again."""
    height: dict[int, tuple[IR, int]] = {}  # id -> (the node, kept so the id stays its own)
    stack: list[tuple[IR, bool]] = [(e, False)]
    while stack:
        x, done = stack.pop()
        if id(x) in height:
            continue
        kids = children(x)
        if done:
            height[id(x)] = (x, 1 + max((height[id(c)][1] for c in kids), default=0))
            continue
        stack.append((x, True))
        stack.extend((c, False) for c in kids if id(c) not in height)
    if height[id(e)][1] <= limit:
        return None
    x = e
    for _ in range(limit):
        x = max(children(x), key=lambda c: height[id(c)][1])
    return x


def columns_used(e: IR) -> list[str]:
    """Column names an expression reads, in first-use order."""
    out: list[str] = []

    def walk(x: IR | None) -> None:
        if x is None:
            return
        if isinstance(x, Col):
            if x.name not in out:
                out.append(x.name)
        elif isinstance(x, Binary):
            walk(x.left)
            walk(x.right)
        elif isinstance(x, Unary):
            walk(x.operand)
        elif isinstance(x, Call):
            for a in x.args:
                walk(a)
        elif isinstance(x, When):
            for c, v in x.branches:
                walk(c)
                walk(v)
            walk(x.otherwise)
        elif isinstance(x, AggCall):
            walk(x.arg)

    walk(e)
    return out


def output_name(e: IR) -> str:
    """Default output column name of an unnamed expression (Polars: the leftmost column)."""
    if isinstance(e, Col):
        return e.name
    if isinstance(e, AggCall) and e.arg is None:
        return e.fn
    cols = columns_used(e)
    if cols:
        return cols[0]
    return "literal"


# --------------------------------------------------------------------------- fluent API


def _ir(x: Any) -> IR:
    if isinstance(x, Expr):
        return x._ir
    if isinstance(x, (Col, Lit, Binary, Unary, Call, When, AggCall)):
        return x
    if isinstance(x, list):
        x = tuple(x)
    return Lit(x)


class Expr:
    """A column expression (Polars-like). Build with :func:`col`, :func:`lit`, :func:`when`.

    Examples
    --------
    >>> import streamcell as sc
    >>> (sc.col("price") * 2 > 10) & sc.col("event").str.contains("view")
    Expr(price * 2 > 10 and event.str.contains('view'))
    """

    __slots__ = ("_ir",)

    def __init__(self, ir: IR):
        self._ir = ir

    def __repr__(self) -> str:
        return f"Expr({to_text(self._ir)})"

    def __bool__(self) -> bool:
        raise TypeError(
            "a streamcell expression has no truth value; use & | ~ instead of and/or/not"
        )

    __hash__ = None  # type: ignore[assignment]

    def _bin(self, op: str, other: Any, reflected: bool = False) -> Expr:
        a, b = (_ir(other), self._ir) if reflected else (self._ir, _ir(other))
        return Expr(Binary(op, a, b))

    def __add__(self, o: Any) -> Expr:
        return self._bin("+", o)

    def __radd__(self, o: Any) -> Expr:
        return self._bin("+", o, True)

    def __sub__(self, o: Any) -> Expr:
        return self._bin("-", o)

    def __rsub__(self, o: Any) -> Expr:
        return self._bin("-", o, True)

    def __mul__(self, o: Any) -> Expr:
        return self._bin("*", o)

    def __rmul__(self, o: Any) -> Expr:
        return self._bin("*", o, True)

    def __truediv__(self, o: Any) -> Expr:
        return self._bin("/", o)

    def __rtruediv__(self, o: Any) -> Expr:
        return self._bin("/", o, True)

    def __floordiv__(self, o: Any) -> Expr:
        return self._bin("//", o)

    def __rfloordiv__(self, o: Any) -> Expr:
        return self._bin("//", o, True)

    def __mod__(self, o: Any) -> Expr:
        return self._bin("%", o)

    def __rmod__(self, o: Any) -> Expr:
        return self._bin("%", o, True)

    def __pow__(self, o: Any) -> Expr:
        return self._bin("**", o)

    def __rpow__(self, o: Any) -> Expr:
        return self._bin("**", o, True)

    def __eq__(self, o: Any) -> Expr:  # type: ignore[override]
        return self._bin("==", o)  # type: ignore[override]

    def __ne__(self, o: Any) -> Expr:  # type: ignore[override]
        return self._bin("!=", o)  # type: ignore[override]

    def __lt__(self, o: Any) -> Expr:
        return self._bin("<", o)

    def __le__(self, o: Any) -> Expr:
        return self._bin("<=", o)

    def __gt__(self, o: Any) -> Expr:
        return self._bin(">", o)

    def __ge__(self, o: Any) -> Expr:
        return self._bin(">=", o)

    def __and__(self, o: Any) -> Expr:
        return self._bin("and", o)

    def __rand__(self, o: Any) -> Expr:
        return self._bin("and", o, True)

    def __or__(self, o: Any) -> Expr:
        return self._bin("or", o)

    def __ror__(self, o: Any) -> Expr:
        return self._bin("or", o, True)

    def __invert__(self) -> Expr:
        return Expr(Unary("not", self._ir))

    def __neg__(self) -> Expr:
        if isinstance(self._ir, Lit) and isinstance(self._ir.value, (int, float)):
            return Expr(Lit(-self._ir.value))
        return Expr(Unary("neg", self._ir))

    def _call(self, fn: str, *args: Any) -> Expr:
        return Expr(Call(fn, (self._ir, *(_ir(a) for a in args))))

    def is_null(self) -> Expr:
        return self._call("is_null")

    def is_not_null(self) -> Expr:
        return self._call("is_not_null")

    def fill_null(self, value: Any) -> Expr:
        return self._call("fill_null", value)

    def abs(self) -> Expr:
        return self._call("abs")

    def round(self, decimals: int = 0) -> Expr:
        return self._call("round", decimals) if decimals else self._call("round")

    def is_in(self, values: Any) -> Expr:
        return self._call("is_in", Lit(tuple(values)))

    def cast(self, dtype: str | type | DType) -> Expr:
        return self._call("cast", Lit(str(parse_dtype(dtype))))

    def alias(self, name: str) -> Named:
        return Named(name, self._ir)

    # aggregates
    def count(self) -> Expr:
        return Expr(AggCall("count", self._ir))

    def sum(self) -> Expr:
        return Expr(AggCall("sum", self._ir))

    def min(self) -> Expr:
        return Expr(AggCall("min", self._ir))

    def max(self) -> Expr:
        return Expr(AggCall("max", self._ir))

    def mean(self) -> Expr:
        return Expr(AggCall("mean", self._ir))

    def first(self) -> Expr:
        return Expr(AggCall("first", self._ir))

    def last(self) -> Expr:
        return Expr(AggCall("last", self._ir))

    def n_unique(self) -> Expr:
        return Expr(AggCall("count_distinct", self._ir))

    count_distinct = n_unique

    @property
    def str(self) -> _StrNS:
        return _StrNS(self)

    @property
    def dt(self) -> _DtNS:
        return _DtNS(self)


class _StrNS:
    def __init__(self, e: Expr):
        self._e = e

    def contains(self, s: str) -> Expr:
        return self._e._call("str.contains", s)

    def starts_with(self, s: str) -> Expr:
        return self._e._call("str.starts_with", s)

    def ends_with(self, s: str) -> Expr:
        return self._e._call("str.ends_with", s)

    def to_lowercase(self) -> Expr:
        return self._e._call("str.to_lowercase")

    def to_uppercase(self) -> Expr:
        return self._e._call("str.to_uppercase")

    def len_chars(self) -> Expr:
        return self._e._call("str.len_chars")

    lower = to_lowercase
    upper = to_uppercase
    length = len_chars


class _DtNS:
    def __init__(self, e: Expr):
        self._e = e

    def year(self) -> Expr:
        return self._e._call("dt.year")

    def month(self) -> Expr:
        return self._e._call("dt.month")

    def day(self) -> Expr:
        return self._e._call("dt.day")

    def hour(self) -> Expr:
        return self._e._call("dt.hour")

    def minute(self) -> Expr:
        return self._e._call("dt.minute")

    def second(self) -> Expr:
        return self._e._call("dt.second")

    def weekday(self) -> Expr:
        return self._e._call("dt.weekday")

    def date(self) -> Expr:
        return self._e._call("dt.date")

    def epoch_us(self) -> Expr:
        return self._e._call("dt.epoch_us")


@dataclass(frozen=True)
class Named:
    """An expression with an output name (``expr.alias("x")`` or ``x=expr`` in the DSL)."""

    name: str
    ir: IR


def col(name: str) -> Expr:
    """Reference a column by name. Example: ``sc.col("price") > 10``."""
    return Expr(Col(name))


def lit(value: Any) -> Expr:
    """A literal value. Example: ``sc.lit(1.5)``."""
    return Expr(Lit(tuple(value) if isinstance(value, list) else value))


class _WhenBuilder:
    def __init__(self, branches: tuple[tuple[IR, IR], ...], cond: IR):
        self._branches = branches
        self._cond = cond

    def then(self, value: Any) -> _Then:
        return _Then(self._branches + ((self._cond, _ir(value)),))


class _Then:
    def __init__(self, branches: tuple[tuple[IR, IR], ...]):
        self._branches = branches

    def when(self, cond: Any) -> _WhenBuilder:
        return _WhenBuilder(self._branches, _ir(cond))

    def otherwise(self, value: Any) -> Expr:
        return Expr(When(self._branches, _ir(value)))


def when(cond: Any) -> _WhenBuilder:
    """Conditional: ``sc.when(cond).then(a).when(c2).then(b).otherwise(c)``."""
    return _WhenBuilder((), _ir(cond))


def count(column: str | Expr | None = None) -> Expr:
    """Aggregate: number of rows (``count()``) or of non-null values (``count("x")``)."""
    return Expr(
        AggCall(
            "count",
            None if column is None else _ir(col(column) if isinstance(column, str) else column),
        )
    )


def _agg_fn(fn: str):  # type: ignore[no-untyped-def]
    def f(column: str | Expr) -> Expr:
        return Expr(AggCall(fn, _ir(col(column) if isinstance(column, str) else column)))

    f.__name__ = fn
    f.__doc__ = f"Aggregate: {fn} of a column (name or expression)."
    return f


sum_ = _agg_fn("sum")
min_ = _agg_fn("min")
max_ = _agg_fn("max")
mean = _agg_fn("mean")
first = _agg_fn("first")
last = _agg_fn("last")
count_distinct = _agg_fn("count_distinct")
