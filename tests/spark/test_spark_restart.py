"""Kill the driver and restart it on the same checkpoint: exactly-once output.

A driver process (``restart_driver.py``) runs a streaming keyed aggregate over a watched
folder into a Parquet sink. The test feeds files, kills the driver's whole process group
(Python, the JVM and its Python workers) with SIGKILL while it is processing a file, starts
a new driver on the same checkpoint and feeds more. The sink's files, in batch order, must
equal one uninterrupted run -- the reference engine over every file -- row for row: no row
lost, none twice, and the keyed state carried across the kill (the counts and sums go on
from where the committed micro-batches left them)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import streamcell as sc
from streamcell.options import RunOptions
from tests.helpers import run_plan
from tests.spark.restart_driver import SCHEMA, pipeline

pytest.importorskip("pyspark")
pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.long]

ROOT = Path(__file__).resolve().parents[2]


def put(folder: Path, i: int) -> None:
    body = "".join(f"k{(j * 5) % 7},{(j * 37) % 101}\n" for j in range(i * 50, i * 50 + 50))
    tmp = folder.parent / f".f{i:02d}.tmp"
    tmp.write_text("k,v\n" + body)
    os.rename(tmp, folder / f"f{i:02d}.csv")


def parts(out: Path) -> list[Path]:
    return sorted(out.glob("part-b*.parquet"))


def written(out: Path) -> int:
    return sum(pl.read_parquet(p).height for p in parts(out))


def start(folder: Path, out: Path, checkpoint: Path, log: Path) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "kernel"), str(ROOT)]))
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.spark.restart_driver",
            str(folder),
            str(out),
            str(checkpoint),
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=log.open("w"),
        text=True,
        start_new_session=True,  # its own process group: the JVM and workers die with it
    )
    assert p.stdout is not None
    assert p.stdout.readline().strip() == "running"
    return p


def until(cond, p: subprocess.Popen[str], timeout: float = 240.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not cond():
        assert p.poll() is None, f"the driver exited with {p.returncode}"
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def batch_ids(folder: Path) -> set[int]:
    return {int(p.name) for p in folder.glob("[0-9]*")} if folder.is_dir() else set()


def in_flight(checkpoint: Path) -> int | None:
    """The micro-batch the query has planned but not committed, if any."""
    planned = batch_ids(checkpoint / "offsets") - batch_ids(checkpoint / "commits")
    return max(planned) if planned else None


def group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def test_driver_killed_and_restarted_continues_exactly_once(tmp_path: Path) -> None:
    folder, out, ckpt = tmp_path / "in", tmp_path / "out", tmp_path / "checkpoint"
    folder.mkdir()
    for i in range(2):
        put(folder, i)
    first = start(folder, out, ckpt, tmp_path / "first.log")
    try:
        until(lambda: len(parts(out)) >= 1, first)
        before = len(parts(out))
        put(folder, 2)
        put(folder, 3)
        # kill while the new files' micro-batch runs: planned (in the offset log), not committed
        until(lambda: in_flight(ckpt) is not None and in_flight(ckpt) >= before, first)
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(30)
        until_gone = time.monotonic() + 30
        while not group_gone(first.pid) and time.monotonic() < until_gone:
            time.sleep(0.1)
        assert group_gone(first.pid), "a process of the killed driver survived"
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
    killed_at = len(parts(out))
    assert in_flight(ckpt) is not None  # the kill left a micro-batch uncommitted
    put(folder, 4)
    second = start(folder, out, ckpt, tmp_path / "second.log")
    try:
        put(folder, 5)
        # one uninterrupted run: the reference over every file, into a Parquet sink too
        ref_dir = tmp_path / "reference"
        plan = sc.combine(pipeline(sc.csv(str(folder), schema=SCHEMA)).sink_parquet(str(ref_dir)))
        run_plan(plan, RunOptions(engine="reference"))
        want = pl.read_parquet(sorted(ref_dir.glob("*.parquet")))
        assert want.height > 200
        until(lambda: written(out) >= want.height, second)
        time.sleep(2.0)  # a duplicated micro-batch would add rows after this point
        (tmp_path / "out.stop").touch()
        code = second.wait(120)
        assert second.stdout is not None
        said = second.stdout.read()
        assert code == 0, (said, (tmp_path / "second.log").read_text()[-3000:])
    finally:
        if second.poll() is None:
            os.killpg(second.pid, signal.SIGKILL)
    files = parts(out)
    got = pl.concat([pl.read_parquet(p) for p in files])
    assert_frame_equal(got, want)
    assert len(files) > killed_at >= before  # the restarted driver wrote on after the kill
    # batch files are numbered by Spark's batch id: the restart went on with the next ones
    ids = [int(p.stem[len("part-b") :]) for p in files]
    assert ids == sorted(set(ids))
