"""Native user functions: scalar functions written in Cython, compiled from the cell.

``cython_udf(source)`` takes Cython source defining one or more typed scalar functions::

    cdef double score(double price, long qty) noexcept nogil:
        return price * qty if qty > 0 else 0.0

and compiles it (Cython, then the system C compiler) into an extension module cached under
``$STREAMCELL_UDF_CACHE`` (default ``~/.cache/streamcell/udf``), keyed by a hash of the source
and the streamcell / Cython / Python versions (the least recently used modules beyond
``$STREAMCELL_UDF_CACHE_SIZE``, 256, are deleted): re-running an unchanged cell imports the cached
module and never invokes a compiler. The generated module adds, per exported function,

- a vectorized kernel ``void k(n, vals, oks, out, out_ok) noexcept nogil`` that the native
  runtime calls from its worker threads without the GIL (null in any argument -> null out);
- a Python row wrapper that the reference engine (the oracle) calls once per row.

Exported functions: every ``cdef <ret> <name>(<type> <arg>, ...) noexcept nogil`` whose name
does not start with ``_``; ``<ret>`` and the argument types are ``double`` (float), ``long`` /
``int64_t`` / ``int`` / ``long long`` (int) or ``bint`` (bool). Other ``cdef`` helpers may be
defined freely and called from the exported functions.

Expressions call a registered function by name: ``score(price, qty)`` in the DSL, or
``sc.call("score", sc.col("price"), sc.col("qty"))`` / ``udfs.score(...)`` in the fluent API.

Transactional functions (the ``speculate`` stage, Sturzrehm) take the state first::

    cdef long claim(sc_txn *tx, long x) noexcept nogil:
        if tx_get(tx, x) == 0:
            tx_put(tx, x, 1)
            return x
        return -1

``tx_get(tx, key)`` / ``tx_put(tx, key, value)`` read and write a keyed store (int64 keys and
values; a key never written reads 0) through a small vtable (native/exec/txn.h), so the
module never links against the runtime. For them the module adds a row kernel the speculative
engine calls per event (exec/txn.h, ``sc_txn_kernel``) and a Python wrapper taking a ``dict``
as the store (the reference engine's plain map). They are not callable in expressions.

Keyed steps (the ``apply`` stage) take a pointer to a state struct declared in the same
source first::

    cdef struct Avg:
        double total
        long n

    cdef double running_avg(Avg *st, double price) noexcept nogil:
        st.total += price
        st.n += 1
        return st.total / st.n

Fields are ``double``, the int types or ``bint``, or fixed-size arrays of them
(``double last[4]``). The module exports ``sizeof`` of each step's struct
(``_sc_state_sizes``), a batch kernel taking one state pointer per row (exec/ops_step.h,
``sc_step_kernel``) and a Python wrapper taking the state as a ``bytearray`` of that size (the
reference engine's per-key buffer). They are not callable in expressions either.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import StreamcellError
from .expr import UDF_PREFIX, Call, Expr, _ir, col
from .types import BOOL, FLOAT, INT, DType

_CTYPES: dict[str, tuple[str, DType]] = {
    # Cython spelling -> (kind letter used by the native kernel ABI, streamcell type)
    "double": ("d", FLOAT),
    "long": ("i", INT),
    "long long": ("i", INT),
    "int64_t": ("i", INT),
    "int": ("i", INT),
    "bint": ("b", BOOL),
}
_C_DECL = {"d": "double", "i": "int64_t", "b": "uint8_t"}


class UdfError(StreamcellError):
    """A user function could not be parsed, compiled or loaded (message names where/why)."""


class UdfCompileError(UdfError):
    """Cython or the C compiler rejected the source. ``line`` / ``column`` are 1-based
    positions in the user's source (None when the error lies in generated code)."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None):
        super().__init__(message)
        self.line = line
        self.column = column


@dataclass(frozen=True)
class UdfSpec:
    """One exported function of a compiled module."""

    name: str
    params: tuple[tuple[str, str], ...]  # (argument name, kind letter d/i/b)
    ret: str  # kind letter
    kernel: int  # address of the vectorized nogil kernel; 0 for a Python function
    row: Any  # Python callable for the reference engine
    module: str  # the compiled module's name ("" for a Python function)
    returns: DType | None = None  # a Python function's declared result type
    txn: bool = False  # transactional: first argument sc_txn *tx (a speculate stage's function)
    state: str | None = None  # keyed step: first argument a pointer to this struct (apply stage)
    state_size: int = 0  # sizeof the state struct (keyed steps)

    @property
    def is_python(self) -> bool:
        return self.kernel == 0

    @property
    def arg_types(self) -> tuple[DType | None, ...]:
        """Each argument's type; None: any type (Python functions)."""
        return tuple(_KIND_TYPE.get(k) for _, k in self.params)

    @property
    def return_type(self) -> DType:
        return self.returns if self.returns is not None else _KIND_TYPE[self.ret]

    def signature(self) -> str:
        args = ", ".join(f"{n}: {_KIND_TYPE[k]}" if k in _KIND_TYPE else n for n, k in self.params)
        if self.txn:
            args = "tx" + (", " + args if args else "")
        if self.state:
            args = f"{self.state} *st" + (", " + args if args else "")
        return f"{self.name}({args}) -> {self.return_type}"

    def label(self) -> str:
        """How ``explain()`` describes the function."""
        if self.txn:
            return f"{self.name}: native transaction (Cython, nogil; speculative, ordered commit)"
        if self.state:
            return (
                f"{self.name}: native keyed step (Cython, nogil; "
                f"state struct {self.state}, {self.state_size} bytes per key)"
            )
        if self.is_python:
            return f"{self.name}: Python function, slow path (per row, reference engine only)"
        return f"{self.name}: native (Cython, nogil)"


_KIND_TYPE = {"d": FLOAT, "i": INT, "b": BOOL}

TXN_IN_EXPR = (
    "{name} is a transactional function (its first argument is sc_txn *tx): "
    "run it with a speculate stage (speculate {name}(...)), not in an expression"
)

STEP_IN_EXPR = (
    "{name} is a keyed step (its first argument is a pointer to its state struct): "
    "run it with an apply stage (key_by k, then apply {name}(...)), not in an expression"
)


def in_expr_error(spec: UdfSpec) -> str | None:
    """Why ``spec`` cannot be called in an expression (None: it can)."""
    if spec.txn:
        return TXN_IN_EXPR.format(name=spec.name)
    if spec.state:
        return STEP_IN_EXPR.format(name=spec.name)
    return None


_REGISTRY: dict[str, UdfSpec] = {}
_LOCK = threading.Lock()
# Number of times a compiler was actually run in this process (cache misses).
compile_count = 0


def lookup(name: str) -> UdfSpec | None:
    """The registered native function ``name`` (without the ``udf:`` prefix), or None."""
    return _REGISTRY.get(name)


def registered() -> dict[str, UdfSpec]:
    return dict(_REGISTRY)


def call(name: str, *args: Any) -> Expr:
    """An expression calling the registered native function ``name`` on ``args`` (column
    names or expressions). Example: ``sc.call("score", "price", sc.col("qty") + 1)``."""
    spec = _REGISTRY.get(name)
    if spec is None:
        known = ", ".join(sorted(_REGISTRY)) or "none registered yet; use sc.cython_udf(...)"
        raise UdfError(f"unknown native function {name!r} (known: {known})")
    why = in_expr_error(spec)
    if why:
        raise UdfError(why)
    if len(args) != len(spec.params):
        raise UdfError(f"{spec.signature()} takes {len(spec.params)} argument(s), got {len(args)}")
    irs = tuple(_ir(col(a) if isinstance(a, str) else a) for a in args)
    return Expr(Call(UDF_PREFIX + name, irs))


class UdfModule:
    """The functions of one compiled source, as attributes building call expressions."""

    def __init__(self, path: Path, specs: dict[str, UdfSpec], cached: bool):
        self.path = path
        self.functions = specs
        self.cached = cached  # True when the module came from the cache (no compiler ran)

    def __getattr__(self, name: str) -> Any:
        spec = self.__dict__.get("functions", {}).get(name)
        if spec is None:
            raise AttributeError(name)
        return lambda *args: call(name, *args)

    def __repr__(self) -> str:
        sigs = "; ".join(s.signature() for s in self.functions.values())
        how = "cached" if self.cached else "compiled"
        return f"<native UDFs ({how}) {sigs}>"


def python_udf(fn: Any, returns: str | type | DType, name: str | None = None) -> Any:
    """Register a plain Python scalar function as the slow path (per-row Python calls).

    Plans calling it run on the reference engine only (``engine="auto"`` falls back and says
    why; ``explain()`` labels it); write the function with :func:`cython_udf` to run it
    natively. A null argument gives null without calling ``fn``. Returns a function building
    call expressions: ``f = sc.python_udf(myfn, returns="float"); f("price")``."""
    import inspect

    from .types import parse_dtype

    if not callable(fn):
        raise UdfError(f"python_udf() needs a callable, got {type(fn).__name__}")
    fname: str = name or str(getattr(fn, "__name__", ""))
    if not fname.isidentifier() or fname == "<lambda>":
        raise UdfError("python_udf(): give the function a name (name='...')")
    try:
        sig = inspect.signature(fn)
        params = tuple(
            (p.name, "p")
            for p in sig.parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        )
    except (TypeError, ValueError):
        raise UdfError(f"python_udf(): cannot read the signature of {fname}") from None
    if not params:
        raise UdfError(f"python_udf(): {fname} must take at least one positional argument")
    t = parse_dtype(returns)
    if t not in (INT, FLOAT, BOOL) and t.name not in ("str", "date", "datetime"):
        raise UdfError(f"python_udf(): unsupported result type {t}")
    row = (lambda *a: None if (v := fn(*a)) is None else float(v)) if t == FLOAT else fn
    with _LOCK:
        _REGISTRY[fname] = UdfSpec(fname, params, "p", 0, row, "", t)
    return lambda *args: call(fname, *args)


def functions_called(e: Any) -> list[str]:
    """Names of the registered functions an expression (IR) calls, in first-use order."""
    from .expr import AggCall, Binary, Unary, When

    out: list[str] = []

    def walk(x: Any) -> None:
        if isinstance(x, Call):
            if x.fn.startswith(UDF_PREFIX) and x.fn[len(UDF_PREFIX) :] not in out:
                out.append(x.fn[len(UDF_PREFIX) :])
            for a in x.args:
                walk(a)
        elif isinstance(x, Binary):
            walk(x.left)
            walk(x.right)
        elif isinstance(x, Unary):
            walk(x.operand)
        elif isinstance(x, When):
            for c, v in x.branches:
                walk(c)
                walk(v)
            walk(x.otherwise)
        elif isinstance(x, AggCall) and x.arg is not None:
            walk(x.arg)

    walk(e)
    return out


# ------------------------------------------------------------------------------ parsing

_DEF = re.compile(
    r"^cdef\s+(?:inline\s+)?(?P<ret>long long|[A-Za-z_]\w*)\s+(?P<name>[A-Za-z_]\w*)\s*"
    r"\((?P<args>[^)]*)\)(?P<tail>[^:]*):",
    re.M,
)
_ARG = re.compile(r"^\s*(?:const\s+)?(?P<type>long long|[A-Za-z_]\w*)\s+(?P<name>[A-Za-z_]\w*)\s*$")
_TXN_ARG = re.compile(r"^\s*sc_txn\s*\*\s*(?P<name>[A-Za-z_]\w*)\s*$")
_PTR_ARG = re.compile(r"^\s*(?:struct\s+)?(?P<type>[A-Za-z_]\w*)\s*\*\s*(?P<name>[A-Za-z_]\w*)\s*$")
_STRUCT = re.compile(r"^c(?:type)?def\s+struct\s+(?P<name>[A-Za-z_]\w*)\s*:[ \t]*(?:#.*)?$", re.M)
_FIELD_NAME = re.compile(r"^(?P<name>[A-Za-z_]\w*)\s*(?:\[\s*(?P<n>\d+)\s*\])?$")

Parsed = tuple[str, tuple[tuple[str, str], ...], str, bool, str | None]
"""(name, ((arg, kind), ...), return kind, transactional, state struct or None)"""


@dataclass
class _Struct:
    name: str
    line: int  # 1-based line of ``cdef struct``
    fields: list[tuple[str, int, int]]  # (field line text, line, 0-based column of its text)


def parse_structs(source: str) -> dict[str, _Struct]:
    """The ``cdef struct NAME:`` blocks of ``source`` with their field lines."""
    lines = source.split("\n")
    out: dict[str, _Struct] = {}
    for m in _STRUCT.finditer(source):
        first = source.count("\n", 0, m.start())  # 0-based line index
        st = _Struct(m["name"], first + 1, [])
        for i in range(first + 1, len(lines)):
            text = lines[i]
            body = text.split("#", 1)[0]
            if not body.strip():
                continue
            if not text[:1].isspace():
                break
            st.fields.append((body.rstrip(), i + 1, len(body) - len(body.lstrip())))
        out[st.name] = st
    return out


def _check_state_struct(st: _Struct, fn: str) -> None:
    """UdfCompileError at the first field of ``st`` a keyed step's state may not have."""
    types = sorted(_CTYPES, key=len, reverse=True)  # "long long" before "long"
    if not st.fields:
        raise UdfCompileError(
            f"line {st.line}: struct {st.name} (the state of {fn}) has no fields", st.line, 1
        )
    for text, line, indent in st.fields:
        body = text.strip()
        if body == "pass":
            continue
        ty = next((t for t in types if re.match(re.escape(t) + r"\s", body)), None)
        names = body[len(ty) :].split(",") if ty else []
        ok = bool(names) and all(_FIELD_NAME.match(n.strip()) for n in names)
        ok = ok and all(int(_FIELD_NAME.match(n.strip())["n"] or 1) > 0 for n in names)  # type: ignore[index]
        if not ok:
            raise UdfCompileError(
                f"line {line}: field {body!r} of struct {st.name} (the state of {fn}) is not "
                f"supported: a state field is one of {', '.join(_CTYPES)} or a fixed-size "
                "array of one (e.g. double last[4])",
                line,
                indent + 1,
            )


def parse_functions(source: str) -> list[Parsed]:
    """The exported functions of ``source``: (name, ((arg, kind), ...), return kind, txn,
    state struct)."""
    out: list[Parsed] = []
    structs = parse_structs(source)
    for m in _DEF.finditer(source):
        name = m["name"]
        if name.startswith("_"):
            continue
        line = source.count("\n", 0, m.start()) + 1
        where = f"line {line}: {name}"
        ret = m["ret"]
        if ret not in _CTYPES:
            raise UdfCompileError(
                f"{where}: return type {ret!r} is not supported "
                f"(use one of {', '.join(_CTYPES)}; prefix helpers with _ to keep them private)",
                line,
                m.start("ret") - m.start() + 1,
            )
        tail = m["tail"].split()
        if "nogil" not in tail or "noexcept" not in tail:
            raise UdfCompileError(
                f"{where}: exported functions must be declared 'noexcept nogil' "
                f"(e.g. cdef {ret} {name}(...) noexcept nogil:)",
                line,
                1,
            )
        params = []
        raw = m["args"]
        line_start = source.rfind("\n", 0, m.start()) + 1
        offset = m.start("args") - line_start  # 0-based column of the argument list
        parts = raw.split(",") if raw.strip() else []
        txn = bool(parts) and _TXN_ARG.match(parts[0]) is not None
        pm = _PTR_ARG.match(parts[0]) if parts and not txn else None
        state = pm["type"] if pm is not None else None
        first = "sc_txn *tx" if txn else (f"{state} *st" if state else "")
        for j, a in enumerate(parts):
            column = offset + len(a) - len(a.lstrip()) + 1
            offset += len(a) + 1
            if j == 0 and state is not None:
                if state not in structs:
                    raise UdfCompileError(
                        f"{where}: state struct {state!r} is not declared in this source "
                        f"(declare it before: cdef struct {state}: ...)",
                        line,
                        column,
                    )
                _check_state_struct(structs[state], name)
                continue
            if j == 0 and txn:
                continue
            am = _ARG.match(a)
            if am is None or am["type"] not in _CTYPES:
                if am is not None and am["type"] in structs:
                    hint = (
                        f"; a keyed step takes its state as a pointer first: "
                        f"{am['type']} *{am['name']}"
                    )
                elif "sc_txn" in a:
                    hint = "; the state argument sc_txn *tx comes first"
                elif "*" in a and j > 0:
                    hint = "; only the first argument may be a state pointer"
                else:
                    hint = f" (after {first})" if first else ""
                raise UdfCompileError(
                    f"{where}: argument {a.strip()!r} needs one of the types "
                    f"{', '.join(_CTYPES)} and a name{hint}",
                    line,
                    column,
                )
            params.append((am["name"], _CTYPES[am["type"]][0]))
        if not params:
            raise UdfCompileError(
                f"{where}: an exported function takes at least one "
                f"{f'data argument after {first}' if first else 'argument'}",
                line,
                m.start("args") - line_start + 1,
            )
        out.append((name, tuple(params), _CTYPES[ret][0], txn, state))
    if not out:
        raise UdfCompileError(
            "no exported function found; define e.g. "
            "'cdef double f(double x) noexcept nogil:' (names starting with _ are private)"
        )
    return out


# ------------------------------------------------------------------------- generation

_HEADER = """\
# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=False
from libc.stdint cimport int64_t, uint8_t
from libc.math cimport *
cdef struct sc_txn:  # native/exec/txn.h (SC_TXN_ABI 1): keep the layouts equal
    int64_t (*get)(sc_txn *tx, int64_t key) noexcept nogil
    void (*put)(sc_txn *tx, int64_t key, int64_t value) noexcept nogil
    void *impl
cdef inline int64_t tx_get(sc_txn *tx, int64_t key) noexcept nogil:
    return tx.get(tx, key)
cdef inline void tx_put(sc_txn *tx, int64_t key, int64_t value) noexcept nogil:
    tx.put(tx, key, value)
"""

_REF_STORE = """
cdef int64_t _sc_ref_get(sc_txn *tx, int64_t key) noexcept nogil:
    with gil:
        return (<dict>tx.impl).get(key, 0)


cdef void _sc_ref_put(sc_txn *tx, int64_t key, int64_t value) noexcept nogil:
    with gil:
        (<dict>tx.impl)[key] = value
"""


def _generate_txn(name: str, params: tuple[tuple[str, str], ...], ret: str) -> str:
    """The speculative engine's row kernel and the reference's dict-backed wrapper."""
    n = len(params)
    valid = " and ".join(f"oks[{j}][r]" for j in range(n))
    args = ", ".join(f"(<const {_C_DECL[k]} *>vals[{j}])[r]" for j, (_, k) in enumerate(params))
    call = f"{name}(tx, {args})"
    store = (
        f"(<double *>out)[0] = {call}"
        if ret == "d"
        else f"(<int64_t *>out)[0] = {'(1 if ' + call + ' else 0)' if ret == 'b' else call}"
    )
    pargs = ", ".join(f"p{j}" for j in range(n))
    pnone = " or ".join(f"p{j} is None" for j in range(n))
    result = f"{name}(&tx, {pargs})"
    return f"""
cdef void _sct_{name}(sc_txn *tx, const void **vals, const uint8_t **oks, int64_t r, void *out,
                      uint8_t *out_ok) noexcept nogil:
    if {valid}:
        {store}
        out_ok[0] = 1
    else:
        out_ok[0] = 0


def _scp_{name}(dict store, {pargs}):
    cdef sc_txn tx
    if {pnone}:
        return None
    tx.get = _sc_ref_get
    tx.put = _sc_ref_put
    tx.impl = <void *>store
    return {"bool(" + result + ")" if ret == "b" else result}
"""


def _generate_step(name: str, params: tuple[tuple[str, str], ...], ret: str, state: str) -> str:
    """A keyed step's batch kernel (exec/ops_step.h, one state pointer per row) and the
    reference's wrapper over a bytearray state."""
    n = len(params)
    decls = "\n".join(
        f"    cdef const {_C_DECL[k]} *a{j} = <const {_C_DECL[k]} *>vals[{j}]"
        for j, (_, k) in enumerate(params)
    )
    valid = " and ".join(f"oks[{j}][r]" for j in range(n))
    call = f"{name}(<{state} *>states[r], {', '.join(f'a{j}[r]' for j in range(n))})"
    value = f"(1 if {call} else 0)" if ret == "b" else call
    pargs = ", ".join(f"p{j}" for j in range(n))
    pnone = " or ".join(f"p{j} is None" for j in range(n))
    result = f"{name}(<{state} *>buf, {pargs})"
    return f"""
cdef void _scs_{name}(int64_t n, void **states, const void **vals, const uint8_t **oks, void *out,
                      uint8_t *out_ok) noexcept nogil:
{decls}
    cdef {_C_DECL[ret]} *o = <{_C_DECL[ret]} *>out
    cdef int64_t r
    for r in range(n):
        if {valid}:
            o[r] = {value}
            out_ok[r] = 1
        else:
            out_ok[r] = 0


def _scp_{name}(bytearray state, {pargs}):
    cdef char *buf
    if len(state) != sizeof({state}):
        raise ValueError("{name}: the state must be a bytearray of %d bytes" % sizeof({state}))
    if {pnone}:
        return None
    buf = state
    return {"bool(" + result + ")" if ret == "b" else result}
"""


def _generate(source: str, funcs: list[Parsed]) -> str:
    parts = [_HEADER, source.rstrip() + "\n", "\n# ---- generated by streamcell ----\n"]
    if any(f[3] for f in funcs):
        parts.append(_REF_STORE)
    for name, params, ret, txn, state in funcs:
        if txn:
            parts.append(_generate_txn(name, params, ret))
            continue
        if state:
            parts.append(_generate_step(name, params, ret, state))
            continue
        n = len(params)
        decls = "\n".join(
            f"    cdef const {_C_DECL[k]} *a{j} = <const {_C_DECL[k]} *>vals[{j}]"
            for j, (_, k) in enumerate(params)
        )
        valid = " and ".join(f"oks[{j}][r]" for j in range(n))
        call = f"{name}({', '.join(f'a{j}[r]' for j in range(n))})"
        value = f"(1 if {call} else 0)" if ret == "b" else call
        pargs = ", ".join(f"p{j}" for j in range(n))
        pnone = " or ".join(f"p{j} is None" for j in range(n))
        parts.append(
            f"""
cdef void _sck_{name}(int64_t n, const void **vals, const uint8_t **oks, void *out,
                      uint8_t *out_ok) noexcept nogil:
{decls}
    cdef {_C_DECL[ret]} *o = <{_C_DECL[ret]} *>out
    cdef int64_t r
    for r in range(n):
        if {valid}:
            o[r] = {value}
            out_ok[r] = 1
        else:
            out_ok[r] = 0


def _scp_{name}({pargs}):
    if {pnone}:
        return None
    return {"bool(" + name + "(" + pargs + "))" if ret == "b" else name + "(" + pargs + ")"}
"""
        )
    table = ", ".join(
        f"{name!r}: <size_t>&_sc{'t' if txn else ('s' if state else 'k')}_{name}"
        for name, _, _, txn, state in funcs
    )
    parts.append(f"\ndef _sc_kernels():\n    return {{{table}}}\n")
    sizes = ", ".join(f"{name!r}: sizeof({state})" for name, _, _, _, state in funcs if state)
    parts.append(f"\ndef _sc_state_sizes():\n    return {{{sizes}}}\n")
    return "".join(parts)


_HEADER_LINES = _HEADER.count("\n")


# -------------------------------------------------------------------------- compiling


def cache_limit() -> int:
    """How many compiled modules the cache keeps (``$STREAMCELL_UDF_CACHE_SIZE``, 256)."""
    try:
        return max(1, int(os.environ.get("STREAMCELL_UDF_CACHE_SIZE", "256")))
    except ValueError:
        return 256


def prune_cache(d: Path, keep: Path | None = None) -> list[Path]:
    """Delete the least recently used compiled modules beyond :func:`cache_limit` (never
    ``keep`` nor a module this process has loaded), and build folders left by a compiler
    killed more than an hour ago. Returns what was deleted."""

    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"

    def used(p: Path) -> float:
        st = p.stat()
        return max(st.st_atime, st.st_mtime)

    mods = sorted(d.glob(f"_scudf_*{suffix}"), key=used, reverse=True)
    loaded = {m.split(".")[0] for m in sys.modules if m.startswith("_scudf_")}
    gone = []
    for p in mods[cache_limit() :]:
        if p == keep or p.name.split(".")[0] in loaded:
            continue
        p.unlink(missing_ok=True)
        gone.append(p)
    for b in d.glob(".build-*"):
        if b.stat().st_mtime < time.time() - 3600:
            shutil.rmtree(b, ignore_errors=True)
            gone.append(b)
    return gone


def cache_dir() -> Path:
    d = os.environ.get("STREAMCELL_UDF_CACHE")
    return Path(d) if d else Path.home() / ".cache" / "streamcell" / "udf"


def _versions() -> str:
    import Cython

    from . import __version__

    return f"{__version__}|{Cython.__version__}|{sys.version}|{sysconfig.get_platform()}"


def _compiler() -> str:
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    exe = cc.split()[0]
    if shutil.which(exe) is None and shutil.which("cc") is not None:
        exe = "cc"
    if shutil.which(exe) is None:
        raise UdfError(
            f"no C compiler found (tried {exe!r}); native UDFs need one. Install it, e.g. "
            "'sudo apt-get install build-essential' (Debian/Ubuntu: gcc), 'sudo dnf install gcc' "
            "or 'xcode-select --install' (macOS), or set CC to a compiler's path"
        )
    return exe


_CY_ERR = re.compile(
    r"^(?P<file>[^\s:][^:\n]*\.pyx):(?P<line>\d+):(?P<col>\d+): (?P<msg>.*)$", re.M
)


def _cython_error(stderr: str, pyx: Path, user_lines: int) -> UdfCompileError:
    for m in _CY_ERR.finditer(stderr):
        if Path(m["file"]).name != pyx.name:
            continue
        line = int(m["line"]) - _HEADER_LINES
        column = int(m["col"])
        if 1 <= line <= user_lines:
            return UdfCompileError(
                f"Cython error at line {line}, column {column}: {m['msg']}", line, column
            )
        return UdfCompileError(f"Cython error in the generated wrapper: {m['msg']}")
    return UdfCompileError("Cython failed:\n" + stderr.strip()[-2000:])


def _build(source: str, funcs: list[Any], so: Path, modname: str) -> None:
    global compile_count
    cc = _compiler()
    import Cython  # noqa: F401 - a clear ImportError before anything runs

    work = so.parent / f".build-{modname}-{os.getpid()}-{threading.get_ident()}"
    work.mkdir(parents=True, exist_ok=True)
    try:
        pyx = work / f"{modname}.pyx"
        pyx.write_text(_generate(source, funcs))
        c_file = work / f"{modname}.c"
        compile_count += 1
        r = subprocess.run(
            [sys.executable, "-m", "cython", "-3", str(pyx), "-o", str(c_file)],
            capture_output=True,
            text=True,
            cwd=work,
        )
        if r.returncode != 0:
            raise _cython_error(r.stderr + r.stdout, pyx, source.count("\n") + 1)
        paths = sysconfig.get_paths()
        tmp = work / so.name
        cmd = [
            cc,
            "-shared",
            "-fPIC",
            "-O3",
            "-pthread",
            "-fno-strict-aliasing",
            "-w",
            f"-I{paths['include']}",
            f"-I{paths['platinclude']}",
            str(c_file),
            "-o",
            str(tmp),
            "-lm",
        ]
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=work)
        if r.returncode != 0:
            raise UdfCompileError(
                "the C compiler failed:\n" + (r.stderr or r.stdout).strip()[-2000:]
            )
        os.replace(tmp, so)  # atomic: concurrent kernels see a whole module or none
    finally:
        shutil.rmtree(work, ignore_errors=True)


def cython_udf(source: str) -> UdfModule:
    """Compile (or load from the cache) Cython scalar functions and register them.

    Returns a :class:`UdfModule`; each exported function is also callable by name in
    expressions (``score(price, qty)`` in a ``%%stream`` cell, ``sc.call("score", ...)``).
    Raises :class:`UdfCompileError` with the line and column in ``source`` on bad source, and
    :class:`UdfError` when no C compiler is installed."""
    if not isinstance(source, str) or not source.strip():
        raise UdfError("cython_udf() takes the Cython source as a non-empty string")
    import textwrap

    source = textwrap.dedent(source).rstrip() + "\n"  # keeps line numbers
    funcs = parse_functions(source)
    digest = hashlib.sha256((_versions() + "\0" + source).encode()).hexdigest()[:20]
    modname = f"_scudf_{digest}"
    d = cache_dir()
    d.mkdir(parents=True, exist_ok=True)
    so = d / (modname + (sysconfig.get_config_var("EXT_SUFFIX") or ".so"))
    with _LOCK:
        cached = so.exists()
        if not cached:
            _build(source, funcs, so, modname)
            prune_cache(d, keep=so)
        else:  # recently used (the access time; the build time stays): pruned last
            st = so.stat()
            os.utime(so, ns=(max(st.st_atime_ns, time.time_ns()), st.st_mtime_ns))
        mod = sys.modules.get(modname)
        if mod is None:
            spec = importlib.util.spec_from_file_location(modname, so)
            if spec is None or spec.loader is None:
                raise UdfError(f"cannot load the compiled module {so}")
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            sys.modules[modname] = mod  # never unloaded: kernels stay valid
        kernels = mod._sc_kernels()
        sizes = mod._sc_state_sizes() if any(f[4] for f in funcs) else {}
        specs = {}
        for name, params, ret, txn, state in funcs:
            specs[name] = UdfSpec(
                name,
                params,
                ret,
                int(kernels[name]),
                getattr(mod, f"_scp_{name}"),
                modname,
                txn=txn,
                state=state,
                state_size=int(sizes.get(name, 0)),
            )
        _REGISTRY.update(specs)
    return UdfModule(so, specs, cached)
