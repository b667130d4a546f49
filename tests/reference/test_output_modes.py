"""Output modes of the Parquet sink (append, complete, update) on every engine: each engine's
files equal the reference's, and the reference's equal Polars on the same data."""

from __future__ import annotations

import time
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import streamcell as sc
from streamcell.errors import ArgumentError, DSLSyntaxError
from streamcell.options import RunOptions
from tests.helpers import run_plan

DF = pl.DataFrame(
    {
        "k": ["a", "b", "a", "c", "b", "a", None, "c"],
        "v": [1, 2, 3, 4, 5, 6, 7, 8],
    }
)


def read_dir(path: Path) -> pl.DataFrame:
    """A sink directory's rows, files in name order (how every engine's layout is read)."""
    files = sorted(path.glob("*.parquet"))
    assert files, f"no part files in {path}"
    return pl.read_parquet(files)


def run_both(plan_of, engine, tmp_path: Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The sink's rows on ``engine`` and on the reference (``plan_of(dir)`` builds the plan)."""
    got_dir, ref_dir = tmp_path / "got", tmp_path / "ref"
    run_plan(plan_of(str(got_dir)), engine.options)
    run_plan(plan_of(str(ref_dir)), RunOptions(engine="reference"))
    got, ref = read_dir(got_dir), read_dir(ref_dir)
    assert_frame_equal(got, ref)
    return got, ref


def agg(path: str, mode: str) -> sc.Plan:
    s = sc.source(DF).key_by("k").agg(n=sc.count(), total=sc.sum("v"))
    return sc.combine(s.sink_parquet(path, mode=mode))  # type: ignore[arg-type]


def test_append_after_agg_writes_the_per_row_changelog(engine, tmp_path):
    _, ref = run_both(lambda p: agg(p, "append"), engine, tmp_path)
    want = DF.select(
        "k",
        n=pl.int_range(1, pl.len() + 1).over("k").cast(pl.Int64),
        total=pl.col("v").cum_sum().over("k"),
    )
    assert_frame_equal(ref, want)


def test_complete_after_agg_writes_the_final_row_per_key(engine, tmp_path):
    _, ref = run_both(lambda p: agg(p, "complete"), engine, tmp_path)
    want = DF.group_by("k", maintain_order=True).agg(
        n=pl.len().cast(pl.Int64), total=pl.col("v").sum()
    )
    assert_frame_equal(ref, want)


def test_update_of_a_finite_run_is_one_write_of_the_changed_rows(engine, tmp_path):
    got, _ = run_both(lambda p: agg(p, "update"), engine, tmp_path)
    complete = tmp_path / "complete"
    run_plan(agg(str(complete), "complete"), RunOptions(engine="reference"))
    assert_frame_equal(got, read_dir(complete))


def test_complete_after_top_k_keys_by_rank(engine, tmp_path):
    def plan(p: str) -> sc.Plan:
        s = sc.source(DF).key_by("k").top_k(2, by="v")
        return sc.combine(s.sink_parquet(p, mode="complete"))

    _, ref = run_both(plan, engine, tmp_path)
    want = (
        DF.sort("v", descending=True)
        .group_by("k", maintain_order=True)
        .head(2)
        .with_columns(rank=pl.int_range(1, pl.len() + 1).over("k").cast(pl.Int64))
    )
    assert_frame_equal(
        ref.sort("k", "rank", nulls_last=True),
        want.select(ref.columns).sort("k", "rank", nulls_last=True),
    )


def test_complete_without_a_key_holds_every_row(engine, tmp_path):
    def plan(p: str) -> sc.Plan:
        return sc.combine(sc.source(DF).filter(sc.col("v") > 2).sink_parquet(p, mode="complete"))

    _, ref = run_both(plan, engine, tmp_path)
    assert_frame_equal(ref, DF.filter(pl.col("v") > 2))


def test_complete_with_an_explicit_key(engine, tmp_path):
    def plan(p: str) -> sc.Plan:
        s = sc.source(DF).with_columns(w=sc.col("v") * 10)
        return sc.combine(s.sink_parquet(p, mode="complete", key=["k"]))

    _, ref = run_both(plan, engine, tmp_path)
    want = (
        DF.group_by("k", maintain_order=True)
        .agg(pl.col("v").last())
        .with_columns(w=pl.col("v") * 10)
    )
    assert_frame_equal(ref, want)


def test_the_magic_syntax_takes_the_mode(engine, tmp_path):
    cell = (
        f'source df\nkey_by k\nagg n=count()\nsink parquet("{tmp_path / "out"}", mode="complete")'
    )
    plan = sc.parse(cell, {"df": DF})
    text = plan.to_dsl()
    assert 'mode="complete"' in text.replace("'", '"')
    assert sc.parse(text, {"df": DF}).to_dsl() == text
    run_plan(plan, engine.options)
    got = read_dir(tmp_path / "out")
    want = DF.group_by("k", maintain_order=True).agg(n=pl.len().cast(pl.Int64))
    assert_frame_equal(got, want)


@pytest.mark.parametrize(
    ("opts", "param", "col"),
    [('mode="bogus"', "mode", 22), ("mode=1", "mode", 22), ('key=["k"]', "key", 22)],
)
def test_bad_modes_are_refused_naming_the_parameter(opts, param, col):
    cell = f'source df\nsink parquet("out/", {opts})'
    with pytest.raises(ArgumentError) as e:
        sc.parse(cell, {"df": DF})
    assert e.value.parameter == param and (e.value.line, e.value.column) == (2, col)
    with pytest.raises(ArgumentError) as e:
        sc.source(DF).sink_parquet("out/", mode="bogus")  # type: ignore[arg-type]
    assert e.value.parameter == "mode" and "'append', 'complete', 'update'" in str(e.value)


def test_unknown_parquet_options_are_refused_at_their_text():
    with pytest.raises(DSLSyntaxError) as e:
        sc.parse('source df\nsink parquet("out/", bogus=1)', {"df": DF})
    assert (e.value.line, e.value.column) == (2, 22) and "mode= and key=" in str(e.value)


def rows_of(n: int) -> list[dict]:
    return [{"k": "abc"[i % 3], "v": i} for i in range(n)]


def slow_rows(fast: int, slow: int, pause: float):
    """``fast`` rows at once (what schema inference peeks at), then ``slow`` rows, one per
    ``pause`` seconds: an iterator the engine cannot know the end of."""
    rows = rows_of(fast + slow)
    yield from rows[:fast]
    for r in rows[fast:]:
        time.sleep(pause)
        yield r


@pytest.mark.parametrize("eng", ["reference", "native"])
def test_unbounded_sources_write_per_epoch(eng, tmp_path):
    """A source that takes time (an iterator with no known end, a throttled generator):
    complete rewrites the table per epoch (~1 s), update adds the rows changed since the last
    write; folding the update files in name order gives the complete table, which equals
    Polars' final aggregate. (The native engine reads an iterator in whole batches, so it is
    shown a throttled generator.)"""
    from streamcell.backends import available

    if eng not in available():
        pytest.skip(f"{eng} engine not built")
    if eng == "reference":
        want = pl.DataFrame(rows_of(130)).group_by("k").agg(n=pl.len().cast(pl.Int64))
    else:
        from streamcell.sources import CHUNK, clickstream_chunk

        rows = pl.from_arrow(clickstream_chunk(sc.clickstream(rows=3000), 0, CHUNK).slice(0, 3000))
        assert isinstance(rows, pl.DataFrame)
        want = rows.group_by(k="category").agg(n=pl.len().cast(pl.Int64))
    want = want.sort("k")
    for mode in ("update", "complete"):
        out = tmp_path / mode
        if eng == "reference":
            s = sc.source(slow_rows(100, 30, 0.1))
        else:
            s = sc.source(sc.clickstream(rows=3000), rate=1200).with_columns(k=sc.col("category"))
        s = s.key_by("k").agg(n=sc.count())
        run_plan(sc.combine(s.sink_parquet(str(out), mode=mode)), RunOptions(engine=eng))
        files = sorted(out.glob("*.parquet"))
        if mode == "update":
            assert len(files) >= 2, "an unbounded update sink writes once per epoch"
            parts = [pl.read_parquet(f) for f in files]
            folded = pl.concat(parts).group_by("k", maintain_order=True).last()
            assert_frame_equal(folded.sort("k"), want)
        else:
            assert_frame_equal(read_dir(out).sort("k"), want)
