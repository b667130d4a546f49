"""The dashboard never shows a broken state: empty charts say why, an ended run shows its
summary and averages and no controls; the numbers every display shows come from one
MetricsSnapshot, written in one format."""

from __future__ import annotations

import re
import time

import pytest

import streamcell as sc
from streamcell import fmt
from streamcell.comm import run_info
from streamcell.snapshot import SketchSnapshot, metrics_snapshot, unique_names
from tests.helpers import run_plan

pytest.importorskip("ipywidgets")

from streamcell.widgets import charts  # noqa: E402
from streamcell.widgets.dashboard import (  # noqa: E402
    Dashboard,
    cdf_svg,
    headline_html,
    sketch_html,
    summary_text,
    top_items_html,
)
from streamcell.widgets.status import RunTable, plan_html, status_text  # noqa: E402


def _finite(rows: int = 1_000) -> sc.Plan:
    return (
        sc.source(sc.clickstream(rows=rows, users=50, seed=4))
        .key_by("event")
        .agg(n=sc.count())
        .plan("small")
    )


def _cell(html: str, cls: str) -> str:
    m = re.search(rf"class='{cls}'>([^<]*)<", html)
    assert m, (cls, html[:400])
    return m.group(1)


def test_a_run_that_ended_before_any_sample_shows_its_summary(engine):
    run = run_plan(_finite(), engine.options)
    snap = metrics_snapshot(run)
    assert snap.status == "finished" and snap.rows_in == 1_000 and snap.elapsed_s > 0
    # averages, not the zero rate of a stopped source
    assert snap.rows_per_s == pytest.approx(1_000 / snap.elapsed_s)
    assert snap.avg_rows_per_s == snap.rows_per_s > 0
    assert snap.rows_out_per_s == pytest.approx(snap.rows_out / snap.elapsed_s)
    d = Dashboard(run, display=False)
    d.join(180)  # the charts' final state waits for their front end (loading in the background)
    assert charts.ready(), charts.error()
    summary = d.summary.value
    assert "finished: 1,000 rows in " + fmt.elapsed(snap.elapsed_s) in summary
    assert "avg " + fmt.rate(snap.avg_rows_per_s) in summary
    head = d.headline.value
    assert "avg in/s" in head and "duration" in head
    assert _cell(head, "sc-rate-in") == fmt.rate(snap.avg_rows_per_s, "") != "0.0"
    assert _cell(head, "sc-elapsed") == fmt.elapsed(snap.elapsed_s) != "0:00.00"
    if snap.latency_p99_ms is not None:  # the final latency is part of the summary
        assert "p99 " + fmt.ms(snap.latency_p99_ms) in summary
    # no controls on an ended run (not a disabled red Stop button)
    assert d.controls.layout.display == "none"
    # no chart was drawn with nothing to draw: each slot says why it is empty
    assert d.throughput is None and d.latency is None
    for slot in d.slots.values():
        (child,) = slot.children
        assert "sc-chart-empty" in child.value and "the run ended after" in child.value


def test_a_live_run_draws_charts_once_there_are_two_samples():
    assert charts.wait(180), charts.error()
    plan = (
        sc.source(sc.clickstream(rows=None, users=300, seed=9), rate=20_000)
        .key_by("event")
        .agg(n=sc.count())
        .plan("live_dash")
    )
    run = sc.start(plan, name="live_dash")
    d = Dashboard(run, hz=10, display=False)
    try:
        assert d.controls.layout.display is None and not d.stop_button.disabled
        assert "throttled to 20,000 rows/s" in d.status.value
        deadline = time.monotonic() + 30
        while d.throughput is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert d.throughput is not None
        values = d.throughput.rows
        assert len({v["t"] for v in values}) >= 2  # never an empty data set (no Infinite extent)
        assert d.throughput.spec["config"]["background"] == "transparent"
        assert d.throughput.embed_options["renderer"] == "svg"
        assert d.slots[charts.THROUGHPUT].children == (d.throughput,)
        live = d.snapshot
        assert "in/s" in d.headline.value and "avg in/s" not in d.headline.value
        assert live.live and d.summary.value == ""
    finally:
        run.stop()
    d.join(10)
    assert "data-status='stopped'" in d.status.value and d.controls.layout.display == "none"
    assert "stopped: " in d.summary.value


def test_the_plan_graph_is_collapsed_and_the_numbers_come_first():
    plan = _finite(10)
    html = plan_html(plan)
    assert html.startswith("<details class='sc-plan'>") and "<svg" in html and " open" not in html
    assert "plan · 3 steps" in html
    run = run_plan(plan)
    d = Dashboard(run, display=False)
    d.join(5)
    kids = d.widget.children
    assert kids.index(d.headline) < kids.index(d.chart_box) < kids.index(d.operators)


def test_every_display_reads_the_same_snapshot(engine):
    run = run_plan(_finite(5_000), engine.options)
    snap = metrics_snapshot(run, detail=False)
    info = run_info(run.name, run)  # the Streams panel and status bar
    assert info["rows_done"] == snap.rows_in == 5_000
    assert info["rows_per_s"] == snap.rows_per_s == snap.avg_rows_per_s > 0
    assert info["p99_ms"] == snap.latency_p99_ms
    assert info["elapsed_s"] == snap.elapsed_s
    if engine.options.engine == "native":  # the native engine's own latency histogram
        lat = run.native_metrics["latency"]
        assert info["p99_ms"] == lat["p99_ns"] / 1e6
    line = status_text(snap)  # %stream status and --status-line
    assert "5,000 rows in" in line and "avg " + fmt.rate(snap.avg_rows_per_s) in line
    assert fmt.elapsed(snap.elapsed_s) in line
    table = RunTable([snap])  # %stream list
    assert table.rows()[0][3:6] == ("5,000", fmt.count(snap.rows_out), line.split(" · ")[3])
    assert "5,000" in repr(table) and "5,000" in table._repr_html_()
    assert table.frame["rows_in"].to_list() == [5_000]


def test_live_headline_and_ended_headline_words():
    run = run_plan(_finite(100))
    ended = metrics_snapshot(run)
    assert "avg out/s" in headline_html(ended)
    assert summary_text(ended).startswith("finished: 100 rows in ")


def test_operator_names_are_unique():
    assert unique_names(["source", "sketch", "sketch", "sink"]) == [
        "source",
        "sketch",
        "sketch#2",
        "sink",
    ]
    assert unique_names(["a", "a", "a#2"]) == ["a", "a#3", "a#2"]
    assert unique_names(["x", "y"]) == ["x", "y"]


def test_kll_cdf_has_axes():
    qs = ((0.0, 1.0), (0.25, 4.0), (0.5, 10.0), (0.75, 30.0), (1.0, 2500.0))
    svg = cdf_svg(qs)
    labels = re.findall(r">([^<>]+)</text>", svg)
    assert labels == ["0", "0.5", "1", "1", "10", "2,500", "value", "rank"]
    assert svg.count("<line") == 8 and "<polyline" in svg
    assert "no data yet" in cdf_svg(())
    kll = SketchSnapshot("kll", "price", n=1000, quantiles=qs)
    assert "p50 10" in sketch_html(kll) and "n = 1,000" in sketch_html(kll)


def test_frequent_items_are_a_readable_top_list():
    s = SketchSnapshot(
        "frequent",
        "pages",
        n=10_000,
        top_items=(("home", 5_000, 4_990, 5_010), ("cart", 3_000, 2_990, 3_010), ("x", 9, 0, 19)),
    )
    html = top_items_html(s)
    items = re.findall(r"class='sc-item'>([^<]*)<", html)
    assert items == ["home", "cart"]  # an item the sketch cannot tell from noise is left out
    assert "50.0%" in html and "30.0%" in html and "counts ±10" in html and "of 10,000 rows" in html
    exact = SketchSnapshot("frequent", "p", n=3, top_items=(("a", 2, 2, 2), ("b", 1, 1, 1)))
    assert "exact counts" in top_items_html(exact)
    assert "no data yet" in top_items_html(SketchSnapshot("frequent", "p", n=0))
    # a flat distribution: nothing stands out of the error, and the dashboard says so
    flat = SketchSnapshot(
        "frequent", "items", n=100_000, top_items=(("604", 190, 10, 370), ("893", 189, 9, 369))
    )
    none = top_items_html(flat)
    assert "<table" not in none and "no item stands out of 100,000 rows" in none
    assert "(604, 893) have ≈190 rows each (0.2%)" in none and "±180" in none
