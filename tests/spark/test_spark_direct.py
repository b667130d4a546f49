"""Window steps over local Parquet files read their (serial, ticks) pairs in the Python workers
(``backends/spark/direct.py``): the same rows, serials, ticks and counters as Spark's pass,
so the same outputs as the reference, to the bit; and the filters pyarrow evaluates there give
Polars' rows."""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from polars.testing import assert_frame_equal

import streamcell as sc
from streamcell.options import RunOptions
from tests.helpers import assert_same_outputs, float_bits, outputs, run_plan

pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark

SPARK = RunOptions(engine="spark")
col = sc.col


def _files(root, sizes=(700, 1500, 90, 1200), late=True, seed=5, bad=False):
    """Parquet files of clicks in time order (some rows late, some times null), row groups of
    300 rows; ``bad``: a file of another schema in the middle (its rows are one dead letter)."""
    rng = np.random.default_rng(seed)
    root.mkdir()
    start = 0
    for i, n in enumerate(sizes):
        t = start + np.arange(n) * 3 + rng.integers(0, 3, n)
        if late:
            t[rng.integers(0, n, 3)] -= 40
        start = int(t.max()) + 1
        tv = [None if x < 0.01 else int(v) for v, x in zip(t, rng.random(n), strict=True)]
        events = ["view", "cart", "purchase", None]
        frame = pl.DataFrame(
            {
                "k": rng.integers(0, 7, n),
                "t": tv,
                "e": [events[x] for x in rng.integers(0, 4, n)],
                "q": [None if x == 0 else int(x) - 2 for x in rng.integers(0, 6, n)],
                "b": [None if x == 2 else bool(x) for x in rng.integers(0, 3, n)],
                "f": rng.random(n),
            }
        )
        frame.write_parquet(root / f"p{i}.parquet", row_group_size=300)
        if bad and i == 1:
            pl.DataFrame({"other": [1, 2]}).write_parquet(root / f"p{i}b.parquet")
    return root


def _same_bits(plan: sc.Plan) -> sc.Run:
    got = run_plan(plan, SPARK, timeout=300)
    want = run_plan(plan, RunOptions(engine="reference"))
    a, b = outputs(got), outputs(want)
    for x, y in zip(a["tables"].values(), b["tables"].values(), strict=True):
        assert float_bits(x) == float_bits(y)
    assert_same_outputs(a, b)
    assert_frame_equal(got.counts(), want.counts())
    return got


class Reads(list):
    """The window steps that read their pairs directly, and whether a pass fell back to Spark:
    a blocked scan (the in-place scan gave up) or Spark's closes (the closes pass gave up)."""

    fell_back: list[str]


@pytest.fixture
def reads(monkeypatch):
    from streamcell.backends.spark import direct, groupby

    made = Reads()
    made.fell_back = []
    real = direct.direct_pairs

    def spy(low, s, frame, name):
        got = real(low, s, frame, name)
        if got is not None:
            made.append(s.step_id)
        return got

    def blocked(*a, **k):
        made.fell_back.append("blocked scan")
        return real_blocked(*a, **k)

    def closes(*a, **k):
        got = real_closes(*a, **k)
        if got is None:
            made.fell_back.append("closes")
        return got

    real_blocked, real_closes = groupby.blocked_scan, groupby.record_closes
    monkeypatch.setattr(groupby, "direct_pairs", spy)
    monkeypatch.setattr(groupby, "blocked_scan", blocked)
    monkeypatch.setattr(groupby, "record_closes", closes)
    return made


def _filters(c) -> dict:
    """The filters under test, built with ``c``: ``sc.col`` for the runs, ``pl.col`` for
    Polars' own answer over the same files."""
    return {
        "string-eq": c("e") == "view",
        "int-and-not-bool": (c("q") > 0) & ~c("b"),
        "in-or-null": c("e").is_in(["view", "purchase"]) | c("q").is_null(),
        "not-in": ~c("e").is_in(["cart"]),
        "bool-column": c("b"),
        "string-order": (c("e") < "purchase") | (c("q") != 1),
        "not-null": c("e").is_not_null() & (c("b") == True),  # noqa: E712 - a comparison
    }


FILTERS = _filters(col)


@pytest.mark.parametrize("window", ["tumbling", "sessions"])
@pytest.mark.parametrize("name", sorted(FILTERS))
def test_windows_after_filters_read_pairs_from_the_files(tmp_path, reads, window, name):
    """Late rows, null times (dead letters), a file of another schema, row groups of 300: the
    changelog, the table (float sums to the bit) and every counter equal the reference's."""
    src = _files(tmp_path / "in", bad=True)
    s = sc.source(sc.parquet(str(src))).filter(FILTERS[name]).key_by("k")
    w = s.tumbling(20, time="t", lateness=10) if window == "tumbling" else s.session(8, time="t")
    stream = w.agg(n=sc.count(), sq=col("q").sum(), sf=col("f").sum())
    run = _same_bits(stream.plan())
    assert reads == ["aggregate#3"] and reads.fell_back == []
    assert run.late().height > 0 and run.dead_letters().height > 0


@pytest.mark.parametrize("unit_rows", [1, 1 << 21], ids=["units-of-a-row-group", "whole-files"])
def test_sessions_and_their_closes_read_units_of_row_groups(
    monkeypatch, tmp_path, reads, unit_rows
):
    """Units of one row group each (many runs per file) and of whole files: the scan's runs and
    the closes pass's runs are the same units; sessions with a lateness, through projections."""
    from streamcell.backends.spark import direct

    monkeypatch.setattr(direct, "UNIT_ROWS", unit_rows)
    monkeypatch.setattr(direct, "BATCH_ROWS", 128)  # units of many batches
    src = _files(tmp_path / "in")
    stream = (
        sc.source(sc.parquet(str(src)))
        .with_columns(when=col("t"), cart=(col("e") == "cart").cast("int"))
        .select("k", "when", "cart", "q")
        .key_by("k")
        .session(7, time="when", lateness=5)
        .agg(n=sc.count(), carts=col("cart").sum(), sq=col("q").sum())
    )
    run = _same_bits(stream.plan())
    assert reads == ["aggregate#4"] and reads.fell_back == []
    assert run.late().height > 0


def test_a_time_column_a_projection_rewrote_is_read_by_spark(tmp_path, reads):
    """``t`` recomputed by a projection, a float filter (NaN), a cast in a filter: Spark's pass
    reads the pairs, and the answers are the reference's all the same."""
    src = _files(tmp_path / "in")
    base = sc.source(sc.parquet(str(src)))
    for s in (
        base.with_columns(t=col("t") + 1),
        base.filter(col("f") > 0.5),
        base.filter(col("q").cast("str") == "1"),
    ):
        _same_bits(s.key_by("k").tumbling(20, time="t").agg(n=sc.count()).plan())
    assert reads == []


@pytest.mark.parametrize(
    "arrow_type", [pa.timestamp("us"), pa.timestamp("ms"), pa.timestamp("us", tz="UTC")]
)
def test_datetime_times_are_read_as_spark_reads_them(tmp_path, reads, arrow_type):
    """Timestamps in micro- and milliseconds, with and without a time zone: the ticks are the
    microseconds Spark's reader gives (its session is in UTC)."""
    root = tmp_path / "in"
    root.mkdir()
    rng = np.random.default_rng(3)
    for i in range(3):
        n = 500
        us = 1_700_000_000_000_000 + (i * n + np.arange(n)) * 7_000_000 + rng.integers(0, 3, n)
        us[rng.integers(0, n, 2)] -= 90_000_000
        us = us // 1000 * 1000 if arrow_type.unit == "ms" else us
        ts = pa.array(us, pa.int64()).cast(pa.timestamp("us")).cast(arrow_type)
        tbl = pa.table({"k": rng.integers(0, 4, n), "ts": ts, "v": rng.integers(0, 9, n)})
        pq.write_table(tbl, root / f"p{i}.parquet", row_group_size=200)
    s = sc.source(sc.parquet(str(root))).key_by("k")
    for w in (s.tumbling("1m", time="ts", lateness="30s"), s.session("20s", time="ts")):
        _same_bits(w.agg(n=sc.count(), sv=col("v").sum()).plan())
    assert len(reads) == 2 and reads.fell_back == []


def test_the_switch_keeps_sparks_pass(monkeypatch, tmp_path, reads):
    from streamcell.backends.spark import direct

    monkeypatch.setattr(direct, "DIRECT_READS", False)
    src = _files(tmp_path / "in")
    s = sc.source(sc.parquet(str(src))).filter(col("e") == "view").key_by("k")
    _same_bits(s.tumbling(20, time="t").agg(n=sc.count()).plan())
    assert reads == []


# --------------------------------------------------------------------------- the filters


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_the_filters_pyarrow_evaluates_keep_polars_rows(monkeypatch, tmp_path, name):
    """``direct.pairs`` over the files against Polars over the same files: the serials (row
    positions across the files) and the times of the rows the filter keeps that have a time,
    and the counters (rows kept; of them, rows with a null time)."""
    from streamcell.backends.spark import direct
    from streamcell.types import schema_from_arrow

    monkeypatch.setattr(direct, "BATCH_ROWS", 128)  # units of many batches
    src = _files(tmp_path / "in")
    paths = sorted(src.glob("*.parquet"))
    files, base = [], 0
    for p in paths:
        md = pq.ParquetFile(p).metadata
        files.append((str(p), base, [md.row_group(i).num_rows for i in range(md.num_row_groups)]))
        base += md.num_rows
    lin = direct.source_lineage(files, schema_from_arrow(pq.read_schema(paths[0])), 2)
    expr = FILTERS[name]
    pred = direct.predicate(expr._ir, lin)
    assert pred is not None
    counts = [0, 0]
    got = pa.Table.from_batches(
        list(direct.pairs(lin.units, list(range(len(lin.units))), "t", (pred,), counts)),
        schema=pa.schema([("o", pa.int64()), ("t", pa.int64())]),
    )
    frame = pl.concat([pl.read_parquet(p) for p in paths]).with_row_index("o")
    kept = frame.filter(_filters(pl.col)[name])
    want = kept.filter(pl.col("t").is_not_null()).select(pl.col("o").cast(pl.Int64), "t")
    assert_frame_equal(pl.from_arrow(got), want)
    assert counts == [kept.height, kept.height - want.height]


def test_filters_pyarrow_might_answer_otherwise_are_not_translated():
    from streamcell.backends.spark import direct
    from streamcell.types import FLOAT, INT, STR

    lin = direct.source_lineage(
        [("/x.parquet", 0, [10])], [("i", INT), ("f", FLOAT), ("s", STR)], 2
    )
    for e in (
        col("f") > 0.5,  # NaN
        col("i") == "1",  # across families
        col("i") > 1.5,
        col("s").is_in(["a", None]),  # a null among the values
        col("i").is_in([1, True]),
        col("i") + 1 > 2,  # arithmetic
        col("s").str.contains("a"),
        sc.lit(1) == 1,
    ):
        assert direct.predicate(e._ir, lin) is None, e
    assert direct.predicate((col("i") >= 3)._ir, lin) == (
        "cmp",
        "greater_equal",
        ("col", "i"),
        ("lit", 3),
    )


def test_units_are_whole_row_groups_and_pack_small_files():
    """Units never split a row group, pack consecutive small files (a folder of many small
    files is not a task per file), and cover every row group once, serials in order."""
    from streamcell.backends.spark import direct
    from streamcell.types import INT

    files = [(f"/d/p{i}.parquet", i * 50, [20, 30]) for i in range(40)]
    files.insert(3, ("/d/big.parquet", 2000, [400, 400, 100]))
    lin = direct.source_lineage(files, [("t", INT)], 2)
    pieces = [p for u in lin.units for p in u]
    assert [(p[0], g) for p in pieces for g in p[2]] == [
        (f, g) for f, _, sizes in files for g in range(len(sizes))
    ]
    sizes = {f: s for f, _, s in files}
    firsts = {f: b for f, b, _ in files}
    for path, first, groups in pieces:  # a piece's first serial: its first group's first row
        assert first == firsts[path] + sum(sizes[path][: groups[0]])
        assert list(groups) == list(range(groups[0], groups[-1] + 1))
    total = sum(sum(s) for s in sizes.values())
    rows = [sum(sum(sizes[p][g] for g in gs) for p, _, gs in u) for u in lin.units]
    assert len(lin.units) < 10 and all(r >= total // 4 for r in rows[:-1])


def test_a_folder_of_many_small_files_reads_its_pairs_in_few_tasks(tmp_path, reads):
    src = _files(tmp_path / "in", sizes=(40,) * 30, bad=True)
    s = sc.source(sc.parquet(str(src))).filter(col("e") != "cart").key_by("k")
    for w in (s.tumbling(20, time="t", lateness=10), s.session(8, time="t", lateness=3)):
        run = _same_bits(w.agg(n=sc.count(), sq=col("q").sum()).plan())
        assert run.late().height > 0
    assert len(reads) == 2 and reads.fell_back == []


def test_a_dotted_column_name_keeps_sparks_pass(tmp_path, reads):
    """pyarrow would read ``a.t`` as field ``t`` of a struct ``a``: such a time column (or a
    column a filter reads) keeps Spark's pass."""
    root = tmp_path / "in"
    root.mkdir()
    for i in range(2):
        frame = pl.DataFrame({"k": [1, 2, 1] * 50, "a.t": list(range(i * 150, i * 150 + 150))})
        frame.write_parquet(root / f"p{i}.parquet")
    stream = sc.source(sc.parquet(str(root))).key_by("k").tumbling(10, time="a.t")
    _same_bits(stream.agg(n=sc.count()).plan())
    assert reads == []
