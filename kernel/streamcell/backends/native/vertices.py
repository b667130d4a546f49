"""The DAG cut: a plan that is not a chain becomes the vertices of the DAG runtime
(exec/dag.h), each a linear run of plan steps.
"""

from __future__ import annotations

from dataclasses import dataclass

from ... import plan as P
from ...compiler import Compiled
from ...errors import NotSupportedError
from .typecodes import NAME

MAX_VERTICES = 64  # exec/dag.h SC_DAG_MAX_VERTICES


@dataclass
class Vertex:
    """A vertex of the DAG runtime (exec/dag.h): a linear run of plan steps."""

    name: str
    steps: list[P.Step]
    inputs: list[int]  # vertex of each input port (merge vertices: one per plan input)
    sink: P.Sink | None = None
    source: P.Source | None = None


def _vertices(c: Compiled) -> tuple[list[Vertex], dict[str, int]]:
    """Cut the plan into vertices (a new vertex at each source, multi-input step and fan-out
    branch), numbered as Zimmerman and Chandy requires: topologically, sorted by the index of their
    last predecessor (so the vertices whose inputs all lie below x form a prefix)."""
    steps = c.plan.steps
    consumers = c.plan.consumers()
    verts: list[Vertex] = []
    of: dict[str, int] = {}
    for s in steps:
        if isinstance(s, P.Source):
            verts.append(Vertex(s.step_id, [], [], source=s))
            of[s.step_id] = len(verts) - 1
            continue
        ins = [of[i.step_id] for i in s.inputs]
        if len(s.inputs) == 1 and len(consumers[s.inputs[0].step_id]) == 1:
            v = ins[0]
        else:
            verts.append(Vertex(s.step_id, [], ins))
            v = len(verts) - 1
        of[s.step_id] = v
        if isinstance(s, P.Sink):
            verts[v].sink = s
        else:
            verts[v].steps.append(s)
    # Zimmerman and Chandy numbering: repeatedly take, among the vertices whose inputs are numbered,
    # the one whose last input was numbered earliest (sources first)
    new: dict[int, int] = {}
    pending = set(range(len(verts)))
    while pending:
        ready = [
            (max((new[i] + 1 for i in verts[v].inputs), default=0), v)
            for v in pending
            if all(i in new for i in verts[v].inputs)
        ]
        _, v = min(ready)
        new[v] = len(new)
        pending.remove(v)
    order = sorted(range(len(verts)), key=lambda v: new[v])
    out = []
    for v in order:
        x = verts[v]
        out.append(Vertex(x.name, x.steps, [new[i] for i in x.inputs], x.sink, x.source))
    return out, {sid: new[v] for sid, v in of.items()}


def _check_graph(c: Compiled) -> None:
    verts, _ = _vertices(c)
    if len(verts) > MAX_VERTICES:
        raise NotSupportedError(
            c.plan.steps[-1].step_id,
            NAME,
            f"the plan needs {len(verts)} vertices; the DAG runtime takes {MAX_VERTICES}",
        )
