"""A keyed aggregate feeding an upsert table publishes its changed keys instead of its per-row
changelog (exec/ops_state.h): the table, the counts and live snapshots stay the reference's."""

from __future__ import annotations

import time

import numpy as np
import polars as pl
import pytest

import streamcell as sc
from streamcell.options import RunOptions

pytestmark = pytest.mark.native


def _frame(n: int, seed: int, keys: int = 5000) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.random(n) * 10
    return pl.DataFrame(
        {
            "k": rng.integers(0, keys, n),
            "s": rng.choice(np.array(["a", "b", "", "dd"], dtype=object), n),
            "x": np.where(x < 1, np.nan, x),
        }
    ).with_columns(
        pl.when(pl.col("x") > 9).then(None).otherwise(pl.col("x")).alias("x"),
        pl.when(pl.col("s") == "").then(None).otherwise(pl.col("s")).alias("s"),
    )


def _agg(src: pl.DataFrame) -> sc.Stream:
    x = sc.col("x")
    return (
        sc.source(src)
        .key_by("k", "s")
        .agg(
            n=sc.count(), t=x.sum(), m=x.mean(), lo=x.min(), hi=x.max(), f=x.first(), u=x.n_unique()
        )
    )


def _run(stream: sc.Stream, **kw) -> sc.Run:
    return stream.start("publish", options=RunOptions(display=False, **kw)).wait(60)


@pytest.fixture(scope="module")
def reference_run() -> tuple[pl.DataFrame, sc.Run]:
    df = _frame(20_000, seed=11)
    return df, _run(_agg(df), engine="reference")


@pytest.mark.parametrize("workers", [1, 2, 4])
@pytest.mark.parametrize("batch_size", [7, 1024, 65536])
def test_published_table_equals_reference(reference_run, workers, batch_size):
    df, ref = reference_run
    got = _run(_agg(df), engine="native", workers=workers, batch_size=batch_size)
    assert got.status == "finished"
    assert got.table().equals(ref.table())
    assert got.counts().equals(ref.counts())


def test_published_table_follows_polars_group_by():
    df = _frame(50_000, seed=1, keys=300)
    got = _run(_agg(df), engine="native", workers=2).table()
    want = df.group_by("k", "s", maintain_order=True).agg(n=pl.len(), t=pl.col("x").sum())
    assert got.select("k", "s", "n").equals(want.select("k", "s", "n"))
    assert np.allclose(got["t"].to_numpy(), want["t"].to_numpy(), equal_nan=True)


def test_changelog_consumers_still_see_every_update():
    """A filter after the aggregate sees the per-row changelog (no publishing there)."""
    df = _frame(20_000, seed=2, keys=50)
    s = _agg(df).filter(sc.col("n") % 7 == 0)
    ref = _run(s, engine="reference")
    got = _run(s, engine="native", workers=2)
    assert got.table().equals(ref.table())
    assert got.counts().equals(ref.counts())


def test_live_snapshots_are_consistent_prefixes(monkeypatch):
    """Every snapshot taken while the run ingests equals the aggregate of a prefix of the
    input (the prefix whose length is the sum of the counts). Publishing every 2 ms (instead
    of 100 ms) makes the table change many times within the run."""
    from streamcell.backends.native import program  # builds the Program: reads PUBLISH_NS

    monkeypatch.setattr(program, "PUBLISH_NS", 2_000_000)
    monkeypatch.setattr(program, "PUBLISH_MAX_NS", 2_000_000)
    n = 8_000_000
    rng = np.random.default_rng(5)
    df = pl.DataFrame({"k": rng.integers(0, 2000, n), "v": rng.integers(0, 100, n)})
    run = (
        sc.source(df)
        .key_by("k")
        .agg(n=sc.count(), s=sc.col("v").sum())
        .start("publish_live", options=RunOptions(engine="native", workers=2, display=False))
    )
    snaps = []
    while not run.done():
        snaps.append(run.table())
        time.sleep(0.005)
    run.wait(60)

    def rows(snap: pl.DataFrame) -> int:
        return int(snap["n"].sum()) if snap.height else 0

    # the table was live, not filled at the end only (counted over every snapshot: a sample
    # of them may miss the few taken mid-run when the run is fast)
    partial = [s for s in snaps if 0 < rows(s) < n]
    assert partial
    checked = snaps[:: max(1, len(snaps) // 8)] + partial[:: max(1, len(partial) // 4)]
    for snap in checked + [run.table()]:
        seen = rows(snap)
        want = (
            df.head(seen)
            .group_by("k", maintain_order=True)
            .agg(n=pl.len().cast(pl.Int64), s=pl.col("v").sum())
        )
        assert snap.equals(want), seen
    assert rows(run.table()) == n


def test_counts_are_conserved_when_a_publishing_run_is_stopped():
    n = 6_000_000
    rng = np.random.default_rng(9)
    df = pl.DataFrame({"k": rng.integers(0, 50_000, n), "v": rng.random(n)})
    run = (
        sc.source(df)
        .key_by("k")
        .agg(n=sc.count(), s=sc.col("v").sum())
        .start("publish_stop", options=RunOptions(engine="native", workers=2, display=False))
    )
    while run.progress()["rows_in"] == 0 and not run.done():
        time.sleep(0.001)
    run.stop()
    assert run.status == "stopped"
    counts = {r["step"]: r for r in run.counts().to_dicts()}
    for r in counts.values():
        assert r["rows_in"] == r["consumed"] + r["filtered"] + r["late"] + r["dead"] + r[
            "unprocessed"
        ]
    assert counts["aggregate#2"]["rows_in"] == counts["source#1"]["rows_out"]
    assert counts["sink#3"]["rows_in"] == counts["aggregate#2"]["rows_out"]
    # the sink counts as consumed the changelog rows known when each publish was written (a
    # lower bound of what the publish holds): the table holds at least that many rows
    table = run.table()
    assert int(table["n"].sum()) >= counts["sink#3"]["consumed"]


def _int_frame(n: int, seed: int, keys: int) -> pl.DataFrame:
    """One int key with nulls; an int, a float (NaN, -0.0, nulls) and a bool column."""
    rng = np.random.default_rng(seed)
    x = rng.random(n) * 10 - 5
    x[rng.random(n) < 0.05] = np.nan
    x[rng.random(n) < 0.05] = -0.0
    return pl.DataFrame(
        {
            "k": rng.integers(-keys // 2, keys // 2, n),
            "i": rng.integers(-1000, 1000, n),
            "x": x,
            "b": rng.random(n) < 0.3,
        }
    ).with_columns(
        pl.when(pl.col("k") % 17 == 3).then(None).otherwise(pl.col("k")).alias("k"),
        pl.when(pl.col("i") % 11 == 0).then(None).otherwise(pl.col("i")).alias("i"),
        pl.when(pl.col("x") > 4.5).then(None).otherwise(pl.col("x")).alias("x"),
    )


def _dense_agg(src: pl.DataFrame) -> sc.Stream:
    """Every aggregate with a compact per-key record (exec/aggstate.h), one int key."""
    i, x, b = sc.col("i"), sc.col("x"), sc.col("b")
    return (
        sc.source(src)
        .key_by("k")
        .agg(
            n=sc.count(),
            ni=i.count(),
            si=i.sum(),
            mi=i.mean(),
            lo_i=i.min(),
            hi_i=i.max(),
            sx=x.sum(),
            mx=x.mean(),
            lo=x.min(),
            hi=x.max(),
            sb=b.sum(),
        )
    )


@pytest.fixture(scope="module")
def dense_reference() -> tuple[pl.DataFrame, sc.Run]:
    df = _int_frame(30_000, seed=3, keys=3000)
    return df, _run(_dense_agg(df), engine="reference")


@pytest.mark.parametrize("workers", [1, 2, 3, 4])
@pytest.mark.parametrize("batch_size", [7, 1024, 65536])
def test_int_key_dense_table_equals_reference(dense_reference, workers, batch_size):
    """The int-key map and dense records give the reference's table bit for bit: float sums
    per key in arrival order, -0.0 and NaN kept, null keys one group, null values skipped."""
    df, ref = dense_reference
    got = _run(_dense_agg(df), engine="native", workers=workers, batch_size=batch_size)
    assert got.status == "finished"
    assert got.table().equals(ref.table())
    assert got.counts().equals(ref.counts())


@pytest.mark.parametrize("workers", [1, 2, 4])
def test_int_key_aggregates_follow_polars(workers):
    """count, sum, min, max, mean, n_unique per int key equal Polars' group_by (float sums
    and means within rounding: Polars sums in another order)."""
    df = _int_frame(60_000, seed=8, keys=500)
    i, x = sc.col("i"), sc.col("x")
    got = (
        _run(
            sc.source(df)
            .key_by("k")
            .agg(
                n=sc.count(),
                si=i.sum(),
                lo=i.min(),
                hi=i.max(),
                mx=x.mean(),
                sx=x.sum(),
                u=i.n_unique(),
            ),
            engine="native",
            workers=workers,
        )
        .table()
        .sort("k", nulls_last=True)
    )
    pi, px = pl.col("i"), pl.col("x").fill_nan(None)
    want = (
        df.group_by("k")
        .agg(
            n=pl.len().cast(pl.Int64),
            si=pi.sum(),
            lo=pi.min(),
            hi=pi.max(),
            u=pi.n_unique().cast(pl.Int64),
            has_nan=pl.col("x").is_nan().any(),
            mx=px.mean(),
            sx=px.sum(),
        )
        .sort("k", nulls_last=True)
    )
    assert got.height == want.height
    for c in ("k", "n", "si", "lo", "hi", "u"):
        assert got[c].to_list() == want[c].to_list(), c
    nan = want["has_nan"].to_numpy()
    gx, wx = got["mx"].to_numpy(), want["mx"].to_numpy()
    assert np.isnan(gx[nan]).all()  # a NaN value makes the key's mean NaN
    assert np.allclose(gx[~nan], wx[~nan].astype(float), equal_nan=True)
    assert np.allclose(got["sx"].to_numpy()[~nan], want["sx"].to_numpy()[~nan])


@pytest.mark.parametrize("workers", [1, 3])
def test_complete_final_publish_replaces_the_table(workers, monkeypatch):
    """An aggregate feeding a table ends with one publish of every key, which replaces the
    table (no compaction): more keys than one 64K-row sink chunk, and live publishes before
    it, still give the reference's table, order of first rows included, and its counts."""
    from streamcell.backends.native import program

    monkeypatch.setattr(program, "PUBLISH_NS", 1_000_000)  # publish often before the end
    monkeypatch.setattr(program, "PUBLISH_MAX_NS", 1_000_000)
    df = _int_frame(200_000, seed=21, keys=150_000)
    ref = _run(_dense_agg(df), engine="reference")
    got = _run(_dense_agg(df), engine="native", workers=workers, batch_size=4096)
    assert got.status == "finished"
    assert ref.table().height > 65_536
    assert got.table().equals(ref.table())
    assert got.counts().equals(ref.counts())
