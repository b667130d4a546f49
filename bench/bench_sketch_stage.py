"""Sketch stages in a native pipeline (issue 4): what a `sketch` stage costs, and how long a
live query takes while the run ingests. Ratios against baselines measured in the same run.

Usage: python bench/bench_sketch_stage.py [--rows 2_000_000] [--reps 5]

Figures are medians of --reps runs with the median CPU time beside them; the machine's outside
load during the run is printed last.

- throughput of `source -> sketch theta(user_id), kll(price), frequent(item_id) -> sink none`
  against the same pipeline without the sketch stage (`source -> filter true -> sink none`);
- `run.sketch("users").estimate()` from the main thread while the run ingests (median, p99 µs);
- the same sketches built standalone over the same columns (ThetaSketch / KllDoublesSketch /
  FrequentItemsSketch update_batch), as the stage's floor.
Not a timed assertion: a report.
"""

from __future__ import annotations

import argparse
import statistics
import time

import polars as pl
from _machine import Window
from _machine import timed as med_timed

import streamcell as sc
from streamcell.sketches import FrequentItemsSketch, KllDoublesSketch, ThetaSketch


def frame(rows: int) -> pl.DataFrame:
    run = (
        sc.source(sc.clickstream(rows=rows, users=1_000_000, seed=1)).plan().start(engine="native")
    )
    return run.wait().table()


def timed(plan: sc.Plan, opts: sc.RunOptions) -> float:
    t0 = time.perf_counter()
    run = plan.start(options=opts).wait()
    assert run.status == "finished", run.error
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    df = frame(a.rows)
    opts = sc.RunOptions(engine="native", workers=a.workers)
    base = sc.source(df).filter(sc.lit(True)).sink_none()
    with_stage = sc.source(df).sketch(
        users=sc.theta("user_id"), prices=sc.kll("price"), items=sc.frequent("item_id")
    )
    p_base, p_stage = sc.Plan.of((base,)), with_stage.plan()
    win = Window().__enter__()
    timed(p_base, opts)  # warm-up: the first run loads the runtime
    base_s, base_c, _ = med_timed(lambda: timed(p_base, opts), a.reps)
    stage_s, stage_c, _ = med_timed(lambda: timed(p_stage, opts), a.reps)

    def standalone() -> None:
        ThetaSketch(12).update_batch(df["user_id"])
        KllDoublesSketch(200).update_batch(df["price"])
        FrequentItemsSketch(10).update_batch(df["item_id"])

    alone_s, alone_c, _ = med_timed(standalone, a.reps)

    # live queries while a throttled run ingests
    live = (
        sc.source(df.head(min(a.rows, 1_000_000)), rate=500_000)
        .sketch(users=sc.theta("user_id"))
        .plan()
        .start(options=opts)
    )
    lat: list[float] = []
    while not live.done():
        t0 = time.perf_counter_ns()
        live.sketch("users").estimate()
        lat.append((time.perf_counter_ns() - t0) / 1000)
        time.sleep(0.001)
    live.wait()
    win.__exit__(None, None, None)
    lat.sort()
    med = statistics.median(lat) if lat else float("nan")
    p99 = lat[int(0.99 * (len(lat) - 1))] if lat else float("nan")

    m = a.rows / 1e6
    ns = lambda c: c * 1e9 / a.rows  # noqa: E731  (CPU ns per row)
    print(f"rows={a.rows:,} workers={a.workers} reps={a.reps} (median of reps)")
    rows = [
        ("pipeline without the stage (M rows/s)", f"{m / base_s:.1f}"),
        ("  CPU ns per row", f"{ns(base_c):.0f}"),
        ("pipeline with theta+kll+frequent stage (M rows/s)", f"{m / stage_s:.1f}"),
        ("  CPU ns per row", f"{ns(stage_c):.0f}"),
        ("with stage / without", f"{base_s / stage_s:.2f}×"),
        ("standalone theta+kll+frequent over the columns (M rows/s)", f"{m / alone_s:.1f}"),
        ("  CPU ns per row", f"{ns(alone_c):.0f}"),
        (f"live query run.sketch().estimate(), median (µs, {len(lat)} queries)", f"{med:.0f}"),
        ("live query, p99 (µs)", f"{p99:.0f}"),
    ]
    w = max(len(r[0]) for r in rows)
    for name, v in rows:
        print(f"{name:<{w}}  {v:>8}")
    print(win.line())


if __name__ == "__main__":
    main()
