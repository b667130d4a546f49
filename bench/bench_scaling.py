"""How the native runtime scales from 1 to 16 workers, beside Polars at the same thread count.
``make bench-scaling`` (after the concurrent Θ sketch's scaling table, in C).

For workers = 1, 2, 4, 8, 16 (capped at ``os.cpu_count()``), the pipelines and inputs of
``bench_runtime.py`` figures 1, 3 and 9, imported from it:

- (a) ``stateless``: filter + with_columns to a table (the clickstream, seed 1);
- (b) ``keyed``: key_by + agg(count, sum, mean) to a table (figure 3's uniform and Zipf-1.2 keys);
- (c) ``tumbling``: tumbling 1-minute windows per user to a table (the clickstream).

Three more on request (``--pipelines``), to tell where (a) stops scaling: ``stateless-unordered``
(a) with ``reorder="none"`` (what restoring the order costs at each worker count),
``stateless-discard`` ((a) then a filter no row passes: the runtime without the table sink) and
``heavy`` (figure 4's compute-heavy with_columns to a table).

Each point is the median of ``--repeat`` runs after one warm-up: rows/s, wall and CPU ns per
input row (CPU: this process, every thread), and the part of the wall time spent in
``run.table()`` after ``run.wait()`` returned (building the final table). Polars runs the same query (``collect``, the
in-memory engine, and with ``--polars-engines`` the streaming one too) in a subprocess started
with ``POLARS_MAX_THREADS=n``, since Polars reads it once at import; the child reports the pool
size it got, and a point whose pool differs from n is marked. Printed per point: the speed-up
over 1 worker (native) and over 1 thread (Polars), and Polars time / native time (> 1: the
native runtime is faster at that thread count). The output row count at every worker count is
compared with 1 worker's, and with Polars' where the two define the same rows (not (c): the
tumbling window sends rows behind the watermark to ``run.late()`` and drops null keys, Polars
groups them); a mismatch is marked. Timings are ratios within this run only.

    python bench/bench_scaling.py [--rows N] [--repeat R] [--workers 1,2,4,8,16]
                                  [--pipelines stateless,keyed-uniform,keyed-zipf,tumbling]
                                  [--polars-engines in-memory,streaming]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import polars as pl
from _machine import Window
from bench_runtime import (
    clickstream_frame,
    heavy,
    keyed,
    keyed_frames,
    measure,
    native,
    polars_heavy,
    polars_keyed,
    polars_stateless,
    polars_tumbling,
    stateless,
    tumbling,
)

import streamcell as sc

col = sc.col


@dataclass(frozen=True)
class Pipeline:
    title: str
    stream: Callable[[Any], sc.Stream]
    polars: str  # the query's name in POLARS_QUERIES
    input: str  # "clicks" or a key of keyed_frames()
    same_rows: bool = True  # Polars' output has the same rows
    options: tuple[tuple[str, Any], ...] = ()  # RunOptions beside workers


PIPELINES = {
    "stateless": Pipeline("(a) filter + with_columns to a table", stateless, "stateless", "clicks"),
    "keyed-uniform": Pipeline(
        "(b) key_by + agg(count, sum, mean) to a table, uniform keys", keyed, "keyed", "uniform"
    ),
    "keyed-zipf": Pipeline(
        "(b) key_by + agg(count, sum, mean) to a table, Zipf-1.2 keys", keyed, "keyed", "Zipf-1.2"
    ),
    "tumbling": Pipeline(
        "(c) tumbling 1 min per user to a table (Polars: group_by(user, truncate))",
        tumbling,
        "tumbling",
        "clicks",
        same_rows=False,
    ),
    "stateless-unordered": Pipeline(
        "(a') filter + with_columns to a table, reorder='none' (no order restored)",
        stateless,
        "stateless",
        "clicks",
        options=(("reorder", "none"),),
    ),
    "stateless-discard": Pipeline(
        "(a'') filter + with_columns, then a filter no row passes (no table to build)",
        lambda src: stateless(src).filter(col("price") > 1e9),
        "stateless-discard",
        "clicks",
    ),
    "heavy": Pipeline(
        "(d) compute-heavy with_columns (figure 4) to a table", heavy, "heavy", "clicks"
    ),
}
POLARS_QUERIES: dict[str, Callable[[pl.DataFrame], pl.LazyFrame]] = {
    "stateless": polars_stateless,
    "keyed": polars_keyed,
    "tumbling": polars_tumbling,
    "heavy": polars_heavy,
    "stateless-discard": lambda df: polars_stateless(df).filter(pl.col("price") > 1e9),
}


@dataclass
class Point:
    wall: float  # median seconds
    cpu: float  # median CPU seconds
    rows_out: int
    note: str = ""
    table_wall: float = 0.0  # native: median seconds in run.table() after run.wait()


def polars_child(query: str, data: str, repeat: int, engines: list[str]) -> int:
    """Run in the subprocess: time the Polars query, print one JSON line per engine."""
    with open(data, "rb") as f:  # into memory, as the native runs' input is (not a mapped file)
        df = pl.read_ipc(f.read())
    q = POLARS_QUERIES[query](df)
    for engine in engines:
        out: dict[str, Any] = {}

        def go(engine: str = engine, out: dict[str, Any] = out) -> None:
            out["rows_out"] = q.collect(engine=engine).height  # type: ignore[call-overload]

        wall, cpu = measure(go, repeat)
        print(
            json.dumps(
                {
                    "engine": engine,
                    "wall": wall,
                    "cpu": cpu,
                    "rows_out": out["rows_out"],
                    "threads": pl.thread_pool_size(),
                }
            ),
            flush=True,
        )
    return 0


def polars_points(
    query: str, data: str, threads: int, repeat: int, engines: list[str]
) -> dict[str, Point]:
    env = dict(os.environ, POLARS_MAX_THREADS=str(threads))
    cmd = [sys.executable, os.path.abspath(__file__), "--polars-child", query, "--data", data]
    cmd += ["--repeat", str(repeat), "--polars-engines", ",".join(engines)]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise SystemExit(f"bench_scaling: the Polars child failed ({query}):\n{res.stderr}")
    points = {}
    for line in res.stdout.splitlines():
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        note = "" if r["threads"] == threads else f"pool {r['threads']} != {threads}"
        points[r["engine"]] = Point(r["wall"], r["cpu"], r["rows_out"], note)
    return points


def native_point(pipe: Pipeline, df: pl.DataFrame, w: int, repeat: int) -> Point:
    """``bench_runtime.to_table``'s run, timed in two parts: to ``wait()``, then ``table()``."""
    stream, opts = pipe.stream(df), native(w, **dict(pipe.options))
    out: dict[str, Any] = {"table": []}

    def go() -> None:
        run = stream.start("bench", options=opts)
        run.wait()
        t0 = time.perf_counter()
        out["rows_out"] = run.table().height
        out["table"].append(time.perf_counter() - t0)

    wall, cpu = measure(go, repeat)
    return Point(wall, cpu, out["rows_out"], table_wall=statistics.median(out["table"][1:]))


def machine_line() -> str:
    model = "unknown processor"
    try:
        with open("/proc/cpuinfo") as f:
            model = next(ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    mem = ""
    try:
        gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
        mem = f", {gib:.0f} GiB"
    except (ValueError, OSError):
        pass
    return (
        f"{platform.machine()}, {os.cpu_count()} cpus ({model}){mem}; "
        f"Python {platform.python_version()}, Polars {pl.__version__}; "
        f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC"
    )


def table(
    pipe: Pipeline,
    rows: int,
    nat: dict[int, Point],
    pol: dict[int, dict[str, Point]],
    engines: list[str],
) -> None:
    print(f"\n{pipe.title}: {rows:,} rows")
    head = f"  {'workers':>7} | {'native M rows/s':>15} {'wall ns/row':>11} {'CPU ns/row':>10}"
    head += f" {'table() ns/row':>14} {'speed-up':>8}"
    for e in engines:
        head += f" | {'Polars ' + e + ' M rows/s':>27} {'CPU ns/row':>10} {'speed-up':>8}"
        head += f" {'Polars/native':>13}"
    print(head + " | rows out")
    w1 = min(nat)
    for w, p in nat.items():
        line = f"  {w:>7} | {rows / p.wall / 1e6:>15.1f} {p.wall * 1e9 / rows:>11.1f}"
        line += f" {p.cpu * 1e9 / rows:>10.1f} {p.table_wall * 1e9 / rows:>14.1f}"
        line += f" {nat[w1].wall / p.wall:>7.2f}x"
        notes = []
        if p.rows_out != nat[w1].rows_out:
            notes.append(f"MISMATCH: {w1} worker gave {nat[w1].rows_out:,}")
        for e in engines:
            q = pol[w][e]
            line += f" | {rows / q.wall / 1e6:>27.1f} {q.cpu * 1e9 / rows:>10.1f}"
            line += f" {pol[w1][e].wall / q.wall:>7.2f}x {q.wall / p.wall:>12.2f}x"
            if pipe.same_rows and q.rows_out != p.rows_out:
                notes.append(f"MISMATCH: Polars {e} {q.rows_out:,}")
            if q.note:
                notes.append(q.note)
        print(line + f" | {p.rows_out:,}" + ("  " + "; ".join(notes) if notes else ""), flush=True)
    if not pipe.same_rows:
        got = ", ".join(f"{e} {pol[w1][e].rows_out:,}" for e in engines)
        print(f"  (Polars rows out: {got}; late rows and null keys are in its groups)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workers", default="1,2,4,8,16")
    ap.add_argument("--pipelines", default="stateless,keyed-uniform,keyed-zipf,tumbling")
    ap.add_argument("--polars-engines", default="in-memory")
    ap.add_argument("--polars-child", choices=sorted(POLARS_QUERIES), help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    a = ap.parse_args()
    engines = [e for e in a.polars_engines.split(",") if e]
    if a.polars_child:
        return polars_child(a.polars_child, a.data, a.repeat, engines)
    if a.repeat < 3:
        ap.error("--repeat must be >= 3 (each point is a median)")
    unknown = set(a.pipelines.split(",")) - set(PIPELINES)
    if unknown:
        ap.error(f"unknown pipelines {sorted(unknown)}; choices: {', '.join(PIPELINES)}")
    cpus = os.cpu_count() or 1
    workers = sorted({int(w) for w in a.workers.split(",") if int(w) <= cpus})
    if not workers:
        ap.error(f"no worker count <= {cpus} cpus in --workers {a.workers}")
    print("streamcell scaling benchmark: native runtime workers vs Polars threads")
    print(f"machine: {machine_line()}")
    print(
        f"{a.rows:,} rows per point, median of {a.repeat} after a warm-up; workers {workers}; "
        f"load average before {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="streamcell-scaling-") as tmp, Window() as win:
        wanted = [PIPELINES[p] for p in a.pipelines.split(",")]
        inputs: dict[str, pl.DataFrame] = {}
        if any(p.input == "clicks" for p in wanted):
            inputs["clicks"] = clickstream_frame(a.rows)
        if any(p.input != "clicks" for p in wanted):
            inputs.update(keyed_frames(a.rows))
        paths = {}
        for name, df in inputs.items():
            paths[name] = os.path.join(tmp, f"{name}.arrow")
            df.write_ipc(paths[name])
        for pipe in wanted:
            df = inputs[pipe.input]
            nat = {w: native_point(pipe, df, w, a.repeat) for w in workers}
            src = paths[pipe.input]
            pol = {w: polars_points(pipe.polars, src, w, a.repeat, engines) for w in workers}
            table(pipe, df.height, nat, pol, engines)
    print(f"\n{win.line()}")
    if win.noisy:
        print("note: another process took a noticeable share of the cores during the run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
