"""KLL ingest benchmark: streamcell KLL from an Arrow column vs the DataSketches library.

Prints measured vs target and whether each target is met. Ratios are against baselines
measured in the same run (the machine is shared: numbers move with its load).

    .venv/bin/python bench/bench_sketch_kll.py [--n 10000000] [--repeat 5]

Every figure is the median of --repeat runs, with the median CPU time of the process beside it
(ns per item) and the machine's outside load during the run.

Targets (issue 4): KLL >= 30 M updates/s per writer from an Arrow column.
"""

from __future__ import annotations

import argparse
import threading

import numpy as np
import pyarrow as pa
from _machine import Window, timed

from streamcell.sketches import FrequentItemsSketch, KllDoublesSketch, KllFloatsSketch

TARGET_MPS = 30.0


CPU_NS: dict[float, float] = {}  # rate -> median CPU ns per item of the figure


def best_rate(fn, n, repeat):
    """Median throughput (M items/s) of ``fn()`` processing n items, over ``repeat`` runs
    (the median CPU ns per item is kept in CPU_NS under the rate)."""
    wall, cpu, _ = timed(fn, repeat)
    rate = n / wall / 1e6
    CPU_NS[rate] = cpu * 1e9 / n
    return rate


def kll_arrow(col, cls=KllDoublesSketch):
    def run():
        sk = cls(200, seed=1)
        sk.update(col)

    return run


def kll_two_writers(cols):
    """Two Python threads, each with its own sketch (the concurrent framework's writers)."""

    def run():
        sketches = [KllDoublesSketch(200, seed=i + 1) for i in range(len(cols))]
        threads = [threading.Thread(target=s.update, args=(c,)) for s, c in zip(sketches, cols)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        merged = sketches[0]
        for s in sketches[1:]:
            merged.merge(s)

    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000_000, help="items in the Arrow column")
    ap.add_argument("--baseline-n", type=int, default=500_000, help="items for the Python loop")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    n, repeat = args.n, args.repeat

    rng = np.random.default_rng(0)
    values = rng.normal(size=n)
    col = pa.array(values)
    col_f32 = pa.array(values.astype(np.float32))
    col_sorted = pa.array(np.sort(values))

    rows = []
    win = Window().__enter__()
    ours = best_rate(kll_arrow(col), n, repeat)
    rows.append(("streamcell KLL doubles, Arrow float64, 1 writer", ours))
    rows.append(
        (
            "streamcell KLL floats, Arrow float32, 1 writer",
            best_rate(kll_arrow(col_f32, KllFloatsSketch), n, repeat),
        )
    )
    rows.append(
        ("streamcell KLL doubles, sorted Arrow column", best_rate(kll_arrow(col_sorted), n, repeat))
    )
    half = n // 2
    two = best_rate(kll_two_writers([col.slice(0, half), col.slice(half)]), n, repeat)
    rows.append(("streamcell KLL doubles, 2 writers (own sketches) + merge", two))

    base = None
    try:
        import datasketches as ds

        m = min(args.baseline_n, n)
        items = values[:m].tolist()

        def loop():
            sk = ds.kll_doubles_sketch(200)
            for v in items:
                sk.update(v)

        base = best_rate(loop, m, repeat)
        rows.append(("datasketches kll_doubles_sketch, per-item Python loop", base))

        def numpy_batch():
            sk = ds.kll_doubles_sketch(200)
            sk.update(values)

        rows.append(
            ("datasketches kll_doubles_sketch, update(ndarray)", best_rate(numpy_batch, n, repeat))
        )
    except ImportError:
        print("(datasketches not installed: no baseline)")

    ints = pa.array((rng.zipf(1.2, size=n) % 1_000_000).astype(np.int64))

    def freq():
        FrequentItemsSketch(12).update(ints)

    rows.append(("streamcell frequent items int64, lg_max 12 (info)", best_rate(freq, n, repeat)))

    win.__exit__(None, None, None)
    print(f"KLL ingest benchmark: n={n:,}, median of {repeat} (shared machine: expect noise)")
    for name, rate in rows:
        ratio = f"  {rate / base:7.1f}x loop" if base else ""
        print(f"  {name:<58} {rate:8.1f} M/s {CPU_NS[rate]:7.1f} CPU ns/item{ratio}")
    print(win.line())
    status = "met" if ours >= TARGET_MPS else "NOT met (not reproduced here)"
    print(
        f"target: KLL >= {TARGET_MPS:.0f} M updates/s per writer from Arrow: "
        f"measured {ours:.1f} M/s -> {status}"
    )
    if base:
        print(f"ratio vs datasketches per-item Python loop (same run): {ours / base:.1f}x")


if __name__ == "__main__":
    main()
