"""The native backend: the plan lowered to C operators on the ordered multicore runtime.

Lowering (``lower``) turns each step of a linear plan into native operators:

- ``filter`` -> a filter with the predicate as a vectorized expression;
- ``select`` / ``with_columns`` -> a project;
- ``agg`` / ``running`` (unwindowed), ``top_k``, ``dedup`` -> a keyed operator, run
  partitioned on the hybrid queue between a split and an order-restoring merge; aggregate
  arguments that are expressions are computed by a project in front (counted as the same
  step);
- windowed ``agg`` -> one stateful window operator (the watermark is global);
- the sink is the driver: it drains ordered output batches into the run's stores.

The driver (``execute``) runs on the run's thread: it reads the source as Arrow record
batches, pushes them in ``batch_size`` slices (copied into runtime batches without the GIL;
a full pipeline makes it wait, never drop), and drains outputs, dead letters and late rows.
Dead letters and late rows are put in the reference's order (source row, then step) and their
reasons are re-derived with the reference's expression evaluator, so every output equals
the reference's exactly.

Modules, one idea each: ``typecodes`` (column type codes, the list encoding), ``vertices``
(the DAG cut), ``lowering`` (steps and expressions as operators; the tagged layout of
multi-input steps), ``program`` (building the runtime Program), ``arrow`` (Arrow batches in
and out), ``sinks`` (a sink's ordered outputs), ``drivers`` (the chain and DAG drivers).
"""

from __future__ import annotations

from typing import Any

from ... import plan as P
from ...compiler import Compiled
from ...errors import NotSupportedError
from ...options import RunOptions
from .arrow import _arrow_target, to_frame
from .drivers import DagDriver, Driver
from .lowering import (
    PORT_COLUMN,
    Lowered,
    lower,
    lower_expr,
    lower_fanin,
    tagged_name,
    tagged_schema,
    untag_row,
)
from .program import build, check_operator_count
from .typecodes import NAME, _check_types, _lts, encode_list
from .vertices import Vertex, _check_graph, _vertices

# the names other code imports from streamcell.backends.native (tuning constants such as
# PUBLISH_NS are not re-exported: patch them on the module that reads them)
__all__ = [
    "NAME",
    "PORT_COLUMN",
    "DagDriver",
    "Driver",
    "Lowered",
    "NativeBackend",
    "Vertex",
    "_arrow_target",
    "_lts",
    "_vertices",
    "build",
    "encode_list",
    "lower",
    "lower_expr",
    "lower_fanin",
    "tagged_name",
    "tagged_schema",
    "to_frame",
    "untag_row",
]


class NativeBackend:
    name = NAME

    def check(self, c: Compiled, options: RunOptions) -> None:
        _check_types(c)
        if not c.plan.is_chain():
            _check_graph(c)
        for s in c.plan.steps:
            if isinstance(s, P.Sink) and s.target not in ("table", "parquet", "callback", "none"):
                raise NotSupportedError(s.step_id, NAME, f"sink {s.target}")
        check_operator_count(lower(c, options), c)  # lowering checks expression support
        if options.reorder == "none":
            for s in c.plan.steps:
                if isinstance(
                    s,
                    (
                        P.Aggregate,
                        P.Running,
                        P.TopK,
                        P.Dedup,
                        P.Transfer,
                        P.Sketch,
                        P.Speculate,
                        P.Apply,
                    ),
                ):
                    raise NotSupportedError(
                        s.step_id,
                        NAME,
                        "reorder='none' (the ordering-cost ablation) takes stateless plans only",
                    )

    def execute(self, c: Compiled, env: Any, options: RunOptions) -> bool:
        if c.plan.is_chain():
            return Driver(c, env, options).run()
        return DagDriver(c, env, options).run()
