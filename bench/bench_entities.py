"""Multi-entity events (issue 8, seed 002): transfers/s with ticket ordering at 1 and 2
workers, against a single global ticket lock around the same update (entity_order="serial"),
at low contention (100,000 accounts, uniform) and high contention (20 accounts, Zipf 1.5).

Usage: python bench/bench_entities.py [--rows 2_000_000] [--repeat 3]

Every figure is the median of --repeat runs of the same pipeline over the same in-memory
frame; ratios are within this run. Also printed: the fraction of events that had to wait for
a ticket (the rest took the fast path). Not a timed assertion: a report.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import polars as pl

import streamcell as sc


def frame(rows: int, accounts: int, skew: float | None, seed: int) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    if skew is None:
        src, dst = rng.integers(0, accounts, rows), rng.integers(0, accounts, rows)
    else:
        src = (rng.zipf(skew, rows) - 1) % accounts
        dst = (rng.zipf(skew, rows) - 1) % accounts
    return pl.DataFrame({"src": src, "dst": dst, "amount": rng.integers(1, 50, rows)})


def measure(df: pl.DataFrame, workers: int, order: str, repeat: int) -> tuple[float, float]:
    plan = sc.source(df).key_by_all("src", "dst").transfer("amount", initial=1_000).sink_none()
    times, waited = [], 0.0
    for _ in range(repeat):
        opts = sc.RunOptions(engine="native", workers=workers, entity_order=order)
        t0 = time.perf_counter()
        run = sc.Plan.of((plan,)).start(options=opts).wait()
        times.append(time.perf_counter() - t0)
        assert run.status == "finished", run.error
        st = run.native_metrics["entities"]["transfer#2"]
        waited = st["waited"] / df.height
    return df.height / statistics.median(times) / 1e6, waited


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    cases = [("low contention", 100_000, None), ("high contention", 20, 1.5)]
    print(f"rows={a.rows:,} repeat={a.repeat} (median M transfers/s)")
    print(
        f"  {'case':<16} {'workers':>7} {'tickets':>9} {'global lock':>12} {'ratio':>7} {'waited':>8}"
    )
    for name, accounts, skew in cases:
        df = frame(a.rows, accounts, skew, seed=accounts)
        one = None
        for w in (1, 2):
            t, waited = measure(df, w, "tickets", a.repeat)
            g, _ = measure(df, w, "serial", a.repeat)
            one = one or t
            print(f"  {name:<16} {w:>7} {t:>9.2f} {g:>12.2f} {t / g:>6.2f}x {waited:>7.1%}")
        print(f"  {name:<16} 2 workers / 1 worker (tickets): {t / one:.2f}x")


if __name__ == "__main__":
    main()
