"""The one-line live status a ``%%stream --status-line`` cell and ``%stream status`` show.

It reads the run's :class:`~streamcell.snapshot.MetricsSnapshot` (as the dashboard and the
Streams panel do) and writes its numbers with :mod:`streamcell.fmt`. A background thread
refreshes an IPython display handle a few times per second until the run ends, then shows
the final state once more. Safe from threads with ipykernel >= 7.1.
"""

from __future__ import annotations

import html
import threading
from typing import Any

from streamcell import fmt
from streamcell.snapshot import MetricsSnapshot, metrics_snapshot

COLORS = {
    "running": "#2e7d32",
    "paused": "#f9a825",
    "finished": "#1565c0",
    "stopped": "#6d4c41",
    "failed": "#c62828",
    "starting": "#757575",
}


def status_text(snap: MetricsSnapshot) -> str:
    """``running · 12,000 rows in · 11,800 out · 20,000 rows/s · p99 0.42 ms · 0:07.3``;
    an ended run reads its average rate (``avg 18,500 rows/s``)."""
    parts = [snap.status, f"{fmt.count(snap.rows_in)} rows in", f"{fmt.count(snap.rows_out)} out"]
    if snap.live:
        parts.append(fmt.rate(snap.rows_per_s))
    else:
        parts.append("avg " + fmt.rate(snap.avg_rows_per_s))
    if snap.latency_p99_ms is not None:
        parts.append("p99 " + fmt.ms(snap.latency_p99_ms))
    parts.append(fmt.elapsed(snap.elapsed_s))
    if snap.late:
        parts.append(f"{fmt.count(snap.late)} late")
    if snap.dead:
        parts.append(f"{fmt.count(snap.dead)} dead-lettered")
    return " · ".join(parts)


def status_html(run: Any) -> str:
    snap = metrics_snapshot(run, detail=False)
    color = COLORS.get(snap.status, "#757575")
    text = html.escape(f"{snap.name}: {status_text(snap)}")
    err = ""
    if snap.status == "failed" and snap.error is not None:
        err = f"<div style='color:#c62828'>{html.escape(snap.error)}</div>"
    return (
        f"<div class='streamcell-status' data-status='{snap.status}' style='font-family:monospace'>"
        f"<span style='color:{color}'>●</span> {text}{err}</div>"
    )


class StatusLine:
    """Shows ``status_html(run)`` and keeps it updated while the run is live."""

    def __init__(self, run: Any, interval: float = 0.25):
        from IPython.display import HTML, display

        self.run = run
        self.interval = interval
        self._HTML = HTML
        self.handle = display(HTML(status_html(run)), display_id=True)
        self._thread = threading.Thread(
            target=self._loop, name=f"streamcell-status-{run.name}", daemon=True
        )
        self._thread.start()

    def _loop(self) -> None:
        while not self.run.done():
            self.run._done.wait(self.interval)
            self._update()
        self._update()

    def _update(self) -> None:
        if self.handle is not None:
            self.handle.update(self._HTML(status_html(self.run)))


class RunTable:
    """What ``%stream list`` returns: every run's snapshot, shown as a table in the one number
    format; ``.frame`` has the same numbers unformatted (a Polars DataFrame)."""

    HEAD = ("name", "status", "engine", "rows in", "rows out", "rows/s", "p99", "elapsed")

    def __init__(self, snaps: list[MetricsSnapshot]):
        self.snapshots = snaps

    @property
    def frame(self) -> Any:
        import polars as pl

        return pl.DataFrame(
            [
                {
                    "name": s.name,
                    "status": s.status,
                    "engine": s.engine,
                    "rows_in": s.rows_in,
                    "rows_out": s.rows_out,
                    "rows_per_s": s.rows_per_s,
                    "p99_ms": s.latency_p99_ms,
                    "elapsed_s": s.elapsed_s,
                }
                for s in self.snapshots
            ],
            schema={
                "name": pl.String,
                "status": pl.String,
                "engine": pl.String,
                "rows_in": pl.Int64,
                "rows_out": pl.Int64,
                "rows_per_s": pl.Float64,
                "p99_ms": pl.Float64,
                "elapsed_s": pl.Float64,
            },
        )

    def rows(self) -> list[tuple[str, ...]]:
        """Each run's cells as text (an ended run's rows/s is its average, marked ``avg``)."""
        return [
            (
                s.name,
                s.status,
                s.engine,
                fmt.count(s.rows_in),
                fmt.count(s.rows_out),
                fmt.rate(s.rows_per_s) if s.live else "avg " + fmt.rate(s.avg_rows_per_s),
                fmt.ms(s.latency_p99_ms),
                fmt.elapsed(s.elapsed_s),
            )
            for s in self.snapshots
        ]

    def __len__(self) -> int:
        return len(self.snapshots)

    def __repr__(self) -> str:
        if not self.snapshots:
            return "no runs"
        table = [self.HEAD, *self.rows()]
        widths = [max(len(r[i]) for r in table) for i in range(len(self.HEAD))]
        return "\n".join(
            "  ".join(
                c.rjust(w) if i >= 3 else c.ljust(w)
                for i, (c, w) in enumerate(zip(r, widths, strict=True))
            ).rstrip()
            for r in table
        )

    def _repr_html_(self) -> str:
        if not self.snapshots:
            return "<i>no runs</i>"
        head = "".join(f"<th>{h}</th>" for h in self.HEAD)
        body = "".join(
            "<tr>"
            + "".join(
                f"<td style='text-align:{'right' if i >= 3 else 'left'}'>{html.escape(c)}</td>"
                for i, c in enumerate(r)
            )
            + "</tr>"
            for r in self.rows()
        )
        return f"<table class='sc-run-table'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def plan_html(plan: Any) -> str:
    """The plan's graph, collapsed (a ``<details>``): the live numbers come first."""
    steps = len(getattr(plan, "steps", ()))
    label = f"plan · {steps} step{'s' if steps != 1 else ''} (click to show the graph)"
    return (
        f"<details class='sc-plan'><summary style='cursor:pointer'>{html.escape(label)}</summary>"
        f"{plan._repr_html_()}</details>"
    )
