"""The backend-neutral metrics snapshot, sketch snapshots, run.metrics(), and the dashboard's
widgets driven in-process (the kernel-side and browser tests drive them for real)."""

from __future__ import annotations

import time

import numpy as np
import polars as pl
import pytest

import streamcell as sc
from streamcell.options import RunOptions
from streamcell.snapshot import SketchSnapshot, metrics_snapshot, sketch_snapshot
from tests.helpers import run_plan


def _pipeline(rows: int | None = 20_000, rate: int | None = None) -> sc.Plan:
    return (
        sc.source(sc.clickstream(rows=rows, users=500, seed=3), rate=rate)
        .filter(sc.col("event") == "view")
        .key_by("user_id")
        .agg(n=sc.count(), spent=sc.col("price").sum())
        .plan("snap")
    )


def test_snapshot_matches_the_run_on_every_engine(engine):
    run = run_plan(_pipeline(), engine.options)
    ref = run_plan(_pipeline(), RunOptions(engine="reference"))
    snap, rsnap = metrics_snapshot(run), metrics_snapshot(ref)
    assert snap.status == "finished" and snap.engine == engine.options.engine
    # run-level numbers are the same on every engine (the reference is the oracle)
    for f in ("rows_in", "rows_out", "late", "dead"):
        assert getattr(snap, f) == getattr(rsnap, f), f
    assert snap.rows_in == 20_000
    counts = run.counts()
    assert snap.rows_out == counts.filter(pl.col("step").str.starts_with("sink"))["rows_in"].sum()
    assert snap.operators and all(o.rows_in >= o.rows_out >= 0 for o in snap.operators[:2])
    if engine.options.engine == "native":
        assert all(o.workers is not None and o.cost_ns_per_row is not None for o in snap.operators)
        assert all(
            o.selectivity == pytest.approx(o.rows_out / o.rows_in)
            for o in snap.operators
            if o.rows_in
        )
        assert snap.latency_p99_ms is not None and snap.latency_max_ms >= snap.latency_p99_ms
    else:  # one operator per plan step, straight from counts()
        assert [o.name for o in snap.operators] == counts["step"].to_list()
        assert [o.rows_in for o in snap.operators] == counts["rows_in"].to_list()
    assert snap.sketches == ()  # no sketches() hook: the panel stays hidden


def test_sketch_snapshots_from_standalone_sketches():
    from streamcell.sketches import (
        ConcurrentThetaSketch,
        FrequentItemsSketch,
        HllSketch,
        KllDoublesSketch,
        ThetaSketch,
    )

    rng = np.random.default_rng(5)
    users = rng.integers(0, 50_000, 200_000)
    exact = len(np.unique(users))
    th = ThetaSketch(12)
    th.update_batch(users)
    s = sketch_snapshot("users", th)
    assert s.kind == "theta" and s.lower <= s.estimate <= s.upper
    assert s.lower <= exact <= s.upper
    hll = HllSketch(12)
    hll.update_batch(users)
    h = sketch_snapshot("users_hll", hll)
    assert h.kind == "hll" and abs(h.estimate - exact) / exact < 0.05
    cts = ConcurrentThetaSketch(12, writers=1)
    cts.update_batch(0, users)
    cts.flush()
    c = sketch_snapshot("users_c", cts)
    assert c.kind == "theta" and c.lower <= exact <= c.upper
    prices = rng.gamma(2.0, 10.0, 100_000)
    kll = KllDoublesSketch(200)
    kll.update_batch(prices)
    k = sketch_snapshot("price", kll)
    qs = dict(k.quantiles)
    assert k.kind == "kll" and k.n == 100_000
    assert [v for _, v in k.quantiles] == sorted(v for _, v in k.quantiles)
    assert qs[0.0] == prices.min() and qs[1.0] == prices.max()
    assert abs(np.mean(prices <= qs[0.5]) - 0.5) < 0.02
    items = np.concatenate([np.full(5000, 7), np.full(3000, 11), rng.integers(100, 10_000, 20_000)])
    fi = FrequentItemsSketch(8)
    fi.update_batch(items)
    f = sketch_snapshot("items", fi)
    assert f.kind == "frequent" and [t[0] for t in f.top_items[:2]] == [7, 11]
    assert f.top_items[0][2] <= 5000 <= f.top_items[0][3]
    with pytest.raises(TypeError, match="sketch 'x': cannot snapshot a object"):
        sketch_snapshot("x", object())


def test_sketches_hook_feeds_the_snapshot():
    from streamcell.sketches import KllDoublesSketch, ThetaSketch

    run = run_plan(_pipeline(rows=2_000))
    th, kll = ThetaSketch(), KllDoublesSketch()
    th.update_batch(run.table()["user_id"].to_numpy())
    kll.update_batch(run.table()["spent"].to_numpy())
    run.sketches = lambda: {"users": th, "spent": kll}  # the hook a sketch stage provides
    snap = metrics_snapshot(run)
    assert [(s.kind, s.name) for s in snap.sketches] == [("theta", "users"), ("kll", "spent")]
    assert snap.sketches[0].estimate == pytest.approx(run.table().height, rel=0.01)
    ready = SketchSnapshot("frequent", "top", n=3, top_items=(("a", 2, 2, 2),))
    run.sketches = lambda: [ready]
    assert metrics_snapshot(run).sketches == (ready,)


def test_metrics_history_uses_spark_progress_names(engine):
    run = run_plan(_pipeline(rows=30_000), engine.options)
    m = run.metrics()
    for c in (
        "name",
        "batchId",
        "timestamp",
        "numInputRows",
        "inputRowsPerSecond",
        "processedRowsPerSecond",
        "totalInputRows",
    ):
        assert c in m.columns
    assert m.schema["timestamp"] == pl.Datetime("us", "UTC")
    assert m["numInputRows"].sum() == 30_000 == m["totalInputRows"][-1]
    assert m["batchId"].to_list() == list(range(m.height))
    assert m["status"][-1] == "finished"


def test_table_snapshots_are_consistent_under_concurrent_ingestion(engine, tmp_path):
    spark = engine.options.engine == "spark"  # a Structured Streaming query, micro-batches
    plan = (
        sc.source(sc.clickstream(rows=None, users=300, seed=9), rate=5_000 if spark else 100_000)
        .key_by("user_id")
        .agg(n=sc.count())
        .plan("live")
    )
    opts = engine.options
    if spark:
        opts = opts.with_(trigger_interval=0.2, checkpoint_dir=str(tmp_path / "checkpoint"))
    run = sc.start(plan, name="live_consistency", options=opts)
    if spark:  # the query's first micro-batch
        deadline = time.monotonic() + 120
        while run.table().height == 0 and not run.done() and time.monotonic() < deadline:
            time.sleep(0.1)
    totals: list[int] = []
    t0 = time.monotonic()
    # 1.5 s of snapshots; on Spark, until the next micro-batch has landed too
    while time.monotonic() < t0 + 1.5 or (
        spark and totals[-1] == totals[0] and time.monotonic() < t0 + 120
    ):
        df = run.table()
        assert df["user_id"].n_unique() == df.height  # upsert: one row per key in every snapshot
        assert df["n"].min() is None or df["n"].min() >= 1
        totals.append(int(df["n"].sum()))
        time.sleep(0.05)
    run.stop()
    assert run.error is None
    assert totals == sorted(totals) and totals[-1] > totals[0]
    # the table holds what the sink wrote: rows in flight when the run stopped were discarded
    # and count as the sink's unprocessed rows
    sink = run.counts().row(-1, named=True)
    assert int(run.table()["n"].sum()) == sink["consumed"] == sink["rows_in"] - sink["unprocessed"]


def test_dashboard_updates_and_stops_the_run():
    pytest.importorskip("ipywidgets")
    from streamcell.widgets.dashboard import Dashboard

    plan = (
        sc.source(sc.clickstream(rows=None, users=300, seed=9), rate=20_000)
        .key_by("event")
        .agg(n=sc.count())
        .plan("dash")
    )
    run = sc.start(plan, name="dash")
    d = Dashboard(run, hz=10, display=False)
    time.sleep(0.6)
    first = (d.updates, d.snapshot.rows_in, d.headline.value)
    time.sleep(0.6)
    assert d.updates > first[0] and d.snapshot.rows_in > first[1] and d.headline.value != first[2]
    assert "sc-rows-in" in d.headline.value and "<td>" in d.operators.value
    assert d.sketch_box.layout.display == "none"
    assert not d.stop_button.disabled
    d.stop_button.click()
    run._done.wait(5)
    d.join(120)  # the charts attach once their front end has loaded (in the background)
    assert run.status == "stopped"
    assert "data-status='stopped'" in d.status.value and d.stop_button.disabled
    values = d.throughput.rows
    assert {v["series"] for v in values} == {"in", "out"}
    assert max(v["value"] for v in values) > 0
    assert d.throughput.spec["mark"]["type"] == "line"
    d.dead_button.click()
    assert "no dead-lettered rows" in d.dead_sample.value


def test_dashboard_shows_dead_letters_and_sketches():
    pytest.importorskip("ipywidgets")
    from streamcell.sketches import FrequentStringsSketch
    from streamcell.widgets.dashboard import Dashboard

    rows = [{"x": "1"}, {"x": "oops"}, {"x": "3"}]
    plan = sc.source(rows).select(y=sc.col("x").cast("int")).plan("dl")
    run = run_plan(plan)
    fs = FrequentStringsSketch(6)
    fs.update_batch(pl.Series(["a", "a", "b"]).to_arrow())
    run.sketches = lambda: {"top": fs}
    d = Dashboard(run, display=False)
    d.join(5)
    assert "data-kind='frequent'" in d.sketches.value
    assert "<td class='sc-item'>a</td><td>2</td><td>66.7%</td>" in d.sketches.value
    assert d.sketch_box.layout.display is None
    d.dead_button.click()
    assert "sc-dead-sample" in d.dead_sample.value and "oops" in d.dead_sample.value
    with pytest.raises(ValueError, match="hz must be in"):
        Dashboard(run, hz=50, display=False)


@pytest.mark.skipif(
    "native" not in __import__("streamcell.backends").backends.available(),
    reason="no native runtime",
)
def test_a_live_native_snapshot_takes_headline_and_operators_from_one_frame():
    """While a native run is live, the headline rows and the operator table come from one
    instant: no operator has taken more rows than the headline says were read, and the sinks
    never hold more rows than the last operator emitted."""
    run = (
        sc.source(sc.clickstream(rows=None, seed=3), rate=40_000)
        .filter(sc.col("price") > 5)
        .key_by("user_id")
        .agg(n=sc.count())
        .start("frame_check", engine="native")
    )
    try:
        seen = 0
        deadline = time.monotonic() + 30
        while seen < 30 and time.monotonic() < deadline:
            snap = metrics_snapshot(run)
            if snap.live and snap.operators and snap.rows_in > 0:
                ops = snap.operators
                assert all(o.rows_in <= snap.rows_in for o in ops), snap
                assert snap.rows_out <= ops[-1].rows_out, snap
                seen += 1
            time.sleep(0.02)
        assert seen == 30
    finally:
        run.stop()
        from streamcell.run import registry

        registry().pop("frame_check", None)
