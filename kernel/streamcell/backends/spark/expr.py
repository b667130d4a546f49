"""Expressions to Spark SQL columns, with streamcell's semantics (``evaluate.py``).

:func:`to_spark` turns an expression into ``(value, error)``: ``value`` is a Spark Column
computing the reference's result; ``error`` is a boolean Column that is true exactly when the
reference would raise a :class:`~streamcell.backends.evaluate.RowError` for the row (so the
row goes to the dead-letter table), or None when the expression can never fail. Short
circuits are honoured: an error in a branch the reference does not evaluate (the right side
of ``False and x``, an untaken ``when`` branch) is not an error.

Most operators map to Spark builtins (Spark's NaN ordering and Kleene logic already equal
Polars'); where Spark differs the translation spells the rule out (``/`` by zero gives ±inf or
nan, ``//`` and ``%`` floor like Python, ``round`` rounds half to even like Polars). Casts Spark
cannot reproduce exactly (from strings, float to string) and ``**`` (Python's int/float
power rules) run the reference's own code in Arrow-optimized Python UDFs.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from collections.abc import Callable
from typing import Any

from ... import plan as P
from ...compiler import Typer
from ...errors import NotSupportedError
from ...expr import IR, Binary, Call, Col, Lit, Shapes, Unary, When
from ...types import DType, Schema, parse_dtype
from ..evaluate import ARITHMETIC, COMPARE

NAME = "spark"

SPARK_TYPES = {
    "int": "bigint",
    "float": "double",
    "str": "string",
    "bool": "boolean",
    "datetime": "timestamp_ntz",
    "date": "date",
    "null": "void",
}
_I64_LO, _I64_HI = -9.223372036854775808e18, 9.223372036854775808e18
_US_MIN, _US_MAX = -62_135_596_800_000_000, 253_402_300_799_999_999  # datetime 1..9999


def spark_type(t: DType) -> str:
    if t.name == "list":
        assert t.inner is not None
        return f"array<{spark_type(t.inner)}>"
    return SPARK_TYPES[t.name]


# The columns the Spark engine adds beside a batch run's user columns: the order key, error
# and keep flags, dead and late rows, window bounds and watermarks, keys and buckets of a
# groupBy, the sides and rows of joins and correlations, partition hashes (_h0, _h1, ...),
# shared subexpressions (__sc_shared0, ...), running-sum helpers (__sc_run0, ...), and the
# hidden file-metadata column a Parquet scan's order key is read from (_metadata). Spark
# resolves column names without regard to case, so a user column spelled like one of them in
# any case would be taken for it: such a plan is refused (check_names). The text-scan frame's
# columns (_f, _bs, _m, _nb) never sit beside user columns, nor does a streaming run's row
# (user rows travel pickled in _b), so those names, and any name on a streaming run, are free.
INTERNAL_COLUMNS = frozenset(
    [
        "_o",
        "_e",
        "_p",
        "_k",
        "_b",
        "_t",
        "_l",
        "_r",
        "_we",
        "_ws",
        "_wq",
        "_wma",
        "_dead",
        "_late",
        "_prev",
        "_ro",
        "_lo",
        "_rr",
        "_rt",
        "_lt",
        "_sid",
        "_nk",
        "_r0",
        "_r1",
        "_row",
        "_metadata",
    ]
)
_INTERNAL = re.compile(r"_[hr]\d+|__sc_.*", re.DOTALL)


def internal_name(name: str) -> bool:
    """Whether ``name`` is, to Spark, one of the engine's own columns (:data:`INTERNAL_COLUMNS`)."""
    folded = name.casefold()
    return folded in INTERNAL_COLUMNS or _INTERNAL.fullmatch(folded) is not None


def check_names(step_id: str, schema: Schema) -> None:
    """Refuse a step whose output has a column named like one of the engine's own."""
    for n, _ in schema:
        if internal_name(n):
            raise NotSupportedError(
                step_id,
                NAME,
                f"column {n!r}: the Spark engine names its own columns so (Spark reads names "
                "without case); rename it where it is made (in the source data, e.g. "
                "df.rename(...), or in the step that computes it)",
            )


FLIPPED = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


def _nan_passes(op: str, other: IR) -> bool:
    """Whether ``NaN op other`` can hold: NaN compares above every number and equal to NaN."""
    if op in (">", ">=", "!="):
        return True
    return not isinstance(other, Lit) or (
        isinstance(other.value, float) and other.value != other.value
    )


def _unscanned(c: Any, e: IR, t: DType) -> Any:
    """A float column compared as itself plus 0.0 (the same value in every comparison: NaN
    stays NaN, -0.0 equals 0.0 either way). Spark pushes a comparison of a bare column into a
    Parquet scan, which skips row groups by their min / max statistics, and those leave NaN
    out: a group holding [NaN, 0.1] has max 0.1, so ``f > 0.5`` skipped it and lost the NaN
    row, which compares above every number (as in Polars). An expression is never pushed."""
    from pyspark.sql import functions as F

    if t.name == "float" and isinstance(e, Col):
        return c + F.lit(0.0)
    return c


def qcol(name: str) -> Any:
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


def _or(a: Any, b: Any) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    return a | b


def _and_err(cond: Callable[[], Any], err: Any) -> Any:
    """``err`` only where ``cond()`` is true (a condition that is null counts as false).
    ``cond`` builds its column only when there is an error to guard: every column built is a
    round trip to the JVM (1-3 ms each here), and most expressions cannot fail."""
    from pyspark.sql import functions as F

    if err is None:
        return None
    return F.coalesce(cond(), F.lit(False)) & err


# --------------------------------------------------------------------------- Python UDFs

_UDFS: dict[tuple[str, str], Any] = {}


def _udf(kind: str, out: DType) -> Any:
    """An Arrow-optimized Python UDF returning struct<v: out, e: boolean> (e: a RowError)."""
    key = (kind, out.name)
    if key in _UDFS:
        return _UDFS[key]
    from pyspark.sql.functions import udf

    rtype = f"struct<v: {spark_type(out)}, e: boolean>"
    if kind == "pow":

        def f(a: Any, b: Any) -> tuple[Any, bool]:
            from streamcell.backends.evaluate import RowError, python_pow

            if a is None or b is None:
                return (None, False)
            try:
                v = python_pow(a, b)
            except RowError:
                return (None, True)
            return (float(v) if out.name == "float" else v, False)

    else:
        target = kind

        def f(a: Any) -> tuple[Any, bool]:  # type: ignore[misc]
            from streamcell.backends.evaluate import RowError, cast_value

            try:
                return (cast_value(a, target), False)
            except RowError:
                return (None, True)

    fn = udf(f, returnType=rtype, useArrow=True)
    _UDFS[key] = fn
    return fn


# --------------------------------------------------------------------------- translation


class Translator:
    """Translates expressions over one input schema (the step's input)."""

    def __init__(self, schema: Schema, step: P.Step):
        self.schema = schema
        self.types = dict(schema)
        self.step = step
        self.typer = Typer(schema, step)
        self._cols: dict[str, Any] = {}  # a column read twice is one Spark column
        self._shapes = Shapes()  # a number per distinct subexpression
        self._shared: set[int] = set()  # shapes computed once, into a column of their own
        self._done: dict[int, tuple[Any, Any, int]] = {}  # shape -> (value, error, stage)
        self._inside: list[int] = []  # the latest stage read by each shared node being built
        self.stages: list[dict[str, Any]] = []
        """Columns to add before the translated ones read them, stage by stage (a stage
        reads only the stages before it): the subexpressions :meth:`share` found."""

    def _shape(self, e: IR) -> int:
        """A number per distinct subexpression (:class:`~streamcell.expr.Shapes`)."""
        return self._shapes.of(e)

    def share(self, roots: list[IR]) -> None:
        """Marks the subexpressions that ``roots`` compute more than once, to be computed
        once each into a hidden column (:attr:`stages`). Without it a repeated subexpression
        is a repeated Spark column: ``e = f(e, e)`` applied k times is 2^k copies of the first
        ``e`` (and of any Python UDF in it) in one Catalyst expression, which Spark plans and
        runs in time exponential in k. A subexpression counts once however often it appears
        inside a shared one (that one is computed once)."""
        self._shared |= self._shapes.repeated(roots)

    def unsupported(self, what: str) -> NotSupportedError:
        return NotSupportedError(self.step.step_id, NAME, what)

    def lit(self, v: Any, t: DType) -> Any:
        from pyspark.sql import functions as F

        if v is None or t.name == "null":
            return F.lit(None).cast(spark_type(t))
        if t.name == "float":
            if math.isnan(v):
                return F.lit(float("nan")).cast("double")
            return F.lit(float(v)).cast("double")
        if t.name == "datetime":
            if not isinstance(v, _dt.datetime):
                v = _dt.datetime(v.year, v.month, v.day)
            return F.lit(v.replace(tzinfo=None)).cast("timestamp_ntz")
        return F.lit(v).cast(spark_type(t))

    def translate(self, e: IR, want: DType | None = None) -> tuple[Any, Any]:
        """``(value, error)`` for ``e``; ``value`` cast to ``want`` (default: e's type)."""
        v, err = self._go(e)
        t = want or self.typer.type(e)
        if t.name != "list":
            v = v.cast(spark_type(t))
        return v, err

    def _go(self, e: IR) -> tuple[Any, Any]:
        if not self._shared:
            return self._node(e)
        k = self._shape(e)
        if k not in self._shared:
            return self._node(e)
        got = self._done.get(k)
        if got is None:
            self._inside.append(-1)
            v, err = self._node(e)
            stage = self._inside.pop() + 1
            while len(self.stages) <= stage:
                self.stages.append({})
            name = f"__sc_shared{len(self._done)}"
            self.stages[stage][name] = v
            if err is not None:
                self.stages[stage][name + "_e"] = err
            got = self._done[k] = (qcol(name), None if err is None else qcol(name + "_e"), stage)
        if self._inside:
            self._inside[-1] = max(self._inside[-1], got[2])
        return got[0], got[1]

    def _node(self, e: IR) -> tuple[Any, Any]:  # noqa: C901 - one dispatch over the IR
        from pyspark.sql import functions as F

        t = self.typer.type(e)
        if isinstance(e, Col):
            c = self._cols.get(e.name)
            if c is None:
                c = self._cols[e.name] = qcol(e.name)
            return c, None
        if isinstance(e, Lit):
            if isinstance(e.value, tuple):
                raise self.unsupported("list literal outside is_in")
            return self.lit(e.value, t), None
        if isinstance(e, Unary):
            v, err = self._go(e.operand)
            if e.op == "neg":
                return (-v).cast(spark_type(t)), err
            return ~v, err
        if isinstance(e, Binary):
            return self._binary(e, t)
        if isinstance(e, When):
            out = None
            errs: list[tuple[Any, Any, Any]] = []
            for cond, val in e.branches:
                c, ce = self._go(cond)
                vv, ve = self._go(val)
                vv = vv.cast(spark_type(t))
                out = F.when(c, vv) if out is None else out.when(c, vv)
                errs.append((c, ce, ve))
            o, oe = self._go(e.otherwise)
            assert out is not None
            value = out.otherwise(o.cast(spark_type(t)))
            # error of the first evaluated failing part, walking the branches as the reference
            err = oe
            for c, ce, ve in reversed(errs):
                taken = F.coalesce(c, F.lit(False))
                inner: Any = F.when(taken, ve if ve is not None else F.lit(False)).otherwise(
                    err if err is not None else F.lit(False)
                )
                if ve is None and err is None:
                    inner = None
                err = _or(ce, inner)
            return value, err
        if isinstance(e, Call):
            return self._call(e, t)
        raise self.unsupported(f"expression {e!r}")

    # ----------------------------------------------------------------- operators
    def _binary(self, e: Binary, t: DType) -> tuple[Any, Any]:  # noqa: C901
        from pyspark.sql import functions as F

        lt, rt = self.typer.type(e.left), self.typer.type(e.right)
        a, ae = self._go(e.left)
        b, be = self._go(e.right)
        op = e.op
        if op in ("and", "or"):
            # right side evaluated unless the left decided (False for and, True for or)
            decided = op == "or"
            err = _or(ae, _and_err(lambda: ~F.coalesce(a == F.lit(decided), F.lit(False)), be))
            return (a & b if op == "and" else a | b), err
        # every other binary op: left evaluated; right evaluated only if left is not null
        err = _or(ae, _and_err(a.isNotNull, be))
        if lt.name == "null" or rt.name == "null":
            return self.lit(None, t), err
        if op in ("==", "!=", "<", "<=", ">", ">="):
            if {lt.name, rt.name} == {"int", "float"}:
                a, b = a.cast("double"), b.cast("double")
            if _nan_passes(op, e.right):
                a = _unscanned(a, e.left, lt)
            if _nan_passes(FLIPPED[op], e.left):
                b = _unscanned(b, e.right, rt)
            return COMPARE[op](a, b), err  # only the chosen column is built
        if op == "+" and t.name == "str":
            return F.concat(a, b), err
        if op in ("+", "-", "*"):
            st = spark_type(t)
            a, b = a.cast(st), b.cast(st)
            return ARITHMETIC[op](a, b), err
        if op == "/":
            return _true_div(a.cast("double"), b.cast("double")), err
        if op == "//":
            if t.name == "int":
                return _int_floordiv(a, b), err
            return _float_floor(_nz_div(a.cast("double"), b.cast("double"))), err
        if op == "%":
            if t.name == "int":
                return _int_mod(a, b), err
            return _float_mod(a.cast("double"), b.cast("double")), err
        if op == "**":
            r = _udf("pow", t)(a, b)
            return r["v"], _or(err, _and_err(lambda: a.isNotNull() & b.isNotNull(), r["e"]))
        raise self.unsupported(f"operator {op}")

    def _call(self, e: Call, t: DType) -> tuple[Any, Any]:  # noqa: C901 - one table of functions
        from pyspark.sql import functions as F

        fn = e.fn
        st = self.typer.type(e.args[0])
        v, verr = self._go(e.args[0])
        if fn == "is_null":
            return v.isNull(), verr
        if fn == "is_not_null":
            return v.isNotNull(), verr
        if fn == "fill_null":
            o, oe = self._go(e.args[1])
            tt = spark_type(t)
            return F.coalesce(v.cast(tt), o.cast(tt)), _or(verr, _and_err(v.isNull, oe))
        if fn == "cast":
            lit = e.args[1]
            assert isinstance(lit, Lit)
            return self._cast(v, st, parse_dtype(lit.value), verr)
        if fn == "is_in":
            lit = e.args[1]
            assert isinstance(lit, Lit)
            return self._is_in(v, st, tuple(lit.value)), verr
        # the remaining functions give null for a null subject or argument
        rest: list[Any] = []
        err = verr
        for a in e.args[1:]:
            x, xe = self._go(a)
            err = _or(err, _and_err(v.isNotNull, xe))
            rest.append(x)
        if st.name == "null":
            return self.lit(None, t), err
        if fn == "abs":
            return F.abs(v), err
        if fn == "round":
            if st.name == "int":
                return v, err
            d = e.args[1] if len(e.args) > 1 else Lit(0)
            if not isinstance(d, Lit) or not isinstance(d.value, int):
                raise self.unsupported("round() with non-literal decimals")
            return _round_half_even(v, d.value), err
        if fn == "str.contains":
            return v.contains(rest[0]), err
        if fn == "str.starts_with":
            return v.startswith(rest[0]), err
        if fn == "str.ends_with":
            return v.endswith(rest[0]), err
        if fn == "str.to_lowercase":
            return F.lower(v), err
        if fn == "str.to_uppercase":
            return F.upper(v), err
        if fn == "str.len_chars":
            return F.char_length(v).cast("bigint"), err
        dt_fns = {
            "dt.year": F.year,
            "dt.month": F.month,
            "dt.day": F.dayofmonth,
            "dt.hour": F.hour,
            "dt.minute": F.minute,
            "dt.second": F.second,
        }
        if fn in dt_fns:
            return dt_fns[fn](v).cast("bigint"), err
        if fn == "dt.weekday":
            return (F.weekday(v) + 1).cast("bigint"), err
        if fn == "dt.date":
            return F.to_date(v), err
        if fn == "dt.epoch_us":
            return epoch_us(v, st), err
        raise self.unsupported(f"function {fn}")

    def _is_in(self, v: Any, st: DType, values: tuple[Any, ...]) -> Any:
        from pyspark.sql import functions as F

        has_null = None in values
        n = st.name
        keep: list[Any]
        if n in ("int", "bool"):
            keep = [
                int(x)
                for x in values
                if isinstance(x, (bool, int)) or isinstance(x, float) and x.is_integer()
            ]
            subject = v.cast("bigint")
        elif n == "float":
            # a row's NaN is never ``in`` a list (Python compares NaN unequal)
            keep = [float(x) for x in values if isinstance(x, (int, float)) and x == x]
            subject = v
        elif n == "str":
            keep = [x for x in values if isinstance(x, str)]
            subject = v
        elif n == "datetime":
            keep = [x for x in values if isinstance(x, _dt.datetime)]
            subject = v
        elif n == "date":
            keep = [
                x for x in values if isinstance(x, _dt.date) and not isinstance(x, _dt.datetime)
            ]
            subject = v
        else:
            keep, subject = [], v
        hit = subject.isin(keep) if keep else F.lit(False)
        return F.when(v.isNull(), F.lit(True) if has_null else F.lit(None)).otherwise(hit)

    def _cast(self, v: Any, st: DType, tt: DType, err: Any) -> tuple[Any, Any]:  # noqa: C901
        from pyspark.sql import functions as F

        s, t = st.name, tt.name
        out = spark_type(tt)
        notnull = v.isNotNull  # built where an error needs it
        if s == "null":
            return self.lit(None, tt), err
        if s == t:
            return v, err
        fails = None  # a rule for which non-null values fail
        res = None
        if t == "int":
            if s == "bool":
                res = v.cast(out)
            elif s == "float":
                ok = ~F.isnan(v) & (v >= F.lit(_I64_LO)) & (v < F.lit(_I64_HI))
                res, fails = F.when(ok, v.cast(out)), ~ok
            elif s in ("datetime", "date"):
                res = epoch_us(v, s_type(s)) if s == "datetime" else F.unix_date(v).cast(out)
        elif t == "float":
            if s in ("int", "bool"):
                res = v.cast(out)
            elif s in ("datetime", "date"):
                res = epoch_us(v, st).cast(out)
        elif t == "str":
            if s in ("bool", "int", "date"):
                res = v.cast(out)
            elif s == "datetime":
                res = F.date_format(v, "yyyy-MM-dd HH:mm:ss.SSSSSS")
        elif t == "bool":
            if s in ("int", "float"):
                res = v != F.lit(0)
            elif s in ("datetime", "date"):
                res, fails = self.lit(None, tt), F.lit(True)
        elif t == "datetime":
            if s == "date":
                res = v.cast(out)
            elif s == "int":
                ok = (v >= F.lit(_US_MIN)) & (v <= F.lit(_US_MAX))
                res, fails = F.when(ok, F.timestamp_micros(v).cast(out)), ~ok
            elif s in ("float", "bool"):
                res, fails = self.lit(None, tt), F.lit(True)
        elif t == "date":
            if s == "datetime":
                res = F.to_date(v)
            elif s in ("int", "float", "bool"):
                res, fails = self.lit(None, tt), F.lit(True)
        if res is None:  # from strings, float to str: the reference's own conversion
            r = _udf(t, tt)(v)
            return r["v"], _or(err, _and_err(notnull, r["e"]))
        return res, _or(err, None if fails is None else _and_err(notnull, fails))


def s_type(name: str) -> DType:
    return DType(name)


def epoch_us(v: Any, t: DType) -> Any:
    from pyspark.sql import functions as F

    if t.name == "date":
        return F.unix_date(v).cast("bigint") * F.lit(86_400_000_000)
    return F.unix_micros(v.cast("timestamp"))


def _negative_zero(b: Any) -> Any:
    return b.cast("string") == "-0.0"


def _true_div(a: Any, b: Any) -> Any:
    """Python/Polars ``/``: x/0 is ±inf, 0/0 and nan/0 are nan (Spark would give null)."""
    from pyspark.sql import functions as F

    nan = F.lit(float("nan")).cast("double")
    inf = F.lit(float("inf")).cast("double")
    sign = F.when(a > 0, F.lit(1.0)).otherwise(F.lit(-1.0))
    sign = F.when(_negative_zero(b), -sign).otherwise(sign)
    by_zero = F.when((a == 0) | F.isnan(a), nan).otherwise(sign * inf)
    return (
        F.when(b.isNull() | a.isNull(), F.lit(None).cast("double"))
        .when(b == 0, by_zero)
        .otherwise(a / b)
    )


def _nz_div(a: Any, b: Any) -> Any:
    """``a / b`` as doubles, null when ``b == 0`` (``//`` and ``%`` give null there)."""
    from pyspark.sql import functions as F

    return F.when(b != 0, a / b)


def _float_floor(q: Any) -> Any:
    """``float(math.floor(q))`` for finite q, q itself for inf/nan, without leaving doubles."""
    from pyspark.sql import functions as F

    r = q % F.lit(1.0)
    fl = F.when(r < 0, q - r - F.lit(1.0)).otherwise(q - r)
    finite = ~F.isnan(q) & (F.abs(q) != F.lit(float("inf")))
    return F.when(finite, fl).otherwise(q)


def _int_floordiv(a: Any, b: Any) -> Any:
    from pyspark.sql import functions as F

    a, b = a.cast("bigint"), b.cast("bigint")
    q = F.call_function("div", a, b)
    r = a % b
    adjust = (r != 0) & ((r < 0) != (b < 0))
    return F.when(b == 0, F.lit(None).cast("bigint")).when(adjust, q - 1).otherwise(q)


def _int_mod(a: Any, b: Any) -> Any:
    from pyspark.sql import functions as F

    a, b = a.cast("bigint"), b.cast("bigint")
    r = a % b
    return (
        F.when(b == 0, F.lit(None).cast("bigint"))
        .when((r != 0) & ((r < 0) != (b < 0)), r + b)
        .otherwise(r)
    )


def _float_mod(a: Any, b: Any) -> Any:
    """Python's float ``%``: the result takes the divisor's sign (null when b == 0)."""
    from pyspark.sql import functions as F

    m = a % b
    zero = F.when(b < 0, F.lit(-0.0)).otherwise(F.lit(0.0)).cast("double")
    return (
        F.when(b == 0, F.lit(None).cast("double"))
        .when(m != 0, F.when((b < 0) != (m < 0), m + b).otherwise(m))
        .otherwise(zero)
    )


def _rint(t: Any) -> Any:
    """A finite double rounded to an integer, ties to even, the sign of zero kept (Rust's
    ``round_ties_even``): ``t - floor(t)`` is exact, so the tie test is exact."""
    from pyspark.sql import functions as F

    fl = _float_floor(t)
    diff = t - fl
    up = fl + F.lit(1.0)
    tie = F.when(fl % F.lit(2.0) == F.lit(0.0), fl).otherwise(up)
    r = F.when(diff < F.lit(0.5), fl).when(diff > F.lit(0.5), up).otherwise(tie)
    return F.when(r == F.lit(0.0), t * F.lit(0.0)).otherwise(r)


def _round_half_even(v: Any, d: int) -> Any:
    """``evaluate.round_float`` (Polars' ``round``): ``rint(v·10^d) / 10^d``, v itself when
    that is not finite (nan, inf, overflow)."""
    from pyspark.sql import functions as F

    from ..evaluate import powi

    if d >= 326:
        return v

    def finite(x: Any) -> Any:
        return ~F.isnan(x) & (F.abs(x) != F.lit(float("inf")))

    if d == 0:
        t = v
        res = _rint(t)
    elif d >= 300:
        mul2, mul5 = math.ldexp(1.0, d), powi(5.0, d)
        t = v * F.lit(mul2) * F.lit(mul5)
        res = _rint(t) / F.lit(mul5) * F.lit(1.0 / mul2)
    else:
        m = powi(10.0, d)
        t = v * F.lit(m)
        res = _rint(t) / F.lit(m)
    return F.when(finite(t) & finite(res), res).otherwise(v)


def can_fail(e: IR) -> bool:
    """Whether evaluating ``e`` can raise a RowError for some row (cast, int power)."""
    if isinstance(e, Call):
        return e.fn == "cast" or any(can_fail(a) for a in e.args)
    if isinstance(e, Binary):
        return e.op == "**" or can_fail(e.left) or can_fail(e.right)
    if isinstance(e, Unary):
        return can_fail(e.operand)
    if isinstance(e, When):
        return any(can_fail(c) or can_fail(v) for c, v in e.branches) or can_fail(e.otherwise)
    return False
