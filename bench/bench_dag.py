"""DAG pipelines (issue 8, Zimmerman and Chandy): a 10-vertex DAG over two sources on the native DAG
runtime at 1 and 2 workers, and the vertex executions Δ-propagation skipped.

Usage: python bench/bench_dag.py [--rows 2_000_000] [--repeat 3] [--batch 1024]

Two sensor-like sources (region, ts, temp) of --rows rows each. The DAG: each source fans
out; A's warm readings (converted to °F) and B's cold readings meet in a union that feeds a
per-region running max; A's rare alarms (temp > 50) feed a table and a per-region count;
B also feeds a tumbling window and a frost table. Every figure is
the median of --repeat runs over the same in-memory frames; the reference engine's rate on
a slice of the same input is printed for scale. A report, not a timed assertion.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import polars as pl

import streamcell as sc


def sensor(rows: int, seed: int) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    return pl.DataFrame(
        {
            "region": rng.integers(0, 50, rows),
            "ts": np.arange(rows, dtype=np.int64),
            "temp": rng.normal(15.0, 10.0, rows).round(2),
        }
    )


def dag(a_df: pl.DataFrame, b_df: pl.DataFrame) -> sc.Plan:
    """Ten vertices: two sources; A's warm readings and B's cold ones meet in a union that
    feeds a per-region running max; A's rare alarms (about 1 in 4,000 readings) feed a
    table and a per-region count; B also feeds a tumbling window and a frost table."""
    col = sc.col
    a = sc.source(a_df, name="sensor_a")
    b = sc.source(b_df, name="sensor_b")
    warm = a.filter(col("temp") > 0).select("region", "ts", temp=col("temp") * 1.8 + 32)
    alarms = a.filter(col("temp") > 50)
    cold = b.filter(col("temp") < 0).select("region", "ts", "temp")
    both = warm.union(cold)
    return sc.combine(
        alarms.sink_table("alarms"),
        b.filter(col("temp") < -25).sink_table("frost"),
        alarms.key_by("region").agg(n=sc.count()).sink_table("alarms_per_region"),
        b.key_by("region")
        .tumbling(600, time="ts")
        .agg(n=sc.count(), m=sc.mean("temp"))
        .sink_none(),
        both.key_by("region").running(hottest=sc.max("temp")).sink_none(),
    )


def measure(plan: sc.Plan, rows: int, workers: int, batch: int, repeat: int) -> tuple[float, dict]:
    times, dag = [], {}
    for _ in range(repeat):
        opts = sc.RunOptions(engine="native", workers=workers, batch_size=batch)
        t0 = time.perf_counter()
        run = plan.start(options=opts).wait()
        times.append(time.perf_counter() - t0)
        assert run.status == "finished", run.error
        dag = run.native_metrics["dag"]
    return rows / statistics.median(times) / 1e6, dag


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=2_000_000, help="rows per source")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--batch", type=int, default=1024, help="rounds of the merge per phase")
    a = ap.parse_args()
    a_df, b_df = sensor(a.rows, 1), sensor(a.rows, 2)
    plan = dag(a_df, b_df)
    total = 2 * a.rows
    one, d1 = measure(plan, total, 1, a.batch, a.repeat)
    two, d2 = measure(plan, total, 2, a.batch, a.repeat)
    small = max(1, a.rows // 50)
    ref_plan = dag(a_df.head(small), b_df.head(small))
    t0 = time.perf_counter()
    ref = ref_plan.start(engine="reference").wait()
    ref_rate = 2 * small / (time.perf_counter() - t0) / 1e6
    assert ref.status == "finished", ref.error
    print(
        f"rows={total:,} (2 sources x {a.rows:,}) batch={a.batch} repeat={a.repeat} "
        f"vertices={d1['vertices']} phases={d1['phases']:,}"
    )
    print(f"{'figure':<58}{'measured':>10}")
    print(f"{'native DAG, 1 worker (M rows/s, median)':<58}{one:>10.2f}")
    print(f"{'native DAG, 2 workers (M rows/s, median)':<58}{two:>10.2f}")
    print(f"{'2 workers / 1 worker':<58}{two / one:>9.2f}x")
    print(f"{'reference engine, same DAG on a 1/50 slice (M rows/s)':<58}{ref_rate:>10.3f}")
    print(f"{'native 2 workers / reference':<58}{two / ref_rate:>9.0f}x")
    frac = d2["skipped"] / d2["possible"] if d2["possible"] else 0.0
    print(
        f"{'vertex-phase pairs skipped by Δ-propagation':<58}{frac:>9.1%}"
        f"  ({d2['skipped']:,} of {d2['possible']:,})"
    )
    print(f"{'phases in flight at once, most (2 workers)':<58}{d2['in_flight_max']:>10}")
    print(
        f"{'vertex-phase pairs executing at once, most (2 workers)':<58}{d2['concurrent_max']:>10}"
    )
    for v in d2["per_vertex"]:
        share = v["executions"] / d2["phases"] if d2["phases"] else 0.0
        print(
            f"  v{v['vertex']:<2} {v['name']:<14} executed in {share:6.1%} of phases, {v['rows_in']:>10,} rows in"
        )


if __name__ == "__main__":
    main()
