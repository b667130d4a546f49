"""Spark vs native on the TPCx-BB queries (Q1-Q4, Q15). ``make bench-spark``.

Both engines run the same plan (``bench_runtime.tpcx``) on the same input, in the same run.
Each query's Spark output is first checked equal to the native engine's on a small input.

Throughput: input rows / wall time of ``start() .. wait()`` (median of ``--repeat`` runs).

Latency, defined per engine because the engines deliver differently:

- native: per-row end-to-end latency (source read to sink) from the engine's own metrics,
  p50 / p99 over the rows of the last run;
- Spark: a finite plan runs as one batch job and every result row lands when the job ends,
  so a row's latency is the job's end-to-end time (``start()`` to table filled);
  p50 / p99 are over the ``--repeat`` job times.

    python bench/bench_spark.py [--rows N] [--repeat R] [--check-rows N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import streamcell as sc  # noqa: E402
from bench.bench_runtime import _all, _spec, tpcx  # noqa: E402
from streamcell.options import RunOptions  # noqa: E402
from streamcell.sources import open_source  # noqa: E402
from tests.helpers import assert_same_outputs, outputs  # noqa: E402

NATIVE = RunOptions(engine="native", workers=2, display=False)
SPARK = RunOptions(engine="spark", display=False)


def timed(q: str, src: Any, opts: RunOptions) -> tuple[float, sc.Run]:
    t0 = time.perf_counter()
    run = tpcx(q, src).start(f"{q}_{opts.engine}", options=opts)
    run.wait()
    return time.perf_counter() - t0, run


def pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.array(xs), q * 100))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--check-rows", type=int, default=5000)
    ap.add_argument("--queries", default="Q1,Q2,Q3,Q4,Q15")
    a = ap.parse_args()
    from streamcell.backends.spark.session import current_master, get_session

    t0 = time.perf_counter()
    get_session()
    print(
        f"streamcell Spark ({current_master()}) vs native (2 workers): TPCx-BB, {a.rows:,} rows, "
        f"median of {a.repeat}, {os.cpu_count()} cpus; Spark start-up {time.perf_counter() - t0:.1f} s"
    )
    print(
        "latency: native = per-row end-to-end (engine metrics, last run); "
        "Spark = batch job end-to-end (every row lands at job end), over the repeats"
    )
    clicks = _all(open_source(_spec(sc.clickstream(rows=a.rows, seed=1))))
    sales = _all(open_source(_spec(sc.store_sales(rows=a.rows, seed=1))))
    rows = []
    for q in a.queries.split(","):
        src = sales if q in ("Q1", "Q15") else clicks
        small = src.head(a.check_rows)
        _, rn = timed(q, small, NATIVE)
        _, rs = timed(q, small, SPARK)  # also warms Spark's Python workers for this query
        assert_same_outputs(outputs(rs), outputs(rn))
        nat = [timed(q, src, NATIVE) for _ in range(a.repeat)]
        spk = [timed(q, src, SPARK) for _ in range(a.repeat)]
        tn = statistics.median(t for t, _ in nat)
        ts = statistics.median(t for t, _ in spk)
        lat = (nat[-1][1].native_metrics or {}).get("latency") or {}
        n50, n99 = lat.get("p50_ns", 0) / 1e6, lat.get("p99_ns", 0) / 1e6
        s_times = [t * 1e3 for t, _ in spk]
        s50, s99 = pct(s_times, 0.5), pct(s_times, 0.99)
        out_rows = nat[-1][1].table().height
        assert spk[-1][1].table().height == out_rows
        rows.append(
            (q, a.check_rows, src.height / tn, src.height / ts, n50, n99, s50, s99, out_rows)
        )
        print(
            f"  {q}: == native on {a.check_rows:,} rows; native {src.height / tn:,.0f} rows/s, "
            f"spark {src.height / ts:,.0f} rows/s",
            flush=True,
        )
    print()
    head = (
        f"{'query':<6} {'native rows/s':>14} {'spark rows/s':>13} {'spark/native':>13} "
        f"{'native p50/p99 ms':>19} {'spark p50/p99 ms':>18} {'p50 ratio':>10} {'p99 ratio':>10}"
    )
    print(head)
    print("-" * len(head))
    for q, _, rn_, rs_, n50, n99, s50, s99, _ in rows:
        r50 = f"{s50 / n50:,.0f}x" if n50 else "n/a"
        r99 = f"{s99 / n99:,.0f}x" if n99 else "n/a"
        print(
            f"{q:<6} {rn_:>14,.0f} {rs_:>13,.0f} {rs_ / rn_:>12.3f}x "
            f"{f'{n50:.3f} / {n99:.3f}':>19} {f'{s50:,.0f} / {s99:,.0f}':>18} {r50:>10} {r99:>10}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
