"""How a plan explains itself: ``explain()`` text and ``_repr_html_`` as a drawn graph (SVG)."""

from __future__ import annotations

import html

from . import plan as P
from .expr import to_text
from .types import format_schema


def step_summary(s: P.Step) -> str:
    """One-line description of a step's parameters."""
    if isinstance(s, P.Source):
        rate = f", rate={s.rate:g}/s" if s.rate else ""
        return s.spec.text() + rate
    if isinstance(s, P.Filter):
        return to_text(s.predicate)
    if isinstance(s, (P.Select, P.WithColumns)):
        return ", ".join(n if to_text(e) == n else f"{n}={to_text(e)}" for n, e in s.exprs)
    if isinstance(s, P.Explode):
        return ", ".join(s.columns)
    if isinstance(s, P.Aggregate):
        w = f"{s.window.text()} · " if s.window else ""
        return w + ", ".join(f"{n}={to_text(a)}" for n, a in s.aggs)
    if isinstance(s, P.Running):
        return ", ".join(f"{n}={to_text(a)}" for n, a in s.aggs)
    if isinstance(s, P.TopK):
        return f"k={s.k} by {s.by} {'desc' if s.descending else 'asc'}"
    if isinstance(s, P.Dedup):
        return ", ".join(s.keys) or "all columns"
    if isinstance(s, P.Transfer):
        extra = " overdraft" if s.overdraft else ""
        return f"{s.amount} from {s.keys[0]} to {s.keys[1]}, initial {s.initial!r}{extra}"
    if isinstance(s, P.Sketch):
        return ", ".join(f"{c.text()} as {n}" for n, c in s.sketches)
    if isinstance(s, P.Speculate):
        call = f"{s.fn}({', '.join(s.args)})" if s.args else s.fn
        return f"{s.name} = {call}, horizon {s.horizon}"
    if isinstance(s, P.Apply):
        call = f"{s.fn}({', '.join(s.args)})" if s.args else s.fn
        return f"{s.name} = {call}" + (f" per {', '.join(s.keys)}" if s.keys else " (one state)")
    if isinstance(s, P.Union):
        return " + ".join(i.step_id for i in s.inputs)
    if isinstance(s, P.Join):
        return f"{s.inputs[0].step_id} ⋈ {s.inputs[1].step_id} on {', '.join(s.on)} within {s.within!r} ({s.time})"
    if isinstance(s, P.Correlate):
        ports = [i.step_id for i in s.inputs]
        aggs = ", ".join(f"{n}={a.text(ports)}" for n, a in s.aggs)
        late = f", lateness {s.lateness!r}" if s.lateness != 0 else ""
        return f"{' ~ '.join(ports)} on {', '.join(s.on)} over {s.over!r} ({s.time}{late}) · {aggs}"
    if isinstance(s, P.Sink):
        if s.target == "callback" and s.callback is not None:
            return f"callback {s.callback.label}"
        if s.target == "none":
            return "none (rows dropped)"
        return f"{s.target} {s.name or '(run name)'}" + (f" mode={s.mode}" if s.mode else "")
    return ""


def _schemas(plan: P.Plan) -> dict[str, str]:
    try:
        from .compiler import compile_plan

        c = compile_plan(plan)
    except Exception:  # explain works on plans that do not compile yet
        return {}
    return {sid: format_schema(sch) for sid, sch in c.schemas.items()}


def _function_labels(s: P.Step) -> list[str]:
    """One label per registered user function the step calls (native or Python slow path)."""
    from .udf import functions_called, lookup

    exprs: list[object] = []
    if isinstance(s, P.Filter):
        exprs.append(s.predicate)
    elif isinstance(s, (P.Select, P.WithColumns)):
        exprs += [e for _, e in s.exprs]
    elif isinstance(s, (P.Aggregate, P.Running)):
        exprs += [a for _, a in s.aggs]
    names: list[str] = [s.fn] if isinstance(s, (P.Speculate, P.Apply)) else []
    for e in exprs:
        names += [n for n in functions_called(e) if n not in names]
    out = []
    for n in names:
        spec = lookup(n)
        out.append(spec.label() if spec else f"{n}: not registered in this kernel")
    return out


def explain_text(plan: P.Plan, schemas: dict[str, str] | None = None) -> str:
    schemas = _schemas(plan) if schemas is None else schemas
    steps = plan.steps
    width = max(len(s.step_id) for s in steps)
    lines = [f"plan {plan.name or ''} ({len(steps)} steps)".replace("  ", " ")]
    for s in steps:
        edge = P.edge_kind(s)
        ins = ", ".join(i.step_id for i in s.inputs)
        line = f"  {s.step_id:<{width}}  {step_summary(s)}"
        if ins:
            line += f"    [from {ins}, {edge}, {P.operator_kind(s)}]"
        lines.append(line)
        for label in _function_labels(s):
            lines.append(f"  {'':<{width}}    ƒ {label}")
        if s.step_id in schemas:
            lines.append(f"  {'':<{width}}    → {schemas[s.step_id]}")
    lines += _dag_lines(plan)
    return "\n".join(lines)


def _dag_lines(plan: P.Plan) -> list[str]:
    """How the native engine cuts a non-linear plan into vertices (Zimmerman and Chandy numbering)."""
    try:
        from .backends.native import _vertices
        from .compiler import compile_plan

        c = compile_plan(plan)
        if plan.is_chain():
            return []
        verts, _ = _vertices(c)
    except Exception:  # explain works on plans that do not compile yet
        return []
    lines = [f"native DAG: {len(verts)} vertices, run by phases with Δ-propagation"]
    for v, x in enumerate(verts):
        steps = [s.step_id for s in x.steps] + ([x.sink.step_id] if x.sink else [])
        if x.source is not None:
            steps.insert(0, x.source.step_id)
        src = f" ← {', '.join(f'v{i}' for i in x.inputs)}" if x.inputs else " (source)"
        lines.append(f"  v{v:<3} {' → '.join(steps) or x.name}{src}")
    return lines


def explain_html(plan: P.Plan) -> str:
    """Draw the DAG as SVG: steps as boxes in layers, edges labelled with their kind."""
    steps = plan.steps
    depth: dict[str, int] = {}
    for s in steps:
        depth[s.step_id] = 1 + max((depth[i.step_id] for i in s.inputs), default=-1)
    layers: dict[int, list[P.Step]] = {}
    for s in steps:
        layers.setdefault(depth[s.step_id], []).append(s)
    box_w, box_h, gap_x, gap_y = 330, 44, 24, 34
    ncols = max(len(v) for v in layers.values())
    width = ncols * (box_w + gap_x) + gap_x
    height = len(layers) * (box_h + gap_y) + gap_y
    pos: dict[str, tuple[int, int]] = {}
    for d, row in layers.items():
        for j, s in enumerate(row):
            pos[s.step_id] = (gap_x + j * (box_w + gap_x), gap_y // 2 + d * (box_h + gap_y))
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'class="streamcell-plan" style="font-family:monospace;font-size:11px">',
        '<defs><marker id="sc-arrow" markerWidth="8" markerHeight="8" refX="7" refY="4" orient="auto">'
        '<path d="M0,0 L8,4 L0,8 z" fill="#607d8b"/></marker></defs>',
    ]
    for s in steps:
        x2, y2 = pos[s.step_id]
        for i in s.inputs:
            x1, y1 = pos[i.step_id]
            ax, ay, bx, by = x1 + box_w // 2, y1 + box_h, x2 + box_w // 2, y2
            parts.append(
                f'<line x1="{ax}" y1="{ay}" x2="{bx}" y2="{by - 2}" stroke="#607d8b" marker-end="url(#sc-arrow)"/>'
            )
            parts.append(
                f'<text x="{(ax + bx) // 2 + 6}" y="{(ay + by) // 2 + 4}" fill="#607d8b">{html.escape(P.edge_kind(s))}</text>'
            )
    colors = {
        "source": "#e3f2fd",
        "sink": "#e8f5e9",
        "stateless": "#fafafa",
        "partitioned": "#fff3e0",
        "stateful": "#fce4ec",
        "io": "#ede7f6",
    }
    for s in steps:
        x, y = pos[s.step_id]
        kind = (
            "source"
            if isinstance(s, P.Source)
            else "sink"
            if isinstance(s, P.Sink)
            else P.operator_kind(s)
        )
        summary = step_summary(s)
        if len(summary) > 46:
            summary = summary[:45] + "…"
        parts.append(
            f"<g><title>{html.escape(s.step_id + ': ' + step_summary(s))}</title>"
            f'<rect x="{x}" y="{y}" width="{box_w}" height="{box_h}" rx="6" fill="{colors[kind]}" stroke="#90a4ae"/>'
            f'<text x="{x + 8}" y="{y + 17}" font-weight="bold">{html.escape(s.step_id)}</text>'
            f'<text x="{x + 8}" y="{y + 34}">{html.escape(summary)}</text></g>'
        )
    parts.append("</svg>")
    text = html.escape(explain_text(plan, {}))
    return (
        f"<div class='streamcell-plan-view'>{''.join(parts)}"
        f"<details><summary>plan text</summary><pre>{text}</pre></details></div>"
    )
