"""Keyed, windowed and session steps on Spark: streamcell's native C operators in
``mapInArrow`` (and Spark's ``groupBy`` for a final table, tumbling windows and sessions)
against the reference operators they replace, same Spark session, same data, same run.

Each workload runs warm (after one untimed run per variant), best of ``--repeat``; the
outputs of every variant are checked equal to the reference engine's first (on the full
input). Wall time is ``start() .. wait()`` of a finite Spark run: reading the source on the
driver, the Spark jobs and collecting the result are the same in every variant; only the
stateful step differs.

    python bench/bench_spark_ops.py [--rows N] [--repeat R] [--keys K]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable

import numpy as np
import polars as pl

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import streamcell as sc  # noqa: E402
from streamcell.backends.spark import native_ops  # noqa: E402
from streamcell.options import RunOptions  # noqa: E402
from tests.helpers import assert_same_outputs, outputs  # noqa: E402

SPARK = RunOptions(engine="spark", display=False)
REFERENCE = RunOptions(engine="reference", display=False)


def data(rows: int, keys: int) -> pl.DataFrame:
    rng = np.random.default_rng(1)
    t = np.arange(rows, dtype=np.int64) * 10 + rng.integers(0, 30, rows)  # a little disorder
    return pl.DataFrame(
        {
            "k": rng.integers(0, keys, rows),
            "v": rng.integers(-1000, 1000, rows),
            "x": rng.random(rows),
            "t": t,
        }
    )


def workloads(df: pl.DataFrame) -> dict[str, Callable[[], sc.Plan]]:
    src = sc.source(df)
    aggs = dict(n=sc.count(), s=sc.col("v").sum(), hi=sc.col("x").max())
    return {
        "keyed agg (changelog)": lambda: sc.combine(
            src.key_by("k").agg(**aggs).sink_table("log", mode="append")
        ),
        "keyed agg (final table)": lambda: (
            src.key_by("k").agg(n=sc.count(), s=sc.col("v").sum(), hi=sc.col("v").max()).plan()
        ),
        "tumbling window": lambda: src.key_by("k").tumbling(1000, time="t").agg(**aggs).plan(),
        "sessions": lambda: src.key_by("k").session(200, time="t").agg(**aggs).plan(),
    }


VARIANTS = {  # name -> (NATIVE_OPERATORS, GROUP_BY)
    "reference ops": (False, False),
    "native ops": (True, False),
    "native + groupBy": (True, True),
}


def timed(plan: sc.Plan, variant: str, name: str) -> tuple[float, sc.Run]:
    native_ops.NATIVE_OPERATORS, native_ops.GROUP_BY = VARIANTS[variant]
    t0 = time.perf_counter()
    run = sc.start(plan, name=name, options=SPARK)
    run.wait()
    assert run.status == "finished", (run.status, run.error)
    return time.perf_counter() - t0, run


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--keys", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=2)
    a = ap.parse_args()
    from streamcell.backends.spark.session import MASTER, get_session

    get_session()
    df = data(a.rows, a.keys)
    print(
        f"Spark ({MASTER}), {a.rows:,} rows, {a.keys:,} keys, warm, best of {a.repeat}, "
        f"{os.cpu_count()} cpus; baseline: the reference operators in mapInArrow"
    )
    print(f"{'workload':<26}{'variant':<20}{'wall s':>9}{'speed-up':>10}  ran as")
    i = 0
    for wname, make in workloads(df).items():
        plan = make()
        want = outputs(sc.start(plan, name=f"ref{i}", options=REFERENCE).wait())
        base = None
        for variant in VARIANTS:
            if variant == "native + groupBy" and "changelog" in wname:
                continue
            i += 1
            _, run = timed(plan, variant, f"w{i}")  # warm-up, and the check
            assert_same_outputs(outputs(run), want)
            best = min(timed(plan, variant, f"w{i}_{r}")[0] for r in range(a.repeat))
            base = base or best
            how = ",".join(sorted(set(run.spark_operators.values())))
            print(f"{wname:<26}{variant:<20}{best:>9.2f}{base / best:>9.2f}x  {how}")
    native_ops.NATIVE_OPERATORS, native_ops.GROUP_BY = True, True
    return 0


if __name__ == "__main__":
    sys.exit(main())
