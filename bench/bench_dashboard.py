"""Ingestion overhead of the live dashboard (issue 5). ``make bench-dashboard``.

Runs the benchmark pipeline (bench_runtime's keyed aggregation over a preloaded clickstream,
native engine, 2 workers) inside a real IPython kernel, alternately without and with a
dashboard attached (the %%stream cell's Dashboard, publishing at its default rate to a real
client over ZMQ), and prints the ratio of the median throughputs measured in the same run:

    throughput with dashboard / throughput without   (target >= 0.97)

    python bench/bench_dashboard.py [--rows N] [--repeat R] [--engine native|reference]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from jupyter_client.manager import start_new_kernel

KERNEL_CODE = r"""
import json, statistics, time
import streamcell as sc
from streamcell.options import RunOptions
from streamcell.sources import open_source
from streamcell.widgets.dashboard import Dashboard
import pyarrow as pa, polars as pl

reader = open_source(sc.clickstream(rows={rows}, seed=1))
clicks = pl.from_arrow(pa.Table.from_batches(list(reader.arrow_batches())))
opts = RunOptions(engine={engine!r}, workers=2)

def once(dashboard):
    stream = sc.source(clicks).key_by("user_id").agg(n=sc.count(), s=sc.col("price").sum())
    t0 = time.perf_counter()
    run = stream.start("bench_dash", options=opts)
    t1 = time.perf_counter()
    d = Dashboard(run) if dashboard else None
    build.append(time.perf_counter() - t1)
    run.wait()
    dt = time.perf_counter() - t0
    if d is not None:
        d.join(5)
        assert d.updates >= 2, d.updates
    return clicks.height / dt, (d.updates if d else 0)

build = []
once(False); once(True)  # warm-up
plain, dash, updates = [], [], []
for i in range({repeat}):
    for with_dash in ((False, True) if i % 2 == 0 else (True, False)):
        rate, n = once(with_dash)
        (dash if with_dash else plain).append(rate)
        if with_dash:
            updates.append(n)
print("RESULT " + json.dumps({{"plain": plain, "dash": dash, "updates": updates, "build": build}}))
"""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--engine", default="native")
    a = ap.parse_args()
    print(
        f"dashboard overhead: keyed aggregation, {a.rows:,} rows, {a.engine} engine, "
        f"median of {a.repeat} interleaved pairs, {os.cpu_count()} cpus",
        flush=True,
    )
    km, kc = start_new_kernel(kernel_name="python3")
    out: list[str] = []
    messages = 0

    def hook(msg: dict) -> None:
        nonlocal messages
        messages += 1
        if msg["msg_type"] == "stream":
            out.append(msg["content"]["text"])
        elif msg["msg_type"] == "error":
            out.append("\n".join(msg["content"]["traceback"]))

    try:
        t0 = time.perf_counter()
        code = KERNEL_CODE.format(rows=a.rows, repeat=a.repeat, engine=a.engine)
        reply = kc.execute_interactive(code, output_hook=hook, timeout=3600)
        wall = time.perf_counter() - t0
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    text = "".join(out)
    if reply["content"]["status"] != "ok" or "RESULT " not in text:
        print(text, file=sys.stderr)
        return 1
    res = json.loads(text.split("RESULT ", 1)[1].splitlines()[0])
    import statistics

    plain, dash = statistics.median(res["plain"]), statistics.median(res["dash"])
    ratio = dash / plain
    print(
        f"  without dashboard: {plain / 1e6:.2f} M rows/s (runs: "
        + ", ".join(f"{r / 1e6:.2f}" for r in res["plain"])
        + ")"
    )
    print(
        f"  with dashboard:    {dash / 1e6:.2f} M rows/s (runs: "
        + ", ".join(f"{r / 1e6:.2f}" for r in res["dash"])
        + f"); "
        f"{statistics.median(res['updates']):.0f} dashboard updates per run, "
        f"{messages} kernel messages received; "
        f"building the dashboard took {statistics.median(res['build']) * 1e3:.0f} ms"
    )
    print(
        f"  ratio (with / without): {ratio:.3f}  target >= 0.97  met: "
        f"{'yes' if ratio >= 0.97 else 'NO'}  ({wall:.0f} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
