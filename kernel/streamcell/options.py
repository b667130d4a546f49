"""Run options: one frozen object instead of a growing list of flags."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

Engine = Literal["auto", "reference", "native", "spark"]
Scheduler = Literal["CT", "QST", "LP", "ET"]
Reorder = Literal["nonblocking", "locked", "none"]
KeyedQueue = Literal["hybrid", "partitioned"]
EntityOrder = Literal["tickets", "serial"]


@dataclass(frozen=True)
class RunOptions:
    """How a plan runs.

    Parameters
    ----------
    engine
        ``"auto"`` (the default): the native engine when this build has it and it supports
        every step of the plan, else the reference engine (``run.engine`` says which ran and
        ``run.engine_note`` why). ``"reference"`` (pure Python, sequential: the oracle),
        ``"native"`` (the ordered multicore runtime) and ``"spark"`` are added by their
        backends; asking for one that is not available raises a clear error.
    workers
        Worker threads (native engine).
    batch_size
        Rows per columnar batch (native engine). ``None`` (the default): the engine picks,
        65,536 rows for a chain of stateless steps only (filters, selects, with_columns) from
        a source that is not throttled, and 16,384 for any other plan
        (backends/native/lowering.py, ``batch_rows``).
    scheduler
        Native scheduling heuristic (Prasaad et al. section 6).
    display
        Whether a ``%%stream`` cell shows its plan and live status.
    reorder
        Native reorder buffer: ``"nonblocking"`` (Prasaad et al. Fig. 4, the default) or
        ``"locked"`` (for the ablation benchmark), or ``"none"``: no order restored after
        stateless operators, outputs in completion order. ``"none"`` exists only to measure
        what ordering costs; it breaks the ordering guarantee and is accepted only for plans
        without keyed or windowed steps.
    checkpoint_dir
        Spark streaming runs: the folder for the query's checkpoints (default: a fresh folder
        under ``.streamcell/checkpoints`` in the working directory).
    trigger_interval
        Spark streaming runs: seconds between micro-batches (a processing-time trigger).
    keyed_queue
        Native keyed worklist: ``"hybrid"`` (Prasaad et al. hybrid queue, the default) or
        ``"partitioned"`` (one queue per worker, for the ablation benchmark).
    entity_order
        Native multi-entity events (``key_by_all`` + ``transfer``): ``"tickets"`` (the lazy topological sorting design,
        per-entity ticket ordering, the default) or ``"serial"`` (one global ticket lock
        around the same update, the benchmark's baseline). Both give the same result.
    """

    engine: Engine = "auto"
    workers: int = 1
    batch_size: int | None = None
    scheduler: Scheduler = "CT"
    display: bool = True
    reorder: Reorder = "nonblocking"
    keyed_queue: KeyedQueue = "hybrid"
    entity_order: EntityOrder = "tickets"
    checkpoint_dir: str | None = None
    trigger_interval: float = 0.5

    def __post_init__(self) -> None:
        if self.engine not in ("auto", "reference", "native", "spark"):
            raise ValueError(
                f"unknown engine {self.engine!r}; engines: auto, reference, native, spark"
            )
        if self.workers < 1:
            raise ValueError("workers must be >= 1")
        if self.batch_size is not None and self.batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        if self.scheduler not in ("CT", "QST", "LP", "ET"):
            raise ValueError(f"unknown scheduler {self.scheduler!r}; schedulers: CT, QST, LP, ET")
        if self.reorder not in ("nonblocking", "locked", "none"):
            raise ValueError(
                f"unknown reorder {self.reorder!r}; choices: nonblocking, locked, none"
            )
        if self.trigger_interval <= 0:
            raise ValueError("trigger_interval must be > 0 seconds")
        if self.keyed_queue not in ("hybrid", "partitioned"):
            raise ValueError(
                f"unknown keyed_queue {self.keyed_queue!r}; choices: hybrid, partitioned"
            )

        if self.entity_order not in ("tickets", "serial"):
            raise ValueError(
                f"unknown entity_order {self.entity_order!r}; choices: tickets, serial"
            )

    def with_(self, **changes: Any) -> RunOptions:
        return replace(self, **{k: v for k, v in changes.items() if v is not None})
