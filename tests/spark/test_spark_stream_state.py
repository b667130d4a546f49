"""Streaming state on Spark: windows on a watched folder close where the reference closes
them, and stopping a run with keyed state in the state store is prompt and complete.

Both compare with the reference engine on the same input: a windowed run on a stream never
reaches an end of input, so what it emits is the reference's output up to the last
watermark (windows still open stay in the state store, for a restart to continue)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import streamcell as sc
from streamcell.options import RunOptions
from tests.helpers import outputs, run_plan

pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark

REF = RunOptions(engine="reference", display=False)
SCHEMA = {"k": "str", "t": "int", "v": "int"}
LATENESS = 4


def spark(tmp_path: Path) -> RunOptions:
    return RunOptions(
        engine="spark",
        display=False,
        trigger_interval=0.2,
        checkpoint_dir=str(tmp_path / "checkpoint"),
    )


def until(cond, timeout: float = 180.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def put(folder: Path, name: str, text: str) -> None:
    tmp = folder.parent / f".{name}.tmp"
    tmp.write_text(text)
    os.rename(tmp, folder / name)


def rows(start: int, n: int) -> str:
    """Rows with event times mostly rising, some late (far behind), and a null time."""
    out = []
    for i in range(start, start + n):
        t = i * 2 + (i * 7) % 5
        if i % 11 == 5:
            t -= 25  # late: behind the watermark by more than the lateness
        out.append(f"k{(i * 3) % 4},{'' if i % 17 == 9 else t},{(i * 13) % 10}\n")
    return "k,t,v\n" + "".join(out)


WINDOWS = {
    "tumbling": lambda s: s.key_by("k").tumbling(10, time="t", lateness=LATENESS),
    "sliding": lambda s: s.key_by("k").sliding(12, every=4, time="t", lateness=LATENESS),
    "session": lambda s: s.key_by("k").session(3, time="t", lateness=LATENESS),
}


def window_plan(kind: str, src: sc.plan.SourceSpec) -> sc.Stream:
    return WINDOWS[kind](sc.source(src)).agg(
        n=sc.count(), total=sc.col("v").sum(), first=sc.col("v").first()
    )


@pytest.mark.parametrize("kind", list(WINDOWS))
def test_windows_on_a_watched_folder_close_as_on_the_reference(tmp_path: Path, kind: str) -> None:
    d = tmp_path / "in"
    d.mkdir()
    put(d, "f0.csv", rows(0, 60))
    run = window_plan(kind, sc.watch(str(d), format="csv", schema=SCHEMA)).start(
        f"win_{kind}", options=spark(tmp_path)
    )
    until(lambda: run.progress()["rows_in"] > 0 or run.done())
    assert run.status == "running", run.error
    q = run.streaming_query
    for i in (1, 2):  # each file its own micro-batch: open windows carry in the state store
        put(d, f"f{i}.csv", rows(i * 60, 60))
        q.processAllAvailable()
    run.stop()
    assert run.status == "stopped", run.error
    ref = run_plan(window_plan(kind, sc.csv(str(d), schema=SCHEMA)).plan(), REF)
    want = outputs(ref)
    ts = pl.concat([pl.read_csv(f, schema_overrides={"t": pl.Int64}) for f in sorted(d.iterdir())])
    wm = int(ts["t"].max()) - LATENESS  # the engine's watermark after the last row
    # the reference emits every window it closes by the watermark before those it flushes at
    # the end of its finite input: those are exactly the ones ending at or before wm
    closed = next(iter(want["tables"].values())).filter(pl.col("window_end") <= wm)
    got = outputs(run)
    table = next(iter(got["tables"].values()))
    assert table.height > 0 and closed.height < next(iter(want["tables"].values())).height
    assert_frame_equal(table, closed)
    assert_frame_equal(got["late"], want["late"], check_column_order=False)
    assert_frame_equal(got["dead"], want["dead"])
    assert got["late"].height > 0 and got["dead"].height > 0
    counts, ref_counts = got["counts"], want["counts"]
    agg = run.plan.steps[1].step_id
    for c in ("filtered", "late", "dead"):
        assert counts[c].to_list() == ref_counts[c].to_list(), c
    # the sink (last step) takes the windows closed so far; the reference's also the flushed
    assert counts["rows_in"][:-1].to_list() == ref_counts["rows_in"][:-1].to_list()
    assert counts["rows_in"][-1] == closed.height
    out = dict(zip(counts["step"], counts["rows_out"]))
    assert out[agg] == closed.height
    assert len(q.recentProgress) >= 3


def test_stop_is_prompt_with_keyed_state(tmp_path: Path) -> None:
    """A rate-driven keyed aggregate, stopped after a few micro-batches: stop() returns with
    the run stopped and no streaming query left in Spark; what was delivered equals the
    reference on that many generator rows."""
    from streamcell.backends.spark.session import get_session

    def plan(src: sc.plan.SourceSpec) -> sc.Stream:
        return (
            sc.source(src, rate=300 if src.arg("rows") is None else None)
            .key_by("user_id")
            .agg(n=sc.count(), spent=sc.col("price").sum())
        )

    run = plan(sc.clickstream(rows=None, seed=8)).start("stop_keyed", options=spark(tmp_path))

    def batches() -> int:
        q = run.streaming_query
        return 0 if q is None else sum(1 for p in q.recentProgress if p.numInputRows > 0)

    until(lambda: batches() >= 2 or run.done())
    assert run.status == "running", run.error
    t0 = time.monotonic()
    run.stop()
    took = time.monotonic() - t0
    print(f"stop() returned in {took:.2f} s")
    assert run.status == "stopped", run.error
    assert run.error is None
    assert get_session().streams.active == []
    assert took < 30, f"stop() took {took:.1f} s"  # a generous functional bound
    n = run.progress()["rows_in"]
    assert n > 0
    want = run_plan(plan(sc.clickstream(rows=n, seed=8)).plan(), REF)
    assert_frame_equal(run.table(), want.table())
