"""Building a runtime Program (not started) from a lowered plan: a chain's operators, or a
DAG's vertices, sources, sinks, merges and edges.
"""

from __future__ import annotations

from typing import Any

from ... import plan as P
from ...compiler import Compiled
from ...errors import NotSupportedError
from ...types import Schema
from .lowering import OUT_ROWS, STATELESS_STEPS, Lowered, tagged_schema
from .typecodes import NAME, _lts

PHASES = 16  # phases in flight at once on the DAG runtime
# while rows arrive, a publishing aggregate publishes first after PUBLISH_NS, then at an
# interval doubling up to PUBLISH_MAX_NS (each publish costs a row per changed key)
PUBLISH_NS = 100_000_000
PUBLISH_MAX_NS = 1_000_000_000
FUSE = True  # consecutive filter / project steps of a chain run as one fused stage (ablation)


def _fused_part(kind: str, a: dict[str, Any]) -> tuple[Any, ...]:
    if kind == "filter":
        return ("filter", a["step"], a["cin"], a["cout"], a["lts"], a["pred"], a["capacity"])
    return (
        "project",
        a["step"],
        a["cin"],
        a["cout"],
        a["in_lts"],
        a["out_lts"],
        a["src"],
        a["exprs"],
        a["capacity"],
    )


def fuse(ops: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, Any]]:
    """A chain's operators with each run of consecutive filter / project operators as one
    ("fused", parts) operator: one stage per batch, one gather (exec/expr.h)."""
    out: list[tuple[str, Any]] = []
    for kind, a in ops:
        if kind not in ("filter", "project"):
            out.append((kind, a))
        elif out and out[-1][0] == "fused":
            out[-1][1].append(_fused_part(kind, a))
        else:
            out.append(("fused", [_fused_part(kind, a)]))
    return out


MAX_OPERATORS = 64  # runtime/scheduler.h SC_SCHED_MAX_OPS: a Program's operator table


def runtime_operators(kind: str, a: dict[str, Any]) -> int:
    """How many runtime operators ``build`` adds for one lowered op: a keyed operator runs
    between a split and a merge; a transfer is a ticket order plus a parallel apply."""
    if kind in ("keyed", "step") or (kind == "sketch" and a.get("keys")):
        return 3
    return 2 if kind == "transfer" else 1


def check_operator_count(low: Lowered, c: Compiled) -> None:
    """Refuse, at start, a plan with more operators than a Program holds, naming the step
    (with its line and column in a cell) where the limit is crossed."""
    total = 0
    steps = list(c.plan.steps)
    for kind, a in low.ops:
        total += runtime_operators(kind, a)
        if total > MAX_OPERATORS:
            step = steps[a["step"]]
            raise NotSupportedError(
                step.step_id,
                NAME,
                f"the native runtime runs at most {MAX_OPERATORS} operators per pipeline and "
                f"this step takes it to {total}; split the cell into two runs (a table of "
                "the first is the source of the second) or use engine='reference'",
                pos=step.pos,
            )


def build(low: Lowered, c: Compiled) -> Any:
    """A Program (not started) for a lowered plan."""
    from ... import _runtime as R

    dag = low.vertices is not None
    ops: list[tuple[str, Any]] = list(low.ops) if dag or not FUSE else fuse(low.ops)
    if dag:
        prog = _dag_program(low, c)
    else:
        prog = R.Program(low.nsteps, 64)
        prog.set_input(_lts(low.in_schema), carried_strings(low, c, ops), lean_chain(low, c, ops))
    parts = 1 if dag else low.partitions  # a DAG vertex runs its phases in order
    for kind, a in ops:
        if dag:
            prog.vertex = a["vertex"]
        if kind == "fused":
            prog.add_fused(a)
        elif kind == "filter":
            prog.add_filter(a["step"], a["cin"], a["cout"], a["lts"], a["pred"], a["capacity"])
        elif kind == "project":
            prog.add_project(
                a["step"],
                a["cin"],
                a["cout"],
                a["in_lts"],
                a["out_lts"],
                a["src"],
                a["exprs"],
                a["capacity"],
            )
        elif kind == "keyed":
            prog.add_keyed(
                a["kind"],
                a["step"],
                a["cin"],
                a["cout"],
                a["in_lts"],
                a["out_lts"],
                a["keys"],
                parts,
                a["capacity"],
                aggs=a.get("aggs"),
                outs=a.get("outs"),
                by=a.get("by", -1),
                k=a.get("k", 0),
                descending=a.get("descending", False),
                publish_ns=PUBLISH_NS if a.get("publish") else 0,
                publish_max_ns=max(PUBLISH_NS, PUBLISH_MAX_NS),
                publish_complete=bool(a.get("complete")),
            )
        elif kind == "window":
            prog.add_window(
                a["step"],
                a["cin"],
                a["cout"],
                a["in_lts"],
                a["out_lts"],
                a["keys"],
                a["aggs"],
                a["outs"],
                a["kind"],
                a["time_col"],
                a["size"],
                a["every"],
                a["lateness"],
                a["capacity"],
            )
        elif kind == "transfer":
            low.entities[a["sid"]] = prog.add_transfer(
                a["step"],
                a["in_lts"],
                a["mid_lts"],
                a["out_lts"],
                a["keys"],
                a["amount"],
                a["is_float"],
                a["initial_f"],
                a["initial_i"],
                a["overdraft"],
                a["serial"],
                a["reasons"],
                a["rejected"],
                a["capacity"],
            )
        elif kind == "speculate":
            low.speculators[a["sid"]] = prog.add_speculate(
                a["step"],
                a["in_lts"],
                a["out_lts"],
                a["kernel"],
                a["args"],
                a["kinds"],
                a["workers"],
                a["horizon"],
                a["max_horizon"],
                a["capacity"],
            )
        elif kind == "step":
            prog.add_step(
                a["step"],
                a["in_lts"],
                a["out_lts"],
                a["kernel"],
                a["keys"],
                a["args"],
                a["kinds"],
                a["ret"],
                a["state_size"],
                parts,
                a["capacity"],
            )
        elif kind == "sketch":
            low.taps[a["sid"]] = prog.add_sketch(
                a["step"],
                a["cin"],
                a["cout"],
                a["lts"],
                a["keys"],
                a["specs"],
                parts,
                a["capacity"],
            )
        elif kind in ("join", "correlate"):  # a ("join" | "correlate", kwargs) of lower_fanin
            getattr(prog, f"add_{kind}")(**{k: v for k, v in a.items() if k != "vertex"})
        elif kind == "explode":
            prog.add_explode(
                a["step"],
                a["cin"],
                a["cout"],
                a["in_lts"],
                a["out_lts"],
                a["cols"],
                a["reason"],
                a["capacity"],
            )
    if dag:
        assert low.vertices is not None
        for w, x in enumerate(low.vertices):
            for port, u in enumerate(x.inputs):
                prog.dag_edge(u, w, port)
    else:
        prog.set_output(_lts(c.schemas[low.sink.inputs[0].step_id]), OUT_ROWS)
    return prog


def _one_stage(low: Lowered, c: Compiled, ops: list[tuple[str, Any]]) -> list[P.Step] | None:
    """The plan's steps when it runs as one fused stateless stage straight into a sink that
    does not publish (filters, selects and with_columns between its source and its sink),
    else None."""
    plan = getattr(c, "plan", None)  # a Spark executor's operator builds without a plan
    if plan is None or len(ops) != 1 or ops[0][0] != "fused" or low.publishing:
        return None
    steps = list(plan.steps)
    return steps if all(isinstance(s, STATELESS_STEPS) for s in steps) else None


def lean_chain(low: Lowered, c: Compiled, ops: list[tuple[str, Any]]) -> bool:
    """Whether the program's batches may be lean (exec/exec.h): one fused stage straight
    into a sink that does not publish reads no hidden column (the sink's frames leave them
    out, and the stage works out a dead row's serial itself), so the import does not write
    them and nothing moves them."""
    return _one_stage(low, c, ops) is not None


def carried_strings(low: Lowered, c: Compiled, ops: list[tuple[str, Any]]) -> bytes | None:
    """Which input string columns no operator reads (one flag per input column, hidden ones
    first), or None: their inline string views may pass from the source frame to the sink as
    they are (``sc_column.views``). Only for one fused stage straight into a sink that does not
    publish: its filters and projects read columns only through their expressions, and pass
    plain column references through. A column is read when an expression (not a plain
    reference) or a predicate names it, or a plain reference renames it (conservative: names
    are not followed through renames); nothing qualifies when an expression calls a user
    function."""
    from ...expr import Call, Col, children, columns_used

    steps = _one_stage(low, c, ops)
    if steps is None:  # a sketch or any other step kind: nothing is carried
        return None
    read: set[str] = set()
    exprs = []
    for s in steps:
        if isinstance(s, P.Filter):
            exprs.append(s.predicate)
            read.update(columns_used(s.predicate))
        elif isinstance(s, (P.Select, P.WithColumns)):
            for n, e in s.exprs:
                exprs.append(e)
                if isinstance(e, Col):
                    if n != e.name:
                        read.add(e.name)
                else:
                    read.update(columns_used(e))
    stack = list(exprs)
    while stack:  # a user function may see whatever it is handed: nothing stays views
        x = stack.pop()
        if isinstance(x, Call) and x.fn.startswith("udf:"):
            return None
        stack.extend(children(x))
    flags = [0, 0] + [int(t.name == "str" and n not in read) for n, t in low.in_schema]
    return bytes(flags) if any(flags) else None


def merge_layout(s: P.Step, c: Compiled) -> tuple[Schema, list[list[int]], int]:
    """How a multi-input step's vertex merges its inputs (exec/dag.h sc_dag_merge): the
    merged schema, per port the input column of each merged column (-1: null), and the
    port column (-1: none). A union maps columns by name into its schema; other steps get
    the tagged layout: a port column, then each input's columns (null on the other ports'
    rows)."""
    ins = [c.schemas[i.step_id] for i in s.inputs]
    if isinstance(s, P.Union):
        out = c.schemas[s.step_id]
        maps = []
        for sch in ins:
            at = {n: k + 2 for k, (n, _) in enumerate(sch)}
            maps.append([0, 1] + [at[n] for n, _ in out])
        return out, maps, -1
    merged = tagged_schema(s, c)
    width = len(merged) + 2
    maps = []
    off = 3  # seq, pos, port
    for sch in ins:
        m = [0, 1, -1] + [-1] * (width - 3)
        for k in range(len(sch)):
            m[off + k] = 2 + k
        maps.append(m)
        off += len(sch)
    return merged, maps, 2


def _dag_program(low: Lowered, c: Compiled) -> Any:
    """A DAG-mode Program with its vertices, sources, sinks and merges declared."""
    from ... import _runtime as R

    verts = low.vertices
    assert verts is not None
    sinks = [x.sink for x in verts if x.sink is not None]
    sources = [x for x in verts if x.source is not None]
    prog = R.Program(low.nsteps, 64, dag=(len(verts), len(sources), len(sinks), PHASES))
    sink_no = {id(x.sink): k for k, x in enumerate(v for v in verts if v.sink is not None)}
    for v, x in enumerate(verts):
        nin = max(1, len(x.inputs))
        prog.dag_vertex(v, x.name, nin, sink_no.get(id(x.sink), -1) if x.sink else -1)
    for i, x in enumerate(sources):
        assert x.source is not None
        prog.dag_source(i, verts.index(x), _lts(c.schemas[x.source.step_id]))
    for x in verts:
        if x.sink is not None:
            prog.dag_sink(_lts(c.schemas[x.sink.inputs[0].step_id]))
    for v, x in enumerate(verts):
        if len(x.inputs) > 1:
            head = c.plan.step(x.name)
            merged, maps, port_col = merge_layout(head, c)
            prog.dag_merge(v, _lts(merged), maps, port_col)
    return prog
