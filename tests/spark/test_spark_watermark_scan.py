"""The watermark scan that finds a window step's late rows on Spark (``groupby.late_serials``),
against the reference's definition computed row by row in arrival order here: a row is late
when its time is below the largest earlier time minus the lateness; a mark ``v`` of the
admitted rows (``floor((t - lateness) / size) * size``) goes to the first admitted row that
reaches it. The partitions come in every layout a plan gives them: runs of increasing
serials in order, out of order, several to a partition, interleaved, shuffled."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark

SIZE = 25


@pytest.fixture(autouse=True)
def small_batches():
    """Arrow batches of 37 rows into the scans: runs continue across batch boundaries."""
    from streamcell.backends.spark.session import get_session

    conf = get_session().conf
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    old = conf.get(key)
    conf.set(key, "37")
    yield
    conf.set(key, old)


def _rows(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Serials with gaps (filtered rows) and times mostly increasing, with rows far behind and
    jumps back at some places (so a row can be late because of a row many partitions back)."""
    rng = np.random.default_rng(seed)
    o = np.cumsum(rng.integers(1, 4, n)).astype(np.int64)
    t = (np.arange(n) * 3 + rng.integers(-5, 6, n)).astype(np.int64)
    t[rng.random(n) < 0.03] -= 60
    t[n // 3 : n // 3 + 40] -= 200  # a stretch far behind: late after the stretch before it
    return o, t


def _want(o: np.ndarray, t: np.ndarray, lateness: int) -> tuple[list[int], dict[int, int]]:
    late, marks, top = [], {}, None
    for i in np.argsort(o, kind="stable"):
        oi, ti = int(o[i]), int(t[i])
        if top is not None and ti < top - lateness:
            late.append(oi)
        else:
            v = (ti - lateness) // SIZE * SIZE
            marks.setdefault(v, oi)
        top = ti if top is None else max(top, ti)
    return sorted(late), marks


def _frame(spark, o: np.ndarray, t: np.ndarray, layout: str):
    """(o, t) in five pieces of consecutive rows, each its own partition, in ``layout``."""
    from pyspark.sql import functions as F

    n = len(o)
    cuts = [0, n // 5, n // 3, n // 2, 4 * n // 5, n]
    rows = list(zip(o.tolist(), t.tolist(), strict=True))
    pieces = [spark.sparkContext.parallelize(rows[a:z], 1) for a, z in zip(cuts, cuts[1:])]
    if layout.startswith("reversed"):
        pieces = pieces[::-1]
    df = spark.createDataFrame(spark.sparkContext.union(pieces), "o bigint, t bigint")
    if layout == "reversed-in-two":  # several runs, out of order, in one partition
        return df.coalesce(2)
    if layout == "interleaved":
        return df.repartition(3)
    if layout == "shuffled":
        return df.orderBy(F.rand(seed=3)).repartition(2)
    return df


LAYOUTS = ["in-order", "reversed", "reversed-in-two", "interleaved", "shuffled"]


# the blocked scan shuffles the rows into blocks whatever their layout: two layouts suffice
@pytest.mark.parametrize(
    ("layout", "in_place"),
    [(x, True) for x in LAYOUTS] + [("in-order", False), ("shuffled", False)],
    ids=[f"{x}-in-place" for x in LAYOUTS] + ["in-order-blocked", "shuffled-blocked"],
)
@pytest.mark.parametrize("lateness", [0, 10, 250])
def test_late_rows_and_marks_equal_the_sequential_scan(monkeypatch, layout, lateness, in_place):
    from streamcell.backends.spark import groupby
    from streamcell.backends.spark.session import get_session

    monkeypatch.setattr(groupby, "SCAN_IN_PLACE", in_place)
    spark = get_session()
    o, t = _rows(3000, seed=lateness + 1)
    late, marks, _ = groupby.late_serials(
        _frame(spark, o, t, layout), lateness, 4, lambda f: f(), 97, SIZE
    )
    want_late, want_marks = _want(o, t, lateness)
    assert sorted(late) == want_late
    if lateness < 250:
        assert want_late  # the data has late rows to find
    if in_place and layout.startswith(("in-order", "reversed")):
        assert marks == want_marks  # found by the in-place scan on its way
    else:
        assert marks is None  # the caller has Spark find them


def test_a_partition_out_of_order_gives_up_the_in_place_scan(monkeypatch):
    """Rows not in runs of increasing serials (the partition came out of a shuffle) make the
    in-place scan give up after MAX_SEGMENTS runs: the blocked scan decides instead."""
    from streamcell.backends.spark import groupby
    from streamcell.backends.spark.session import get_session

    spark = get_session()
    o, t = _rows(2000, seed=5)
    df = _frame(spark, o, t, "shuffled")
    monkeypatch.setattr(groupby, "MAX_SEGMENTS", 50)
    assert groupby.in_place_scan(df, 10, lambda f: f(), SIZE) is None
    late, *_ = groupby.late_serials(df, 10, 4, lambda f: f(), 97, SIZE)
    assert sorted(late) == _want(o, t, 10)[0]


@pytest.mark.parametrize(
    ("layout", "ends_via"),
    [(x, "local-file") for x in LAYOUTS[:4]] + [("reversed-in-two", "shipped")],
)
@pytest.mark.parametrize("lateness", [0, 10])
def test_window_ends_close_at_the_first_admitted_row_reaching_them(
    monkeypatch, layout, lateness, ends_via
):
    """A session closes at the first admitted row (arrival order) with ``t - lateness`` at or
    beyond its end; ends no row reaches stay open (absent). The ends reach the executors as
    local Parquet files (local master) or with the function (elsewhere), repeats and all."""
    from streamcell.backends.spark import groupby, session
    from streamcell.backends.spark.session import get_session

    if ends_via == "shipped":
        monkeypatch.setattr(session, "is_local", lambda master: False)

    spark = get_session()
    o, t = _rows(3000, seed=lateness + 3)
    narrow = _frame(spark, o, t, layout)
    scan = groupby.late_serials(narrow, lateness, 4, lambda f: f(), 97, SIZE)
    rng = np.random.default_rng(4)
    ends = np.unique(np.r_[rng.integers(int(t.min()) - 50, int(t.max()) + 50, 400), t[:50] + 1])
    # as the sessions hand them over: one end per session, so repeats, in no order, over
    # several partitions
    given = np.r_[ends, ends[::3]]
    rng.shuffle(given)
    frame = spark.createDataFrame([(int(e),) for e in given], "v bigint").repartition(3)
    got = groupby.record_closes(
        narrow, frame, lateness, scan, lambda f: f(), lambda d: d.localCheckpoint(eager=True)
    )
    if layout == "interleaved":
        assert got is None  # not in place: the caller has Spark find them
        return
    late = set(scan.late)
    want = {}
    for e in ends.tolist():
        reach = [int(x) for x, y in zip(o, t, strict=True) if x not in late and y - lateness >= e]
        if reach:
            want[e] = [min(reach)]
    rows = got.collect()
    have = {r["_we"]: list(r[groupby.WINDOW_CLOSE]) for r in rows}
    assert have == want
    assert len(rows) == len(have)  # one close per end, however often it was given
    assert 0 < len(want) < len(ends)  # some ends are reached, some not
    if ends_via == "shipped":  # more ends than may ride with the function: Spark finds them
        monkeypatch.setattr(groupby, "MAX_SHIPPED_ENDS", len(ends) - 1)
        args = (narrow, frame, lateness, scan, lambda f: f(), lambda d: d)
        assert groupby.record_closes(*args) is None


def _closes_want(o, t, ends, lateness):
    """Per end, the first row in arrival order with ``t - lateness`` at or beyond it."""
    want = {}
    for e in ends.tolist():
        reach = [int(x) for x, y in zip(o, t, strict=True) if y - lateness >= e]
        if reach:
            want[e] = [min(reach)]
    return want


def _on_time(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Serials with gaps and times increasing with a jitter of 3 ticks: no row is late with a
    lateness of 10, yet each run's first row is behind the largest time before it."""
    rng = np.random.default_rng(seed)
    o = np.cumsum(rng.integers(1, 4, n)).astype(np.int64)
    t = (np.arange(n) * 3 + rng.integers(-3, 4, n)).astype(np.int64)
    return o, t


@pytest.mark.parametrize(
    ("layout", "ends_via"),
    [(x, "local-file") for x in LAYOUTS[:4]] + [("reversed-in-two", "shipped")],
)
def test_one_pass_finds_the_closes_where_no_row_is_late(monkeypatch, layout, ends_via):
    """``scan_and_close``: each run scanned from nothing before it still gives every end the
    first row of all (arrival order) reaching it: the smallest of the runs' records, or the
    first row of the earliest run that starts at or beyond it. Ends no row reaches stay open;
    runs that interleave leave it to the two passes."""
    from pyspark.sql import functions as F

    from streamcell.backends.spark import groupby, session
    from streamcell.backends.spark.session import get_session

    if ends_via == "shipped":
        monkeypatch.setattr(session, "is_local", lambda master: False)
    spark = get_session()
    lateness = 10
    o, t = _on_time(3000, seed=7)
    narrow = _frame(spark, o, t, layout)
    rng = np.random.default_rng(8)
    # ends anywhere, ends right at the runs' first rows (t - lateness), and beyond every row
    firsts = np.array([0, 3000 // 5, 3000 // 3, 3000 // 2, 4 * 3000 // 5])
    ends = np.unique(
        np.r_[
            rng.integers(int(t.min()) - 50, int(t.max()) + 50, 400),
            t[firsts] - lateness,
            t[firsts] - lateness + 1,
        ]
    )
    given = np.r_[ends, ends[::3]]
    rng.shuffle(given)
    frame = spark.createDataFrame([(int(e),) for e in given], "v bigint").repartition(3)
    check = lambda d: d.localCheckpoint(eager=True)  # noqa: E731
    fused, first = groupby.scan_and_close(narrow, frame, lateness, lambda f: f(), check)
    assert first is not None
    if layout == "interleaved":
        assert fused is None  # runs of different partitions interleave: two passes
        return
    assert fused is not None
    assert len(fused.opens) == 5  # one branch per run
    got = (
        spark.createDataFrame([(int(e),) for e in ends], "_we bigint")
        .join(fused.enum, on="_we", how="left")
        .select("_we", fused.close(F.col(groupby.CLOSE_AT), F.col("_we")).alias("close"))
        .collect()
    )
    have = {r["_we"]: list(r["close"]) for r in got if r["close"] is not None}
    want = _closes_want(o, t, ends, lateness)
    assert have == want
    assert 0 < len(want) < len(ends)
    # some ends close at a run's first row, which the scan of that run does not enumerate
    assert any(have[e] == [int(o[f])] for f in firsts[1:] for e in [int(t[f]) - lateness])


@pytest.mark.parametrize("case", ["late-in-a-run", "late-because-of-an-earlier-run", "ends"])
def test_one_pass_leaves_late_rows_to_the_two_passes(monkeypatch, case):
    """A late row, found in its own run or only knowing the runs before (a run whose first rows
    are behind the largest time of the run before it), makes ``scan_and_close`` give up after
    its pass; ends too many to ship with the function, before it."""
    from streamcell.backends.spark import groupby, session
    from streamcell.backends.spark.session import get_session

    spark = get_session()
    o, t = _on_time(3000, seed=9)
    if case == "late-in-a-run":
        t[2000] -= 100
    else:  # rows 1500-1539 open the fourth run, 200 ticks behind the end of the third
        t[1500:1540] -= 200
    if case == "ends":
        monkeypatch.setattr(session, "is_local", lambda master: False)
        monkeypatch.setattr(groupby, "MAX_SHIPPED_ENDS", 10)
    narrow = _frame(spark, o, t, "in-order")
    frame = spark.createDataFrame([(int(e),) for e in t[::100]], "v bigint")
    check = lambda d: d.localCheckpoint(eager=True)  # noqa: E731
    fused, first = groupby.scan_and_close(narrow, frame, 10, lambda f: f(), check)
    assert fused is None
    assert (first is not None) == (case != "ends")
    want_late, _ = _want(o, t, 10)
    assert want_late  # the two passes have late rows to find
    # the scan goes on from the pass's rows (only runs an earlier run makes late are scanned
    # again), or scans from the start
    calls: list[int] = []

    def action(f):
        calls.append(1)
        return f()

    late, *_ = groupby.late_serials(narrow, 10, 4, action, 97, None, first)
    assert sorted(late) == want_late
    # from the pass's rows: nothing more to scan where the late row is late in its own run;
    # the runs an earlier run makes late, once more; without the pass, the whole first pass too
    assert len(calls) == {"late-in-a-run": 0, "late-because-of-an-earlier-run": 1, "ends": 2}[case]
