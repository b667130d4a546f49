"""The final table of a keyed ``agg`` over local Parquet files, folded in arrival order by one
Python worker that reads the files itself (``backends/spark/fold.py``). Every run is compared
with the reference (tables to the last bit, counters, the filters' rows out), with Spark's own
``groupBy`` path (``fold.FOLD = False``), and where the answer does not depend on arrival
order, with Polars."""

from __future__ import annotations

import functools
import math
import operator
import time

import numpy as np
import polars as pl
import pyarrow as pa
import pytest

import streamcell as sc
from streamcell.options import RunOptions
from tests.helpers import float_bits, run_plan, same_to_the_bit

pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark

SPARK = RunOptions(engine="spark")
NAN, INF = float("nan"), float("inf")


def _floats(rng: np.random.Generator, n: int) -> list[float | None]:
    """Values whose sum depends on the order of the additions (magnitudes 1e-3 to 1e16),
    with nulls, NaN, infinities and zeros of both signs."""
    f = rng.normal(size=n) * 10.0 ** rng.integers(-3, 17, n)
    out: list[float | None] = []
    for j, x in enumerate(f):
        if j % 17 == 3:
            out.append(None)
        elif j % 211 == 5:
            out.append(NAN)
        elif j % 307 == 7:
            out.append(INF if j % 2 else -INF)
        elif j % 23 == 1:
            out.append(-0.0 if j % 3 else 0.0)
        else:
            out.append(float(x))
    return out


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Three files of row groups of 700 rows: int, string and bool keys with nulls; a group
    "z" of only -0.0 values, one of only nulls ("n"), one all NaN ("q"), and groups whose
    min ("m") and max ("w") are zeros of both signs."""
    rng = np.random.default_rng(3)
    d = tmp_path_factory.mktemp("fold")
    for i, n in enumerate([2500, 40, 3100]):
        k = [None if x == 0 else int(x) for x in rng.integers(0, 40, n)]
        s = [None if x == 0 else f"u{x}" for x in rng.integers(0, 25, n)]
        f = _floats(rng, n)
        for m, j in enumerate(range(11, n, 157)):  # max: the first zero, -0.0
            s[j], f[j] = "w", [-0.0, -3.0, 0.0, -1.0][m % 4]
        for m, j in enumerate(range(13, n, 163)):  # min: the first zero, 0.0
            s[j], f[j] = "m", [0.0, 3.0, -0.0, 2.0][m % 4]
        for j in range(0, n, 97):
            s[j], f[j] = "z", -0.0
        for j in range(5, n, 131):
            s[j], f[j] = "n", None
        for j in range(9, n, 149):
            s[j], f[j] = "q", NAN
        frame = pl.DataFrame(
            {
                "k": k,
                "s": s,
                "b": [None if x == 2 else bool(x) for x in rng.integers(0, 3, n)],
                "f": f,
                "v": [
                    None if j % 13 == 2 else int(x)
                    for j, x in enumerate(rng.integers(-(2**62), 2**62, n))
                ],
                "e": rng.choice(["view", "cart", "buy"], n).tolist(),
            },
            schema={
                "k": pl.Int64,
                "s": pl.String,
                "b": pl.Boolean,
                "f": pl.Float64,
                "v": pl.Int64,
                "e": pl.String,
            },
        )
        frame.write_parquet(d / f"p{i}.parquet", row_group_size=700)
    return str(d)


AGGS = {
    "n": sc.count(),
    "c": sc.col("f").count(),
    "sf": sc.col("f").sum(),
    "sv": sc.col("v").sum(),  # wraps at 64 bits
    "sb": sc.col("b").sum(),
    "mx": sc.col("f").max(),
    "mn": sc.col("f").min(),
    "mv": sc.col("v").max(),
    "lv": sc.col("v").min(),
    "dk": sc.count_distinct("k"),  # null is one of the values, as for Polars' n_unique
    "ds": sc.count_distinct("s"),
    "db": sc.count_distinct("b"),
}


def _same(plan: sc.Plan) -> sc.Run:
    return same_to_the_bit(plan, SPARK)


@pytest.mark.parametrize("fold", [True, False], ids=["fold", "group-by"])
@pytest.mark.parametrize("key", ["k", "s", "b"])
def test_a_final_table_folds_in_arrival_order_as_the_reference(monkeypatch, files, key, fold):
    """Filters in the lineage (a string comparison, ``is_in``) and a projection; the filters'
    rows out are the fold's counts. Folded or by Spark's groupBy, the reference's table."""
    from streamcell.backends.spark import fold as F

    monkeypatch.setattr(F, "FOLD", fold)
    stream = (
        sc.source(sc.parquet(files))
        .filter(sc.col("e") != "buy")
        .with_columns(key=sc.col(key))
        .filter(~sc.col("s").is_in(["u3", "u4"]))
        .key_by("key")
        .agg(**AGGS)
    )
    for plan in (stream.plan(), sc.combine(stream.sink_table("t", mode="complete"))):
        run = _same(plan)
        want = "python fold" if fold else "spark groupBy"
        assert run.spark_operators == {"aggregate#5": want}
    if key == "s":  # the adversarial groups are there
        t = run.table().filter(pl.col("key").is_in(["n", "q", "z"])).sort("key")
        # only nulls: 0.0; a NaN among the values: NaN; only -0.0: -0.0 (the first value)
        assert float_bits(t.select("sf")) == [
            ("0000000000000000",),
            ("nan",),
            ("0000000000000080",),
        ]
        zeros = run.table().filter(pl.col("key").is_in(["m", "w"])).sort("key")
        assert float_bits(zeros.select("mn", "mx")) == [
            ("0000000000000000", "0000000000000840"),  # m: min 0.0 (first zero), max 3.0
            ("00000000000008c0", "0000000000000080"),  # w: min -3.0, max -0.0 (first zero)
        ]


def test_the_parquet_sink_gets_the_folded_table_in_key_order(tmp_path, files):
    """A ``complete`` Parquet sink: the folded table's files, in name order, hold the
    reference's rows; the keys in order of first appearance agree with Polars, and so do
    the counts and integer sums (which do not depend on arrival order)."""

    def plan(out: str) -> sc.Plan:
        s = sc.source(sc.parquet(files)).key_by("k").agg(**AGGS)
        return sc.combine(s.sink_parquet(out, mode="complete"))

    got = run_plan(plan(str(tmp_path / "s")), SPARK, timeout=300)
    want = run_plan(plan(str(tmp_path / "r")), RunOptions(engine="reference"))
    assert got.spark_operators == {"aggregate#2": "python fold"}
    a = pl.read_parquet(sorted((tmp_path / "s").glob("*.parquet")))
    b = pl.read_parquet(sorted((tmp_path / "r").glob("*.parquet")))
    assert float_bits(a) == float_bits(b)
    polars = (
        pl.read_parquet(f"{files}/*.parquet")
        .group_by("k", maintain_order=True)
        .agg(
            n=pl.len(),
            c=pl.col("f").count(),
            sv=pl.col("v").sum(),
            sb=pl.col("b").sum(),
            ds=pl.col("s").n_unique(),
            db=pl.col("b").n_unique(),
        )
        .cast({"ds": pl.Int64, "db": pl.Int64})
    )
    same = ["k", "n", "c", "sv", "ds", "db"]
    assert a.select(same).equals(polars.select(same))
    assert a["sb"].to_list() == polars["sb"].cast(pl.Int64).to_list()
    assert got.counts().equals(want.counts())


def test_float_sums_are_left_folds_in_arrival_order(tmp_path):
    """One group's values whose sum differs with the order of the additions: the fold is
    ``((1e16 + 1.0) + 1.0) + ...`` row by row, across row groups and files, as Python's
    left fold (and the reference) adds them; a pairwise or sorted sum is not."""
    from streamcell.backends.spark.direct import source_lineage
    from streamcell.backends.spark.fold import fold_table
    from streamcell.types import FLOAT, INT

    vals = [1e16] + [1.0] * 2999 + [-1e16] + [0.5] * 1000
    rows = []
    for i, start in enumerate(range(0, len(vals), 1300)):
        part = vals[start : start + 1300]
        pl.DataFrame({"k": [7] * len(part), "f": part}).write_parquet(
            tmp_path / f"p{i}.parquet", row_group_size=300
        )
        rows.append((str(tmp_path / f"p{i}.parquet"), start, _groups(len(part), 300)))
    lin = source_lineage(rows, [("k", INT), ("f", FLOAT)], 2)
    counts: list[int] = []
    keys, values, first = fold_table(
        lin.units, [("col", "k")], [("sum", "f", "float")], (), counts, 256
    )
    left = functools.reduce(operator.add, vals)
    assert values[0].to_pylist() == [left] and left == 500.0
    assert math.fsum(vals) == 3499.0 != left  # the exact sum: the order matters here
    assert keys[0].to_pylist() == [7] and first.tolist() == [0] and counts == [len(vals)]


def _groups(n: int, size: int) -> list[int]:
    return [min(size, n - i) for i in range(0, n, size)]


@pytest.mark.parametrize(
    "why",
    [
        "float-key",
        "float-count-distinct",
        "string-min",
        "expression",
        "too-many-rows",
        "too-many-distinct-rows",
        "dotted",
    ],
)
def test_what_the_fold_does_not_compute_keeps_sparks_group_by(monkeypatch, tmp_path, files, why):
    from streamcell.backends.spark import fold as F

    src = sc.source(sc.parquet(files))
    if why == "float-key":
        stream = src.key_by("k", "f").agg(n=sc.count())
    elif why == "float-count-distinct":  # NaN and the zeros' signs: Spark's path
        stream = src.key_by("k").agg(d=sc.count_distinct("f"))
    elif why == "string-min":
        stream = src.key_by("k").agg(m=sc.col("s").min())
    elif why == "expression":
        stream = src.with_columns(g=sc.col("v") % 5).key_by("g").agg(n=sc.count())
    elif why == "too-many-rows":
        monkeypatch.setattr(F, "FOLD_ROWS", 5000)
        stream = src.key_by("k").agg(sf=sc.col("f").sum())
    elif why == "too-many-distinct-rows":  # a count_distinct keeps up to a pair per row
        monkeypatch.setattr(F, "DISTINCT_ROWS", 5000)
        stream = src.key_by("k").agg(sf=sc.col("f").sum(), d=sc.count_distinct("s"))
    else:
        d = tmp_path / "dotted"
        d.mkdir()
        pl.DataFrame({"a.b": [1, 2, 1], "f": [1.0, 2.0, 3.0]}).write_parquet(d / "p.parquet")
        stream = sc.source(sc.parquet(str(d))).key_by("a.b").agg(sf=sc.col("f").sum())
    run = _same(stream.plan())
    assert "python fold" not in run.spark_operators.values()


def test_the_read_ahead_hands_on_errors_and_stops_with_its_caller():
    from streamcell.backends.spark.fold import ahead

    def failing():
        yield 1
        raise OSError("disk gone")

    got = []
    with pytest.raises(OSError, match="disk gone"):
        for x in ahead(failing()):
            got.append(x)
    assert got == [1]
    made = []

    def endless():
        i = 0
        while True:
            made.append(i)
            yield pa.array([i])
            i += 1

    it = ahead(endless(), depth=2)
    assert next(it).to_pylist() == [0]
    it.close()  # the reader thread stops: at most the queue's depth beyond what was taken
    n = len(made)
    assert n <= 5
    time.sleep(0.3)
    assert len(made) == n


# ------------------------------------------------------------------ tumbling windows


@pytest.fixture(scope="module")
def timed(tmp_path_factory):
    """Three files of rows in time order but for rows 40 ticks behind (late where the
    lateness is smaller) and null times (dead letters); an int time ``t`` and a timestamp
    ``ts`` (seconds from 2024-01-01)."""
    rng = np.random.default_rng(9)
    d = tmp_path_factory.mktemp("timed")
    start = 0
    for i, n in enumerate([2100, 30, 2600]):
        t = [None if j % 29 == 7 else (start + j) * 3 - (40 if j % 9 == 4 else 0) for j in range(n)]
        start += n
        frame = pl.DataFrame(
            {
                "k": [None if x == 0 else int(x) for x in rng.integers(0, 6, n)],
                "s": [f"u{x}" for x in rng.integers(0, 4, n)],
                "f": _floats(rng, n),
                "v": rng.integers(-50, 50, n).tolist(),
                "t": t,
                "e": rng.choice(["view", "cart", "buy"], n).tolist(),
            },
            schema={
                "k": pl.Int64,
                "s": pl.String,
                "f": pl.Float64,
                "v": pl.Int64,
                "t": pl.Int64,
                "e": pl.String,
            },
        ).with_columns(ts=pl.datetime(2024, 1, 1) + pl.duration(seconds=pl.col("t")))
        frame.write_parquet(d / f"p{i}.parquet", row_group_size=500)
    return str(d)


@pytest.mark.parametrize("relative", [True, False], ids=["relative", "closes"])
@pytest.mark.parametrize("fold", [True, False], ids=["fold", "group-by"])
@pytest.mark.parametrize(
    ("key", "time", "size", "lateness"),
    [("k", "t", 10, 0), ("s", "t", 25, 20), (None, "t", 50, 60), ("k", "ts", "30s", "20s")],
)
def test_tumbling_windows_fold_in_arrival_order_as_the_reference(
    monkeypatch, timed, key, time, size, lateness, fold, relative
):
    """Late rows (found by the watermark scan) and dead rows stay out of the fold; windows in
    the reference's order, found by their closing rows or, where only their order among
    themselves matters, by (end, start, first row); float sums to the last bit."""
    from streamcell.backends.spark import fold as F
    from streamcell.backends.spark import groupby

    monkeypatch.setattr(F, "FOLD", fold)
    monkeypatch.setattr(groupby, "RELATIVE_ORDER", relative)
    src = sc.source(sc.parquet(timed)).filter(sc.col("e") != "buy")
    keyed = src.key_by(key) if key else src
    stream = keyed.tumbling(size, time=time, lateness=lateness).agg(
        n=sc.count(),
        sf=sc.col("f").sum(),
        mx=sc.col("f").max(),
        sv=sc.col("v").sum(),
        ds=sc.count_distinct("s"),
        dk=sc.count_distinct("k"),
    )
    for plan in (stream.plan(), sc.combine(stream.sink_table("log", mode="append"))):
        run = _same(plan)
        assert run.spark_operators == {"aggregate#3": "python fold" if fold else "spark groupBy"}
        assert run.dead_letters().height > 0
        assert (run.late().height > 0) == (lateness in (0, 20, "20s"))


def test_windows_the_fold_does_not_compute_keep_sparks_group_by(timed):
    src = sc.source(sc.parquet(timed))
    for stream in (
        src.key_by("k").tumbling(10, time="t").agg(a=sc.col("s").first()),
        src.key_by("k").tumbling(10, time="t").agg(d=sc.count_distinct("f")),
    ):
        run = _same(stream.plan())
        assert "python fold" not in run.spark_operators.values()


@pytest.mark.parametrize("fold", [True, False], ids=["fold", "group-by"])
def test_folded_windows_fall_among_other_rows_where_their_closing_rows_are(
    monkeypatch, timed, fold
):
    """A union sets the windows among the source's own rows: each window falls right after
    the row whose watermark closes it, so the fold finds that row for each window."""
    from streamcell.backends.spark import fold as F

    monkeypatch.setattr(F, "FOLD", fold)
    src = sc.source(sc.parquet(timed))
    wins = (
        src.key_by("k").tumbling(10, time="t", lateness=5).agg(n=sc.count(), sv=sc.col("v").sum())
    )
    raw = src.filter(sc.col("e") == "buy").select(
        k=sc.col("k"),
        window_start=sc.col("t"),
        window_end=sc.col("t"),
        n=sc.col("v"),
        sv=sc.col("v"),
    )
    run = _same(sc.combine(wins.union(raw).sink_table("log", mode="append")))
    assert run.spark_operators["aggregate#2"] == ("python fold" if fold else "spark groupBy")
    log = run.table("log")
    assert log.height > 1000 and log["n"].n_unique() > 10


@pytest.mark.parametrize("fold", [True, False], ids=["fold", "group-by"])
def test_keys_of_several_columns_and_datetime_parts_fold(monkeypatch, timed, fold):
    """A key of three columns, one of them the month of a timestamp computed by a projection
    (as TPCx-BB Q15 groups sales per category and month), and a window step keyed by an hour
    and a string; with nulls among the keys."""
    from streamcell.backends.spark import fold as F

    monkeypatch.setattr(F, "FOLD", fold)
    src = (
        sc.source(sc.parquet(timed))
        .with_columns(month=sc.col("ts").dt.month(), hour=sc.col("ts").dt.hour())
        .filter(sc.col("e") != "buy")
    )
    for stream in (
        src.key_by("s", "month", "k").agg(n=sc.count(), sf=sc.col("f").sum()),
        src.key_by("hour", "s").tumbling(50, time="t", lateness=60).agg(mx=sc.col("v").max()),
    ):
        run = _same(stream.plan())
        assert set(run.spark_operators.values()) == {"python fold" if fold else "spark groupBy"}
    assert run.table()["hour"].n_unique() > 1


# ------------------------------------------------------------------ session windows


@pytest.mark.parametrize("fold", [True, False], ids=["fold", "group-by"])
@pytest.mark.parametrize(
    ("keys", "gap", "lateness", "floats"),
    [
        (("k",), 7, 0, "sum+max"),
        ((), 3, 0, "sum+max"),
        (("s", "k"), 9, 60, ""),
        (("k",), 9, 60, "max"),
    ],
)
def test_sessions_fold_in_arrival_order_as_the_reference(
    monkeypatch, timed, keys, gap, lateness, floats, fold
):
    """Sessions ordered among themselves only (a sink after them): the worker sorts each
    key's admitted rows by time and serial, cuts them where a row is a gap or more after the
    one before, and folds each session in that order, which is arrival order without a
    lateness. With a lateness, an aggregate that depends on the order (a float min or max, as
    its first of equal zeros does) keeps Spark's path."""
    from streamcell.backends.spark import fold as F

    monkeypatch.setattr(F, "FOLD", fold)
    src = sc.source(sc.parquet(timed)).filter(sc.col("e") != "buy")
    keyed = src.key_by(*keys) if keys else src
    aggs = {
        "n": sc.count(),
        "sv": sc.col("v").sum(),
        "mv": sc.col("v").min(),
        "dv": sc.count_distinct("v"),
        "dk": sc.count_distinct("k"),
    }
    if "sum" in floats:
        aggs["sf"] = sc.col("f").sum()
    if "max" in floats:
        aggs["mx"] = sc.col("f").max()
    stream = keyed.session(gap, time="t", lateness=lateness).agg(**aggs)
    for plan in (stream.plan(), sc.combine(stream.sink_table("log", mode="append"))):
        run = _same(plan)
        folded = fold and not (floats and lateness)
        assert run.spark_operators == {"aggregate#3": "python fold" if folded else "spark groupBy"}
        assert (run.late().height > 0) == (lateness < 40)
        assert run.table().height > 20


@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "spark"])
@pytest.mark.parametrize(
    "shape",
    ["tumbling-global", "tumbling-filters-keyed", "sessions-filter", "datetime-window"],
)
def test_a_top_k_after_folded_windows_runs_in_the_folds_task(monkeypatch, timed, shape, fuse):
    """Windows ordered among themselves, then filters and a ``top_k``: the fold's task runs
    them on the windows it made (the native ``top_k``), and only the ``top_k``'s rows come
    through Spark. The changelog (ties of ``n`` among many windows, ranks re-emitted),
    the counters of every step (the windows, each filter's rows out, null ``by`` values the
    ``top_k`` filters) and the dead and late rows equal the reference's."""
    from streamcell.backends.spark import fold as F

    monkeypatch.setattr(F, "FUSE", fuse)
    src = sc.source(sc.parquet(timed)).filter(sc.col("e") != "buy")
    if shape == "tumbling-global":
        s = (
            src.key_by("k")
            .tumbling(20, time="t", lateness=5)
            .agg(n=sc.count(), mv=sc.col("v").max())
        )
        s = s.top_k(7, by="mv")
        tail = ["top_k#4"]
    elif shape == "tumbling-filters-keyed":
        s = src.key_by("k", "s").tumbling(15, time="t").agg(n=sc.count(), sv=sc.col("v").sum())
        s = s.filter(sc.col("n") > 1).filter((sc.col("s") != "u2") | sc.col("k").is_null())
        s = s.key_by("s").top_k(2, by="sv", descending=False)
        tail = ["filter#4", "filter#5", "top_k#6"]
    elif shape == "sessions-filter":
        s = src.key_by("s").session(9, time="t").agg(n=sc.count(), d=sc.count_distinct("k"))
        s = s.filter(sc.col("n") >= 2).top_k(5, by="d")
        tail = ["filter#4", "top_k#5"]
    else:
        s = src.key_by("k").tumbling("40s", time="ts", lateness="10s").agg(n=sc.count())
        s = s.filter(sc.col("k") != 3).top_k(4, by="n")
        tail = ["filter#4", "top_k#5"]
    for plan in (s.plan(), sc.combine(s.sink_table("t", mode="append"))):
        run = _same(plan)
        top = tail[-1]
        assert run.spark_operators["aggregate#3"] == "python fold"
        assert run.spark_operators[top] == ("native, in the python fold" if fuse else "native")
        counts = {r["step"]: r for r in run.counts().to_dicts()}
        assert counts[top]["rows_in"] > 10 and counts[top]["rows_out"] > 20  # ranks re-emitted
        if len(tail) > 1:
            assert counts[tail[0]]["filtered"] > 0
    if shape == "tumbling-global":
        assert run.late().height > 0 and run.dead_letters().height > 0


def test_what_the_fold_cannot_run_after_the_windows_stays_on_spark(timed):
    """A filter over a float (NaN), a window step with two consumers, a ``top_k`` after a
    projection: the windows are folded, the steps after them run on Spark."""
    src = sc.source(sc.parquet(timed))
    w = src.key_by("k").tumbling(20, time="t").agg(n=sc.count(), sf=sc.col("f").sum())
    by_float = w.filter(sc.col("sf") > 0).top_k(3, by="n")
    projected = w.with_columns(m=sc.col("n") * 2).top_k(3, by="m")
    both = sc.combine(w.top_k(3, by="n").sink_table("a"), w.sink_table("b", mode="append"))
    for plan in (by_float.plan(), projected.plan(), both):
        run = _same(plan)
        assert run.spark_operators["aggregate#2"] == "python fold"
        tops = [v for k, v in run.spark_operators.items() if k.startswith("top_k")]
        assert tops == ["native"]


@pytest.mark.parametrize("lateness", [0, 3, 50])
def test_the_folds_watermark_finds_the_late_rows_batch_by_batch(lateness):
    """The fold's own watermark over batches of random sizes gives the late rows of a
    row-by-row scan in arrival order (the reference's rule)."""
    from streamcell.backends.spark.fold import Watermark

    rng = np.random.default_rng(lateness)
    t = (np.arange(3000) + rng.integers(-60, 60, 3000)).astype(np.int64)
    o = np.arange(3000, dtype=np.int64) * 7
    want, top = [], None
    for ti, oi in zip(t.tolist(), o.tolist()):
        if top is not None and ti < top - lateness:
            want.append(oi)
        top = ti if top is None else max(top, ti)
    wm = Watermark(lateness)
    kept, at = [], 0
    for n in rng.integers(1, 400, 40):
        kept.append(wm.admit(t[at : at + n], o[at : at + n]))
        at += n
    kept.append(wm.admit(t[at:], o[at:]))
    assert wm.serials().tolist() == want and len(want) > 10
    assert (~np.concatenate(kept)).sum() == len(want)


def test_count_distinct_merges_its_pairs_as_they_grow(monkeypatch):
    """The (group, value) pairs of a ``count_distinct`` merged many times over (a small merge
    threshold) count what a set per group counts; null is a value."""
    from streamcell.backends.spark.fold import _Distinct

    monkeypatch.setattr(_Distinct, "MERGE_AT", 50)
    rng = np.random.default_rng(11)
    d = _Distinct()
    sets: dict[int, set] = {}
    for _ in range(40):
        n = int(rng.integers(1, 300))
        ids = rng.integers(0, 30, n)
        vals = [None if x == 0 else f"v{x}" for x in rng.integers(0, 60, n)]
        d.add(ids, pa.array(vals, pa.string()))
        for g, v in zip(ids.tolist(), vals):
            sets.setdefault(g, set()).add(v)
    assert d.merged > 0  # merged along the way
    assert d.counts(32).tolist() == [len(sets.get(g, ())) for g in range(32)]


@pytest.mark.parametrize("kind", ["int", "str"])
def test_numbering_numbers_keys_in_order_of_first_appearance(kind):
    """Across batches, null among the keys: integers through the sorted array of the keys
    seen, other keys through a dict; both number each key at its first appearance."""
    from streamcell.backends.spark.fold import Numbering

    rng = np.random.default_rng(5)
    num = Numbering()
    seen: dict = {}
    for _ in range(30):
        raw = rng.integers(-(2**40), 2**40, 50).tolist() + rng.integers(0, 40, 150).tolist()
        rng.shuffle(raw)
        keys = [None if x % 37 == 0 else (x if kind == "int" else f"k{x}") for x in raw]
        got = num.ids(pa.array(keys, pa.int64() if kind == "int" else pa.string()))
        want = [seen.setdefault(k, len(seen)) for k in keys]
        assert got.tolist() == want
    assert len(num) == len(seen)
    assert num.keys().to_pylist() == list(seen)


def test_numbering_merges_its_runs_of_integer_keys():
    """Batches of mostly new integer keys: the runs merge as they grow (about log2 of the
    keys remain) and every key keeps its number."""
    from streamcell.backends.spark.fold import Numbering

    rng = np.random.default_rng(9)
    num = Numbering()
    seen: dict = {}
    for i in range(64):
        keys = (rng.permutation(5000)[:300] + i * 4000).tolist()  # some overlap the last batch
        got = num.ids(pa.array(keys, pa.int64()))
        assert got.tolist() == [seen.setdefault(k, len(seen)) for k in keys]
    assert len(num.runs) <= 8 and sum(len(c) for c, _ in num.runs) == len(seen)
