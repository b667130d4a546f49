"""A backend-neutral snapshot of a run's metrics: what dashboards and ``%stream status`` read.

Every engine feeds the same :class:`MetricsSnapshot` through :func:`metrics_snapshot`:

- run-level numbers come from :meth:`Run.progress` (all engines), latency from the native
  engine's own histogram when it has one; while the run is live ``rows_per_s`` is the
  current rate, once it has ended the average over the run (``rows_in / elapsed_s``), so a
  finished run never reads "0 rows/s";
- per-operator rows come from ``run.native_metrics`` (native engine: rows in/out, cost per row,
  selectivity, queue depth, workers, state size, latency) or, for any other engine, from
  :meth:`Run.counts` (rows in/out and selectivity per plan step). An engine may also provide
  ``run.operator_metrics()`` returning a list of dicts with :class:`OperatorStats`' fields;
- speculate stages (native engine) come from ``run.native_metrics["speculate"]``: the
  predictor's horizon and the abort rate of each stage (:class:`SpeculationStats`);
- sketches come from a ``run.sketches()`` hook when the run has one (a mapping or list of
  sketch objects or :class:`SketchSnapshot`); no hook or no sketches gives an empty list.

Sketch objects (``streamcell.sketches``: Θ, HLL, KLL, frequent items) become
:class:`SketchSnapshot` through :func:`sketch_snapshot`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

QUANTILE_RANKS = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 1.0)
LIVE = frozenset({"starting", "running", "paused"})


@dataclass(frozen=True)
class OperatorStats:
    """One operator (native) or plan step (other engines). ``None``: the engine does not know."""

    name: str
    rows_in: int
    rows_out: int
    selectivity: float | None = None
    cost_ns_per_row: float | None = None
    queue_depth: int | None = None
    workers: int | None = None
    state_size: int | None = None


@dataclass(frozen=True)
class SpeculationStats:
    """One ``speculate`` stage: its function, the conflict predictor's current horizon
    (``mode`` fixed or adaptive; ``horizon_mean`` over committed events) and how many of the
    committed events were aborted once and re-executed (``abort_rate`` = aborts / commits)."""

    step: str
    function: str
    mode: str
    horizon: int
    horizon_mean: float
    commits: int
    aborts: int
    abort_rate: float
    workers: int
    keys: int


@dataclass(frozen=True)
class SketchSnapshot:
    """A sketch's current answer: Θ/HLL give an estimate with bounds, KLL quantiles (a CDF),
    frequent items a top list ``(item, estimate, lower, upper)``."""

    kind: str
    name: str
    n: int | None = None
    estimate: float | None = None
    lower: float | None = None
    upper: float | None = None
    quantiles: tuple[tuple[float, float], ...] = ()
    top_items: tuple[tuple[Any, int, int, int], ...] = ()


@dataclass(frozen=True)
class MetricsSnapshot:
    """One run's numbers at one moment: what the dashboard, the Streams panel and status bar
    (through the ``streamcell`` comm), the status line and ``%stream list|status`` show.

    ``rows_per_s`` / ``rows_out_per_s``: the current rates while the run is live (``None``
    when the engine does not say), the averages over the run once it has ended
    (``avg_rows_per_s`` is always the average).
    ``operators``, ``sketches`` and ``speculation`` are empty when taken with
    ``detail=False``."""

    name: str
    engine: str
    status: str
    error: str | None
    timestamp: float
    elapsed_s: float
    rows_in: int
    rows_out: int
    rows_per_s: float | None
    latency_p50_ms: float | None
    latency_p99_ms: float | None
    latency_max_ms: float | None
    late: int
    dead: int
    watermark_lag_s: float | None
    operators: tuple[OperatorStats, ...] = ()
    sketches: tuple[SketchSnapshot, ...] = field(default_factory=tuple)
    speculation: tuple[SpeculationStats, ...] = ()
    rows_out_per_s: float | None = None
    avg_rows_per_s: float = 0.0
    cell_id: str | None = None

    @property
    def live(self) -> bool:
        """Running, paused or starting: the numbers still change."""
        return self.status in LIVE

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _num(x: Any) -> float | None:
    """A finite float, or None (None, NaN, infinities, anything that is not a number)."""
    if x is None or isinstance(x, bool):
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def sketch_snapshot(name: str, sk: Any) -> SketchSnapshot:
    """Adapt a sketch object (or pass a :class:`SketchSnapshot` through)."""
    if isinstance(sk, SketchSnapshot):
        return sk
    if hasattr(sk, "snapshot") and callable(sk.snapshot) and not hasattr(sk, "get_quantile"):
        inner = sk.snapshot()
        if isinstance(inner, SketchSnapshot):
            return inner
        if hasattr(inner, "estimate"):
            sk = inner
    cls = type(sk).__name__
    if hasattr(sk, "get_quantile"):  # KLL
        n = int(sk.n)
        qs: tuple[tuple[float, float], ...] = ()
        if n:
            inner = [(r, float(sk.get_quantile(r, inclusive=True))) for r in QUANTILE_RANKS[1:-1]]
            qs = ((0.0, float(sk.min_value)), *inner, (1.0, float(sk.max_value)))
        return SketchSnapshot("kll", name, n=n, quantiles=qs)
    if hasattr(sk, "get_frequent_items"):
        items = sk.get_frequent_items("no_false_negatives")
        top = tuple(
            (i, int(e), int(lo), int(hi))
            for i, e, lo, hi in sorted(items, key=lambda t: -t[1])[:10]
        )
        return SketchSnapshot("frequent", name, n=int(sk.total_weight), top_items=top)
    if hasattr(sk, "estimate"):
        est = sk.estimate() if callable(sk.estimate) else sk.estimate
        if hasattr(est, "lower_bounds"):  # ConcurrentThetaEstimate: 2 standard deviations
            return SketchSnapshot(
                "theta",
                name,
                estimate=float(est.estimate),
                lower=float(est.lower_bounds[1]),
                upper=float(est.relaxed_upper_bounds[1]),
            )
        kind = "hll" if "Hll" in cls else "theta"
        return SketchSnapshot(
            kind,
            name,
            estimate=float(est),
            lower=float(sk.lower_bound(2)),
            upper=float(sk.upper_bound(2)),
        )
    raise TypeError(f"sketch {name!r}: cannot snapshot a {cls} (no estimate/quantile/items API)")


def sketch_snapshots(sketches: Any) -> tuple[SketchSnapshot, ...]:
    """A mapping name -> sketch, or an iterable of snapshots / (name, sketch) pairs."""
    if sketches is None:
        return ()
    if isinstance(sketches, Mapping):
        return tuple(sketch_snapshot(str(k), v) for k, v in sketches.items())
    out = []
    for s in sketches:
        if isinstance(s, tuple) and len(s) == 2:
            out.append(sketch_snapshot(str(s[0]), s[1]))
        else:
            out.append(sketch_snapshot(getattr(s, "name", "sketch"), s))
    return tuple(out)


def _native_operators(nm: Mapping[str, Any]) -> tuple[OperatorStats, ...]:
    ops = []
    for o in nm.get("ops", []):
        rin, rout = int(o.get("rows_in", 0)), int(o.get("rows_out", 0))
        ns = o.get("ns")
        cost = float(ns) / rin if ns is not None and rin else _num(o.get("cost_ns"))
        sel = o.get("selectivity")
        ops.append(
            OperatorStats(
                name=str(o.get("op")),
                rows_in=rin,
                rows_out=rout,
                # measured rows out / rows in; the scheduler's running estimate before any row
                selectivity=rout / rin if rin else _num(sel),
                cost_ns_per_row=cost,
                queue_depth=int(o.get("queue_depth", o.get("queued", 0))),
                workers=int(o.get("workers_now", o.get("workers", 0))),
                state_size=int(o.get("state_size", 0)),
            )
        )
    return tuple(ops)


def _step_operators(run: Any) -> tuple[OperatorStats, ...]:
    ops = []
    for s in run.plan.steps:
        c = run._counters[s.step_id]
        rin, rout = int(c.rows_in), int(c.rows_out)
        ops.append(
            OperatorStats(
                name=s.step_id,
                rows_in=rin,
                rows_out=rout,
                selectivity=rout / rin if rin else None,
            )
        )
    return tuple(ops)


def unique_names(names: Iterable[str]) -> list[str]:
    """Number repeated operator names as plan steps are (``sketch``, ``sketch#2``); a name
    that already carries a number (a step id) is kept."""
    names = list(names)
    total: dict[str, int] = {}
    for n in names:
        total[n] = total.get(n, 0) + 1
    seen: dict[str, int] = {}
    out = []
    taken = set(names)
    for n in names:
        if total[n] == 1:
            out.append(n)
            continue
        seen[n] = seen.get(n, 0) + 1
        k = seen[n]
        candidate = n if k == 1 else f"{n}#{k}"
        while k > 1 and candidate in taken:
            k += 1
            candidate = f"{n}#{k}"
        taken.add(candidate)
        out.append(candidate)
    return out


def _operators(run: Any) -> tuple[OperatorStats, ...]:
    hook = getattr(run, "operator_metrics", None)
    nm = getattr(run, "native_metrics", None)
    if callable(hook):
        ops = tuple(OperatorStats(**d) for d in hook())
    elif nm and nm.get("ops"):
        ops = _native_operators(nm)
    else:
        ops = _step_operators(run)
    names = unique_names(o.name for o in ops)
    return tuple(o if o.name == n else replace(o, name=n) for o, n in zip(ops, names, strict=True))


def _speculation(nm: Mapping[str, Any] | None) -> tuple[SpeculationStats, ...]:
    out = []
    for sid, d in ((nm or {}).get("speculate") or {}).items():
        out.append(
            SpeculationStats(
                step=str(sid),
                function=str(d.get("function", "")),
                mode=str(d.get("mode", "")),
                horizon=int(d.get("horizon", 0)),
                horizon_mean=float(d.get("horizon_mean", 0.0)),
                commits=int(d.get("commits", 0)),
                aborts=int(d.get("aborts", 0)),
                abort_rate=float(d.get("abort_rate", 0.0)),
                workers=int(d.get("workers", 0)),
                keys=int(d.get("keys", 0)),
            )
        )
    return tuple(out)


def _count(x: Any) -> int:
    """A row count: 0 when the engine has none yet; a count that is not a finite number is
    a broken run, not a zero (ValueError / TypeError)."""
    return 0 if x is None else int(x)


def metrics_snapshot(run: Any, detail: bool = True) -> MetricsSnapshot:
    """The current metrics of ``run`` (any engine), cheap enough to take many times a second.

    ``detail=False`` leaves out the per-operator rows, sketches and speculation stages (the
    Streams panel's pushes need only the run's own numbers)."""
    p = run.progress()
    status = str(p.get("status", getattr(run, "status", "unknown")))
    p50, p99, pmax = p.get("p50_ms"), p.get("p99_ms"), None
    nm = getattr(run, "native_metrics", None)
    lat = nm.get("latency") if nm else None
    if lat and lat.get("count"):
        p50, p99, pmax = lat["p50_ns"] / 1e6, lat["p99_ns"] / 1e6, lat["max_ns"] / 1e6
    err = getattr(run, "error", None)
    sketches: tuple[SketchSnapshot, ...] = ()
    hook = getattr(run, "sketches", None)
    if detail and callable(hook):
        sketches = sketch_snapshots(hook())
    wm = getattr(run, "watermark_lag_s", None)
    elapsed = float(p.get("elapsed_s") or 0.0)
    rows_in, rows_out = _count(p.get("rows_in")), _count(p.get("rows_out"))
    if nm and status in LIVE and "rows_in" in nm:
        # a live native run: the rows of the frame the operator table comes from (the driver
        # takes both at one instant, every 0.1 s), so the headline and the table agree
        rows_in, rows_out = _count(nm["rows_in"]), _count(nm["rows_out"])
    avg_in = rows_in / elapsed if elapsed > 0 else 0.0
    avg_out = rows_out / elapsed if elapsed > 0 else 0.0
    live = status in LIVE
    if live:
        rate_in: float | None = _num(p.get("rows_per_s"))
        rate_out = _num(p.get("rows_out_per_s"))
    else:  # an ended run: averages, not the zero of a stopped source
        rate_in, rate_out = avg_in, avg_out
    cell = p.get("cell_id", getattr(run, "cell_id", None))
    return MetricsSnapshot(
        name=str(getattr(run, "name", p.get("name", ""))),
        engine=str(getattr(getattr(run, "options", None), "engine", "unknown")),
        status=status,
        error=None if err is None else f"{type(err).__name__}: {err}",
        timestamp=time.time(),
        elapsed_s=elapsed,
        rows_in=rows_in,
        rows_out=rows_out,
        rows_per_s=rate_in,
        latency_p50_ms=_num(p50),
        latency_p99_ms=_num(p99),
        latency_max_ms=_num(pmax),
        late=_count(p.get("late")),
        dead=_count(p.get("dead")),
        watermark_lag_s=_num(wm() if callable(wm) else wm),
        operators=_operators(run) if detail else (),
        sketches=sketches,
        speculation=_speculation(nm) if detail else (),
        rows_out_per_s=rate_out,
        avg_rows_per_s=avg_in,
        cell_id=cell if isinstance(cell, str) and cell else None,
    )


def describe_speculation(stats: Iterable[SpeculationStats]) -> list[str]:
    """One line per speculate stage (for text displays and the dashboard)."""
    return [
        f"{s.step} {s.function}: horizon {s.horizon} ({s.mode}, mean {s.horizon_mean:.1f}), "
        f"abort rate {s.abort_rate:.1%} ({s.aborts:,} of {s.commits:,} events re-run), "
        f"{s.workers} workers, {s.keys:,} keys"
        for s in stats
    ]


def describe_sketches(snaps: Iterable[SketchSnapshot]) -> list[str]:
    """One line per sketch (for text displays)."""
    lines = []
    for s in snaps:
        if s.kind in ("theta", "hll") and s.estimate is not None:
            lines.append(f"{s.name} ({s.kind}): {s.estimate:,.0f} [{s.lower:,.0f}, {s.upper:,.0f}]")
        elif s.kind == "kll":
            med = dict(s.quantiles).get(0.5)
            lines.append(f"{s.name} (kll): n={s.n:,} median={med}")
        else:
            top = ", ".join(f"{i}:{e}" for i, e, _, _ in s.top_items[:3])
            lines.append(f"{s.name} ({s.kind}): {top}")
    return lines
