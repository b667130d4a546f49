"""The notebook (driver) process's peak memory growth during a finite Spark run (issue 19).

``make bench-spark-memory`` (10M and 50M rows, ``spark.driver.memory=1g``). Writes N generated clickstream rows as 8 Parquet files, then, in
a fresh Python process per measurement (so peaks do not mix), runs:

- ``streamcell``: a ``%%stream``-style plan with ``engine="spark"`` over the files (filter,
  with_columns), once to a table sink (then ``run.table(limit=10)``) and once to a Parquet
  sink; and a keyed ``agg`` to a ``mode="complete"`` Parquet sink at the smallest size;
- ``pyspark``: the same filter / projection written by hand in PySpark
  (``spark.read.parquet(...).filter(...).write.parquet(...)``): the baseline, same run;
- with ``--before PATH``: the streamcell plans again with another checkout's ``kernel/``
  on ``sys.path`` (e.g. the code before this change), for a before / after table.

Growth is the Python process's peak resident set (``VmHWM`` of ``/proc/self/status``, reset
with ``/proc/self/clear_refs`` after the session is warm) minus its resident set before the
run, in MB. The Spark JVM is a separate process and not counted (it is Spark's, sized by
``spark.driver.memory``).

    python bench/bench_spark_driver_memory.py [--rows 10000000,50000000] [--driver-memory 1g]
        [--before PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r"""
import json, os, sys, time
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
import streamcell as sc
from streamcell.backends.spark.session import get_session

def status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024

def reset_peak():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")

kind, data, out, driver_memory = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
if driver_memory:  # the JVM's heap: a run must complete within it
    sc.configure_spark(conf={"spark.driver.memory": driver_memory})
spark = get_session()
assert not driver_memory or spark.conf.get("spark.driver.memory") == driver_memory
warm = sc.source(sc.clickstream(rows=10)).plan()
sc.start(warm, name="warm", engine="spark", display=False).wait()
import gc; gc.collect()
reset_peak()
before = status("VmRSS")
t0 = time.perf_counter()
if kind == "pyspark":
    from pyspark.sql import functions as F
    df = spark.read.parquet(data).filter(F.col("price") > 5).withColumn("total", F.col("price") * 2)
    df.write.mode("overwrite").parquet(out)
    rows = None
else:
    s = sc.source(sc.parquet(data)).filter(sc.col("price") > 5)
    if kind == "agg":
        s = s.key_by("category").agg(n=sc.count(), spent=sc.sum("price"))
        plan = sc.combine(s.sink_parquet(out, mode="complete"))
    else:
        s = s.with_columns(total=sc.col("price") * 2)
        plan = sc.combine(s.sink_table("t") if kind == "table" else s.sink_parquet(out))
    run = sc.start(plan, name="m", engine="spark", display=False).wait()
    rows = int(run.counts()["rows_in"][-1])
    if kind == "table":
        if "limit" in run.table.__code__.co_varnames:
            run.table(limit=10)
        else:  # the code before run.table(limit=): a table is already in the notebook
            run.table().head(10)
secs = time.perf_counter() - t0
print(json.dumps({"growth_mb": status("VmHWM") - before, "secs": secs, "sink_rows": rows}))
"""


def write_data(d: str, rows: int, files: int = 8) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    sys.path.insert(0, os.path.join(HERE, "kernel"))
    from streamcell.plan import clickstream
    from streamcell.sources import GeneratorReader

    reader = GeneratorReader(clickstream(rows=rows, seed=1))
    per = rows // files
    batches: list[pa.RecordBatch] = []
    n, k = 0, 0
    for b in reader.arrow_batches():
        batches.append(b)
        n += b.num_rows
        while n >= per and k < files - 1:
            t = pa.Table.from_batches(batches)
            pq.write_table(t.slice(0, per), os.path.join(d, f"part-{k:02d}.parquet"))
            rest = t.slice(per)
            batches, n, k = rest.to_batches(), rest.num_rows, k + 1
    pq.write_table(pa.Table.from_batches(batches), os.path.join(d, f"part-{k:02d}.parquet"))


def measure(kernel: str, kind: str, data: str, out: str, driver_memory: str = "") -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=kernel)
    p = subprocess.run(
        [sys.executable, "-c", CHILD, kind, data, out, driver_memory],
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    lines = [x for x in p.stdout.splitlines() if x.startswith("{")]
    if p.returncode or not lines:  # reported in the table (the old code fails at 8M rows)
        why = [x for x in p.stderr.splitlines() if "Error" in x and not x.startswith("\t")]
        return {"error": (why[-1] if why else p.stderr[-200:]).strip()[:160]}
    return json.loads(lines[-1])  # type: ignore[no-any-return]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", default="2000000,8000000")
    ap.add_argument("--before", default=None, help="another checkout's kernel/ to compare")
    ap.add_argument("--agg", action="store_true", help="also a keyed agg at the smallest size")
    ap.add_argument(
        "--before-kinds",
        default="table,parquet",
        help="workloads run on --before (its Parquet sink holds every row in the notebook)",
    )
    ap.add_argument(
        "--driver-memory",
        default="1g",
        help="spark.driver.memory of every run (the issue's bar: a 50M-row run within 1g)",
    )
    args = ap.parse_args()
    dm = args.driver_memory
    sizes = [int(x) for x in args.rows.split(",")]
    codes = [("after", os.path.join(HERE, "kernel"))]
    if args.before:
        codes.insert(0, ("before", args.before))
    print(
        f"# spark.driver.memory={dm or 'default'}; growth: the notebook process's peak RSS - RSS before"
    )
    print(
        f"{'rows':>10} {'code':>7} {'workload':>22} {'growth MB':>10} {'secs':>7} {'vs pyspark (MB)':>16}"
    )
    for rows in sizes:
        with tempfile.TemporaryDirectory(prefix="sc-rss-") as tmp:
            data = os.path.join(tmp, "in")
            os.makedirs(data)
            t0 = time.perf_counter()
            write_data(data, rows)
            print(f"# {rows:,} rows in 8 Parquet files written in {time.perf_counter() - t0:.1f} s")
            base = measure(codes[-1][1], "pyspark", data, os.path.join(tmp, "base"), dm)
            print(
                f"{rows:>10,} {'-':>7} {'hand-written pyspark':>22} "
                f"{base['growth_mb']:>10.1f} {base['secs']:>7.1f} {'+0.0':>16}"
            )
            kinds = ["table", "parquet"] + (["agg"] if args.agg and rows == sizes[0] else [])
            for code, kernel in codes:
                for kind in kinds:
                    if code == "before" and kind not in args.before_kinds.split(","):
                        continue
                    r = measure(kernel, kind, data, os.path.join(tmp, f"{code}-{kind}"), dm)
                    if "error" in r:
                        print(f"{rows:>10,} {code:>7} {kind:>22} failed: {r['error']}")
                        continue
                    # hand-written PySpark grows by ~0 MB: a ratio to it is meaningless, so
                    # the table shows the difference in MB
                    extra = r["growth_mb"] - base["growth_mb"]
                    label = {"table": "filter+map -> table", "parquet": "filter+map -> parquet",
                             "agg": "agg -> parquet complete"}[kind]  # fmt: skip
                    print(
                        f"{rows:>10,} {code:>7} {label:>22} {r['growth_mb']:>10.1f} "
                        f"{r['secs']:>7.1f} {extra:>+16.1f}"
                    )


if __name__ == "__main__":
    main()
