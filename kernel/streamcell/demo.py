"""The flagship demo, headless: ``python -m streamcell.demo`` (what ``make demo`` runs).

Clickstream → keep product views → key by user → 30-minute sessions → per-session pages,
distinct items and spend; a live progress line (rows/s, rows done, elapsed) while it runs;
a short summary at the end.
"""

from __future__ import annotations

import argparse
import sys
import time

import polars as pl

import streamcell as sc
from streamcell import fmt
from streamcell.snapshot import metrics_snapshot

PIPELINE = """\
source clickstream(rows={rows}, users={users}, seed=1)
filter event == "view" and user_id.is_not_null()
key_by user_id
session gap="30m", time=ts
agg pages=count(), items=count_distinct(item_id), spent=sum(price), last_item=last(item_id)
sink table
"""


def _bar(done: int, total: int, width: int = 24) -> str:
    frac = 0.0 if total == 0 else min(1.0, done / total)
    full = int(frac * width)
    return "█" * full + "░" * (width - full)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=300_000)
    ap.add_argument("--users", type=int, default=5_000)
    ap.add_argument("--engine", default="auto")
    args = ap.parse_args(argv)

    text = PIPELINE.format(rows=args.rows, users=args.users)
    print("%%stream sessions")
    print(text)
    plan = sc.parse(text, name="sessions")
    run = plan.start(engine=args.engine)
    tty = sys.stdout.isatty()
    last_print = 0.0
    while not run.done():
        run.wait(0.2)
        s = metrics_snapshot(run, detail=False)
        now = time.monotonic()
        line = (
            f"{_bar(s.rows_in, args.rows)} {fmt.count(s.rows_in):>10} / {fmt.count(args.rows)} rows"
            f"  {fmt.rate(s.rows_per_s):>14}  {fmt.elapsed(s.elapsed_s):>7}  [{s.status}]"
        )
        if tty:
            print("\r" + line, end="", flush=True)
        elif now - last_print >= 1.0:
            print(line, flush=True)
            last_print = now
    run.wait()
    s = metrics_snapshot(run, detail=False)
    print(
        ("\r" if tty else "")
        + f"{_bar(1, 1)} {fmt.count(s.rows_in):>10} rows in {fmt.elapsed(s.elapsed_s)} "
        f"(avg {fmt.rate(s.avg_rows_per_s)})  [{s.status}]"
    )

    sessions = run.table()
    summary = sessions.select(
        pl.len().alias("sessions"),
        pl.col("user_id").n_unique().alias("distinct_users"),
        pl.col("pages").mean().round(2).alias("pages_per_session"),
        pl.col("items").mean().round(2).alias("distinct_items_per_session"),
        pl.col("spent").sum().round(2).alias("total_spent"),
    )
    with pl.Config(tbl_hide_dataframe_shape=True, tbl_width_chars=120):
        print("\nSummary")
        print(summary)
        print("\nTop sessions by spend")
        print(sessions.sort("spent", descending=True).head(5))
        print("\nWhere every row went (rows_in = consumed + filtered + late + dead)")
        print(run.counts())
    counts = run.counts()
    ok = all(
        r["rows_in"] == r["consumed"] + r["filtered"] + r["late"] + r["dead"]
        for r in counts.iter_rows(named=True)
    )
    print(
        f"\nlate rows (side output): {run.late().height:,}   dead letters: {run.dead_letters().height:,}"
        f"   conservation: {'ok' if ok else 'VIOLATED'}"
    )
    return 0 if ok and run.status == "finished" else 1


if __name__ == "__main__":
    sys.exit(main())
