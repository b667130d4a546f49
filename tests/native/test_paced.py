"""A throttled source on the native engine. A paced chain's operators size their batches for
the rows the pacer pushes (lowering.paced_batches: the rows due in 200 us, cut into one batch
per worker once there are at least 4,096 of them; at least 1,024), and the fused stage gives a
gathered output its rows would fill less than half of exactly their room (checked in C by
native/tests/test_select.c, also under ASan), so such outputs reach the sink without a copy.
Here: every shape of pipeline stays equal to the reference, at a rate whose batches are
smaller than 1,024 rows, at one whose batches are a few thousand and at one whose pushes are
split among the workers, and lowering gives the capacities it should."""

from __future__ import annotations

import os
import threading
import time

import polars as pl
import pytest

import streamcell as sc
from streamcell import col
from streamcell.backends.native.lowering import (
    PACED_MIN_ROWS,
    PACED_SPLIT_ROWS,
    lower,
    paced_batches,
    paced_rows,
)
from streamcell.compiler import compile_plan
from streamcell.options import RunOptions
from tests.helpers import check_against_reference

ROWS = 30_000


SHAPES = {
    # about 1 row in 10 kept: outputs fill a tenth of their batch, so they get exact room
    "selective filter": lambda s: s.filter(col("price") > 90.0).with_columns(
        total=col("price") * 1.1, tag=col("event") + "!"
    ),
    # most rows kept: the output takes the scratch batches' columns as they are
    "wide filter": lambda s: s.filter(col("price") > 5.0).with_columns(
        total=col("price") * 1.1 + (col("item_id") % 7), cheap=col("price") < 50.0
    ),
    "every row": lambda s: s.with_columns(total=col("price") * 2.0),
    "keyed agg": lambda s: s.key_by("user_id").agg(n=sc.count(), s=col("price").sum()),
    "tumbling": lambda s: (
        s.key_by("user_id").tumbling("1m", time="ts").agg(n=sc.count(), s=col("price").sum())
    ),
    "filter then keyed": lambda s: (
        s.filter(col("event") == "view").key_by("item_id").agg(n=sc.count(), top=col("price").max())
    ),
}


@pytest.mark.parametrize(
    "rate", [2_000_000, 20_000_000, 60_000_000], ids=["rate-2M", "rate-20M", "rate-60M"]
)
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_paced_run_equals_the_reference(shape, rate):
    src = sc.source(sc.clickstream(rows=ROWS, users=500, seed=11), rate=rate)
    plan = SHAPES[shape](src).plan(f"paced_{shape.replace(' ', '_')}")
    got = check_against_reference(plan, RunOptions(engine="native", workers=2, display=False))
    assert next(iter(got["tables"].values())).height > 0


@pytest.mark.parametrize(
    ("rate", "workers", "expected"),
    [
        (2_000_000, 2, PACED_MIN_ROWS),
        (20_000_000, 2, 4_000),  # 4,000 rows per push: too few to split
        (60_000_000, 1, 12_000),
        (60_000_000, 2, 6_000),  # 12,000 rows per push, one batch per worker
        (60_000_000, 4, 3_000),  # four batches of at least 2,048 rows
        (500_000_000, 1, 16_384),
        (500_000_000, 2, 8_192),
        (None, 2, 16_384),
    ],
)
def test_operators_size_their_batches_for_what_a_paced_source_pushes(rate, workers, expected):
    s = sc.source(pl.DataFrame({"x": [1.0, 2.0]}), rate=rate).filter(col("x") > 1.0)
    opts = RunOptions(engine="native", batch_size=16_384, workers=workers)
    low = lower(compile_plan(s.plan("sized")), opts)
    assert {a["capacity"] for _, a in low.ops} == {expected}


@pytest.mark.parametrize("rate", [1_000, 2_000_000, 20_480_000, 60_000_000, 1e9])
@pytest.mark.parametrize("workers", [1, 2, 3, 16])
def test_a_split_push_covers_the_rows_due_in_one_interval(rate, workers):
    rows = paced_rows(rate, 16_384)
    per, parts = paced_batches(rate, 16_384, workers)
    assert 1 <= parts <= workers
    assert per * parts >= rows > per * (parts - 1)  # every row of the push, no empty batch
    assert parts == 1 or per >= PACED_SPLIT_ROWS


def test_a_paced_source_of_a_dag_keeps_the_batch_size():
    # the DAG driver pushes a paced source's rows in phases of its own size
    a = sc.source(pl.DataFrame({"x": [1.0, 2.0]}), rate=2_000_000, name="a")
    b = sc.source(pl.DataFrame({"x": [3.0]}), name="b")
    plan = a.union(b).filter(col("x") > 1.0).plan("dag")
    assert not plan.is_chain()
    low = lower(compile_plan(plan), RunOptions(engine="native", batch_size=16_384))
    assert {a["capacity"] for _, a in low.ops} == {16_384}
    assert paced_rows(2_000_000, 16_384) == 400 < PACED_MIN_ROWS


def test_the_batches_of_a_push_go_in_together_when_the_first_is_due():
    # the pacer's schedule (paced_due_ns): batch_size 100, bursts of 2, 1,000 rows/s: rows
    # 0-199 go in at 0 s, 200-399 at 0.2 s, whichever chunk of the source holds them (groups
    # count from row 0, not from a chunk's first row); no row before it is due, none more than
    # a burst early
    from streamcell._runtime import paced_due_ns

    t0 = 5_000
    assert [paced_due_ns(t0, r, 100, 2, 1000.0) for r in (0, 100, 150, 200, 300, 400)] == [
        t0,
        t0,
        t0,
        t0 + 200_000_000,
        t0 + 200_000_000,
        t0 + 400_000_000,
    ]
    for row in range(0, 1000, 37):
        due = paced_due_ns(t0, row, 100, 2, 1000.0)
        own = paced_due_ns(t0, row, 1, 1, 1000.0)  # the row's own due time
        assert own - 200_000_000 < due <= own
        assert paced_due_ns(t0, row, 100, 1, 1000.0) == t0 + (row - row % 100) * 1_000_000
    with pytest.raises(ValueError):
        paced_due_ns(t0, 0, 100, 0, 1000.0)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_paced_run_pushes_each_interval_as_one_batch_per_worker(monkeypatch, workers):
    # 60,000 rows at 60M rows/s: 12,000 rows are due every 200 us, cut into one batch of
    # 6,000 per worker with 2 workers, pushed in bursts of 2; with 1 worker, whole
    from streamcell.backends.native import drivers

    calls: list[tuple[int, int]] = []
    pushed: list[int] = []

    class Recording:
        def __init__(self, prog):
            self.prog = prog

        def pace(self, rate, batch_size, burst, *args):
            calls.append((batch_size, burst))
            return self.prog.pace(rate, batch_size, burst, *args)

        def push_many(self, *args, **kw):
            pushed.append(args[2])
            return self.prog.push_many(*args, **kw)

        def __getattr__(self, name):
            return getattr(self.prog, name)

    build = drivers.build
    monkeypatch.setattr(drivers, "build", lambda *a: Recording(build(*a)))
    df = pl.DataFrame({"x": [float(i) for i in range(60_000)]})
    plan = sc.source(df, rate=60_000_000).filter(col("x") >= 0.0).plan(f"bursts{workers}")
    run = sc.start(plan, options=RunOptions(engine="native", workers=workers, display=False))
    run.wait()
    assert run.table().height == 60_000
    per = 12_000 // workers
    assert calls == [(per, workers)] and not pushed  # the pacer pushes every row
    op = run.native_metrics["ops"][0]
    assert op["rows_in"] == 60_000
    assert op["rows_in"] / op["batches_in"] <= per < 2 * op["rows_in"] / op["batches_in"]


def _worker_cores() -> list[tuple[str, str]]:
    """(thread id, the cores it may use: its ``Cpus_allowed_list``) of each running sc-worker
    thread of this process."""
    out = []
    for t in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{t}/comm") as f:
                if f.read().strip() != "sc-worker":
                    continue
            with open(f"/proc/self/task/{t}/status") as f:
                out += [(t, ln.split()[1]) for ln in f if ln.startswith("Cpus_allowed_list")]
        except OSError:  # the thread ended meanwhile
            pass
    return out


@pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs at least 2 cores",
)
def test_a_paced_runs_workers_keep_to_separate_cores():
    # runtime/pool.h, sc_pool_spread: a paced run's 2 workers each get half of the process's
    # cores (none in common); an unthrottled run's keep them all
    allowed = os.sched_getaffinity(0)
    df = pl.DataFrame({"x": [float(i) for i in range(400_000)]})

    def cores_while(rate):
        # every affinity seen, and each worker thread's last one: a paced run spreads its
        # workers once they have started (exec/program.c, sc_prog_spread), so a poll in the
        # run's first microseconds may see a worker still on every core
        seen: set[str] = set()
        last: dict[str, str] = {}
        plan = sc.source(df, rate=rate).filter(col("x") >= 0.0).plan(f"cores{bool(rate)}")
        done = threading.Event()

        def poll():
            while not done.is_set():
                for tid, spec in _worker_cores():
                    seen.add(spec)
                    last[tid] = spec
                time.sleep(0.002)

        th = threading.Thread(target=poll)
        th.start()
        try:
            # a bulk run is over in milliseconds, and a poll can miss all of its workers: it
            # runs again (at least 50 times) until the poller has seen them, for at most 30 s
            start, runs = time.monotonic(), 0
            while True:
                sc.start(plan, options=RunOptions(engine="native", workers=2, display=False)).wait()
                runs += 1
                if rate or (runs >= 50 and seen) or time.monotonic() - start > 30:
                    break
        finally:
            done.set()
            th.join()
        return seen, last

    def cpus(spec: str) -> set[int]:
        got: set[int] = set()
        for part in spec.split(","):
            lo, _, hi = part.partition("-")
            got.update(range(int(lo), int(hi or lo) + 1))
        return got

    _, last = cores_while(400_000)  # one second
    paced = [cpus(s) for s in last.values()]
    assert len(paced) == 2 and not paced[0] & paced[1] and paced[0] | paced[1] == allowed
    bulk = [cpus(s) for s in cores_while(None)[0]]
    assert bulk and all(c == allowed for c in bulk)
