"""The live dashboard a ``%%stream`` cell displays (ipywidgets + Altair ``JupyterChart``).

It appears at once: Altair is loaded in the background (:mod:`.charts`), the numbers are drawn
first and the charts are attached when Altair is ready, drawing the history recorded since the
run's t=0 (the dashboard's own samples, from t=0 and the run's metrics rows taken before it
existed), so a chart never misses the run's first seconds.

It reads only :func:`streamcell.snapshot.metrics_snapshot`, so every engine gets the same
dashboard. A publisher thread takes a snapshot a few times per second (``hz``, 4-20) and pushes
the changed widget state in one batch per widget (``hold_sync``); ipykernel >= 7.1 makes widget
updates from a thread safe. When the run ends the thread shows the final state once more and
exits; the widgets stay (final numbers, status, error) in JupyterLab 4 and Notebook 7.

Parts: status with pause / resume / stop buttons; headline numbers (rows in/out, rates, watermark
lag, late and dead-lettered rows, with a button that shows a sample of dead letters and their
reasons); throughput (rows/s in and out) and latency (p50, p99) charts; the per-operator table
(rows in/out, selectivity, cost per row, queue depth, workers, state size); and a sketch panel
(hidden while the run has no sketches): Θ/HLL estimate with bounds, KLL quantiles as a small CDF
chart, frequent items as a top list.
"""

from __future__ import annotations

import contextlib
import html
import threading
import time
from collections import deque
from typing import Any

from streamcell import plan as P
from streamcell.snapshot import (
    MetricsSnapshot,
    SketchSnapshot,
    describe_speculation,
    metrics_snapshot,
)

from . import charts
from .status import _COLORS, _fmt_rate


def _fmt(x: float | int | None, unit: str = "", digits: int = 2) -> str:
    if x is None:
        return "–"
    if isinstance(x, int):
        return f"{x:,}{unit}"
    return f"{x:,.{digits}f}{unit}"


def operators_html(snap: MetricsSnapshot) -> str:
    head = (
        "operator",
        "rows in",
        "rows out",
        "selectivity",
        "cost/row",
        "queue",
        "workers",
        "state",
    )
    rows = []
    for o in snap.operators:
        cost = None if o.cost_ns_per_row is None else o.cost_ns_per_row
        cells = (
            html.escape(o.name),
            _fmt(o.rows_in),
            _fmt(o.rows_out),
            _fmt(o.selectivity, digits=3),
            "–" if cost is None else f"{cost:,.0f} ns",
            _fmt(o.queue_depth),
            _fmt(o.workers),
            _fmt(o.state_size),
        )
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    spec = "".join(
        f"<div class='sc-speculation'>{html.escape(line)}</div>"
        for line in describe_speculation(snap.speculation)
    )
    return (
        "<table class='sc-ops' style='font-family:monospace;font-size:12px'><thead><tr>"
        + "".join(f"<th>{h}</th>" for h in head)
        + "</tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table>"
        + spec
    )


def _cdf_svg(quantiles: tuple[tuple[float, float], ...], w: int = 160, h: int = 50) -> str:
    if len(quantiles) < 2:
        return ""
    lo, hi = quantiles[0][1], quantiles[-1][1]
    span = (hi - lo) or 1.0
    pts = " ".join(f"{(v - lo) / span * w:.1f},{h - r * h:.1f}" for r, v in quantiles)
    return (
        f"<svg class='sc-cdf' width='{w}' height='{h}' style='border:1px solid #ddd'>"
        f"<polyline fill='none' stroke='#1565c0' stroke-width='1.5' points='{pts}'/></svg>"
    )


def sketch_html(s: SketchSnapshot) -> str:
    title = f"<b>{html.escape(s.name)}</b> <i>{s.kind}</i>"
    if s.kind in ("theta", "hll"):
        body = (
            f"≈ <span class='sc-estimate'>{_fmt(s.estimate, digits=0)}</span> "
            f"[{_fmt(s.lower, digits=0)}, {_fmt(s.upper, digits=0)}] (±2σ)"
        )
    elif s.kind == "kll":
        q = dict(s.quantiles)
        body = (
            f"n={_fmt(s.n)} p50={_fmt(q.get(0.5))} p90={_fmt(q.get(0.9))} "
            f"p99={_fmt(q.get(0.99))}<br>{_cdf_svg(s.quantiles)}"
        )
    else:
        items = "".join(
            f"<li>{html.escape(str(i))}: {e:,} [{lo:,}, {hi:,}]</li>"
            for i, e, lo, hi in s.top_items
        )
        body = f"n={_fmt(s.n)}<ol style='margin:0'>{items}</ol>"
    return f"<div class='sc-sketch' data-kind='{s.kind}'>{title}: {body}</div>"


def headline_html(snap: MetricsSnapshot, in_rate: float, out_rate: float) -> str:
    parts = [
        ("rows in", _fmt(snap.rows_in), "sc-rows-in"),
        ("rows out", _fmt(snap.rows_out), "sc-rows-out"),
        ("in/s", _fmt_rate(in_rate), "sc-rate-in"),
        ("out/s", _fmt_rate(out_rate), "sc-rate-out"),
        ("p50", _fmt(snap.latency_p50_ms, " ms"), "sc-p50"),
        ("p99", _fmt(snap.latency_p99_ms, " ms"), "sc-p99"),
        ("watermark lag", _fmt(snap.watermark_lag_s, " s"), "sc-wm"),
        ("late", _fmt(snap.late), "sc-late"),
        ("dead-lettered", _fmt(snap.dead), "sc-dead"),
        ("elapsed", _fmt(snap.elapsed_s, " s", 1), "sc-elapsed"),
    ]
    return (
        "<div style='display:flex;flex-wrap:wrap;gap:14px;font-family:monospace'>"
        + "".join(
            f"<div><div style='color:#777;font-size:11px'>{k}</div><div class='{c}'>{v}</div></div>"
            for k, v, c in parts
        )
        + "</div>"
    )


def throttle_text(rates: tuple[float, ...]) -> str:
    """``throttled to 20,000 rows/s`` for sources with ``rate=`` (a cap), else empty."""
    if not rates:
        return ""
    return "throttled to " + " + ".join(f"{r:,.0f}" for r in rates) + " rows/s"


def status_html(snap: MetricsSnapshot, rates: tuple[float, ...] = ()) -> str:
    color = _COLORS.get(snap.status, "#757575")
    err = ""
    if snap.error:
        err = f" <span class='sc-error' style='color:#c62828'>{html.escape(snap.error)}</span>"
    throttle = ""
    if rates:
        throttle = f" · <span class='sc-throttle'>{throttle_text(rates)}</span>"
    return (
        f"<div class='streamcell-dashboard-status' data-status='{snap.status}' "
        f"style='font-family:monospace'><span style='color:{color}'>●</span> "
        f"<b>{html.escape(snap.name)}</b> <span class='sc-status'>{snap.status}</span> "
        f"({html.escape(snap.engine)}){throttle}{err}</div>"
    )


class Dashboard:
    """The live dashboard of ``run``; ``.widget`` is the root ipywidget (displayed at once)."""

    def __init__(self, run: Any, hz: float = 4.0, history: int = 120, display: bool = True) -> None:
        import ipywidgets as W

        if not 0 < hz <= 20:
            raise ValueError(f"Dashboard: hz must be in (0, 20], got {hz}")
        charts.prefetch()
        self.run = run
        self.interval = 1.0 / hz
        self.history: deque[dict[str, Any]] = deque(maxlen=history)
        self.updates = 0
        self._prev: tuple[float, int, int] | None = None
        self._chart_every = max(1, round(hz))  # charts at ~1 Hz, numbers at hz
        steps = getattr(getattr(run, "plan", None), "steps", ())
        self.rates = tuple(s.rate for s in steps if isinstance(s, P.Source) and s.rate)

        self.status = W.HTML()
        self.pause_button = W.Button(description="pause", icon="pause")
        self.resume_button = W.Button(description="resume", icon="play")
        self.stop_button = W.Button(description="stop", icon="stop", button_style="danger")
        for b in (self.pause_button, self.resume_button, self.stop_button):
            b.add_class("sc-" + b.description)
            b.layout.width = "90px"
        self.pause_button.on_click(lambda _: run.pause())
        self.resume_button.on_click(lambda _: run.resume())
        self.stop_button.on_click(lambda _: self._stop_clicked())
        self.headline = W.HTML()
        self.dead_button = W.Button(description="dead letters", icon="list")
        self.dead_button.add_class("sc-dead-letters")
        self.dead_sample = W.HTML()
        self.dead_button.on_click(lambda _: self._toggle_dead())
        self.operators = W.HTML()
        self.sketches = W.HTML()
        self.sketch_box = W.VBox([W.HTML("<b>sketches</b>"), self.sketches])
        self.sketch_box.layout.display = "none"
        self.throughput: Any = None  # the JupyterCharts, once attached (see _attach_charts)
        self.latency: Any = None
        self.chart_box = W.HBox([W.HTML(self._charts_note())])
        self.chart_box.add_class("sc-charts")
        self._seed_history()
        self.widget = W.VBox(
            [
                W.HBox([self.status, self.pause_button, self.resume_button, self.stop_button]),
                self.headline,
                self.chart_box,
                W.HTML("<b>operators</b>"),
                self.operators,
                self.sketch_box,
                W.HBox([self.dead_button]),
                self.dead_sample,
            ]
        )
        self.widget.add_class("streamcell-dashboard")
        self.publish()
        if display:
            from IPython.display import display as show

            show(self.widget)
        self._thread = threading.Thread(
            target=self._loop, name=f"streamcell-dashboard-{run.name}", daemon=True
        )
        self._thread.start()

    # ----------------------------------------------------------------- charts
    def _seed_history(self) -> None:
        """Start the charts' history at the run's t=0, whenever this dashboard was made: a
        zero point, then the run's own metrics rows (about 1/s) taken before now."""
        self.history.append({"t": 0.0, "in": 0.0, "out": 0.0, "p50": None, "p99": None})
        for m in list(getattr(self.run, "_metrics", ())):
            t = m.get("elapsedSeconds")
            if t is None or t <= 0:
                continue
            self.history.append(
                {
                    "t": round(t, 2),
                    "in": m.get("inputRowsPerSecond"),
                    "out": m.get("processedRowsPerSecond"),
                    "p50": m.get("latencyP50Ms"),
                    "p99": m.get("latencyP99Ms"),
                }
            )

    def _rows(self, series: tuple[str, ...]) -> list[dict[str, Any]]:
        return [
            {"t": h["t"], "series": s, "value": h[s]}
            for h in self.history
            for s in series
            if h.get(s) is not None
        ]

    def _charts_note(self) -> str:
        err = charts.error()
        if err is not None:
            why = html.escape(f"{type(err).__name__}: {err}")
            return f"<i class='sc-charts-note'>charts unavailable ({why})</i>"
        return "<i class='sc-charts-note' style='color:#777'>loading charts…</i>"

    def _attach_charts(self) -> None:
        """Draw the charts (the history so far) once Altair is loaded; called by publish."""
        titles = list(charts.CHARTS)
        self.throughput, self.latency = (
            charts.chart(t, self._rows(charts.CHARTS[t])) for t in titles
        )
        self.chart_box.children = (self.throughput, self.latency)

    def _draw_charts(self) -> None:
        for ch, title in ((self.throughput, "rows/s"), (self.latency, "latency ms")):
            ch.spec = charts.spec(title, self._rows(charts.CHARTS[title]))

    # ----------------------------------------------------------------- controls
    def _stop_clicked(self) -> None:
        # stop() joins the run thread; do it off the kernel's comm handler
        threading.Thread(target=self.run.stop, daemon=True).start()

    def _toggle_dead(self) -> None:
        if self.dead_sample.value:
            self.dead_sample.value = ""
            return
        df = self.run.dead_letters().head(10)
        if df.height == 0:
            self.dead_sample.value = "<i>no dead-lettered rows</i>"
            return
        rows = "".join(
            "<tr>" + "".join(f"<td>{html.escape(str(v))[:120]}</td>" for v in r) + "</tr>"
            for r in df.iter_rows()
        )
        head = "".join(f"<th>{html.escape(c)}</th>" for c in df.columns)
        self.dead_sample.value = (
            f"<table class='sc-dead-sample' style='font-family:monospace;font-size:12px'>"
            f"<tr>{head}</tr>{rows}</table>"
        )

    # ---------------------------------------------------------------- publisher
    def publish(self) -> MetricsSnapshot:
        """Take a snapshot and push it to the widgets (one batched message per widget)."""
        snap = metrics_snapshot(self.run)
        now = time.monotonic()
        in_rate, out_rate = snap.rows_per_s, 0.0
        if self._prev is not None:
            t0, i0, o0 = self._prev
            dt = now - t0
            if dt > 0:
                in_rate, out_rate = (snap.rows_in - i0) / dt, (snap.rows_out - o0) / dt
        self._prev = (now, snap.rows_in, snap.rows_out)
        live = snap.status in ("running", "paused", "starting")
        self.history.append(
            {
                "t": round(snap.elapsed_s, 2),
                "in": in_rate if live else None,
                "out": out_rate if live else None,
                "p50": snap.latency_p50_ms,
                "p99": snap.latency_p99_ms,
            }
        )
        with contextlib.ExitStack() as stack:
            for w in (self.status, self.headline, self.operators, self.sketches):
                stack.enter_context(w.hold_sync())
            self.status.value = status_html(snap, self.rates)
            self.headline.value = headline_html(snap, in_rate, out_rate)
            self.operators.value = operators_html(snap)
            if snap.sketches:
                self.sketches.value = "".join(sketch_html(s) for s in snap.sketches)
                self.sketch_box.layout.display = None
            else:
                self.sketch_box.layout.display = "none"
            self.pause_button.disabled = not live or snap.status == "paused"
            self.resume_button.disabled = snap.status != "paused"
            self.stop_button.disabled = not live
        if self.throughput is None:
            if charts.ready():
                self._attach_charts()
            elif charts.state() == "failed":
                self.chart_box.children[0].value = self._charts_note()
        elif self.updates % self._chart_every == 0 or not live:
            self._draw_charts()
        self.updates += 1
        self.snapshot = snap
        return snap

    def _loop(self) -> None:
        while not self.run.done():
            self.run._done.wait(self.interval)
            try:
                self.publish()
            except Exception:  # a closed comm (kernel shutting down) ends the publisher
                return
        with contextlib.suppress(Exception):
            self.publish()
        if self.throughput is None and charts.wait():  # the run ended before the charts loaded
            with contextlib.suppress(Exception):
                self.publish()

    def join(self, timeout: float | None = None) -> None:
        """Wait for the publisher to show the final state (after the run ended), charts
        included (they wait for Altair when the run ended before it was loaded)."""
        self._thread.join(timeout)
