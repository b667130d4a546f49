"""Speculative stateful operators (Sturzrehm): transactional Cython UDFs in a ``speculate``
stage. The reference engine runs the function on each row in order against a dict; the
native engine runs rows ahead on several threads, commits in order and re-runs a row whose
reads an earlier commit changed. Every test compares the native output with the reference's
exactly. One module is compiled per test session (into a temporary cache)."""

from __future__ import annotations

import random
import time

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

import streamcell as sc
from streamcell import udf
from streamcell.errors import DSLSyntaxError, NotSupportedError, PlanError
from streamcell.options import RunOptions
from streamcell.plan import Horizon
from streamcell.snapshot import metrics_snapshot
from streamcell.widgets.dashboard import operators_html
from tests.helpers import run_plan

SOURCE = """
from posix.unistd cimport usleep

cdef extern from "<sched.h>":
    int sched_yield() nogil

cdef extern from "<stdlib.h>":
    int rand() nogil

cdef inline void _jitter(long on) noexcept nogil:
    # random yields and short sleeps: other interleavings of the speculative workers
    cdef int r
    if on:
        r = rand() % 8
        if r < 2:
            sched_yield()
        elif r == 2:
            usleep(rand() % 40)

cdef long match(sc_txn *tx, long region, long spot, long release, long jitter) noexcept nogil:
    # ride sharing (Sturzrehm ch. 7): drivers sit at spots 0..15 of a region (key
    # region * 16 + spot, value 1 when busy); a request at `spot` takes the nearest free driver
    # within 3 spots and marks it busy; `release` >= 0 first frees that driver (a ride ended)
    cdef long best = -1, dist = 100, d, k
    _jitter(jitter)
    if release >= 0:
        tx_put(tx, release, 0)
    for d in range(spot - 3, spot + 4):
        if d < 0 or d >= 16:
            continue
        k = region * 16 + d
        if tx_get(tx, k) == 0 and (d - spot if d >= spot else spot - d) < dist:
            best = k
            dist = d - spot if d >= spot else spot - d
    if best >= 0:
        tx_put(tx, best, 1)
    _jitter(jitter)
    return best

cdef long bump(sc_txn *tx, long bucket, long extra, long jitter) noexcept nogil:
    # a histogram: count into `bucket` and, when extra >= 0, also into `extra`
    cdef long n = tx_get(tx, bucket) + 1
    _jitter(jitter)
    tx_put(tx, bucket, n)
    if extra >= 0:
        tx_put(tx, extra, tx_get(tx, extra) + 1)
    return n * 1000 + tx_get(tx, extra if extra >= 0 else bucket)

cdef double share(sc_txn *tx, long bucket, double weight) noexcept nogil:
    # a float result: this row's share of its bucket's running weight (weights in 1/1000)
    cdef long total = tx_get(tx, bucket) + <long>(weight * 1000)
    tx_put(tx, bucket, total)
    return weight * 1000 / total if total else 0.0

cdef bint first_visit(sc_txn *tx, long key) noexcept nogil:
    if tx_get(tx, key):
        return False
    tx_put(tx, key, 1)
    return True

cdef long slow_count(sc_txn *tx, long key, long us) noexcept nogil:
    cdef long n = tx_get(tx, key)
    usleep(us)
    tx_put(tx, key, n + 1)
    return n + 1

cdef double plain(double x) noexcept nogil:
    return x + 1
"""


@pytest.fixture(scope="module")
def udfs(tmp_path_factory: pytest.TempPathFactory):
    mp = pytest.MonkeyPatch()
    mp.setenv("STREAMCELL_UDF_CACHE", str(tmp_path_factory.mktemp("spec-udf-cache")))
    try:
        yield sc.cython_udf(SOURCE)
    finally:
        mp.undo()


NATIVE = [
    RunOptions(engine="native", workers=1, batch_size=64),
    RunOptions(engine="native", workers=2, batch_size=64),
    RunOptions(engine="native", workers=4, batch_size=256),
]
REFERENCE = RunOptions(engine="reference")


def _result(plan: sc.Plan, options: RunOptions) -> tuple[pl.DataFrame, sc.Run]:
    run = run_plan(plan, options)
    assert run.engine == options.engine  # never a silent fallback to the reference
    return run.table(run.table_names()[0]), run


def _same_as_reference(plan: sc.Plan, options: RunOptions) -> dict:
    want, _ = _result(plan, REFERENCE)
    got, run = _result(plan, options)
    assert_frame_equal(got, want)
    assert run.native_metrics is not None
    (stats,) = run.native_metrics["speculate"].values()
    assert stats["commits"] == want.height
    return stats


# ------------------------------------------------------------------------- workloads


def rides(n: int, conflict: float, seed: int = 7, jitter: int = 0) -> pl.DataFrame:
    """Requests in fresh regions (no shared driver: no conflict) except a share `conflict`
    that go to the previous request's region (they read drivers it may take)."""
    rnd = random.Random(seed)
    region, rows = 0, []
    for i in range(n):
        if i == 0 or rnd.random() >= conflict:
            region += 1
        release = region * 16 + rnd.randrange(16) if rnd.random() < 0.3 else -1
        rows.append((region, rnd.randrange(16), release, jitter))
    return pl.DataFrame(rows, schema=["region", "spot", "release", "jitter"], orient="row")


def histogram(n: int, conflict: float, seed: int = 11, jitter: int = 0) -> pl.DataFrame:
    """Each event counts into its own bucket; a share `conflict` also count into the previous
    event's bucket (Sturzrehm Alg. 25)."""
    rnd = random.Random(seed)
    rows = [(i, i - 1 if i and rnd.random() < conflict else -1, jitter) for i in range(n)]
    return pl.DataFrame(rows, schema=["bucket", "extra", "jitter"], orient="row")


def _ride_plan(frame: pl.DataFrame, horizon: Horizon = "adaptive") -> sc.Plan:
    s = sc.source(frame).speculate(
        "match", "region", "spot", "release", "jitter", name="driver", horizon=horizon
    )
    return s.plan()


def _hist_plan(frame: pl.DataFrame, horizon: Horizon = "adaptive") -> sc.Plan:
    return sc.source(frame).speculate("bump", horizon=horizon).plan()


@pytest.mark.parametrize("conflict", [0.0, 0.1, 0.5])
@pytest.mark.parametrize("options", NATIVE, ids=["w1", "w2", "w4"])
def test_ride_sharing_matches_reference(udfs, options, conflict):
    frame = rides(1500, conflict)
    stats = _same_as_reference(_ride_plan(frame), options)
    if conflict == 0.0 or options.workers == 1:
        assert stats["aborts"] == 0  # no shared keys / nothing runs ahead of a commit
    assert stats["workers"] == options.workers and stats["mode"] == "adaptive"


@pytest.mark.parametrize("conflict", [0.0, 0.1, 0.5])
@pytest.mark.parametrize("options", NATIVE, ids=["w1", "w2", "w4"])
def test_histogram_matches_reference(udfs, options, conflict):
    frame = histogram(2000, conflict)
    stats = _same_as_reference(_hist_plan(frame, horizon=16), options)
    if conflict == 0.0 or options.workers == 1:
        assert stats["aborts"] == 0
    assert stats["mode"] == "fixed" and stats["horizon"] == 16
    assert stats["keys"] == 2000


def test_ride_sharing_output_is_a_valid_matching(udfs):
    """Beyond equality with the reference: no driver is handed out twice while busy."""
    got, _ = _result(_ride_plan(rides(800, 0.5)), NATIVE[2])
    busy: set[int] = set()
    for release, driver in zip(got["release"], got["driver"]):
        busy.discard(release)
        if driver >= 0:
            assert driver not in busy
            busy.add(driver)
    assert (got["driver"] >= 0).sum() > 400


def test_results_are_identical_at_every_horizon(udfs):
    frame = rides(1200, 0.5, seed=3, jitter=1)
    want, _ = _result(_ride_plan(frame), REFERENCE)
    for horizon in (1, 2, 5, 64, "adaptive"):
        got, run = _result(_ride_plan(frame, horizon), RunOptions(engine="native", workers=4))
        assert_frame_equal(got, want)
        (stats,) = run.native_metrics["speculate"].values()
        if horizon != "adaptive":
            assert stats["horizon"] == horizon
        if horizon == 1:
            assert stats["aborts"] == 0  # only the earliest event ever runs: sequential


def test_conflicts_are_detected_and_rerun(udfs):
    """Every row reads and writes one key and holds the read across a 100 µs sleep, so rows
    speculated past the head read a value the head then changes: they must be re-run."""
    frame = pl.DataFrame({"key": [0] * 300, "us": [100] * 300})
    plan = sc.source(frame).speculate("slow_count", horizon=4).plan()
    stats = _same_as_reference(plan, RunOptions(engine="native", workers=2, batch_size=300))
    assert stats["aborts"] > 0
    got, _ = _result(plan, NATIVE[1])
    assert got["slow_count"].to_list() == list(range(1, 301))


def test_float_and_bool_results_and_null_arguments(udfs):
    frame = pl.DataFrame(
        {
            "bucket": [i % 5 if i % 9 else None for i in range(300)],
            "weight": [(i % 7) / 4 for i in range(300)],
            "key": [i % 40 for i in range(300)],
        }
    )
    plan = (
        sc.source(frame)
        .speculate("share", "bucket", "weight", horizon=3)
        .speculate("first_visit", "key", name="first")
        .plan()
    )
    for options in NATIVE:
        want, _ = _result(plan, REFERENCE)
        got, _ = _result(plan, options)
        assert_frame_equal(got, want)
    assert got.schema["share"] == pl.Float64 and got.schema["first"] == pl.Boolean
    assert got["share"].null_count() == frame["bucket"].null_count() > 0
    assert got["first"].sum() == 40


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    events=st.lists(st.tuples(st.integers(0, 7), st.integers(-1, 7)), min_size=1, max_size=300),
    workers=st.sampled_from([2, 3, 4]),
    horizon=st.sampled_from([1, 2, 3, 8, "adaptive"]),
    batch=st.sampled_from([1, 5, 64]),
)
def test_random_workloads_and_interleavings(udfs, events, workers, horizon, batch):
    """Randomized interleavings: histogram updates over a tiny key space (many conflicts),
    with random yields and sleeps inside every transaction, any worker count, horizon and
    batch split: always exactly the sequential result."""
    frame = pl.DataFrame(
        [(b, e, 1) for b, e in events], schema=["bucket", "extra", "jitter"], orient="row"
    )
    plan = _hist_plan(frame, horizon)
    _same_as_reference(plan, RunOptions(engine="native", workers=workers, batch_size=batch))


# ------------------------------------------------------------------- the language


def test_dsl_stage_equals_the_fluent_api_and_round_trips(udfs):
    frame = rides(10, 0.1)
    text = (
        "source frame\n"
        "speculate driver=match(region, spot, release, jitter), horizon=8\n"
        "speculate bump(region, release, jitter)\n"
        "speculate first_visit(spot), horizon='adaptive'\n"
    )
    p = sc.parse(text, {"frame": frame})
    fluent = (
        sc.source(frame)
        .speculate("match", "region", "spot", "release", "jitter", name="driver", horizon=8)
        .speculate("bump", "region", "release", "jitter")
        .speculate("first_visit", "spot")
        .plan()
    )
    assert p == fluent
    assert sc.parse(p.to_dsl(), {"frame": frame}) == p
    bare = sc.parse("source frame\nspeculate bump", {"frame": histogram(5, 0)})
    assert bare.steps[1].args == () and bare.to_dsl().splitlines()[1] == "speculate bump"
    got, _ = _result(bare, NATIVE[1])
    assert "bump" in got.columns


def test_explain_names_the_stage_and_its_function(udfs):
    text = _ride_plan(rides(5, 0), horizon=4).explain()
    assert "speculate#2  driver = match(region, spot, release, jitter), horizon 4" in text
    assert "speculative" in text
    assert "ƒ match: native transaction (Cython, nogil; speculative, ordered commit)" in text


def test_unknown_function_and_wrong_kind_of_function_point_at_the_cell(udfs):
    frame = histogram(5, 0)
    with pytest.raises(DSLSyntaxError) as ei:
        sc.parse("source frame\nspeculate no_such_fn(bucket)", {"frame": frame})
    assert (ei.value.line, ei.value.column) == (2, 11)
    assert "unknown function 'no_such_fn'" in str(ei.value)
    with pytest.raises(DSLSyntaxError, match="plain.* is not transactional") as ei:
        sc.parse("source frame\nspeculate plain(bucket)", {"frame": frame})
    assert (ei.value.line, ei.value.column) == (2, 11)
    with pytest.raises(DSLSyntaxError, match="takes 3 column") as ei:
        sc.parse("source frame\nspeculate bump(bucket)", {"frame": frame})
    with pytest.raises(DSLSyntaxError, match="horizon must be") as ei:
        sc.parse("source frame\nspeculate bump, horizon=0", {"frame": frame})
    assert (ei.value.line, ei.value.column) == (2, 25)
    with pytest.raises(DSLSyntaxError, match="transactional function") as ei:
        sc.parse("source frame\nwith_columns y=bump(bucket, extra, jitter)", {"frame": frame})
    assert ei.value.line == 2
    with pytest.raises(udf.UdfError, match="transactional function"):
        udf.call("bump", "bucket", "extra", "jitter")
    with pytest.raises(ValueError, match="horizon must be"):
        sc.source(frame).speculate("bump", horizon=-3)


def test_compile_errors_name_the_step(udfs):
    frame = pl.DataFrame({"bucket": ["a"], "extra": [1], "jitter": [0]})
    with pytest.raises(PlanError, match="needs int for column 'bucket', which is str"):
        run_plan(sc.source(frame).speculate("bump").plan(), REFERENCE)
    with pytest.raises(PlanError, match="unknown function 'nope'"):
        run_plan(sc.source(frame).speculate("nope", "extra").plan(), REFERENCE)
    clash = pl.DataFrame({"bump": [1], "bucket": [1], "extra": [1], "jitter": [0]})
    with pytest.raises(PlanError, match="adds column 'bump' but the input has it"):
        run_plan(sc.source(clash).speculate("bump").plan(), REFERENCE)


def test_bad_transaction_signature_gives_line_and_column(tmp_path, monkeypatch):
    monkeypatch.setenv("STREAMCELL_UDF_CACHE", str(tmp_path))
    src = "\ncdef long f(sc_txn *tx, str name) noexcept nogil:\n    return 0\n"
    with pytest.raises(sc.UdfCompileError, match="argument 'str name'") as ei:
        sc.cython_udf(src)
    assert (ei.value.line, ei.value.column) == (2, 25)
    with pytest.raises(sc.UdfCompileError, match="sc_txn \\*tx comes first") as ei:
        sc.cython_udf("cdef long g(long x, sc_txn *tx) noexcept nogil:\n    return x\n")
    assert (ei.value.line, ei.value.column) == (1, 21)
    with pytest.raises(sc.UdfCompileError, match="data argument after sc_txn") as ei:
        sc.cython_udf("cdef long h(sc_txn *tx) noexcept nogil:\n    return 0\n")
    assert not list(tmp_path.glob("*.so"))


@pytest.mark.spark
def test_spark_refuses_the_stage_at_compile_time(udfs):
    pytest.importorskip("pyspark")
    from streamcell.backends import get_backend
    from streamcell.compiler import compile_plan

    plan = _hist_plan(histogram(5, 0))
    with pytest.raises(NotSupportedError) as ei:
        get_backend("spark").check(compile_plan(plan), RunOptions(engine="spark"))
    msg = str(ei.value)
    assert "not supported on spark: step speculate#2" in msg and "speculate bump" in msg


# ------------------------------------------------------------ metrics, stop, dashboard


def test_metrics_reach_the_dashboard_snapshot(udfs):
    _, run = _result(_ride_plan(rides(600, 0.5), horizon=6), NATIVE[1])
    snap = metrics_snapshot(run)
    (spec,) = snap.speculation
    assert (spec.step, spec.function, spec.mode, spec.horizon) == (
        "speculate#2",
        "match",
        "fixed",
        6,
    )
    assert spec.commits == 600 and 0.0 <= spec.abort_rate <= 1.0
    assert spec.abort_rate == pytest.approx(spec.aborts / spec.commits)
    html = operators_html(snap)
    assert "speculate#2 match: horizon 6 (fixed" in html and "abort rate" in html
    ref = run_plan(_ride_plan(rides(50, 0.5)), REFERENCE)
    assert metrics_snapshot(ref).speculation == ()


def test_stop_interrupts_a_long_speculative_batch(udfs):
    """10,000 rows of 2 ms each in one batch (20 s of work): stop() returns promptly."""
    frame = pl.DataFrame({"key": [i % 3 for i in range(10_000)], "us": [2000] * 10_000})
    plan = sc.source(frame).speculate("slow_count").plan()
    run = sc.start(
        plan, name="spec_stop", options=RunOptions(engine="native", workers=2, batch_size=10_000)
    )
    time.sleep(0.5)
    t0 = time.monotonic()
    run.stop()
    assert time.monotonic() - t0 < 3.0
    assert run.status == "stopped" and run.error is None


def test_speculate_inside_a_dag_plan(udfs):
    """Two sources merged by union, then one speculate stage (a DAG vertex on the native
    engine; the reference defines the merged order): native = reference."""
    a = histogram(300, 0.5, seed=1)
    b = histogram(300, 0.5, seed=2).with_columns(pl.col("bucket") % 7)
    plan = sc.source(a).union(sc.source(b)).speculate("bump", horizon="adaptive").plan()
    for options in NATIVE[1:]:
        stats = _same_as_reference(plan, options)
        assert stats["commits"] == 600
