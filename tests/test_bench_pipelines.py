"""The benchmarks' premise: each Polars baseline computes what the streamcell pipeline it is
timed against computes (``bench/bench_runtime.py``'s pipelines and their Polars twins, which
``bench/bench_scaling.py`` times at 1 to 16 threads), and the native engine at several worker
counts gives the reference engine's table. The tumbling window has no exact Polars twin (rows
behind the watermark go to ``run.late()``; Polars groups them) and is checked where the two
agree: every window the reference emits holds the Polars group's rows minus the late ones."""

from __future__ import annotations

import sys
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import bench_runtime as br  # noqa: E402

import streamcell as sc  # noqa: E402
from streamcell.options import RunOptions  # noqa: E402
from tests.helpers import run_plan  # noqa: E402

ROWS = 6000


@pytest.fixture(scope="module")
def clicks() -> pl.DataFrame:
    return br.clickstream_frame(ROWS)


@pytest.fixture(scope="module")
def keyed_inputs() -> dict[str, pl.DataFrame]:
    return br.keyed_frames(ROWS)


def _table(stream: sc.Stream, options: RunOptions) -> pl.DataFrame:
    return run_plan(stream.plan(), options).table()


REFERENCE = RunOptions(engine="reference", display=False)


def _native_configs() -> list[RunOptions]:
    try:
        import streamcell._runtime  # noqa: F401
    except ImportError:
        return []
    return [br.native(w) for w in (1, 2, 4)]


@pytest.mark.parametrize("name", ["stateless", "heavy"])
def test_stateless_twins_match_reference(name: str, clicks: pl.DataFrame) -> None:
    stream = {"stateless": br.stateless, "heavy": br.heavy}[name](clicks)
    want = _table(stream, REFERENCE)
    polars = {"stateless": br.polars_stateless, "heavy": br.polars_heavy}[name](clicks).collect()
    assert want.height > 0
    assert_frame_equal(want, polars.select(want.columns), check_dtypes=False)
    for opts in _native_configs():
        assert_frame_equal(_table(stream, opts), want)


@pytest.mark.parametrize("keys", ["uniform", "Zipf-1.2"])
def test_keyed_twin_matches_reference(keys: str, keyed_inputs: dict[str, pl.DataFrame]) -> None:
    df = keyed_inputs[keys]
    want = _table(br.keyed(df), REFERENCE)
    polars = br.polars_keyed(df).collect().sort("user_id")
    assert want.height == polars.height > 100
    assert_frame_equal(
        want.sort("user_id"), polars.select(want.columns), check_dtypes=False, rel_tol=1e-9
    )
    for opts in _native_configs():
        assert_frame_equal(_table(br.keyed(df), opts), want)


def test_tumbling_twin_agrees_where_defined(clicks: pl.DataFrame) -> None:
    run = run_plan(br.tumbling(clicks).plan(), REFERENCE)
    want, late = run.table(), run.late()
    late = late.with_columns(pl.col("_position").str.extract(r"row (\d+)$").cast(pl.UInt32))
    rows = clicks.with_row_index("_position")
    # the late side output names its rows' positions in the source: check them, then drop them
    assert_frame_equal(
        rows.join(late.select("_position"), on="_position", how="semi").drop("_position"),
        late.sort("_position").select(clicks.columns),
    )
    on_time = rows.join(late, on="_position", how="anti")
    polars = (
        br.polars_tumbling(on_time.filter(pl.col("user_id").is_not_null()))
        .collect()
        .rename({"ts": "window_start"})
    )
    got = want.join(polars, on=["user_id", "window_start"], how="left", suffix="_polars")
    assert want.height > 0 and got.height == want.height
    assert (got["n"] == got["n_polars"]).all()
    assert ((got["s"] - got["s_polars"]).abs() <= 1e-9 * got["s"].abs().max()).all()
    for opts in _native_configs():
        assert_frame_equal(_table(br.tumbling(clicks), opts), want)
