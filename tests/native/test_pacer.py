"""A throttled source's rows go in on the pacer's thread (exec/pacer.h; the driver's
``_feed_paced``) while the driver takes the outputs. Here: a pause in the middle of a chunk
loses and repeats nothing, a stop counts exactly the rows that went in, bad rows between
chunks stay dead letters at their place, and a run ends with no pacer left. Timing is never
asserted: rates are chosen so that a pause or stop falls inside the run."""

from __future__ import annotations

import time
from pathlib import Path

import polars as pl
from polars.testing import assert_frame_equal

import streamcell as sc
from streamcell import col
from streamcell.options import RunOptions
from tests.helpers import check_against_reference, until

NATIVE = RunOptions(engine="native", workers=2, display=False)



def _frame(n: int) -> pl.DataFrame:
    return pl.DataFrame({"i": range(n), "x": [float(i % 97) for i in range(n)]})


def test_a_pause_in_the_middle_of_a_chunk_loses_and_repeats_nothing() -> None:
    # 300,000 rows at 400,000 rows/s: chunks of 64K rows and more, each pushed over a
    # sixth of a second or longer, so the pause halts the pacer inside one
    df = _frame(300_000)
    plan = sc.source(df, rate=400_000).with_columns(y=col("x") * 2.0).plan("pacer_pause")
    run = sc.start(plan, options=NATIVE)
    assert until(lambda: run.progress()["rows_in"] >= 50_000)
    run.pause()
    assert until(lambda: run.status == "paused")
    n = run.progress()["rows_in"]
    time.sleep(0.2)
    assert run.progress()["rows_in"] == n < 300_000  # nothing goes in while paused
    run.resume()
    run.wait(60)
    assert run.status == "finished"
    assert run.progress()["rows_in"] == 300_000
    assert_frame_equal(run.table(), df.with_columns(y=pl.col("x") * 2.0))


def test_a_stop_counts_exactly_the_rows_that_went_in() -> None:
    df = _frame(2_000_000)
    plan = sc.source(df, rate=1_000_000).filter(col("x") > 10.0).plan("pacer_stop")
    run = sc.start(plan, options=NATIVE)
    assert until(lambda: run.progress()["rows_in"] >= 100_000)
    run.stop()
    assert run.status == "stopped"
    got = run.progress()["rows_in"]
    pushed = run.native_metrics["ops"][0]["rows_in"]  # what the runtime received
    assert 100_000 <= got == pushed < 2_000_000


def test_bad_rows_between_chunks_stay_at_their_place(tmp_path: Path) -> None:
    lines = ["i,x"]
    for i in range(12_000):
        lines.append(f"{i},{i % 13}.5" if i % 2_500 != 7 else f"{i},not a number")
    path = tmp_path / "paced.csv"
    path.write_text("\n".join(lines) + "\n")
    plan = (
        sc.source(sc.csv(str(path), schema={"i": "int", "x": "float"}), rate=3_000_000)
        .filter(col("x") > 2.0)
        .with_columns(z=col("x") + col("i"))
        .plan("pacer_bad")
    )
    got = check_against_reference(plan, NATIVE)
    assert got["dead"].height == 5


def test_a_stop_dead_letters_exactly_the_bad_rows_before_the_last_that_went_in(
    tmp_path: Path,
) -> None:
    # a bad row is read up to two chunks ahead of the pacer: its dead letter waits for the
    # rows before it, so after a stop the source's count covers every dead letter, and every
    # bad row it covers is one. At 100,000 rows/s a chunk (4,096 CSV rows) takes 41 ms to
    # push, longer than the driver takes to see the stop, and each holds a bad row
    lines = ["i,x"]
    bad = set(range(7, 200_000, 3_001))
    for i in range(200_000):
        lines.append(f"{i},not a number" if i in bad else f"{i},{i % 13}.5")
    path = tmp_path / "stop.csv"
    path.write_text("\n".join(lines) + "\n")
    src = sc.csv(str(path), schema={"i": "int", "x": "float"})
    plan = sc.source(src, rate=100_000).filter(col("x") > 2.0).plan("pacer_bad_stop")
    run = sc.start(plan, options=NATIVE)
    assert until(lambda: run.progress()["rows_in"] >= 30_000)
    run.stop()
    assert run.status == "stopped"
    source = run.counts().row(0, named=True)
    went_in = source["rows_in"]  # good rows pushed and bad rows dead-lettered, in order
    assert 30_000 <= went_in < 200_000
    want = sorted(i for i in bad if i < went_in)
    assert source["dead"] == len(want)
    got = [int(r.rsplit(":", 1)[-1]) - 2 for r in run.dead_letters()["position"]]  # line: row + 2
    assert sorted(got) == want


def test_runs_one_after_another_each_with_its_own_pacer() -> None:
    df = _frame(40_000)
    for k in range(3):
        plan = sc.source(df, rate=20_000_000).filter(col("i") % 3 == k).plan(f"pacer_seq{k}")
        got = sc.start(plan, options=NATIVE).wait(60).table()
        assert got["i"].to_list() == list(range(k, 40_000, 3))


def _slow_rows(n: int, every: int, pause_s: float):
    """``n`` rows, ``pause_s`` of waiting every ``every`` rows: a source slower than its rate."""
    for i in range(n):
        if i and i % every == 0:
            time.sleep(pause_s)
        yield {"i": i, "x": float(i % 97)}


def test_a_source_slower_than_its_rate_still_shows_progress_and_pauses() -> None:
    # 40,000 rows read at about 40,000 rows/s, capped at 1M rows/s: the pacer never fills,
    # and the driver still counts, takes outputs and honours a pause between chunks
    plan = sc.source(_slow_rows(40_000, 4_096, 0.1), rate=1_000_000).plan("pacer_slow")
    run = sc.start(plan, options=NATIVE)
    assert until(lambda: 0 < run.progress()["rows_in"] < 40_000)
    assert until(lambda: run.table().height > 0 or run.done())
    run.pause()
    assert until(lambda: run.status == "paused" or run.done())
    if run.status == "paused":
        n = run.progress()["rows_in"]
        time.sleep(0.3)
        assert run.progress()["rows_in"] == n
        run.resume()
    run.wait(60)
    assert run.status == "finished"
    assert run.table()["i"].to_list() == list(range(40_000))


def test_while_the_pacer_feeds_a_program_push_many_and_finish_are_refused(monkeypatch) -> None:
    # exec/pacer.h: the pacer is the program's only feeder until pace_end(); a second feeder
    # would interleave its batches with the pacer's
    import pyarrow as pa

    from streamcell.backends.native import drivers

    refused: list[str] = []

    class Checking:
        def __init__(self, prog):
            self.prog = prog

        def pace(self, *args):
            out = self.prog.pace(*args)
            batch = pa.record_batch({"i": pa.array([1], pa.int64()), "x": pa.array([1.0])})
            for call in (
                lambda: self.prog.push_many(batch, 0, 1, 0, 16),
                lambda: self.prog.finish(0),
            ):
                try:
                    call()
                except ValueError as e:
                    refused.append(str(e).split(":")[0])
            return out

        def __getattr__(self, name):
            return getattr(self.prog, name)

        def __setattr__(self, name, value):  # the driver sets the program's options
            if name == "prog":
                object.__setattr__(self, name, value)
            else:
                setattr(self.prog, name, value)

    build = drivers.build
    monkeypatch.setattr(drivers, "build", lambda *a: Checking(build(*a)))
    df = _frame(20_000)
    run = sc.start(sc.source(df, rate=20_000_000).plan("pacer_alone"), options=NATIVE).wait(60)
    assert refused == ["push_many", "finish"]
    assert_frame_equal(run.table(), df)
