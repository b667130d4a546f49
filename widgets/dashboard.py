"""The live dashboard a ``%%stream`` cell displays (ipywidgets + Vega-Lite charts, :mod:`.charts`).

It appears at once: the charts' front end is loaded in the background (:mod:`.charts`), the
numbers are drawn first and the charts are attached when it is ready, drawing the history recorded since the
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
(hidden while the run has no sketches): Θ/HLL estimate with bounds, KLL quantiles as a CDF
with axes, frequent items as a top list; the run's output table as a live grid (:mod:`.grid`).
(The ``%%stream`` magic shows the plan's graph below it, collapsed.) Charts say why they are empty until they have data, and an ended
run keeps a summary (rows, average rows/s, duration, final latency) and loses its controls.
"""

from __future__ import annotations

import contextlib
import html
import threading
from collections import deque
from typing import Any

from streamcell import fmt
from streamcell import plan as P
from streamcell.snapshot import (
    MetricsSnapshot,
    SketchSnapshot,
    describe_speculation,
    metrics_snapshot,
)

from . import charts
from .status import COLORS

# The dashboard follows the JupyterLab theme (light or dark): its colours are JupyterLab's CSS
# variables (with light fallbacks outside JupyterLab), and the charts are drawn as SVG on a
# transparent background whose text and axes these rules colour (CSS beats SVG attributes).
STYLE = """<style>
.streamcell-dashboard { color: var(--jp-ui-font-color1, #212121); }
.streamcell-dashboard .sc-label { color: var(--jp-ui-font-color2, #616161); font-size: 11px; }
.streamcell-dashboard .sc-chart { background: var(--jp-layout-color0, #fff);
  border: 1px solid var(--jp-border-color2, #e0e0e0); border-radius: 2px; padding: 4px;
  min-width: 320px; min-height: 170px; box-sizing: border-box; }
.streamcell-dashboard .sc-chart-empty { display: flex; align-items: center;
  justify-content: center; height: 160px; color: var(--jp-ui-font-color2, #757575);
  font-style: italic; font-family: monospace; }
.streamcell-dashboard .sc-chart svg text { fill: var(--jp-ui-font-color1, #212121); }
.streamcell-dashboard .sc-chart svg .role-axis-domain path,
.streamcell-dashboard .sc-chart svg .role-axis-tick line,
.streamcell-dashboard .sc-chart svg .role-axis-domain line {
  stroke: var(--jp-ui-font-color2, #616161); }
.streamcell-dashboard .sc-chart svg .role-axis-grid line {
  stroke: var(--jp-border-color2, #e0e0e0); }
.streamcell-dashboard table { border-collapse: collapse; }
.streamcell-dashboard th, .streamcell-dashboard td { padding: 1px 8px; text-align: right; }
.streamcell-dashboard th:first-child, .streamcell-dashboard td:first-child { text-align: left; }
.streamcell-dashboard th { color: var(--jp-ui-font-color2, #616161); font-weight: normal; }
.streamcell-dashboard .sc-cdf { color: var(--jp-ui-font-color2, #616161); }
.streamcell-dashboard .sc-bar { background: var(--jp-brand-color1, #1976d2); height: 8px; }
</style>"""


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
        cost = o.cost_ns_per_row
        cells = (
            html.escape(o.name),
            fmt.count(o.rows_in),
            fmt.count(o.rows_out),
            fmt.NONE if o.selectivity is None else f"{o.selectivity:.3f}",
            fmt.NONE if cost is None else f"{fmt.count(cost)} ns",
            fmt.count(o.queue_depth),
            fmt.count(o.workers),
            fmt.count(o.state_size),
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


def _tick(v: float) -> str:
    """A short axis label: 3 significant digits, separators for large values."""
    a = abs(v)
    if a >= 1000:
        return fmt.count(v)
    if a >= 10 or a == 0:
        return f"{v:.0f}" if float(v).is_integer() else f"{v:.1f}"
    return f"{v:.3g}"


def cdf_svg(quantiles: tuple[tuple[float, float], ...], w: int = 300, h: int = 130) -> str:
    """A KLL sketch's CDF with axes: value (x: min, median, max) against rank (y: 0, 0.5, 1)."""
    if len(quantiles) < 2:
        return "<div class='sc-cdf sc-chart-empty' style='height:40px'>no data yet</div>"
    ml, mr, mt, mb = 44, 10, 8, 30  # margins: y labels, right, top, x labels + title
    pw, ph = w - ml - mr, h - mt - mb
    lo, hi = quantiles[0][1], quantiles[-1][1]
    span = (hi - lo) or 1.0

    def x(v: float) -> float:
        return ml + (v - lo) / span * pw

    def y(r: float) -> float:
        return mt + ph - r * ph

    pts = " ".join(f"{x(v):.1f},{y(r):.1f}" for r, v in quantiles)
    med = dict(quantiles).get(0.5, (lo + hi) / 2)
    parts = [
        f"<svg class='sc-cdf' width='{w}' height='{h}' style='font-family:monospace;"
        "font-size:10px'>",
        f"<line x1='{ml}' y1='{mt + ph}' x2='{ml + pw}' y2='{mt + ph}' stroke='currentColor'/>",
        f"<line x1='{ml}' y1='{mt}' x2='{ml}' y2='{mt + ph}' stroke='currentColor'/>",
    ]
    for r in (0.0, 0.5, 1.0):
        parts.append(
            f"<line x1='{ml - 3}' y1='{y(r):.1f}' x2='{ml}' y2='{y(r):.1f}' "
            "stroke='currentColor'/>"
            f"<text x='{ml - 5}' y='{y(r) + 3:.1f}' text-anchor='end' fill='currentColor'>"
            f"{r:g}</text>"
        )
    for v, anchor in ((lo, "start"), (med, "middle"), (hi, "end")):
        parts.append(
            f"<line x1='{x(v):.1f}' y1='{mt + ph}' x2='{x(v):.1f}' y2='{mt + ph + 3}' "
            "stroke='currentColor'/>"
            f"<text x='{x(v):.1f}' y='{mt + ph + 13}' text-anchor='{anchor}' "
            f"fill='currentColor'>{html.escape(_tick(v))}</text>"
        )
    parts.append(
        f"<text x='{ml + pw / 2:.1f}' y='{h - 2}' text-anchor='middle' fill='currentColor'>"
        "value</text>"
        f"<text x='10' y='{mt + ph / 2:.1f}' text-anchor='middle' fill='currentColor' "
        f"transform='rotate(-90 10 {mt + ph / 2:.1f})'>rank</text>"
        f"<polyline fill='none' style='stroke:var(--jp-brand-color1,#1565c0)' "
        f"stroke-width='1.5' points='{pts}'/></svg>"
    )
    return "".join(parts)


def top_items_html(s: SketchSnapshot, limit: int = 8) -> str:
    """Frequent items as a top list: item, estimated count, share of all rows, a bar.

    Only the items that stand out are listed: those whose lower bound is above the sketch's
    error (``upper - lower``, the same for every item), which the sketch guarantees to be
    frequent. When none does (a flat distribution), one line says so and names the largest
    candidates, instead of a list of near-identical counts with wide bounds."""
    if not s.top_items:
        return "<i class='sc-chart-empty' style='height:auto'>no data yet</i>"
    n = s.n or sum(e for _, e, _, _ in s.top_items) or 1
    width = max(hi - lo for _, _, lo, hi in s.top_items)
    err = max(max(hi - e, e - lo) for _, e, lo, hi in s.top_items)
    items = [t for t in s.top_items if t[2] > width][:limit]
    if not items:
        first = s.top_items[:3]
        names = ", ".join(html.escape(str(i)) for i, _, _, _ in first)
        return (
            "<div class='sc-top-none'>no item stands out of "
            f"{fmt.count(s.n)} rows: the largest ({names}) have ≈{fmt.count(first[0][1])} "
            f"rows each ({fmt.share(first[0][1] / n)}), within the sketch's error "
            f"(±{fmt.count(err)})</div>"
        )
    top = max(e for _, e, _, _ in items) or 1
    rows = "".join(
        f"<tr><td>{k}</td><td class='sc-item'>{html.escape(str(i))}</td>"
        f"<td>{fmt.count(e)}</td><td>{fmt.share(e / n)}</td>"
        f"<td style='width:120px'><div class='sc-bar' style='width:{100 * e / top:.0f}%'>"
        "</div></td></tr>"
        for k, (i, e, _, _) in enumerate(items, 1)
    )
    note = f"counts ±{fmt.count(err)}" if err else "exact counts"
    return (
        "<table class='sc-top' style='font-family:monospace;font-size:12px'>"
        "<thead><tr><th>#</th><th>item</th><th>count</th><th>share</th><th></th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
        f"<div class='sc-label'>of {fmt.count(s.n)} rows · {note}</div>"
    )


def sketch_html(s: SketchSnapshot) -> str:
    title = f"<b>{html.escape(s.name)}</b> <i>{s.kind}</i>"
    if s.kind in ("theta", "hll"):
        body = (
            f"≈ <span class='sc-estimate'>{fmt.count(s.estimate)}</span> distinct "
            f"[{fmt.count(s.lower)}, {fmt.count(s.upper)}] (±2σ)"
        )
    elif s.kind == "kll":
        q = dict(s.quantiles)
        body = (
            f"n = {fmt.count(s.n)} · p50 {_tick(q[0.5]) if 0.5 in q else fmt.NONE} · "
            f"p90 {_tick(q[0.9]) if 0.9 in q else fmt.NONE} · "
            f"p99 {_tick(q[0.99]) if 0.99 in q else fmt.NONE}<br>{cdf_svg(s.quantiles)}"
        )
    else:
        body = top_items_html(s)
    return f"<div class='sc-sketch' data-kind='{s.kind}'>{title}: {body}</div>"


def headline_html(snap: MetricsSnapshot) -> str:
    """The headline numbers. An ended run shows its averages (``avg in/s``) and its duration,
    never the zero rate of a stopped source."""
    live = snap.live
    parts = [
        ("rows in", fmt.count(snap.rows_in), "sc-rows-in"),
        ("rows out", fmt.count(snap.rows_out), "sc-rows-out"),
        (
            "in/s" if live else "avg in/s",
            fmt.rate(snap.rows_per_s, ""),
            "sc-rate-in",
        ),
        (
            "out/s" if live else "avg out/s",
            fmt.rate(snap.rows_out_per_s, ""),
            "sc-rate-out",
        ),
        ("p50", fmt.ms(snap.latency_p50_ms), "sc-p50"),
        ("p99", fmt.ms(snap.latency_p99_ms), "sc-p99"),
        ("watermark lag", fmt.elapsed(snap.watermark_lag_s), "sc-wm"),
        ("late", fmt.count(snap.late), "sc-late"),
        ("dead-lettered", fmt.count(snap.dead), "sc-dead"),
        ("elapsed" if live else "duration", fmt.elapsed(snap.elapsed_s), "sc-elapsed"),
    ]
    return (
        "<div class='sc-headline' style='display:flex;flex-wrap:wrap;gap:14px;"
        "font-family:monospace'>"
        + "".join(
            f"<div><div class='sc-label'>{k}</div><div class='{c}'>{v}</div></div>"
            for k, v, c in parts
        )
        + "</div>"
    )


def summary_text(snap: MetricsSnapshot) -> str:
    """An ended run in one line: ``finished: 1,000 rows in 0:00.05 · avg 20,000 rows/s ·
    final latency p50 0.21 ms, p99 0.42 ms``."""
    parts = [
        f"{snap.status}: {fmt.count(snap.rows_in)} rows in {fmt.elapsed(snap.elapsed_s)}",
        "avg " + fmt.rate(snap.avg_rows_per_s),
        f"{fmt.count(snap.rows_out)} rows out",
    ]
    if snap.latency_p99_ms is not None:
        parts.append(
            f"final latency p50 {fmt.ms(snap.latency_p50_ms)}, p99 {fmt.ms(snap.latency_p99_ms)}"
        )
    return " · ".join(parts)


def summary_html(snap: MetricsSnapshot) -> str:
    if snap.live:
        return ""
    return (
        "<div class='sc-summary' style='font-family:monospace'>"
        f"{html.escape(summary_text(snap))}</div>"
    )


def throttle_text(rates: tuple[float, ...]) -> str:
    """``throttled to 20,000 rows/s`` for sources with ``rate=`` (a cap), else empty."""
    if not rates:
        return ""
    return "throttled to " + " + ".join(fmt.count(r) for r in rates) + " rows/s"


def status_html(snap: MetricsSnapshot, rates: tuple[float, ...] = ()) -> str:
    color = COLORS.get(snap.status, "#757575")
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


def empty_chart_html(text: str) -> str:
    return f"<div class='sc-chart-empty'>{html.escape(text)}</div>"


class Dashboard:
    """The live dashboard of ``run``; ``.widget`` is the root ipywidget (displayed at once)."""

    def __init__(
        self,
        run: Any,
        hz: float = 4.0,
        history: int = 120,
        display: bool = True,
        grid_enabled: bool = True,
    ) -> None:
        import ipywidgets as W

        if not 0 < hz <= 20:
            raise ValueError(f"Dashboard: hz must be in (0, 20], got {hz}")
        charts.prefetch()
        self.run = run
        self.interval = 1.0 / hz
        self.history: deque[dict[str, Any]] = deque(maxlen=history)
        self.updates = 0
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
        self.controls = W.HBox([self.pause_button, self.resume_button, self.stop_button])
        self.headline = W.HTML()
        self.summary = W.HTML()
        self.dead_button = W.Button(description="dead letters", icon="list")
        self.dead_button.add_class("sc-dead-letters")
        self.dead_sample = W.HTML()
        self.dead_button.on_click(lambda _: self._toggle_dead())
        self.operators = W.HTML()
        self.sketches = W.HTML()
        self.sketch_box = W.VBox([W.HTML("<b>sketches</b>"), self.sketches])
        self.sketch_box.layout.display = "none"
        # one slot per chart: an empty state ("loading charts…", "no data yet") until the
        # chart has data to draw, so Vega never sees an empty data set (Infinite extents)
        self.throughput: Any = None  # the chart widgets, once attached (see _draw_charts)
        self.latency: Any = None
        self.slots = {
            t: W.Box([W.HTML(empty_chart_html(self._charts_note()))]) for t in charts.CHARTS
        }
        for t, slot in self.slots.items():
            slot.add_class("sc-chart")
            slot.add_class("sc-chart-" + charts.slug(t))
        self.chart_box = W.HBox(list(self.slots.values()))
        self.chart_box.add_class("sc-charts")
        self.chart_box.layout.flex_flow = "row wrap"
        self.chart_box.layout.grid_gap = "8px"
        # the run's output table, live (a window of rows, sortable and filterable)
        self.grid: Any = None
        tables = run.table_names() if hasattr(run, "table_names") else []
        if tables and grid_enabled:
            from .grid import ResultGrid

            self.grid = ResultGrid(run)
            self.grid_box = W.VBox(
                [W.HTML(f"<b>output</b> <i>{html.escape(tables[0])}</i>"), self.grid.widget]
            )
        else:
            self.grid_box = W.VBox([])
        self._seed_history()
        self.widget = W.VBox(
            [
                W.HTML(STYLE),
                W.HBox([self.status, self.controls]),
                self.headline,
                self.summary,
                self.chart_box,
                self.grid_box,
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
            if t is None or t <= 0 or m.get("status") not in ("running", "paused", "starting"):
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
            return f"charts unavailable ({type(err).__name__}: {err})"
        return "loading charts…"

    def _empty_note(self, snap: MetricsSnapshot) -> str:
        if snap.live:
            return "no data yet"
        return f"no samples: the run ended after {fmt.elapsed(snap.elapsed_s)} (see the summary)"

    def _draw_charts(self, snap: MetricsSnapshot) -> None:
        """Each chart draws the history so far once the charts are loaded and the chart has two
        points in time to draw; until then its slot shows why it is empty."""
        for title, slot in self.slots.items():
            rows = self._rows(charts.CHARTS[title])
            drawable = len({r["t"] for r in rows}) >= 2
            attr = "throughput" if title == charts.THROUGHPUT else "latency"
            current = getattr(self, attr)
            if not charts.ready() or not drawable:
                note = self._charts_note() if not charts.ready() else self._empty_note(snap)
                if current is not None:  # never happens in practice: history only grows
                    setattr(self, attr, None)
                html_value = empty_chart_html(note)
                child = slot.children[0]
                if isinstance(getattr(child, "value", None), str):
                    if child.value != html_value:
                        child.value = html_value
                else:
                    import ipywidgets as W

                    slot.children = (W.HTML(html_value),)
                continue
            if current is None:
                current = charts.chart(title, rows)
                setattr(self, attr, current)
                slot.children = (current,)
            elif current.rows != rows:
                current.rows = rows

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
        live = snap.live
        self.history.append(
            {
                "t": round(snap.elapsed_s, 2),
                "in": snap.rows_per_s if live else None,
                "out": snap.rows_out_per_s if live else None,
                "p50": snap.latency_p50_ms,
                "p99": snap.latency_p99_ms,
            }
        )
        with contextlib.ExitStack() as stack:
            for w in (self.status, self.headline, self.summary, self.operators, self.sketches):
                stack.enter_context(w.hold_sync())
            self.status.value = status_html(snap, self.rates)
            self.headline.value = headline_html(snap)
            self.summary.value = summary_html(snap)
            self.operators.value = operators_html(snap)
            if snap.sketches:
                self.sketches.value = "".join(sketch_html(s) for s in snap.sketches)
                self.sketch_box.layout.display = None
            else:
                self.sketch_box.layout.display = "none"
            self.pause_button.disabled = snap.status != "running"
            self.resume_button.disabled = snap.status != "paused"
            self.stop_button.disabled = not live
            # an ended run has nothing to control: no buttons (not a disabled red Stop)
            self.controls.layout.display = None if live else "none"
        if self.updates % self._chart_every == 0 or not live or self.throughput is None:
            self._draw_charts(snap)
        if self.grid is not None and (self.updates % self._chart_every == 0 or not live):
            self.grid.refresh()
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
        included (they wait for the charts' front end when the run ended before it was loaded)."""
        self._thread.join(timeout)
