"""A streaming keyed aggregate over a watched folder into a Parquet sink, run as its own
driver process by ``test_spark_restart.py`` (which kills it with SIGKILL and starts it
again on the same checkpoint).

Usage: ``python -m tests.spark.restart_driver IN OUT CHECKPOINT``. Prints ``running`` once
the query is started; stops the run and exits 0 when the file ``OUT.stop`` appears."""

from __future__ import annotations

import os
import sys
import time

import streamcell as sc
from streamcell.options import RunOptions

SCHEMA = {"k": "str", "v": "int"}


def pipeline(src: sc.plan.SourceSpec) -> sc.Stream:
    return (
        sc.source(src)
        .filter(sc.col("v") % 7 != 3)
        .key_by("k")
        .agg(n=sc.count(), total=sc.col("v").sum(), last=sc.col("v").last())
    )


def main(folder: str, out: str, checkpoint: str) -> int:
    options = RunOptions(
        engine="spark", display=False, trigger_interval=0.2, checkpoint_dir=checkpoint
    )
    plan = sc.combine(pipeline(sc.watch(folder, format="csv", schema=SCHEMA)).sink_parquet(out))
    run = plan.start("restart", options=options)
    print("running", flush=True)
    while not os.path.exists(out + ".stop"):
        if run.done():
            print(f"ended: {run.status} {run.error!r}", flush=True)
            return 1
        time.sleep(0.1)
    t0 = time.monotonic()
    run.stop(timeout=120)  # prompt stops are test_spark_stream_state's; this one is loaded
    print(f"stopped: {run.status} in {time.monotonic() - t0:.2f} s {run.error!r}", flush=True)
    return 0 if run.status == "stopped" else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
