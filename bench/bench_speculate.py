"""Speculative stateful operators (issue 9, seed 001 Fig. 5.4 / 5.9): speedup of a
``speculate`` stage at 2 workers over the same stage at 1 worker, for 0%, 10% and 20%
conflicts and task sizes of 1, 10 and 100 µs.

Usage: python bench/bench_speculate.py [--work-ms 200] [--repeat 3] [--batch 4096]

The transaction is seed 001's Alg. 25 written as a Cython transactional UDF: event e reads
bucket e % 20 (and, for a conflicting event, the next bucket, which the following event
owns), busy-waits the task size, then writes what it read plus one. With 10% conflicts every
10th event updates the next event's bucket, with 20% every 5th. Each configuration runs the
same in-memory frame (events sized so one worker does about --work-ms of task work) at 1 and
2 workers, with the adaptive predictor and with a fixed horizon of 10 (the seed's simple
predictor); every figure is the median of --repeat wall-clock runs measured in this run,
and the 2-worker output is checked equal to the 1-worker output. Printed with the 2-worker
run's abort rate (events re-run / events) and horizon (final; mean over commits for the
adaptive predictor). A report, not a timed assertion; on a shared 2-core machine the
figures are only as good as the cores that were free.
"""

from __future__ import annotations

import argparse
import statistics
import time

import polars as pl

import streamcell as sc
from streamcell.plan import Horizon

SOURCE = """
from posix.time cimport clock_gettime, timespec, CLOCK_MONOTONIC

cdef inline long _now_ns() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec * 1000000000 + ts.tv_nsec

cdef long alg25(sc_txn *tx, long bucket, long extra, long task_ns) noexcept nogil:
    cdef long t0 = _now_ns()
    cdef long v = tx_get(tx, bucket)
    cdef long w = tx_get(tx, extra) if extra >= 0 else 0
    while _now_ns() - t0 < task_ns:
        pass
    tx_put(tx, bucket, v + 1)
    if extra >= 0:
        tx_put(tx, extra, w + 1)
    return v + 1
"""

STATE = 20


def frame(events: int, every: int | None, task_us: int) -> pl.DataFrame:
    """Alg. 25: bucket e % STATE; every `every`-th event also updates the next bucket."""
    e = pl.int_range(0, events, eager=True)
    bucket = e % STATE
    extra = (
        pl.Series([-1] * events)
        if every is None
        else pl.Series([(b + 1) % STATE if i % every == 0 else -1 for i, b in enumerate(bucket)])
    )
    return pl.DataFrame({"bucket": bucket, "extra": extra, "task_ns": [task_us * 1000] * events})


def measure(
    df: pl.DataFrame, workers: int, horizon: Horizon, repeat: int, batch: int
) -> tuple[float, dict, pl.DataFrame]:
    plan = sc.source(df).speculate("alg25", horizon=horizon).plan()
    times, stats, out = [], {}, None
    for _ in range(repeat):
        opts = sc.RunOptions(engine="native", workers=workers, batch_size=batch)
        t0 = time.perf_counter()
        run = plan.start(options=opts).wait()
        times.append(time.perf_counter() - t0)
        assert run.status == "finished", run.error
        assert run.engine == "native"
        (stats,) = run.native_metrics["speculate"].values()
        out = run.table(run.table_names()[0])
    assert out is not None
    return statistics.median(times), stats, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--work-ms", type=float, default=200.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--batch", type=int, default=4096)
    a = ap.parse_args()
    sc.cython_udf(SOURCE)
    print(
        f"speculate: speedup of 2 workers over 1 (median of {a.repeat} runs, same frame, "
        f"same run; batch {a.batch}; Alg. 25, {STATE} buckets)"
    )
    print(
        f"  {'task':>6} {'conflicts':>9} {'events':>8} {'predictor':>10} {'1 worker':>10} "
        f"{'2 workers':>10} {'speedup':>8} {'aborts':>7} {'horizon':>12}"
    )
    for task_us in (1, 10, 100):
        events = max(1000, int(a.work_ms * 1000 / task_us))
        for pct, every in ((0, None), (10, 10), (20, 5)):
            df = frame(events, every, task_us)
            for horizon in ("adaptive", 10):
                t1, _, out1 = measure(df, 1, horizon, a.repeat, a.batch)
                t2, st, out2 = measure(df, 2, horizon, a.repeat, a.batch)
                assert out1.equals(out2), "2-worker output differs from 1-worker output"
                hz = (
                    f"{st['horizon']} (~{st['horizon_mean']:.0f})"
                    if horizon == "adaptive"
                    else str(st["horizon"])
                )
                print(
                    f"  {task_us:>4}µs {pct:>8}% {events:>8,} {str(horizon):>10} "
                    f"{t1 * 1e3:>8.1f}ms {t2 * 1e3:>8.1f}ms {t1 / t2:>7.2f}x "
                    f"{st['abort_rate']:>6.1%} {hz:>12}"
                )


if __name__ == "__main__":
    main()
