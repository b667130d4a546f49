"""Compile a plan: open its sources, infer every step's output schema, check types.

Errors carry the DSL position when the plan came from text (line, column, caret), and
name the step otherwise. Unknown columns list the available ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import plan as P
from .errors import ArgumentError, PlanError, UnsupportedTypeError, did_you_mean
from .expr import (
    ARITH_OPS,
    CMP_OPS,
    IR,
    LOGIC_OPS,
    MAX_EXPR_DEPTH,
    AggCall,
    Binary,
    Call,
    Col,
    Lit,
    Pos,
    Unary,
    When,
    to_text,
    too_deep,
)
from .sources import Reader, SourceError, open_source
from .types import (
    BOOL,
    DATE,
    DATETIME,
    FLOAT,
    INT,
    NULL,
    STR,
    DType,
    Schema,
    dtype_of_value,
    format_schema,
    list_of,
    parse_dtype,
    unify,
)
from .udf import UDF_PREFIX, UdfSpec, in_expr_error
from .udf import lookup as udf_lookup


@dataclass
class Compiled:
    """A checked plan: output schema of every step, open source readers, sink table names."""

    plan: P.Plan
    schemas: dict[str, Schema]
    readers: dict[str, Reader]
    table_names: dict[str, str] = field(default_factory=dict)
    upsert_keys: dict[str, tuple[str, ...] | None] = field(default_factory=dict)

    def schema(self, step: P.Step) -> Schema:
        return self.schemas[step.step_id]


def _err(msg: str, pos: Any, step: P.Step | None) -> PlanError:
    if isinstance(pos, Pos):
        return PlanError(
            msg, pos.line, pos.column, pos.text, pos.length, step.step_id if step else None
        )
    return PlanError(msg, step=step.step_id if step else None)


class Typer:
    def __init__(self, schema: Schema, step: P.Step):
        self.cols = dict(schema)
        self.step = step
        self._checked: IR | None = None  # the top expression being typed (depth checked)
        # each node typed once, by identity (the node is kept, so its id is not reused): an
        # expression built as e = f(e, e) reuses each level's node twice, and typing it as a
        # tree, or each node again when an engine asks for every node's type, is exponential
        self._types: dict[int, tuple[IR, DType]] = {}

    def fail(self, e: IR, msg: str) -> PlanError:
        return _err(msg, getattr(e, "pos", None) or self.step.pos, self.step)

    def col(self, name: str, at: Any) -> DType:
        if name not in self.cols:
            avail = ", ".join(self.cols) or "(none)"
            raise _err(
                f"unknown column {name!r}{did_you_mean(name, self.cols)}; "
                f"available columns: {avail}",
                getattr(at, "pos", None) or self.step.pos,
                self.step,
            )
        return self.cols[name]

    def type(self, e: IR) -> DType:
        """The type of ``e`` (its nesting checked once, at the top: the walk recurses)."""
        got = self._types.get(id(e))
        if got is not None:
            return got[1]
        if self._checked is None:
            deep = too_deep(e)
            if deep is not None:
                raise self.fail(
                    deep,
                    f"expression nested more than {MAX_EXPR_DEPTH} levels deep; "
                    "split it into several with_columns stages",
                )
            self._checked = e
            try:
                return self._type(e)
            finally:
                self._checked = None
        return self._type(e)

    def _type(self, e: IR) -> DType:
        got = self._types.get(id(e))
        if got is None:
            got = self._types[id(e)] = (e, self._node_type(e))
        return got[1]

    def _node_type(self, e: IR) -> DType:  # noqa: C901 - one dispatch over the IR
        if isinstance(e, Col):
            return self.col(e.name, e)
        if isinstance(e, Lit):
            try:
                return dtype_of_value(e.value)
            except TypeError as ex:
                raise self.fail(e, str(ex)) from None
        if isinstance(e, Unary):
            t = self.type(e.operand)
            if e.op == "neg":
                if not t.is_numeric and t != NULL:
                    raise self.fail(e, f"cannot negate a {t} value ({to_text(e.operand)})")
                return t
            if t not in (BOOL, NULL):
                raise self.fail(e, f"'not' needs a bool operand; {to_text(e.operand)} is {t}")
            return BOOL
        if isinstance(e, Binary):
            return self._binary(e)
        if isinstance(e, Call):
            return self._call(e)
        if isinstance(e, When):
            out = NULL
            for c, v in e.branches:
                ct = self.type(c)
                if ct not in (BOOL, NULL):
                    raise self.fail(c, f"when() condition must be bool; {to_text(c)} is {ct}")
                u = unify(out, self.type(v))
                if u is None:
                    raise self.fail(
                        v, f"when/then branches have different types ({out} and {self.type(v)})"
                    )
                out = u
            u = unify(out, self.type(e.otherwise))
            if u is None:
                raise self.fail(
                    e.otherwise,
                    f"otherwise() type {self.type(e.otherwise)} differs from then() type {out}",
                )
            return u
        if isinstance(e, AggCall):
            raise self.fail(e, "aggregates are only allowed in agg/running")
        raise self.fail(e, f"unsupported expression {e!r}")

    def _binary(self, e: Binary) -> DType:
        lt, rt = self.type(e.left), self.type(e.right)
        op = e.op
        if op in LOGIC_OPS:
            for side, t in ((e.left, lt), (e.right, rt)):
                if t not in (BOOL, NULL):
                    raise self.fail(side, f"'{op}' needs bool operands; {to_text(side)} is {t}")
            return BOOL
        if op in CMP_OPS:
            if lt != NULL and rt != NULL and unify(lt, rt) is None:
                raise self.fail(e, f"cannot compare {lt} with {rt} ({to_text(e)})")
            return BOOL
        assert op in ARITH_OPS
        if op == "+" and lt == STR and rt in (STR, NULL):
            return STR
        for side, t in ((e.left, lt), (e.right, rt)):
            if not t.is_numeric and t != NULL:
                raise self.fail(side, f"'{op}' needs numbers; {to_text(side)} is {t}")
        if op == "/" or op == "**" and FLOAT in (lt, rt):
            return FLOAT
        if op == "**":
            return INT if lt == INT and rt == INT else FLOAT
        u = unify(lt, rt)
        return (
            u
            if u not in (None, NULL)
            else (INT if lt == rt == NULL else (lt if rt == NULL else rt))
        )  # type: ignore[return-value]

    def _call(self, e: Call) -> DType:
        fn = e.fn
        if fn.startswith(UDF_PREFIX):
            return self._udf(e)
        t = self.type(e.args[0])
        subject = to_text(e.args[0])
        if fn in ("is_null", "is_not_null"):
            return BOOL
        if fn == "fill_null":
            u = unify(t, self.type(e.args[1]))
            if u is None:
                raise self.fail(
                    e, f"fill_null value type {self.type(e.args[1])} does not match {subject} ({t})"
                )
            return u
        if fn == "cast":
            arg = e.args[1]
            assert isinstance(arg, Lit)
            target = parse_dtype(arg.value)
            if t.name == "list" or target.name == "list":
                raise self.fail(e, "casts to or from list are not supported")
            return target
        if fn in ("abs", "round"):
            if not t.is_numeric and t != NULL:
                raise self.fail(e, f"{fn}() needs a number; {subject} is {t}")
            return t
        if fn == "is_in":
            return BOOL
        if fn.startswith("str."):
            if t not in (STR, NULL):
                raise self.fail(e, f"{fn}() needs a str column; {subject} is {t}")
            for a in e.args[1:]:
                if self.type(a) != STR:
                    raise self.fail(a, f"{fn}() argument must be a string")
            return (
                INT
                if fn == "str.len_chars"
                else (STR if fn in ("str.to_lowercase", "str.to_uppercase") else BOOL)
            )
        if fn.startswith("dt."):
            if t not in (DATETIME, DATE, NULL):
                raise self.fail(e, f"{fn}() needs a datetime or date; {subject} is {t}")
            if fn in ("dt.hour", "dt.minute", "dt.second", "dt.epoch_us") and t == DATE:
                raise self.fail(e, f"{fn}() needs a datetime; {subject} is a date")
            return DATE if fn == "dt.date" else INT
        raise self.fail(e, f"unknown function {fn}")

    def _udf(self, e: Call) -> DType:
        name = e.fn[len(UDF_PREFIX) :]
        spec = udf_lookup(name)
        if spec is None:
            raise self.fail(
                e, f"unknown native function {name!r}; define it first with sc.cython_udf(...)"
            )
        why = in_expr_error(spec)
        if why:
            raise self.fail(e, why)
        if len(e.args) != len(spec.params):
            raise self.fail(
                e, f"{spec.signature()} takes {len(spec.params)} argument(s), got {len(e.args)}"
            )
        for a, want in zip(e.args, spec.arg_types):
            t = self.type(a)
            ok = want is None or t in (NULL, want) or (want == FLOAT and t == INT)
            if not ok:
                raise self.fail(a, f"{spec.signature()}: argument {to_text(a)} is {t}, not {want}")
        return spec.return_type

    def agg(self, a: AggCall) -> DType:
        if a.arg is None:
            return INT
        t = self.type(a.arg)
        what = to_text(a.arg)
        if a.fn in ("count", "count_distinct"):
            return INT
        if a.fn == "sum":
            if t == BOOL:
                return INT
            if not t.is_numeric and t != NULL:
                raise self.fail(a, f"sum() needs a numeric column; {what} is {t}")
            return t if t != NULL else INT
        if a.fn == "mean":
            if not t.is_numeric and t not in (NULL, BOOL):
                raise self.fail(a, f"mean() needs a numeric column; {what} is {t}")
            return FLOAT
        if a.fn in ("min", "max"):
            if not t.is_orderable and t != NULL:
                raise self.fail(a, f"{a.fn}() needs an orderable column; {what} is {t}")
            return t
        return t  # first / last


def _duration_for(step: P.Step, d: P.Duration, time_type: DType, what: str) -> int:
    us = P.parse_duration(d)
    if isinstance(d, str) and time_type not in (DATETIME, DATE):
        raise _err(
            f"{what}={d!r} is a time span but the time column is {time_type}; "
            "give an integer in the column's units",
            step.pos,
            step,
        )
    if isinstance(d, int) and time_type in (DATETIME, DATE) and d != 0:
        raise _err(
            f'{what}={d} must be a time span like "30s" for a {time_type} time column',
            step.pos,
            step,
        )
    return us


def _time_col(step: P.Step, schema: Schema, name: str) -> DType:
    t = Typer(schema, step).col(name, step)
    if t not in (DATETIME, DATE, INT):
        raise _err(f"time column {name!r} must be datetime, date or int, not {t}", step.pos, step)
    return t


def _udf_step(s: P.Speculate | P.Apply, why: str, first: str) -> tuple[UdfSpec, tuple[str, ...]]:
    """The registered function of a speculate / apply step and its input columns (the
    step's, or the function's parameter names); PlanError naming the step otherwise."""
    spec = udf_lookup(s.fn)
    if spec is None:
        raise _err(
            f"{s.kind}: unknown function {s.fn!r}; define it first with sc.cython_udf(...)",
            s.pos,
            s,
        )
    if not (spec.txn if isinstance(s, P.Speculate) else spec.state):
        raise _err(f"{s.kind}: {spec.signature()} {why}", s.pos, s)
    cols = s.args or tuple(n for n, _ in spec.params)
    if len(cols) != len(spec.params):
        raise _err(
            f"{s.kind}: {spec.signature()} takes {len(spec.params)} column(s) after {first}, "
            f"got {len(cols)}",
            s.pos,
            s,
        )
    return spec, cols


def speculate_function(s: P.Speculate) -> tuple[UdfSpec, tuple[str, ...]]:
    """The transactional function of a speculate step and its input columns."""
    return _udf_step(s, "is not transactional (its first argument must be sc_txn *tx)", "tx")


def _udf_step_schema(
    s: P.Speculate | P.Apply, schema: Schema, spec: UdfSpec, cols: tuple[str, ...]
) -> Schema:
    """The input plus the function's result column ``s.name``; the argument columns must
    have the parameters' types (an int column may feed a float parameter)."""
    ty = Typer(schema, s)
    for c, want in zip(cols, spec.arg_types):
        t = ty.col(c, s)
        if not (t == want or (want == FLOAT and t == INT)):
            raise _err(
                f"{s.kind}: {spec.signature()} needs {want} for column {c!r}, which is {t}",
                s.pos,
                s,
            )
    if s.name in dict(schema):
        raise _err(
            f"{s.kind} adds column {s.name!r} but the input has it; name the result "
            f"({s.kind} other_name=...)",
            s.pos,
            s,
        )
    return tuple(schema) + ((s.name, spec.return_type),)


def _speculate_schema(s: P.Speculate, schema: Schema) -> Schema:
    return _udf_step_schema(s, schema, *speculate_function(s))


def apply_function(s: P.Apply) -> tuple[UdfSpec, tuple[str, ...]]:
    """The keyed step of an apply step and its input columns."""
    return _udf_step(
        s,
        "is not a keyed step (its first argument must be a pointer to a state struct)",
        "the state",
    )


def _apply_schema(s: P.Apply, schema: Schema) -> Schema:
    _check_keys(s, schema, s.keys)
    return _udf_step_schema(s, schema, *apply_function(s))


def _check_keys(step: P.Step, schema: Schema, keys: tuple[str, ...]) -> None:
    ty = Typer(schema, step)
    for k in keys:
        t = ty.col(k, step)
        if t.name == "list":
            raise _err(f"key column {k!r} is a list; keys must be scalar", step.pos, step)


def compile_plan(plan: P.Plan, readers: dict[str, Reader] | None = None) -> Compiled:
    """Check ``plan`` and compute every step's schema (opens sources to read their schemas)."""
    schemas: dict[str, Schema] = {}
    opened: dict[str, Reader] = dict(readers or {})
    for s in plan.steps:
        ins = [schemas[i.step_id] for i in s.inputs]
        schemas[s.step_id] = _step_schema(s, ins, opened)
    c = Compiled(plan, schemas, opened)
    _name_sinks(c)
    seen: set[str] = set()
    for st in plan.steps:
        for name, _ in getattr(st, "sketches", ()):
            if name in seen:
                raise _err(f"two sketch stages are named {name!r}", st.pos, st)
            seen.add(name)
    return c


def _step_schema(s: P.Step, ins: list[Schema], opened: dict[str, Reader]) -> Schema:  # noqa: C901
    if isinstance(s, P.Source):
        if s.step_id not in opened:
            try:
                opened[s.step_id] = open_source(s.spec)
            except ArgumentError as e:
                raise _err(e.msg, s.pos, s) from None
            except (SourceError, UnsupportedTypeError) as e:
                raise _err(str(e), s.pos, s) from None
        return opened[s.step_id].schema
    schema = ins[0]
    ty = Typer(schema, s)
    if isinstance(s, P.Filter):
        t = ty.type(s.predicate)
        if t not in (BOOL, NULL):
            raise ty.fail(
                s.predicate, f"filter needs a bool expression; {to_text(s.predicate)} is {t}"
            )
        return schema
    if isinstance(s, (P.Select, P.WithColumns)):
        computed = [(n, ty.type(e)) for n, e in s.exprs]
        names = [n for n, _ in computed]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise _err(f"duplicate output column(s): {', '.join(sorted(dup))}", s.pos, s)
        if isinstance(s, P.Select):
            return tuple(computed)
        out = dict(schema)
        out.update(computed)
        return tuple(out.items())
    if isinstance(s, P.Explode):
        out = dict(schema)
        for c in s.columns:
            t = ty.col(c, s)
            if t.name != "list":
                raise _err(f"explode needs a list column; {c!r} is {t}", s.pos, s)
            assert t.inner is not None
            out[c] = t.inner
        return tuple(out.items())
    if isinstance(s, (P.Aggregate, P.Running)):
        _check_keys(s, schema, s.keys)
        aggs = [(n, ty.agg(a)) for n, a in s.aggs]
        out_cols: list[tuple[str, DType]] = []
        if isinstance(s, P.Running):
            out_cols = list(schema)
            clash = [n for n, _ in aggs if n in dict(schema)]
            if clash:
                raise _err(
                    f"running aggregate name(s) clash with input columns: {', '.join(clash)}",
                    s.pos,
                    s,
                )
            return tuple(out_cols + aggs)
        out_cols = [(k, dict(schema)[k]) for k in s.keys]
        if s.window is not None:
            w = s.window
            tt = _time_col(s, schema, w.time)
            size = _duration_for(s, w.size, tt, "gap" if w.kind == "session" else "size")
            if size <= 0:
                raise _err(
                    f"window {'gap' if w.kind == 'session' else 'size'} must be > 0", s.pos, s
                )
            if w.every is not None:
                every = _duration_for(s, w.every, tt, "every")
                if every <= 0 or every > size:
                    raise _err("sliding window needs 0 < every <= size", s.pos, s)
            _duration_for(s, w.lateness, tt, "lateness")
            wt = DATETIME if tt == DATE else tt
            out_cols += [("window_start", wt), ("window_end", wt)]
        names = [n for n, _ in out_cols] + [n for n, _ in aggs]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise _err(f"duplicate output column(s): {', '.join(sorted(dup))}", s.pos, s)
        return tuple(out_cols + aggs)
    if isinstance(s, P.TopK):
        _check_keys(s, schema, s.keys)
        t = ty.col(s.by, s)
        if not t.is_orderable:
            raise _err(f"top_k by={s.by!r} must be orderable, not {t}", s.pos, s)
        if "rank" in dict(schema):
            raise _err("top_k adds a 'rank' column but the input already has one", s.pos, s)
        return tuple(schema) + (("rank", INT),)
    if isinstance(s, P.Dedup):
        _check_keys(s, schema, s.keys)
        return schema
    if isinstance(s, P.Transfer):
        _check_keys(s, schema, s.keys)
        if len(s.keys) != 2:
            raise _err(
                f"transfer needs key_by_all with two entity columns (from, to), got {len(s.keys)}",
                s.pos,
                s,
            )
        ta, tb = (ty.col(k, s) for k in s.keys)
        if ta != tb:
            raise _err(
                f"transfer: entity columns {s.keys[0]!r} ({ta}) and {s.keys[1]!r} ({tb}) "
                "must have the same type",
                s.pos,
                s,
            )
        at = ty.col(s.amount, s)
        if at not in (INT, FLOAT):
            raise _err(f"transfer amount {s.amount!r} must be int or float, not {at}", s.pos, s)
        if isinstance(s.initial, bool) or not isinstance(s.initial, (int, float)):
            raise _err(f"transfer initial= must be a number, got {s.initial!r}", s.pos, s)
        bt = FLOAT if at == FLOAT or isinstance(s.initial, float) else INT
        clash = [c for c in s.balance_columns if c in dict(schema)]
        if clash:
            raise _err(f"transfer adds {', '.join(clash)} but the input has it", s.pos, s)
        return tuple(schema) + tuple((c, bt) for c in s.balance_columns)
    if isinstance(s, P.Speculate):
        return _speculate_schema(s, schema)
    if isinstance(s, P.Apply):
        return _apply_schema(s, schema)
    if isinstance(s, P.Sketch):
        _check_keys(s, schema, s.keys)
        for name, call in s.sketches:
            t = ty.col(call.column, s)
            ok = t.name != "list" and t.name != "null"
            if call.fn == "kll":
                ok = t.name in ("int", "float", "bool")
            elif call.fn == "frequent":
                ok = ok and t.name != "float"
            if not ok:
                need = {
                    "kll": "int, float or bool",
                    "frequent": "int, bool, str, datetime or date",
                }.get(call.fn, "a scalar type")
                raise _err(
                    f"sketch {name}: {call.fn}({call.column}) needs {need}, "
                    f"but {call.column!r} is {t}",
                    s.pos,
                    s,
                )
        return schema
    if isinstance(s, P.Union):
        first = dict(schema)
        for i, other in zip(s.inputs[1:], ins[1:]):
            if dict(other) != first:
                raise _err(
                    f"union needs equal schemas; {s.inputs[0].step_id} has ({format_schema(schema)}) "
                    f"but {i.step_id} has ({format_schema(other)})",
                    s.pos,
                    s,
                )
        return schema
    if isinstance(s, P.Join):
        left, right = ins
        for sch in (left, right):
            _check_keys(s, sch, s.on)
            tt = _time_col(s, sch, s.time)
            _duration_for(s, s.within, tt, "within")
            _duration_for(s, s.lateness, tt, "lateness")
        for k in s.on:
            if unify(dict(left)[k], dict(right)[k]) is None:
                raise _err(
                    f"join key {k!r} is {dict(left)[k]} on the left and {dict(right)[k]} on the right",
                    s.pos,
                    s,
                )
        if dict(left)[s.time] != dict(right)[s.time]:
            raise _err(
                f"join time column {s.time!r} has different types on the two sides", s.pos, s
            )
        joined = list(left)
        left_names = set(dict(left))
        for n, t in right:
            if n in s.on:
                continue
            joined.append((n if n not in left_names else f"{n}_right", t))
        return tuple(joined)
    if isinstance(s, P.Correlate):
        return _correlate_schema(s, ins)
    if isinstance(s, P.Sink):
        if s.key is not None:
            _check_keys(s, schema, s.key)
        return schema
    raise _err(f"unknown step kind {type(s).__name__}", s.pos, s)


def _correlate_schema(s: P.Correlate, ins: list[Schema]) -> Schema:
    """Keys, the time column, then each aggregate (see README "correlate")."""
    if len(ins) < 2:
        raise _err("correlate needs at least one other stream", s.pos, s)
    if not s.on:
        raise _err("correlate needs on=key column(s)", s.pos, s)
    first = dict(ins[0])
    for inp, sch in zip(s.inputs, ins):
        _check_keys(s, sch, s.on)
        tt = _time_col(s, sch, s.time)
        cols = dict(sch)
        for k in s.on:
            if cols[k] != first[k]:
                raise _err(
                    f"correlate key {k!r} is {first[k]} in {s.inputs[0].step_id} "
                    f"but {cols[k]} in {inp.step_id}",
                    s.pos,
                    s,
                )
        if tt != first[s.time]:
            raise _err(
                f"correlate time column {s.time!r} is {first[s.time]} in {s.inputs[0].step_id} "
                f"but {tt} in {inp.step_id}",
                s.pos,
                s,
            )
    tt = first[s.time]
    if s.time in s.on:
        raise _err(f"the time column {s.time!r} cannot also be a key", s.pos, s)
    if _duration_for(s, s.over, tt, "over") <= 0:
        raise _err("correlate over= must be > 0", s.pos, s)
    _duration_for(s, s.lateness, tt, "lateness")
    out: list[tuple[str, DType]] = [(k, first[k]) for k in s.on] + [(s.time, tt)]
    for name, a in s.aggs:
        out.append((name, _corr_agg_type(s, a, ins)))
    if len(out) == len(s.on) + 1:
        raise _err("correlate needs at least one aggregate, e.g. n=count()", s.pos, s)
    names = [n for n, _ in out]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise _err(f"duplicate output column(s): {', '.join(sorted(dup))}", s.pos, s)
    return tuple(out)


def _corr_agg_type(s: P.Correlate, a: P.CorrAgg, ins: list[Schema]) -> DType:
    where = a.pos or s.pos
    if a.fn not in P.CORRELATE_FUNCTIONS:
        raise _err(
            f"unknown correlate aggregate {a.fn!r}; aggregates: {', '.join(P.CORRELATE_FUNCTIONS)}",
            where,
            s,
        )
    if not 0 <= a.port < len(ins):
        raise _err(f"{a.fn}(): input {a.port} does not exist", where, s)
    if a.column is None:
        if a.fn != "count":
            raise _err(f"{a.fn}() needs a column", where, s)
        return INT
    cols = dict(ins[a.port])
    if a.column not in cols:
        raise _err(
            f"unknown column {a.column!r} in {s.inputs[a.port].step_id}; available columns: "
            + ", ".join(cols),
            where,
            s,
        )
    t = cols[a.column]
    if a.fn == "count":
        return INT
    if a.fn in ("sum", "mean", "std"):
        if t not in (INT, FLOAT):
            raise _err(f"{a.fn}() needs an int or float column; {a.column!r} is {t}", where, s)
        return t if a.fn == "sum" else FLOAT
    if a.fn in ("min", "max") and not t.is_orderable:
        raise _err(f"{a.fn}() needs an orderable column; {a.column!r} is {t}", where, s)
    return t


def default_upsert_key(c: Compiled, sink: P.Sink) -> tuple[str, ...] | None:
    """Key of an upsert table, or None for append (the default depends on the input step).
    A Parquet sink has a key only in the ``complete`` / ``update`` output modes: its given
    key, else the key an upsert table after the same step has (none: every row is a row)."""
    if sink.mode == "append" or (sink.target == "parquet" and sink.mode is None):
        return None
    if sink.target == "parquet" and sink.key is None:
        up = sink.inputs[0]
        if isinstance(up, P.Aggregate):
            return up.keys if up.window is None else up.keys + ("window_start", "window_end")
        if isinstance(up, P.TopK):
            return up.keys + ("rank",)
        return None
    if sink.key is not None:
        return sink.key
    up = sink.inputs[0]
    if sink.mode == "upsert" and not isinstance(up, (P.Aggregate, P.TopK)):
        raise _err('mode="upsert" needs key=[...] unless it follows agg or top_k', sink.pos, sink)
    if isinstance(up, P.Aggregate) and up.window is None:
        return up.keys
    if isinstance(up, P.TopK):
        return up.keys + ("rank",)
    if sink.mode == "upsert" and isinstance(up, P.Aggregate):
        return up.keys + ("window_start", "window_end")
    return None


def _name_sinks(c: Compiled) -> None:
    used: set[str] = set()
    for i, sink in enumerate(c.plan.sinks):
        c.upsert_keys[sink.step_id] = default_upsert_key(c, sink)
        if sink.target != "table":
            continue
        name = sink.name or (c.plan.name if i == 0 and c.plan.name else None) or f"table{i + 1}"
        if name in used:
            raise _err(f"two sinks write table {name!r}", sink.pos, sink)
        used.add(name)
        c.table_names[sink.step_id] = name


__all__ = ["Compiled", "compile_plan", "list_of", "STR", "FLOAT"]
