"""``make bench-spark``: streamcell on Spark against the same query written by hand in PySpark.

One run, one Spark session, one input: the clickstream and store-sales generators are written
once into ``--files`` Parquet files each (a temporary folder). Every workload then runs

- as a streamcell plan with ``engine="spark"`` reading ``sc.parquet(folder)``;
- as hand-written PySpark DataFrame code, the way a Spark user would write the query
  (``spark.read.parquet``, ``groupBy``, ``window`` / ``session_window``, window functions),
  producing the same final table;
- as the same streamcell plan with ``engine="native"`` (2 workers), for reference.

Each variant writes its final result to a Parquet folder (the plan's ``sink parquet``, with
``mode="complete"`` where the engine offers output modes; ``df.write.parquet`` by hand), so
none of them needs to bring the result to the bench process. Before timing, each workload's
result is checked on ``--check-rows`` rows: the streamcell Spark table equals the native one
exactly and the hand-written one (floats to 1e-9 relative; for ``top_k`` workloads, whose ties
SQL leaves open, the ranked values). The check runs also warm Spark's Python workers.

The input has no late rows (``late_fraction=0``): with every event in time order, a Spark
user's ``groupBy(window(...))`` / ``session_window`` is the same query as streamcell's windows
(which would send rows behind the watermark to the late side output).

Each workload first runs ``--warmup`` times unmeasured in both Spark variants (the JVM
compiles a query's hot code during its first runs, and the variant that ran first would pay
for both), then ``--repeat`` measured rounds, the two Spark variants taking turns at going
first.

Printed per workload: wall time of each variant (median of ``--repeat``, runs interleaved),
the CPU seconds the bench process, the driver JVM and Spark's Python workers spent meanwhile
(median; on a shared machine other users' load shows in the wall time, less in the CPU
time) and that CPU time per input row, the ratio hand-written time / streamcell-on-Spark
time (target >= 0.8: streamcell at least 80% of hand-written speed) and the bench process's
peak RSS growth while the streamcell Spark run ran (sampled every 10 ms; target <= 100 MB),
plus the driver JVM's, for information.
The issue's target size is 10M rows (``--rows 10000000``).

    python bench/bench_spark.py [--rows N] [--files N] [--repeat R] [--warmup W] [--check-rows N]
                                [--workloads filter_map,keyed_agg,...] [--master URL | --cluster]

``--cluster`` starts a standalone master and two 1-core workers on this machine (the tests'
``StandaloneCluster``), runs everything there, and stops them.
"""

from __future__ import annotations

import argparse
import inspect
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import polars as pl
from polars.testing import assert_frame_equal

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import streamcell as sc  # noqa: E402
from bench.bench_runtime import _all, _spec, tpcx  # noqa: E402
from streamcell import col  # noqa: E402
from streamcell.options import RunOptions  # noqa: E402
from streamcell.sources import open_source  # noqa: E402

SPARK = RunOptions(engine="spark", display=False)
NATIVE = RunOptions(engine="native", workers=2, display=False)
RATIO_TARGET = 0.8
RSS_TARGET_MB = 100.0


# --------------------------------------------------------------------------- workloads


@dataclass(frozen=True)
class Workload:
    name: str
    data: str  # "clicks" or "sales"
    plan: Callable[[Any], sc.Stream]  # streamcell, from a source spec
    hand: Callable[[Any, str], Any]  # PySpark: (spark, input folder) -> DataFrame
    ranked: str | None = None  # top_k workloads: the ranking column (ties are open)


def _window() -> list[Any]:
    from pyspark.sql import functions as F

    return [F.col("w.start").alias("window_start"), F.col("w.end").alias("window_end")]


def hand_filter_map(spark: Any, path: str) -> Any:
    from pyspark.sql import functions as F

    df = spark.read.parquet(path)
    return df.filter((F.col("event") == "view") & (F.col("price") > 10)).withColumns(
        {"net": F.col("price") * 0.9, "cat2": F.col("category") * 2 + 1}
    )


def hand_keyed_agg(spark: Any, path: str) -> Any:
    from pyspark.sql import functions as F

    return (
        spark.read.parquet(path)
        .groupBy("user_id")
        .agg(F.count("*").alias("n"), F.sum("price").alias("spent"), F.max("price").alias("top"))
    )


def hand_tumbling(spark: Any, path: str) -> Any:
    from pyspark.sql import functions as F

    df = spark.read.parquet(path)
    g = df.groupBy("item_id", F.window("ts", "1 hour").alias("w"))
    g = g.agg(F.count("*").alias("n"), F.sum("price").alias("revenue"))
    return g.select("item_id", *_window(), "n", "revenue")


def hand_sessions(spark: Any, path: str) -> Any:
    from pyspark.sql import functions as F

    df = spark.read.parquet(path).filter(F.col("event") == "view")
    g = df.groupBy("user_id", F.session_window("ts", "30 minutes").alias("w"))
    g = g.agg(F.count("*").alias("views"), F.sum("price").alias("spent"))
    return g.select("user_id", *_window(), "views", "spent")


def _top(df: Any, k: int, by: str) -> Any:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    w = Window.orderBy(F.col(by).desc())
    return df.withColumn("rank", F.row_number().over(w)).filter(F.col("rank") <= k)


def hand_q1(spark: Any, path: str) -> Any:
    from pyspark.sql import functions as F

    df = spark.read.parquet(path).filter(F.col("quantity") > 0)
    g = df.groupBy("item_id", F.window("ts", "1 hour").alias("w"))
    g = g.agg(F.count("*").alias("n"), F.sum("quantity").alias("qty"))
    return _top(g.select("item_id", *_window(), "n", "qty"), 100, "n")


def hand_q2(spark: Any, path: str) -> Any:
    from pyspark.sql import functions as F

    df = spark.read.parquet(path).filter(F.col("event") == "view")
    g = df.groupBy("user_id", F.session_window("ts", "60 minutes").alias("w"))
    g = g.agg(F.count("*").alias("views"), F.count_distinct("item_id").alias("items"))
    g = g.select("user_id", *_window(), "views", "items").filter(F.col("views") > 1)
    return _top(g, 30, "views")


def hand_q3(spark: Any, path: str) -> Any:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    df = spark.read.parquet(path).filter(F.col("event").isin("view", "purchase"))
    upto = Window.partitionBy("user_id").orderBy("ts").rowsBetween(Window.unboundedPreceding, 0)
    df = df.withColumn("last_item", F.last("item_id").over(upto))
    df = df.filter(F.col("event") == "purchase")
    return df.groupBy("last_item").agg(F.count("*").alias("n"))


def hand_q4(spark: Any, path: str) -> Any:
    from pyspark.sql import functions as F

    df = spark.read.parquet(path).withColumns(
        {
            "cart": (F.col("event") == "cart").cast("long"),
            "buy": (F.col("event") == "purchase").cast("long"),
        }
    )
    g = df.groupBy("user_id", F.session_window("ts", "60 minutes").alias("w"))
    g = g.agg(F.count("*").alias("pages"), F.sum("cart").alias("carts"), F.sum("buy").alias("buys"))
    g = g.select("user_id", *_window(), "pages", "carts", "buys")
    return g.filter((F.col("carts") > 0) & (F.col("buys") == 0))


def hand_q15(spark: Any, path: str) -> Any:
    from pyspark.sql import functions as F

    df = spark.read.parquet(path).withColumn("month", F.month("ts").cast("long"))
    df = df.filter(F.col("quantity") > 0)
    return df.groupBy("category", "month").agg(F.sum("net_paid").alias("sales"))


WORKLOADS = [
    Workload(
        "filter_map",
        "clicks",
        lambda s: (
            sc.source(s)
            .filter((col("event") == "view") & (col("price") > 10))
            .with_columns(net=col("price") * 0.9, cat2=col("category") * 2 + 1)
        ),
        hand_filter_map,
    ),
    Workload(
        "keyed_agg",
        "clicks",
        lambda s: (
            sc.source(s)
            .key_by("user_id")
            .agg(n=sc.count(), spent=col("price").sum(), top=col("price").max())
        ),
        hand_keyed_agg,
    ),
    Workload(
        "tumbling",
        "clicks",
        lambda s: (
            sc.source(s)
            .key_by("item_id")
            .tumbling("1h", time="ts")
            .agg(n=sc.count(), revenue=col("price").sum())
        ),
        hand_tumbling,
    ),
    Workload(
        "sessions",
        "clicks",
        lambda s: (
            sc.source(s)
            .filter(col("event") == "view")
            .key_by("user_id")
            .session("30m", time="ts")
            .agg(views=sc.count(), spent=col("price").sum())
        ),
        hand_sessions,
    ),
    Workload("Q1", "sales", lambda s: tpcx("Q1", s), hand_q1, ranked="n"),
    Workload("Q2", "clicks", lambda s: tpcx("Q2", s), hand_q2, ranked="views"),
    Workload("Q3", "clicks", lambda s: tpcx("Q3", s), hand_q3),
    Workload("Q4", "clicks", lambda s: tpcx("Q4", s), hand_q4),
    Workload("Q15", "sales", lambda s: tpcx("Q15", s), hand_q15),
]


# --------------------------------------------------------------------------- measuring


def _rss_kb(pid: int | str = "self") -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _cmdline(pid: str) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


def _driver_jvm() -> int | None:
    """The Spark driver JVM: the java child of this process that PySpark's gateway launched
    through ``spark-submit``."""
    me = os.getpid()
    for e in os.listdir("/proc"):
        if not e.isdigit():
            continue
        try:
            with open(f"/proc/{e}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        if ppid == me and name == "java" and b"deploy.SparkSubmit" in _cmdline(e):
            return int(e)  # the gateway, not a --cluster master or worker
    return None


class PeakRss:
    """Peak resident-set growth of this process (and the driver JVM) over a block,
    sampled every 10 ms by a thread."""

    def __init__(self) -> None:
        self.jvm = _driver_jvm()

    def __enter__(self) -> PeakRss:
        self.base = _rss_kb()
        self.jbase = _rss_kb(self.jvm) if self.jvm else 0
        self.peak, self.jpeak = self.base, self.jbase
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._sample, daemon=True)
        self._t.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.01):
            self.peak = max(self.peak, _rss_kb())
            if self.jvm:
                self.jpeak = max(self.jpeak, _rss_kb(self.jvm))

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, _rss_kb())
        self.growth_mb = (self.peak - self.base) / 1024
        self.jvm_growth_mb = (self.jpeak - self.jbase) / 1024


def tree_cpu_s() -> float:
    """CPU seconds of this process and every process under it (the driver JVM, Spark's
    Python workers), the finished ones included."""
    import psutil

    me = psutil.Process()
    total = 0.0
    for p in [me, *me.children(recursive=True)]:
        try:
            t = p.cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return total


def timed(fn: Callable[[], float]) -> tuple[float, float]:
    """(wall seconds as ``fn`` reports them, CPU seconds of the process tree meanwhile)."""
    c0 = tree_cpu_s()
    wall = fn()
    return wall, tree_cpu_s() - c0


def _has_output_modes() -> bool:
    return "mode" in inspect.signature(sc.Stream.sink_parquet).parameters


def run_plan(w: Workload, path: str, out: str, opts: RunOptions) -> float:
    stream = w.plan(sc.parquet(path))
    if _has_output_modes():  # the final table, as the hand-written query writes it
        plan = sc.combine(stream.sink_parquet(out, mode="complete"))  # type: ignore[call-arg]
    else:
        plan = sc.combine(stream.sink_parquet(out))
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.perf_counter()
    run = plan.start(f"bench_{w.name}_{opts.engine}", options=opts)
    run.wait()
    t = time.perf_counter() - t0
    if run.status != "finished":
        raise RuntimeError(f"{w.name} on {opts.engine}: {run.status}: {run.error}")
    return t


def run_hand(w: Workload, spark: Any, path: str, out: str) -> float:
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.perf_counter()
    w.hand(spark, path).write.mode("overwrite").parquet(out)
    return time.perf_counter() - t0


def check(w: Workload, spark: Any, path: str) -> None:
    """streamcell on Spark == native (exactly) and == hand-written PySpark (same rows)."""
    tables = {}
    for opts in (SPARK, NATIVE):
        run = w.plan(sc.parquet(path)).start(f"check_{w.name}_{opts.engine}", options=opts)
        run.wait()
        if run.status != "finished":
            raise RuntimeError(f"{w.name} on {opts.engine}: {run.status}: {run.error}")
        tables[opts.engine] = run.table()
    got = tables["spark"]
    assert_frame_equal(got, tables["native"], check_exact=True)
    hand = pl.from_arrow(w.hand(spark, path).toArrow())
    assert isinstance(hand, pl.DataFrame)
    if w.ranked:  # ties in the ranking column: any of the tied rows is a right answer
        assert got.height == hand.height, (w.name, got.height, hand.height)
        assert got.sort("rank")[w.ranked].to_list() == hand.sort("rank")[w.ranked].to_list()
        return
    hand = hand.select(got.columns).cast(dict(got.schema))  # type: ignore[arg-type]
    keys = [c for c, t in got.schema.items() if not t.is_float()]
    assert_frame_equal(got.sort(keys), hand.sort(keys), check_exact=False, rel_tol=1e-9)


def write_inputs(root: str, rows: int, files: int) -> dict[str, str]:
    """The generators' rows written once, each into ``files`` Parquet files."""
    frames = {
        "clicks": _all(open_source(_spec(sc.clickstream(rows=rows, seed=1, late_fraction=0.0)))),
        "sales": _all(open_source(_spec(sc.store_sales(rows=rows, seed=1)))),
    }
    paths = {}
    for name, df in frames.items():
        d = os.path.join(root, name)
        os.makedirs(d)
        step = -(-df.height // files)
        for i in range(files):
            df.slice(i * step, step).write_parquet(os.path.join(d, f"part-{i:05d}.parquet"))
        paths[name] = d
    return paths


# --------------------------------------------------------------------------- main


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--files", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--check-rows", type=int, default=4000)
    ap.add_argument("--workloads", default=",".join(w.name for w in WORKLOADS))
    ap.add_argument("--master", default=None, help="a Spark master URL (default: local[2])")
    ap.add_argument(
        "--cluster",
        action="store_true",
        help="start a standalone master + 2 one-core workers here (the tests' fixture) and use it",
    )
    ap.add_argument(
        "--warmup",
        type=int,
        default=1,
        help="unmeasured runs of both variants per workload first (0: measure cold runs)",
    )
    ap.add_argument("--no-native", action="store_true")
    a = ap.parse_args()
    chosen = [w for w in WORKLOADS if w.name in a.workloads.split(",")]
    from streamcell.backends.spark.session import current_master, get_session

    cluster = None
    if a.cluster:
        from tests.spark.cluster import StandaloneCluster

        cluster = StandaloneCluster(workers=2, cores=1, memory="1g").start()
        sc.configure_spark(cluster.master_url, conf=cluster.session_conf())
    elif a.master:
        sc.configure_spark(a.master)
    root = tempfile.mkdtemp(prefix="streamcell-bench-spark-")
    try:
        t0 = time.perf_counter()
        spark = get_session()
        startup = time.perf_counter() - t0
        small = write_inputs(os.path.join(root, "check"), a.check_rows, a.files)
        t0 = time.perf_counter()
        big = write_inputs(os.path.join(root, "input"), a.rows, a.files)
        print(
            f"streamcell engine='spark' vs hand-written PySpark (same session: "
            f"{current_master()}, Spark {spark.version}) vs native (2 workers); "
            f"{a.rows:,} rows in {a.files} Parquet files per input (written in "
            f"{time.perf_counter() - t0:.1f} s); {a.warmup} unmeasured run(s) of each, then "
            f"median of {a.repeat} (which runs first alternates); {os.cpu_count()} cpus; "
            f"Spark start-up {startup:.1f} s; sinks: parquet"
            f"{' (mode=complete)' if _has_output_modes() else ' (the engine has no output modes: append)'}",
            flush=True,
        )
        results = []
        for w in chosen:
            check(w, spark, small[w.data])
            path, out = big[w.data], os.path.join(root, "out", w.name)
            ts, th, tn, rss, jrss = [], [], [], [], []
            for _ in range(a.warmup):  # the JVM compiles each query's hot code on its first runs
                run_plan(w, path, out + "-spark", SPARK)
                run_hand(w, spark, path, out + "-hand")
            for k in range(a.repeat):

                def streamcell(
                    w: Workload = w,
                    p: str = path,
                    o: str = out,
                    got: tuple[list, ...] = (ts, rss, jrss),
                ) -> None:
                    with PeakRss() as m:
                        got[0].append(timed(lambda: run_plan(w, p, o + "-spark", SPARK)))
                    got[1].append(m.growth_mb)
                    got[2].append(m.jvm_growth_mb)

                def hand(w: Workload = w, p: str = path, o: str = out, th: list = th) -> None:
                    th.append(timed(lambda: run_hand(w, spark, p, o + "-hand")))

                for variant in (streamcell, hand) if k % 2 == 0 else (hand, streamcell):
                    variant()
                if not a.no_native:
                    tn.append(run_plan(w, path, out + "-native", NATIVE))

            def med(xs: list[tuple[float, float]], k: int) -> float:
                return statistics.median(x[k] for x in xs)

            r = (
                w.name,
                med(ts, 0),
                med(th, 0),
                statistics.median(tn) if tn else None,
                max(rss),
                max(jrss),
                med(ts, 1),
                med(th, 1),
            )
            results.append(r)
            print(
                f"  {w.name}: checked on {a.check_rows:,} rows; spark "
                f"{' '.join(f'{x[0]:.2f}' for x in ts)} s, hand-written "
                f"{' '.join(f'{x[0]:.2f}' for x in th)} s",
                flush=True,
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)
        if cluster is not None:
            sc.configure_spark()
            cluster.stop()
    report(results, a.rows)
    return 0


def report(results: list[tuple[Any, ...]], rows: int) -> None:
    head = (
        f"{'workload':<11} {'spark s':>8} {'hand s':>8} {'native s':>9} "
        f"{'hand/spark':>11} {'>=0.8':>6} {'spark cpu s':>12} {'hand cpu s':>11} "
        f"{'spark ns/row':>13} {'hand ns/row':>12} "
        f"{'driver RSS +MB':>15} {'<=100':>6} {'JVM RSS +MB':>12}"
    )
    print()
    print(head)
    print("-" * len(head))
    met_all = True
    for name, s, h, n, rss, jrss, cs, ch in results:
        ratio = h / s
        ok_r, ok_m = ratio >= RATIO_TARGET, rss <= RSS_TARGET_MB
        met_all = met_all and ok_r and ok_m
        ns = f"{n:.2f}" if n is not None else "-"
        print(
            f"{name:<11} {s:>8.2f} {h:>8.2f} {ns:>9} {ratio:>10.3f}x "
            f"{'yes' if ok_r else 'NO':>6} {cs:>12.2f} {ch:>11.2f} "
            f"{cs * 1e9 / rows:>13.0f} {ch * 1e9 / rows:>12.0f} "
            f"{rss:>15.1f} {'yes' if ok_m else 'NO':>6} {jrss:>12.1f}"
        )
    print()
    print(
        f"targets ({rows:,} rows): engine='spark' >= {RATIO_TARGET}x hand-written speed and "
        f"driver RSS growth <= {RSS_TARGET_MB:.0f} MB on every workload: "
        f"{'met' if met_all else 'NOT met'} (the issue's size is 10M rows)"
    )


if __name__ == "__main__":
    sys.exit(main())
