"""Concurrent Θ (Rinberg et al.): writers + concurrent queries, relaxation bound, final equality."""

from __future__ import annotations

import threading

import numpy as np
import pytest

pytestmark = pytest.mark.native

pytest.importorskip("streamcell._theta")
ds = pytest.importorskip("datasketches")
pa = pytest.importorskip("pyarrow")
pl = pytest.importorskip("polars")

from streamcell.sketches import ConcurrentThetaSketch, ThetaSketch  # noqa: E402


def sequential(column, lg_k):
    s = ThetaSketch(lg_k)
    s.update_batch(column)
    if s.is_estimation_mode:
        s.trim()  # the concurrent sketch is a union of writer streams: trimmed to k
    return s


def run_writers(cs, parts, chunk, on_query=None):
    """Each part on its own writer thread in chunks; the main thread queries meanwhile.

    Returns the query log: (done_before, estimate, started_after) per query."""
    n = len(parts)
    started = [0] * n
    done = [0] * n
    errors = []

    def writer(w):
        try:
            col = parts[w]
            for off in range(0, len(col), chunk):
                piece = col[off : off + chunk]
                started[w] += len(piece)
                cs.update_batch(w, piece)
                done[w] += len(piece)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(n)]
    for t in threads:
        t.start()
    log = []
    while any(t.is_alive() for t in threads) or len(log) < 50:
        before = sum(done)
        est = cs.estimate()
        after = sum(started)
        log.append((before, est, after))
    for t in threads:
        t.join()
    assert not errors, errors
    return log


def check_log(log):
    for before, e, after in log:
        r = e.relaxation
        if e.exact:  # the relaxation alone: misses at most r preceding updates
            assert e.estimate + r >= before and e.estimate <= after
        else:  # the sketch's 3-sigma bounds widened by r
            assert e.relaxed_upper_bounds[2] >= before
            assert e.lower_bounds[2] <= after


@pytest.mark.parametrize("writers,buffer", [(1, 1), (2, 16), (3, 64)])
def test_small_stream_is_exact_while_ingesting(writers, buffer):
    # distinct items, fewer than the exact-mode threshold: eager propagation keeps it exact
    col = np.arange(6000, dtype=np.int64) * 3 + 1
    parts = np.array_split(col, writers)
    cs = ConcurrentThetaSketch(12, writers=writers, buffer=buffer)
    log = run_writers(cs, parts, chunk=50)
    for before, e, after in log:
        assert e.eager and e.exact
        assert before - writers <= e.estimate <= after  # r = N while eager
    cs.flush()
    assert cs.estimate().estimate == 6000.0
    assert cs.snapshot().to_bytes() == sequential(col, 12).to_bytes()
    cs.close()


@pytest.mark.parametrize("writers,buffer", [(2, 64), (2, 1), (4, 256)])
def test_large_stream_queries_within_relaxation_and_final_equality(writers, buffer):
    rng = np.random.default_rng(writers * 1000 + buffer)
    col = rng.choice(2**62, size=400_000, replace=False).astype(np.int64)
    parts = np.array_split(col, writers)
    with ConcurrentThetaSketch(10, writers=writers, buffer=buffer) as cs:
        assert cs.relaxation == 2 * writers * buffer
        log = run_writers(cs, parts, chunk=10_000)
        check_log(log)
        cs.flush()
        final = cs.estimate()
        seq = sequential(col, 10)
        assert final.estimate == seq.estimate()
        assert not final.eager and final.propagations > 0
        snap = cs.snapshot()
        assert snap.to_bytes() == seq.to_bytes()
        assert ds.compact_theta_sketch.deserialize(snap.to_bytes()).get_estimate() == seq.estimate()


def test_duplicates_and_mixed_column_types():
    strs = [f"user-{i % 30_000}" for i in range(90_000)]
    parts = [pa.array(strs[:45_000]), pl.Series(strs[45_000:])]
    cs = ConcurrentThetaSketch(11, writers=2, buffer=32)
    log = run_writers(cs, parts, chunk=5_000)
    assert log
    cs.flush()
    assert cs.estimate().estimate == sequential(pa.array(strs), 11).estimate()
    cs.update_batch(0, np.array([0.5, -0.0, np.nan]))
    cs.update_batch(1, pa.array([1, None, 2], pa.int32()))
    cs.flush()
    ref = ThetaSketch(11)
    for col in (pa.array(strs), np.array([0.5, -0.0, np.nan]), pa.array([1, None, 2])):
        ref.update_batch(col)
    if ref.is_estimation_mode:
        ref.trim()
    assert cs.snapshot().to_bytes() == ref.to_bytes()
    cs.close()


def test_flush_during_ingestion_loses_nothing():
    col = np.arange(300_000, dtype=np.int64)
    cs = ConcurrentThetaSketch(10, writers=2, buffer=128)
    stop = threading.Event()

    def flusher():
        while not stop.is_set():
            cs.flush()
            cs.snapshot()

    t = threading.Thread(target=flusher)
    t.start()
    run_writers(cs, np.array_split(col, 2), chunk=3_000)
    stop.set()
    t.join()
    cs.flush()
    assert cs.snapshot().to_bytes() == sequential(col, 10).to_bytes()
    cs.close()


def test_errors_and_lifecycle():
    cs = ConcurrentThetaSketch(writers=2)
    with pytest.raises(ValueError):
        cs.update_batch(2, np.arange(3))
    with pytest.raises(ValueError):
        ConcurrentThetaSketch(writers=0)
    with pytest.raises(ValueError):
        ConcurrentThetaSketch(buffer=0)
    cs.update_batch(1, np.arange(10))
    cs.close()
    cs.close()  # idempotent
    assert cs.estimate().estimate == 10.0
    with pytest.raises(RuntimeError):
        cs.update_batch(0, np.arange(3))
    del cs  # destroy after close: no hang, no leak


def test_eager_limit_option_switches_to_lazy_early():
    cs = ConcurrentThetaSketch(12, writers=1, buffer=1000, eager_limit=100)
    cs.update_batch(0, np.arange(150))
    e = cs.estimate()
    assert not e.eager and e.estimate + e.relaxation >= 150
    cs.flush()
    assert cs.estimate().estimate == 150.0
    cs.close()
