"""The ``%%stream`` language: parse cell text into a :class:`~streamcell.plan.Plan`, and back.

A cell is a list of stages, one per line (a line starting with whitespace continues the
previous stage; ``#`` starts a comment). Each stage is ``keyword arguments`` where the
arguments use Python call syntax and expressions use Python syntax and precedence, parsed
with Python's own :mod:`ast`. See the README for the full language.
"""

from __future__ import annotations

import ast
import datetime as _dt
import re
import warnings
from dataclasses import dataclass
from typing import Any, NoReturn

from . import plan as P
from .errors import ArgumentError, DSLSyntaxError, did_you_mean
from .expr import (
    AGG_FUNCTIONS,
    FUNCTION_ALIASES,
    FUNCTIONS,
    IR,
    MAX_EXPR_DEPTH,
    AggCall,
    Binary,
    Call,
    Col,
    Lit,
    Pos,
    Unary,
    When,
    output_name,
    to_text,
)
from .types import parse_dtype
from .udf import UDF_PREFIX, in_expr_error
from .udf import lookup as udf_lookup

STAGES = (
    "source",
    "filter",
    "select",
    "with_columns",
    "explode",
    "key_by",
    "key_by_all",
    "transfer",
    "tumbling",
    "sliding",
    "session",
    "agg",
    "running",
    "top_k",
    "dedup",
    "sketch",
    "speculate",
    "apply",
    "union",
    "join",
    "correlate",
    "sink",
)

_HEAD_RE = re.compile(r"^(?:([A-Za-z_]\w*)\s*=(?!=)\s*)?([A-Za-z_]\w*)(.*)$", re.S)

_BINOPS = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.Pow: "**",
    ast.BitAnd: "and",
    ast.BitOr: "or",
}
_CMPOPS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}


@dataclass
class _Line:
    number: int  # 1-based line of the stage's first line within the cell
    text: str  # the stage text (continuation lines joined with "\n")
    lines: list[str]  # raw lines of the stage


def _split_stages(text: str, first_line: int = 1) -> list[_Line]:
    stages: list[_Line] = []
    for i, raw in enumerate(text.splitlines(), start=first_line):
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if raw[:1] in (" ", "\t") and stages:
            stages[-1].text += "\n" + raw
            stages[-1].lines.append(raw)
            continue
        stages.append(_Line(i, raw, [raw]))
    return stages


class _Stage:
    """One stage being parsed: keeps positions so every error points at the cell text."""

    def __init__(self, line: _Line):
        self.line = line
        m = _HEAD_RE.match(line.text.lstrip())
        indent = len(line.text) - len(line.text.lstrip())
        if not m:
            self.error("expected a stage such as 'filter <expr>'", indent + 1)
        self.label, self.keyword, rest = m.group(1), m.group(2), m.group(3)
        self.kw_col = indent + m.start(2) + 1
        if self.keyword not in STAGES:
            self.error(
                f"unknown stage {self.keyword!r}{did_you_mean(self.keyword, STAGES)}; "
                f"stages are: {', '.join(STAGES)}",
                self.kw_col,
                len(self.keyword),
            )
        self.args_col = indent + m.start(3)  # 0-based column where the argument text starts
        if self.keyword == "sketch":  # `theta(x) as name`: `as` becomes `@ ` (same columns)
            rest = re.sub(r"(?<![\w.])as(?=\s)", "@ ", rest)
        self.call = self._parse_args(rest)

    # -- errors and positions
    def error(self, msg: str, column: int, length: int = 1, line_offset: int = 0) -> NoReturn:
        raise DSLSyntaxError(
            msg,
            self.line.number + line_offset,
            column,
            self.line.lines[line_offset] if line_offset < len(self.line.lines) else "",
            length,
        )

    def pos(self, node: ast.AST) -> Pos:
        lineno = getattr(node, "lineno", 2) - 2  # parsed text is "_(\n" + args + "\n)"
        col = getattr(node, "col_offset", 0)
        end = getattr(node, "end_col_offset", col + 1)
        if lineno == 0:
            col += self.args_col
            end += self.args_col
        length = (
            max(1, end - col)
            if getattr(node, "end_lineno", None) == getattr(node, "lineno", None)
            else 1
        )
        raw = self.line.lines[lineno] if lineno < len(self.line.lines) else ""
        return Pos(self.line.number + lineno, col + 1, length, raw)

    def fail(self, node: ast.AST, msg: str) -> NoReturn:
        p = self.pos(node)
        raise DSLSyntaxError(msg, p.line, p.column, p.text, p.length)

    def _parse_args(self, rest: str) -> ast.Call:
        try:
            with warnings.catch_warnings():  # '\o' or '1and' in a cell: Python's own warnings
                warnings.simplefilter("ignore", SyntaxWarning)
                warnings.simplefilter("ignore", DeprecationWarning)
                tree = ast.parse("_(\n" + rest + "\n)", mode="eval")
        except (RecursionError, MemoryError):  # Python's parser gives up on deep nesting
            self.error(
                f"expression nested too deeply to parse (the limit is {MAX_EXPR_DEPTH} levels)",
                self.args_col + len(rest) - len(rest.lstrip()) + 1,
            )
        except SyntaxError as e:
            lineno = (e.lineno or 2) - 2
            col = (e.offset or 1) - 1
            if lineno <= 0:
                lineno, col = 0, col + self.args_col
            lineno = min(lineno, len(self.line.lines) - 1)
            msg = (e.msg or "invalid syntax").replace(
                "'_(' was never closed", "unbalanced brackets"
            )
            self.error(f"invalid syntax: {msg}", col + 1, 1, lineno)
        call = tree.body
        if not (  # a stray ")" closes the wrapper early: `sketch f(x)) as y` parses as `_(...) @ y`
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Name)
            and call.func.id == "_"
            and call.func.col_offset == 0
            and call.func.lineno == 1
            and getattr(call, "end_lineno", 0) == rest.count("\n") + 3
        ):
            self.error("invalid syntax: unbalanced brackets", self.args_col + 1)
        self._check_depth(call)
        return call

    def _check_depth(self, call: ast.Call) -> None:
        """Refuse an argument nested deeper than MAX_EXPR_DEPTH (iteratively, so any depth is
        safe here), at the node where it goes too deep: the converter, the compiler and every
        engine walk expressions recursively."""
        stack: list[tuple[ast.AST, int]] = [(a, 1) for a in call.args]
        stack += [(k.value, 1) for k in call.keywords]
        while stack:
            node, d = stack.pop()
            if d > MAX_EXPR_DEPTH:
                self.fail(
                    node,
                    f"expression nested more than {MAX_EXPR_DEPTH} levels deep; "
                    "split it into several with_columns stages",
                )
            for c in ast.iter_child_nodes(node):
                if isinstance(c, ast.expr):
                    stack.append((c, d + 1))

    # -- argument access
    def positional(self, lo: int, hi: int, what: str) -> list[ast.expr]:
        args = self.call.args
        for a in args:
            if isinstance(a, ast.Starred):
                self.fail(a, "*args are not supported")
        if not lo <= len(args) <= hi:
            expect = f"{lo}" if lo == hi else f"{lo} to {hi}"
            self.error(
                f"{self.keyword} takes {expect} positional argument(s): {what}",
                self.kw_col,
                len(self.keyword),
            )
        return list(args)

    def keywords(self, allowed: tuple[str, ...] | None) -> dict[str, ast.expr]:
        out: dict[str, ast.expr] = {}
        for k in self.call.keywords:
            if k.arg is None:
                self.fail(k.value, "**kwargs are not supported")
            assert k.arg is not None
            if allowed is not None and k.arg not in allowed:
                self.fail(
                    k, f"{self.keyword} has no option {k.arg!r}; options: {', '.join(allowed)}"
                )
            out[k.arg] = k.value
        return out

    # -- conversions
    def name(self, node: ast.expr) -> str:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "col"
            and len(node.args) == 1
            and isinstance(node.args[0], ast.Constant)
        ):
            return str(node.args[0].value)
        return self.fail(node, "expected a column name")

    def names(self, node: ast.expr) -> tuple[str, ...]:
        if isinstance(node, (ast.List, ast.Tuple)):
            return tuple(self.name(e) for e in node.elts)
        return (self.name(node),)

    def const(self, node: ast.expr) -> Any:
        if (
            isinstance(node, ast.UnaryOp)
            and isinstance(node.op, ast.USub)
            and isinstance(node.operand, ast.Constant)
        ):
            v = node.operand.value
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                return self.fail(node, "'-' goes before a number only")
            return -v
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.List, ast.Tuple)):
            return tuple(self.const(e) for e in node.elts)
        if isinstance(node, ast.Dict):
            return tuple((self.const(k), self.const(v)) for k, v in zip(node.keys, node.values))  # type: ignore[arg-type]
        if isinstance(node, ast.Name) and node.id in (
            "int",
            "float",
            "str",
            "bool",
            "datetime",
            "date",
        ):
            return node.id
        return self.fail(node, "expected a constant (number, string, list)")

    def duration(self, node: ast.expr) -> P.Duration:
        v = self.const(node)
        try:
            P.parse_duration(v)
        except (ValueError, TypeError) as e:
            self.fail(node, str(e))
        return v  # type: ignore[no-any-return]

    def expr(self, node: ast.expr) -> IR:
        return _ExprConverter(self).convert(node)


class _ExprConverter:
    def __init__(self, st: _Stage):
        self.st = st

    def convert(self, n: ast.expr) -> IR:
        st = self.st
        pos = st.pos(n)
        if isinstance(n, ast.Name):
            if n.id in ("True", "False", "None"):
                return Lit({"True": True, "False": False, "None": None}[n.id], pos)
            return Col(n.id, pos)
        if isinstance(n, ast.Constant):
            if not isinstance(n.value, (int, float, str, bool, type(None))):
                st.fail(n, f"unsupported literal {n.value!r}")
            return Lit(n.value, pos)
        if isinstance(n, (ast.List, ast.Tuple)):
            return Lit(st.const(n), pos)
        if isinstance(n, ast.UnaryOp):
            if isinstance(n.op, ast.USub):
                if (
                    isinstance(n.operand, ast.Constant)
                    and isinstance(n.operand.value, (int, float))
                    and not isinstance(n.operand.value, bool)
                ):
                    return Lit(-n.operand.value, pos)
                return Unary("neg", self.convert(n.operand), pos)
            if isinstance(n.op, ast.UAdd):
                return self.convert(n.operand)
            return Unary("not", self.convert(n.operand), pos)
        if isinstance(n, ast.BinOp):
            op = _BINOPS.get(type(n.op))
            if op is None:
                st.fail(n, f"operator {type(n.op).__name__} is not supported")
            return Binary(op, self.convert(n.left), self.convert(n.right), pos)  # type: ignore[arg-type]
        if isinstance(n, ast.BoolOp):
            op = "and" if isinstance(n.op, ast.And) else "or"
            out = self.convert(n.values[0])
            for v in n.values[1:]:
                out = Binary(op, out, self.convert(v), pos)
            return out
        if isinstance(n, ast.Compare):
            return self._compare(n, pos)
        if isinstance(n, ast.IfExp):
            return When(
                ((self.convert(n.test), self.convert(n.body)),), self.convert(n.orelse), pos
            )
        if isinstance(n, ast.Call):
            return self._call(n, pos)
        if isinstance(n, ast.Attribute):
            st.fail(n, f"{n.attr!r} must be called: write .{n.attr}(...)")
        return st.fail(n, f"unsupported expression ({type(n).__name__})")

    def _compare(self, n: ast.Compare, pos: Pos) -> IR:
        parts: list[IR] = []
        left = self.convert(n.left)
        for op, right_node in zip(n.ops, n.comparators):
            right = self.convert(right_node)
            if isinstance(op, (ast.In, ast.NotIn)):
                if not isinstance(right, Lit) or not isinstance(right.value, tuple):
                    self.st.fail(right_node, "'in' needs a literal list, e.g. x in [1, 2, 3]")
                e: IR = Call("is_in", (left, right), pos)
                if isinstance(op, ast.NotIn):
                    e = Unary("not", e, pos)
                parts.append(e)
            elif type(op) in _CMPOPS:
                parts.append(Binary(_CMPOPS[type(op)], left, right, pos))
            else:
                self.st.fail(
                    n, f"comparison {type(op).__name__} is not supported (use == / is_null())"
                )
            left = right
        out = parts[0]
        for p in parts[1:]:
            out = Binary("and", out, p, pos)
        return out

    def _call(self, n: ast.Call, pos: Pos) -> IR:
        st = self.st
        if n.keywords:
            st.fail(n.keywords[0], "keyword arguments are not supported in expressions")
        f = n.func
        if isinstance(f, ast.Name):
            name = f.id
            if name == "col":
                if len(n.args) != 1 or not isinstance(n.args[0], ast.Constant):
                    st.fail(n, 'col() takes one column name string: col("my column")')
                return Col(str(n.args[0].value), pos)  # type: ignore[attr-defined]
            if name == "lit":
                if len(n.args) != 1:
                    st.fail(n, "lit() takes one value")
                return Lit(st.const(n.args[0]), pos)
            if name in ("datetime", "date") and len(n.args) == 1:
                s = st.const(n.args[0])
                try:
                    v = (
                        _dt.datetime.fromisoformat(s)
                        if name == "datetime"
                        else _dt.date.fromisoformat(s)
                    )
                except (TypeError, ValueError):
                    return st.fail(n.args[0], f"expected an ISO {name} string")
                return Lit(v, pos)
            if name == "float" and len(n.args) == 1 and isinstance(n.args[0], ast.Constant):
                try:
                    return Lit(float(n.args[0].value), pos)  # type: ignore[arg-type]
                except (TypeError, ValueError):
                    return st.fail(n.args[0], "expected a number or a float string like 'nan'")
            if name in AGG_FUNCTIONS:
                if name == "count" and not n.args:
                    return AggCall("count", None, pos)
                if len(n.args) != 1:
                    st.fail(n, f"{name}() takes one argument")
                return AggCall(name, self.convert(n.args[0]), pos)
            if name == "when":
                st.fail(n, "when(...) must be followed by .then(...) and .otherwise(...)")
            spec = udf_lookup(name)
            why = in_expr_error(spec) if spec is not None else None
            if why:
                st.fail(f, why)
            if spec is not None:  # a native function compiled with sc.cython_udf
                if len(n.args) != len(spec.params):
                    st.fail(n, f"{spec.signature()} takes {len(spec.params)} argument(s)")
                return Call(UDF_PREFIX + name, tuple(self.convert(a) for a in n.args), pos)
            st.fail(
                f,
                f"unknown function {name!r}"
                f"{did_you_mean(name, [*AGG_FUNCTIONS, *(k.split('.')[-1] for k in FUNCTIONS)])}"
                '; functions are methods (x.abs(), x.str.contains("a")); '
                f"aggregates: {', '.join(AGG_FUNCTIONS)}",
            )
        if isinstance(f, ast.Attribute):
            return self._method(n, f, pos)
        return st.fail(n, "unsupported call")

    def _method(self, n: ast.Call, f: ast.Attribute, pos: Pos) -> IR:
        st = self.st
        if f.attr in ("then", "otherwise", "when"):
            return self._when_chain(n)
        subject_node = f.value
        fn = f.attr
        if isinstance(subject_node, ast.Attribute) and subject_node.attr in ("str", "dt"):
            fn = f"{subject_node.attr}.{f.attr}"
            subject_node = subject_node.value
        fn = FUNCTION_ALIASES.get(fn, fn)
        subject = self.convert(subject_node)
        if fn in AGG_FUNCTIONS or fn == "n_unique":
            if n.args:
                st.fail(n, f".{fn}() takes no arguments")
            return AggCall("count_distinct" if fn == "n_unique" else fn, subject, pos)
        if fn not in FUNCTIONS:
            known = ", ".join(sorted(FUNCTIONS))
            st.fail(f, f"unknown function {fn!r}{did_you_mean(fn, FUNCTIONS)}; known: {known}")
        lo, hi = FUNCTIONS[fn]
        if not lo - 1 <= len(n.args) <= hi - 1:
            st.fail(
                n, f"{fn}() takes {lo - 1}" + (f" to {hi - 1}" if hi != lo else "") + " argument(s)"
            )
        if fn == "cast":
            t = st.const(n.args[0])
            try:
                args: list[IR] = [Lit(str(parse_dtype(t)))]
            except ValueError as e:
                return st.fail(n.args[0], str(e))
        else:
            args = [self.convert(a) for a in n.args]
        if fn == "is_in" and not (isinstance(args[0], Lit) and isinstance(args[0].value, tuple)):
            st.fail(n.args[0], "is_in needs a literal list")
        return Call(fn, (subject, *args), pos)

    def _when_chain(self, n: ast.Call) -> IR:
        st = self.st
        # unwind: when(c).then(v)[.when(c).then(v)]*.otherwise(o)
        links: list[tuple[str, ast.Call]] = []
        cur: ast.expr = n
        while isinstance(cur, ast.Call):
            if isinstance(cur.func, ast.Attribute):
                links.append((cur.func.attr, cur))
                cur = cur.func.value
            elif isinstance(cur.func, ast.Name) and cur.func.id == "when":
                links.append(("when", cur))
                break
            else:
                st.fail(cur, "malformed when/then/otherwise chain")
        links.reverse()
        if not links or links[0][0] != "when" or links[-1][0] != "otherwise":
            st.fail(n, "expected when(cond).then(value)...otherwise(value)")
        branches: list[tuple[IR, IR]] = []
        i = 0
        while i < len(links) - 1:
            w, t = links[i], links[i + 1]
            if w[0] != "when" or t[0] != "then" or len(w[1].args) != 1 or len(t[1].args) != 1:
                st.fail(w[1], "expected when(cond).then(value)")
            branches.append((self.convert(w[1].args[0]), self.convert(t[1].args[0])))
            i += 2
        other = links[-1][1]
        if len(other.args) != 1:
            st.fail(other, "otherwise() takes one value")
        return When(tuple(branches), self.convert(other.args[0]), st.pos(n))


# ------------------------------------------------------------------------------ parser


class _Chain:
    def __init__(self, head: P.Step, label: str | None):
        self.step = head
        self.label = label
        self.keys: tuple[str, ...] | None = None
        self.keys_line = 0
        self.entities: tuple[str, ...] | None = None  # key_by_all, waiting for transfer
        self.entities_line = 0
        self.window: P.Window | None = None
        self.window_stage: _Stage | None = None
        self.sunk: P.Sink | None = None


def parse(
    text: str,
    namespace: dict[str, Any] | None = None,
    name: str | None = None,
    first_line: int = 1,
) -> P.Plan:
    """Parse ``%%stream`` cell text into a frozen :class:`~streamcell.plan.Plan`.

    ``namespace`` resolves names used as sources (``source df``) and callbacks
    (``sink callback(fn)``); in a notebook it is the user namespace. ``first_line`` is the
    number errors give the text's first line (2 in a cell: the ``%%stream`` line is 1).
    """
    ns = namespace or {}
    chains: list[_Chain] = []
    named: dict[str, _Chain] = {}
    consumed: set[int] = set()
    lines = _split_stages(text, first_line)
    if not lines:
        raise DSLSyntaxError("empty pipeline: start with a 'source' stage", first_line, 1)
    depth = 0  # steps after the current chain's source (checked before anything is parsed)
    for line in lines:
        head = _keyword(line)
        depth = 0 if head == "source" else depth + (head != "sink")
        if depth > P.MAX_PIPELINE_DEPTH:
            raise DSLSyntaxError(
                f"a pipeline may have at most {P.MAX_PIPELINE_DEPTH} stages between its source "
                "and its sink; split it into several cells",
                line.number,
                1,
                line.lines[0],
                len(line.lines[0].strip()) or 1,
            )
        st = _Stage(line)
        if st.label is not None and st.keyword != "source":
            st.error("only a source can be named: NAME = source ...", 1, len(st.label))
        if st.keyword == "source":
            if chains:
                _close(chains[-1])
            ch = _Chain(_source(st, ns), st.label)
            if st.label:
                if st.label in named:
                    st.error(f"stream {st.label!r} is already defined", 1, len(st.label))
                named[st.label] = ch
            chains.append(ch)
            continue
        if not chains:
            st.error("a pipeline must start with a 'source' stage", st.kw_col, len(st.keyword))
        ch = chains[-1]
        if ch.sunk is not None:
            st.error(
                "no stage may follow 'sink'; start a new stream with 'source'",
                st.kw_col,
                len(st.keyword),
            )
        _apply(st, ch, ns, named, consumed)
    _close(chains[-1])
    sinks = []
    for ch in chains:
        if id(ch) in consumed:
            if ch.sunk is not None:
                raise DSLSyntaxError(
                    f"stream {ch.label!r} has a sink and is also used by union/join "
                    "(fan-out is not supported yet)",
                    1,
                    1,
                )
            continue
        final_sketch = isinstance(ch.step, P.Sketch)
        sinks.append(
            ch.sunk or P.Sink(inputs=(ch.step,), target="none" if final_sketch else "table")
        )
    return P.Plan.of(tuple(sinks), name)


def _keyword(line: _Line) -> str | None:
    m = _HEAD_RE.match(line.text.lstrip())
    return m.group(2) if m else None


def _close(ch: _Chain) -> None:
    if ch.window_stage is not None:
        ch.window_stage.error(
            "a window stage must be followed by 'agg'",
            ch.window_stage.kw_col,
            len(ch.window_stage.keyword),
        )
    if ch.keys is not None:
        raise DSLSyntaxError(
            f"key_by on line {ch.keys_line} is not followed by a stateful stage", ch.keys_line, 1
        )
    if ch.entities is not None:
        raise DSLSyntaxError(
            f"key_by_all on line {ch.entities_line} must be followed by 'transfer'",
            ch.entities_line,
            1,
        )


def _source(st: _Stage, ns: dict[str, Any]) -> P.Source:
    (what,) = st.positional(1, 1, "what to read, e.g. clickstream(rows=1000) or a DataFrame name")
    kw = st.keywords(("rate",))
    rate = None
    if "rate" in kw:
        r = st.const(kw["rate"])
        if not isinstance(r, (int, float)) or r <= 0:
            st.fail(kw["rate"], "rate must be a positive number of rows per second")
        rate = float(r)
    if isinstance(what, ast.Name):
        if what.id not in ns:
            st.fail(what, f"name {what.id!r} is not defined in the notebook namespace")
        obj = ns[what.id]
        spec = (
            obj
            if isinstance(obj, P.SourceSpec)
            else P.SourceSpec("object", (), P.ObjRef(obj, what.id))
        )
        return P.Source(spec=spec, rate=rate, name=st.label, pos=st.pos(what))
    if isinstance(what, ast.Call) and isinstance(what.func, ast.Name):
        kind = what.func.id
        makers = {
            "clickstream": P.clickstream,
            "store_sales": P.store_sales,
            "parquet": P.parquet,
            "csv": P.csv,
            "ndjson": P.ndjson,
        }
        if kind not in makers:
            st.fail(
                what.func,
                f"unknown source {kind!r}{did_you_mean(kind, makers)}; "
                f"sources: {', '.join(makers)} or a notebook variable",
            )
        args = [st.const(a) for a in what.args]
        kwargs = {k.arg: st.const(k.value) for k in what.keywords if k.arg}
        for k, v in list(kwargs.items()):
            if isinstance(v, tuple) and v and all(isinstance(x, tuple) and len(x) == 2 for x in v):
                kwargs[k] = dict(v)
        try:
            spec = makers[kind](*args, **kwargs)  # type: ignore[operator]
        except TypeError as e:
            st.fail(what, f"{kind}: {e}")
        except ArgumentError as e:  # point at the argument
            p = st.pos(next((k for k in what.keywords if k.arg == e.parameter), what))
            raise ArgumentError(
                e.msg, e.parameter, line=p.line, column=p.column, text=p.text, length=p.length
            ) from None
        return P.Source(spec=spec, rate=rate, name=st.label, pos=st.pos(what))
    return st.fail(
        what, 'expected a source such as clickstream(rows=1000), parquet("dir") or a variable'
    )


def _apply(
    st: _Stage, ch: _Chain, ns: dict[str, Any], named: dict[str, _Chain], consumed: set[int]
) -> None:
    kw_ = st.keyword
    cur = ch.step
    if ch.window_stage is not None and kw_ != "agg":
        st.error("a window stage must be followed by 'agg'", st.kw_col, len(kw_))
    if ch.entities is not None and kw_ != "transfer":
        st.error(
            f"key_by_all on line {ch.entities_line} must be followed by 'transfer'",
            st.kw_col,
            len(kw_),
        )
    pos = Pos(st.line.number, st.kw_col, len(kw_), st.line.lines[0])
    if kw_ == "filter":
        (e,) = st.positional(1, 1, "a boolean expression")
        st.keywords(())
        ch.step = P.Filter(inputs=(cur,), predicate=st.expr(e), pos=pos)
    elif kw_ in ("select", "with_columns"):
        exprs = _named_exprs(st, allow_agg=False)
        if not exprs:
            st.error(f"{kw_} needs at least one column or name=expression", st.kw_col, len(kw_))
        cls = P.Select if kw_ == "select" else P.WithColumns
        ch.step = cls(inputs=(cur,), exprs=exprs, pos=pos)
    elif kw_ == "explode":
        cols = st.positional(1, 64, "list column name(s)")
        st.keywords(())
        ch.step = P.Explode(inputs=(cur,), columns=tuple(st.name(c) for c in cols), pos=pos)
    elif kw_ == "key_by":
        if ch.keys is not None:
            st.error(
                f"key_by already given on line {ch.keys_line} and not used by a stateful stage",
                st.kw_col,
                len(kw_),
            )
        cols = st.positional(1, 64, "key column name(s)")
        st.keywords(())
        ch.keys = tuple(st.name(c) for c in cols)
        ch.keys_line = st.line.number
    elif kw_ == "key_by_all":
        if ch.keys is not None or ch.entities is not None:
            st.error("key_by_all cannot follow an unused key_by / key_by_all", st.kw_col, len(kw_))
        cols = st.positional(2, 64, "the entity columns each event names, e.g. src, dst")
        st.keywords(())
        ch.entities = tuple(st.name(c) for c in cols)
        ch.entities_line = st.line.number
    elif kw_ == "transfer":
        if ch.entities is None:
            st.error(
                "transfer needs the entities first: key_by_all FROM_COL, TO_COL",
                st.kw_col,
                len(kw_),
            )
        (amount,) = st.positional(1, 1, "the amount column")
        opts = st.keywords(("initial", "overdraft"))
        initial = st.const(opts["initial"]) if "initial" in opts else 0
        if isinstance(initial, bool) or not isinstance(initial, (int, float)):
            st.fail(opts["initial"], "initial= must be a number")
        overdraft = st.const(opts["overdraft"]) if "overdraft" in opts else False
        if not isinstance(overdraft, bool):
            st.fail(opts["overdraft"], "overdraft= must be True or False")
        assert ch.entities is not None
        ch.step = P.Transfer(
            inputs=(cur,),
            keys=ch.entities,
            amount=st.name(amount),
            initial=initial,
            overdraft=overdraft,
            pos=pos,
        )
        ch.entities = None
    elif kw_ in ("tumbling", "sliding", "session"):
        ch.window = _window(st)
        ch.window_stage = st
    elif kw_ in ("agg", "running"):
        aggs = _named_exprs(st, allow_agg=True)
        if not aggs:
            st.error(f"{kw_} needs at least one aggregate, e.g. n=count()", st.kw_col, len(kw_))
        keys = _take_keys(ch)
        if kw_ == "agg":
            ch.step = P.Aggregate(inputs=(cur,), keys=keys, window=ch.window, aggs=aggs, pos=pos)  # type: ignore[arg-type]
            ch.window = None
            ch.window_stage = None
        else:
            ch.step = P.Running(inputs=(cur,), keys=keys, aggs=aggs, pos=pos)  # type: ignore[arg-type]
    elif kw_ == "top_k":
        (k,) = st.positional(1, 1, "k (how many rows)")
        opts = st.keywords(("by", "descending"))
        kv = st.const(k)
        if not isinstance(kv, int) or isinstance(kv, bool) or kv < 1:
            st.fail(k, "k must be a positive integer")
        if "by" not in opts:
            st.error("top_k needs by=column", st.kw_col, len(kw_))
        desc = st.const(opts["descending"]) if "descending" in opts else True
        ch.step = P.TopK(
            inputs=(cur,),
            keys=_take_keys(ch),
            k=kv,
            by=st.name(opts["by"]),
            descending=bool(desc),
            pos=pos,
        )
    elif kw_ == "dedup":
        cols = st.positional(0, 64, "column name(s)")
        st.keywords(())
        keys = _take_keys(ch)
        if cols and keys:
            st.error(
                "dedup: give columns either with key_by or after dedup, not both",
                st.kw_col,
                len(kw_),
            )
        ch.step = P.Dedup(inputs=(cur,), keys=keys or tuple(st.name(c) for c in cols), pos=pos)
    elif kw_ == "sketch":
        ch.step = P.Sketch(inputs=(cur,), keys=_take_keys(ch), sketches=_sketches(st), pos=pos)
    elif kw_ == "speculate":
        ch.step = _speculate(st, cur, pos)
    elif kw_ == "apply":
        ch.step = _apply_stage(st, cur, _take_keys(ch), pos)
    elif kw_ == "union":
        others = st.positional(1, 16, "stream name(s)")
        st.keywords(())
        ins = [cur] + [_ref(st, o, named, consumed) for o in others]
        ch.step = P.Union(inputs=tuple(ins), pos=pos)
    elif kw_ == "join":
        (other,) = st.positional(1, 1, "the stream to join with")
        opts = st.keywords(("on", "within", "time", "lateness"))
        for req in ("on", "within", "time"):
            if req not in opts:
                st.error(f"join needs {req}=...", st.kw_col, len(kw_))
        right = _ref(st, other, named, consumed)
        ch.step = P.Join(
            inputs=(cur, right),
            on=st.names(opts["on"]),
            within=st.duration(opts["within"]),
            time=st.name(opts["time"]),
            lateness=st.duration(opts["lateness"]) if "lateness" in opts else 0,
            pos=pos,
        )
    elif kw_ == "correlate":
        others = st.positional(1, 16, "stream name(s)")
        opts = st.keywords(None)
        for req in ("on", "time", "over"):
            if req not in opts:
                st.error(f"correlate needs {req}=...", st.kw_col, len(kw_))
        ins = [cur] + [_ref(st, o, named, consumed) for o in others]
        ports = {ch.label: 0} if ch.label else {}
        ports.update({o.id: i + 1 for i, o in enumerate(others)})  # type: ignore[attr-defined]
        corr_aggs = tuple(
            (k, _corr_agg(st, v, ports))
            for k, v in opts.items()
            if k not in ("on", "time", "over", "lateness")
        )
        if not corr_aggs:
            st.error("correlate needs at least one aggregate, e.g. n=count()", st.kw_col, len(kw_))
        ch.step = P.Correlate(
            inputs=tuple(ins),
            on=st.names(opts["on"]),
            time=st.name(opts["time"]),
            over=st.duration(opts["over"]),
            lateness=st.duration(opts["lateness"]) if "lateness" in opts else 0,
            aggs=corr_aggs,
            pos=pos,
        )
    elif kw_ == "sink":
        ch.sunk = _sink(st, cur, ns, pos)
    if (
        kw_
        not in (
            "key_by",
            "agg",
            "running",
            "top_k",
            "dedup",
            "sketch",
            "apply",
            "tumbling",
            "sliding",
            "session",
        )
        and ch.keys is not None
        and kw_ in ("union", "join", "correlate", "sink")
    ):
        st.error(
            f"key_by on line {ch.keys_line} is not followed by a stateful stage",
            st.kw_col,
            len(kw_),
        )


_CORR_HINT = (
    "an aggregate such as mean(temp) or std(b.temp) "
    f"({', '.join(P.CORRELATE_FUNCTIONS)}; count() counts rows)"
)


def _corr_agg(st: _Stage, node: ast.expr, ports: dict[str, int]) -> P.CorrAgg:
    """``fn()``, ``fn(col)``, ``fn(NAME.col)``, ``count(NAME)`` (rows of NAME);
    ``col("x")`` / ``NAME.col("x")`` for columns whose names are not identifiers."""
    where = st.pos(node)
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)) or node.keywords:
        st.fail(node, f"expected {_CORR_HINT}")
    fn = node.func.id
    if fn not in P.CORRELATE_FUNCTIONS:
        st.fail(node.func, f"unknown correlate aggregate {fn!r}; {_CORR_HINT}")
    if not node.args:
        if fn != "count":
            st.fail(node, f"{fn}() takes a column, e.g. {fn}(temp) or {fn}(b.temp)")
        return P.CorrAgg(fn, None, 0, pos=where)
    if len(node.args) != 1:
        st.fail(node, f"{fn}() takes one column")
    arg = node.args[0]

    def port_of(n: ast.expr) -> int:
        if not isinstance(n, ast.Name) or n.id not in ports:
            known = ", ".join(ports) or "none"
            st.fail(n, f"unknown stream {getattr(n, 'id', '?')!r}; streams here: {known}")
        return ports[n.id]  # type: ignore[attr-defined]

    if isinstance(arg, ast.Name) and arg.id in ports:
        if fn != "count":
            st.fail(arg, f"{fn}() needs a column of stream {arg.id!r}: {fn}({arg.id}.COLUMN)")
        return P.CorrAgg(fn, None, ports[arg.id], pos=where)
    if isinstance(arg, ast.Attribute):
        return P.CorrAgg(fn, arg.attr, port_of(arg.value), pos=where)
    if (
        isinstance(arg, ast.Call)
        and isinstance(arg.func, ast.Attribute)
        and arg.func.attr == "col"
        and len(arg.args) == 1
        and isinstance(arg.args[0], ast.Constant)
    ):
        return P.CorrAgg(fn, str(arg.args[0].value), port_of(arg.func.value), pos=where)
    return P.CorrAgg(fn, st.name(arg), 0, pos=where)


_SKETCH_HINT = "a sketch such as theta(user_id) as users (theta, hll, kll or frequent)"


def _sketches(st: _Stage) -> tuple[tuple[str, P.SketchCall], ...]:
    """``theta(col) as name, kll(col, k=400) as other`` (or ``name=theta(col)``)."""
    items: list[tuple[ast.expr, str, ast.AST]] = []
    for a in st.call.args:
        if not (isinstance(a, ast.BinOp) and isinstance(a.op, ast.MatMult)):
            st.fail(a, f"expected {_SKETCH_HINT}")
        if not isinstance(a.right, ast.Name):
            st.fail(a.right, "the name after 'as' must be an identifier")
        items.append((a.left, a.right.id, a.right))
    for k in st.call.keywords:
        if k.arg is None:
            st.fail(k.value, "**kwargs are not supported")
        items.append((k.value, k.arg, k.value))  # type: ignore[arg-type]
    if not items:
        st.error(f"sketch needs {_SKETCH_HINT}", st.kw_col, len(st.keyword))
    out: list[tuple[str, P.SketchCall]] = []
    for call, name, where in items:
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)):
            st.fail(call, f"expected {_SKETCH_HINT}")
        fn = call.func.id
        if fn not in P.SKETCH_PARAMS:
            st.fail(call.func, f"unknown sketch {fn!r}; sketches: {', '.join(P.SKETCH_PARAMS)}")
        if len(call.args) != 1:
            st.fail(call, f"{fn}() takes one column, e.g. {fn}(user_id)")
        params: dict[str, Any] = {}
        for kw in call.keywords:
            if kw.arg is None:
                st.fail(kw.value, "**kwargs are not supported")
            params[kw.arg] = st.const(kw.value)  # type: ignore[index]
        try:
            sk = P.sketch_call(fn, st.name(call.args[0]), **params)
        except ValueError as e:
            st.fail(call, str(e))
        if name in dict(out):
            st.fail(where, f"sketch name {name!r} is used twice")
        out.append((name, sk))
    return tuple(out)


def _udf_call(
    st: _Stage,
    calls: list[tuple[str | None, ast.expr]],
    stage: str,
    hint: str,
    define: str,
    wrong: str,
    first: str,
) -> tuple[str | None, str, tuple[str, ...]]:
    """The one ``[NAME=]FN(COL, ...)`` (or bare ``FN``) call of a speculate / apply stage:
    (NAME, FN, columns; none for a bare FN), checked against the registered function."""
    if len(calls) != 1:
        st.error(f"{stage} takes one function: {hint}", st.kw_col, len(st.keyword))
    name, node = calls[0]
    if isinstance(node, ast.Name):
        fn_node, args = node, None
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        fn_node, args = node.func, node.args
    else:
        st.fail(node, f"expected {hint}")
    fn = fn_node.id  # type: ignore[union-attr]
    spec = udf_lookup(fn)
    if spec is None:
        st.fail(
            fn_node,
            f"unknown function {fn!r}: define it first with %%stream_udf or sc.cython_udf(...) "
            f"({define})",
        )
    assert spec is not None
    if not (spec.txn if stage == "speculate" else spec.state):
        st.fail(fn_node, f"{spec.signature()} {wrong}")
    cols: tuple[str, ...] = ()
    if args is not None:
        if len(args) != len(spec.params):
            st.fail(node, f"{spec.signature()} takes {len(spec.params)} column(s) after {first}")
        cols = tuple(st.name(a) for a in args)
    return name, fn, cols


_SPEC_HINT = 'a transactional function call, e.g. speculate driver=match(x, y), horizon="adaptive"'


def _speculate(st: _Stage, cur: P.Step, pos: Pos) -> P.Speculate:
    """``speculate [NAME=]FN(COL, ...)[, horizon=N | "adaptive"]`` (or a bare ``FN``: its
    parameters name the columns)."""
    horizon: Any = "adaptive"
    calls: list[tuple[str | None, ast.expr]] = []
    for k in st.call.keywords:
        if k.arg is None:
            st.fail(k.value, "**kwargs are not supported")
        if k.arg == "horizon":
            horizon = st.const(k.value)
            try:
                P.check_horizon(horizon)
            except ValueError as e:
                st.fail(k.value, str(e))
        else:
            calls.append((k.arg, k.value))
    calls += [(None, a) for a in st.call.args]
    name, fn, cols = _udf_call(
        st,
        calls,
        "speculate",
        _SPEC_HINT,
        "a transactional function: cdef <type> f(sc_txn *tx, ...) noexcept nogil",
        "is not transactional: speculate needs a function whose first argument is sc_txn *tx",
        "tx",
    )
    return P.Speculate(inputs=(cur,), fn=fn, args=cols, name=name or fn, horizon=horizon, pos=pos)


_APPLY_HINT = "a keyed step call, e.g. key_by user_id then apply avg=running_avg(price)"


def _apply_stage(st: _Stage, cur: P.Step, keys: tuple[str, ...], pos: Pos) -> P.Apply:
    """``apply [NAME=]FN(COL, ...)`` (or a bare ``FN``: its parameters name the columns):
    a keyed step over a typed state struct, per key of the preceding ``key_by`` (none: one
    global state)."""
    calls: list[tuple[str | None, ast.expr]] = []
    for k in st.call.keywords:
        if k.arg is None:
            st.fail(k.value, "**kwargs are not supported")
        calls.append((k.arg, k.value))
    calls += [(None, a) for a in st.call.args]
    name, fn, cols = _udf_call(
        st,
        calls,
        "apply",
        _APPLY_HINT,
        "a keyed step: cdef struct S: ... and cdef <type> f(S *st, ...) noexcept nogil",
        "is not a keyed step: apply needs a function whose first argument is a pointer to a "
        "state struct (cdef <type> f(S *st, ...))",
        "the state",
    )
    return P.Apply(inputs=(cur,), keys=keys, fn=fn, args=cols, name=name or fn, pos=pos)


def _take_keys(ch: _Chain) -> tuple[str, ...]:
    keys = ch.keys or ()
    ch.keys = None
    return keys


def _ref(st: _Stage, node: ast.expr, named: dict[str, _Chain], consumed: set[int]) -> P.Step:
    if not isinstance(node, ast.Name) or node.id not in named:
        known = ", ".join(named) or "none yet"
        st.fail(
            node,
            f"unknown stream {getattr(node, 'id', '?')!r}; define it first with "
            f"NAME = source ... (defined: {known})",
        )
    ch = named[node.id]  # type: ignore[attr-defined]
    if ch.window_stage is not None or ch.keys is not None:
        st.fail(node, f"stream {ch.label!r} ends with an unfinished key_by/window")
    consumed.add(id(ch))
    return ch.step


def _window(st: _Stage) -> P.Window:
    kind = st.keyword
    first = "gap" if kind == "session" else "size"
    allowed = (first, "time", "lateness") + (("every",) if kind == "sliding" else ())
    pos_args = st.positional(0, 1, first)
    opts = st.keywords(allowed)
    if pos_args:
        if first in opts:
            st.fail(opts[first], f"{first} given twice")
        opts[first] = pos_args[0]
    for req in (first, "time") + (("every",) if kind == "sliding" else ()):
        if req not in opts:
            st.error(f"{kind} needs {req}=...", st.kw_col, len(kind))
    return P.Window(
        kind,  # type: ignore[arg-type]
        st.name(opts["time"]),
        st.duration(opts[first]),
        st.duration(opts["every"]) if "every" in opts else None,
        st.duration(opts["lateness"]) if "lateness" in opts else 0,
    )


def _named_exprs(st: _Stage, allow_agg: bool) -> tuple[tuple[str, IR], ...]:
    out: list[tuple[str, IR]] = []
    for a in st.call.args:
        e = st.expr(a)
        out.append((output_name(e), e))
    for k in st.call.keywords:
        if k.arg is None:
            st.fail(k.value, "**kwargs are not supported")
        out.append((k.arg, st.expr(k.value)))  # type: ignore[arg-type]
    for (name, e), node in zip(out, list(st.call.args) + [k.value for k in st.call.keywords]):
        if allow_agg and not isinstance(e, AggCall):
            st.fail(
                node,
                f"{name}: expected an aggregate ({', '.join(AGG_FUNCTIONS)}), got {to_text(e)}",
            )
        if not allow_agg and _has_agg(e):
            st.fail(node, f"{name}: aggregates are only allowed in 'agg' and 'running'")
    return tuple(out)


def _has_agg(e: IR) -> bool:
    if isinstance(e, AggCall):
        return True
    if isinstance(e, Binary):
        return _has_agg(e.left) or _has_agg(e.right)
    if isinstance(e, Unary):
        return _has_agg(e.operand)
    if isinstance(e, Call):
        return any(_has_agg(a) for a in e.args)
    if isinstance(e, When):
        return any(_has_agg(c) or _has_agg(v) for c, v in e.branches) or _has_agg(e.otherwise)
    return False


def _sink(st: _Stage, cur: P.Step, ns: dict[str, Any], pos: Pos) -> P.Sink:
    (what,) = st.positional(1, 1, 'table, table("name"), parquet("dir") or callback(fn)')
    st.keywords(())
    if isinstance(what, ast.Name) and what.id == "table":
        return P.Sink(inputs=(cur,), target="table", pos=pos)
    if isinstance(what, ast.Name) and what.id == "none":
        return P.Sink(inputs=(cur,), target="none", pos=pos)
    if not (isinstance(what, ast.Call) and isinstance(what.func, ast.Name)):
        return st.fail(what, 'expected table, table("name"), parquet("dir") or callback(fn)')
    kind = what.func.id
    if kind == "table":
        name = st.const(what.args[0]) if what.args else None
        opts = {k.arg: k.value for k in what.keywords}
        bad = set(opts) - {"mode", "key", "name"}
        if bad:
            st.fail(what, f"table() options are mode= and key=, not {', '.join(sorted(bad))}")  # type: ignore[arg-type]
        if "name" in opts:
            name = st.const(opts["name"])
        mode = st.const(opts["mode"]) if "mode" in opts else None
        if mode not in (None, "append", "upsert"):
            st.fail(opts["mode"], 'mode must be "append" or "upsert"')
        key = st.names(opts["key"]) if "key" in opts else None
        return P.Sink(inputs=(cur,), target="table", name=name, mode=mode, key=key, pos=pos)
    if kind == "callback":
        for k in what.keywords:  # no options: refuse them like every stage does
            node = k if k.arg is not None else k.value
            st.fail(node, f"{kind}() sink takes no options, not {k.arg or '**'}=")
    if kind == "parquet":
        return _parquet_sink(st, what, cur, pos)
    if kind == "callback":
        if len(what.args) != 1 or not isinstance(what.args[0], ast.Name):
            st.fail(what, "callback sink takes a function name: callback(fn)")
        fn_name = what.args[0].id  # type: ignore[attr-defined]
        if fn_name not in ns or not callable(ns[fn_name]):
            st.fail(what.args[0], f"{fn_name!r} is not a function in the notebook namespace")
        return P.Sink(
            inputs=(cur,), target="callback", callback=P.ObjRef(ns[fn_name], fn_name), pos=pos
        )
    return st.fail(what.func, f"unknown sink {kind!r}; sinks: table, parquet, callback, none")


def _parquet_sink(st: _Stage, what: ast.Call, cur: P.Step, pos: Pos) -> P.Sink:
    """``parquet("dir", mode="complete", key=[...])``; unknown options and bad modes are
    refused at their text (an ArgumentError names the parameter)."""
    if len(what.args) != 1:
        st.fail(what, 'parquet sink takes a directory: parquet("out/")')
    opts: dict[str, ast.keyword] = {}
    for k in what.keywords:
        if k.arg not in ("mode", "key"):
            node = k if k.arg is not None else k.value
            st.fail(node, f"parquet() sink options are mode= and key=, not {k.arg or '**'}=")
        assert k.arg is not None
        opts[k.arg] = k
    mode = st.const(opts["mode"].value) if "mode" in opts else "append"
    key = st.names(opts["key"].value) if "key" in opts else None
    try:
        P.check_output_mode(mode)
        if key is not None and mode == "append":
            raise ArgumentError('parquet sink: key= needs mode="complete" or "update"', "key")
    except ArgumentError as e:
        p = st.pos(opts.get(e.parameter, what))
        raise ArgumentError(
            e.msg, e.parameter, line=p.line, column=p.column, text=p.text, length=p.length
        ) from None
    return P.Sink(
        inputs=(cur,),
        target="parquet",
        name=str(st.const(what.args[0])),
        mode=None if mode == "append" else mode,  # type: ignore[arg-type]  # checked above
        key=key,
        pos=pos,
    )


# ----------------------------------------------------------------------------- printer


def print_plan(plan: P.Plan) -> str:
    """Render a plan as cell text; ``parse(print_plan(p)) == p``."""
    consumers = plan.consumers()
    names: dict[str, str] = {}
    out: list[str] = []
    counter = [0]

    def chain_of(end: P.Step) -> list[P.Step]:
        steps = [end]
        while not isinstance(steps[-1], P.Source):
            steps.append(steps[-1].inputs[0])
        return steps[::-1]

    def name_for(end: P.Step) -> str:
        if end.step_id in names:
            return names[end.step_id]
        src = chain_of(end)[0]
        label = getattr(src, "name", None)
        if not label or label in names.values():
            counter[0] += 1
            label = f"stream{counter[0]}"
        names[end.step_id] = label
        emit(chain_of(end), label, None)
        return label

    def emit(steps: list[P.Step], label: str | None, sink: P.Sink | None) -> None:
        for s in steps:  # named inputs first
            for other in s.inputs[1:]:
                name_for(other)
        lines: list[str] = []
        for s in steps:
            if len(consumers.get(s.step_id, [])) > 1 and s is not steps[-1]:
                raise ValueError(
                    f"step {s.step_id} feeds several steps; fan-out has no DSL form yet"
                )
            lines.extend(_stage_lines(s, names))
        if label:
            lines[0] = f"{label} = {lines[0]}"
        if sink is not None:
            lines.append(_sink_line(sink))
        out.extend(lines)

    for sink in plan.sinks:
        steps = chain_of(sink.inputs[0])
        emit(steps, None, sink)
    return "\n".join(out) + "\n"


def _stage_lines(s: P.Step, names: dict[str, str]) -> list[str]:
    def key_line(keys: tuple[str, ...]) -> list[str]:
        return [f"key_by {', '.join(_colname(k) for k in keys)}"] if keys else []

    if isinstance(s, P.Source):
        line = f"source {s.spec.text()}"
        if s.rate is not None:
            line += f", rate={s.rate!r}"
        return [line]
    if isinstance(s, P.Filter):
        return [f"filter {to_text(s.predicate)}"]
    if isinstance(s, (P.Select, P.WithColumns)):
        return [f"{s.kind} " + ", ".join(_named_text(n, e) for n, e in s.exprs)]
    if isinstance(s, P.Explode):
        return [f"explode {', '.join(_colname(c) for c in s.columns)}"]
    if isinstance(s, P.Aggregate):
        lines = key_line(s.keys)
        if s.window is not None:
            lines.append(
                s.window.text().replace(f"time={s.window.time}", f"time={_colname(s.window.time)}")
            )
        return lines + ["agg " + ", ".join(f"{n}={to_text(e)}" for n, e in s.aggs)]
    if isinstance(s, P.Running):
        return key_line(s.keys) + ["running " + ", ".join(f"{n}={to_text(e)}" for n, e in s.aggs)]
    if isinstance(s, P.TopK):
        return key_line(s.keys) + [f"top_k {s.k}, by={_colname(s.by)}, descending={s.descending}"]
    if isinstance(s, P.Dedup):
        return key_line(s.keys) + ["dedup"]
    if isinstance(s, P.Transfer):
        opts = "" if s.initial == 0 and isinstance(s.initial, int) else f", initial={s.initial!r}"
        opts += ", overdraft=True" if s.overdraft else ""
        return [
            f"key_by_all {', '.join(_colname(k) for k in s.keys)}",
            f"transfer {_colname(s.amount)}{opts}",
        ]
    if isinstance(s, P.Sketch):
        return key_line(s.keys) + [
            "sketch " + ", ".join(f"{call.text()} as {name}" for name, call in s.sketches)
        ]
    if isinstance(s, P.Speculate):
        call = s.fn + (f"({', '.join(_colname(a) for a in s.args)})" if s.args else "")
        head = call if s.name == s.fn else f"{s.name}={call}"
        if not s.name.isidentifier():
            raise ValueError(f"column name {s.name!r} is not an identifier; use the Python API")
        return [
            f"speculate {head}" + (f", horizon={s.horizon!r}" if s.horizon != "adaptive" else "")
        ]
    if isinstance(s, P.Apply):
        call = s.fn + (f"({', '.join(_colname(a) for a in s.args)})" if s.args else "")
        if not s.name.isidentifier():
            raise ValueError(f"column name {s.name!r} is not an identifier; use the Python API")
        return key_line(s.keys) + ["apply " + (call if s.name == s.fn else f"{s.name}={call}")]
    if isinstance(s, P.Union):
        return [f"union {', '.join(names[i.step_id] for i in s.inputs[1:])}"]
    if isinstance(s, P.Join):
        on = (
            _colname(s.on[0])
            if len(s.on) == 1
            else "[" + ", ".join(_colname(c) for c in s.on) + "]"
        )
        late = f", lateness={s.lateness!r}" if s.lateness != 0 else ""
        return [
            f"join {names[s.inputs[1].step_id]}, on={on}, within={s.within!r}, time={_colname(s.time)}{late}"
        ]
    if isinstance(s, P.Correlate):
        ports = [""] + [names[i.step_id] for i in s.inputs[1:]]
        on = (
            _colname(s.on[0])
            if len(s.on) == 1
            else "[" + ", ".join(_colname(c) for c in s.on) + "]"
        )
        late = f", lateness={s.lateness!r}" if s.lateness != 0 else ""
        aggs = ", ".join(f"{n}={a.text(ports)}" for n, a in s.aggs)
        return [
            f"correlate {', '.join(ports[1:])}, on={on}, time={_colname(s.time)}, "
            f"over={s.over!r}{late}, {aggs}"
        ]
    raise ValueError(f"cannot print step {s.step_id}")


def _colname(c: str) -> str:
    return to_text(Col(c))


def _named_text(name: str, e: IR) -> str:
    if isinstance(e, Col) and e.name == name:
        return _colname(name)
    if (
        name.isidentifier()
        and output_name(e) != name
        or not isinstance(e, Col)
        and name.isidentifier()
    ):
        return f"{name}={to_text(e)}"
    if output_name(e) == name:
        return to_text(e)
    raise ValueError(f"column name {name!r} is not an identifier; rename it with the Python API")


def _sink_line(s: P.Sink) -> str:
    if s.target == "table":
        opts = []
        if s.name is not None:
            opts.append(repr(s.name))
        if s.mode is not None:
            opts.append(f"mode={s.mode!r}")
        if s.key is not None:
            opts.append("key=[" + ", ".join(repr(k) for k in s.key) + "]")
        return "sink table" + (f"({', '.join(opts)})" if opts else "")
    if s.target == "parquet":
        opts = [repr(s.name)]
        if s.mode is not None:
            opts.append(f"mode={s.mode!r}")
        if s.key is not None:
            opts.append("key=[" + ", ".join(repr(k) for k in s.key) + "]")
        return f"sink parquet({', '.join(opts)})"
    if s.target == "none":
        return "sink none"
    assert s.callback is not None
    return f"sink callback({s.callback.label})"
