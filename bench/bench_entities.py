"""Multi-entity events (issue 8; "Scalable concurrent deterministic event processing via lazy
topological sorting"): transfers with per-entity ticket ordering against the paper's baselines,
one global lock around the same update (entity_order="serial") and sequential processing.

Usage: python bench/bench_entities.py [--rows 400_000] [--repeat 5] [--batch 256] [--work-ns 1000]

Two parts, both printed with CPU time beside wall time and the machine's outside load:

1. The claim itself, in C (bench/bench_entities_work.c, built by ``make bench-entities`` into
   native/build/bench_ent; this script runs it first when it is there): streamcell's ORDER and
   APPLY operators with --work-ns of busy work per event done while the event holds its
   entities' tickets, APPLY on 1 and 2 threads taking batches first come, first served,
   against the global lock and a plain sequential loop doing the same work.
2. The engine end to end: ``key_by_all src, dst`` + ``transfer amount`` followed by a
   per-event computation on the balances (a Cython UDF burning about --work-ns per event, so
   each transfer carries real work; it runs in the stateless stage after APPLY, outside the
   tickets), at 1 and 2 workers, tickets vs global lock, at low contention (100,000 accounts,
   uniform) and on hot accounts (20 accounts, Zipf 1.5), with small batches (--batch) so that
   workers hold consecutive batches of the hot accounts at once and events do wait.
   ``waited`` is the fraction of events whose ticket was not being served when they came up.

Every figure is the median of --repeat runs over the same in-memory frame; ratios are within
this run. A report, not a timed assertion; claims that fail say "not reproduced here".
"""

from __future__ import annotations

import argparse
import os
import subprocess

import numpy as np
import polars as pl
from _machine import Window, timed, verdict

import streamcell as sc

HERE = os.path.dirname(os.path.abspath(__file__))
HARNESS = os.path.join(HERE, "..", "native", "build", "bench_ent")

SOURCE = """
cdef long risk(long a, long b, long work_ns) noexcept nogil:
    # per-event work on the balances: an integer hash chain of about work_ns
    cdef unsigned long h = <unsigned long>(a * 31 + b)
    cdef long i
    for i in range(work_ns // 2):
        h = h * 1103515245 + 12345
        h ^= h >> 13
    return <long>(h & 1023)
"""


def frame(rows: int, accounts: int, skew: float | None, seed: int, work: int) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    if skew is None:
        src, dst = rng.integers(0, accounts, rows), rng.integers(0, accounts, rows)
    else:
        src = (rng.zipf(skew, rows) - 1) % accounts
        dst = (rng.zipf(skew, rows) - 1) % accounts
    return pl.DataFrame(
        {"src": src, "dst": dst, "amount": rng.integers(1, 50, rows), "work": [work] * rows}
    )


def measure(
    df: pl.DataFrame, workers: int, order: str, repeat: int, batch: int
) -> tuple[float, float, float]:
    """(median wall s, median CPU s, waited fraction of the last run)."""
    plan = (
        sc.source(df)
        .key_by_all("src", "dst")
        .transfer("amount", initial=1_000)
        .with_columns(
            score=sc.call("risk", sc.col("src_balance"), sc.col("dst_balance"), sc.col("work"))
        )
        .sink_none()
    )
    last: dict = {}

    def once() -> None:
        opts = sc.RunOptions(engine="native", workers=workers, entity_order=order, batch_size=batch)
        run = sc.Plan.of((plan,)).start(options=opts).wait()
        assert run.status == "finished", run.error
        last["st"] = run.native_metrics["entities"]["transfer#2"]

    wall, cpu, _ = timed(once, repeat)
    return wall, cpu, last["st"]["waited"] / df.height


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=400_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--work-ns", type=int, default=1000)
    ap.add_argument("--no-harness", action="store_true", help="skip part 1 (the C harness)")
    a = ap.parse_args()

    if not a.no_harness:
        print("1. ", end="", flush=True)
        if os.path.exists(HARNESS):
            subprocess.run([HARNESS, "200000", str(a.work_ns), str(a.repeat)], check=True)
        else:
            print("native/build/bench_ent not built: run `make bench-entities` for part 1")
        print()

    sc.cython_udf(SOURCE)
    print(
        f"2. engine end to end: rows={a.rows:,} batch={a.batch} repeat={a.repeat}, "
        f"~{a.work_ns} ns of work per event after the transfer (median M transfers/s; "
        f"CPU ns per event in brackets)"
    )
    print(
        f"  {'case':<16} {'workers':>7} {'tickets':>16} {'global lock':>16} {'ratio':>7} "
        f"{'waited':>8}"
    )
    cases = [("low contention", 100_000, None), ("hot accounts", 20, 1.5)]
    scale: dict[str, float] = {}
    with Window() as win:
        warm = frame(10_000, 100, None, 0, 0)
        measure(warm, 2, "tickets", 1, a.batch)  # first run loads the runtime and the UDF
        for name, accounts, skew in cases:
            df = frame(a.rows, accounts, skew, seed=accounts, work=a.work_ns)
            one = None
            for w in (1, 2):
                t, tc, waited = measure(df, w, "tickets", a.repeat, a.batch)
                g, gc, _ = measure(df, w, "serial", a.repeat, a.batch)
                one = one or t
                print(
                    f"  {name:<16} {w:>7} {df.height / t / 1e6:>7.2f} ({tc * 1e9 / a.rows:>5.0f}) "
                    f"{df.height / g / 1e6:>7.2f} ({gc * 1e9 / a.rows:>5.0f}) {g / t:>6.2f}x {waited:>7.2%}"
                )
            scale[name] = one / t
            print(f"  {name:<16} 2 workers / 1 worker (tickets): {one / t:.2f}x")
    print(win.line())
    lo, hot = scale["low contention"], scale["hot accounts"]
    print(f"  {'claim (engine, work outside the tickets)':<52} {'measured':>9} {'target':>8}  met")
    print(
        f"  {'low contention: 2 workers / 1 worker':<52} {lo:>8.2f}x {'>= 1.5x':>8}  "
        f"{verdict(lo >= 1.5, win)}"
    )
    print(
        f"  {'hot accounts: 2 workers / 1 worker':<52} {hot:>8.2f}x {'>= 1.3x':>8}  "
        f"{verdict(hot >= 1.3, win)}"
    )


if __name__ == "__main__":
    main()
