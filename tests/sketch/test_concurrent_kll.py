"""ConcurrentKllDoublesSketch: N Python threads update one KLL through Rinberg et al.'s framework;
queries during ingestion stay within the relaxation, nothing is lost after the flush."""

from __future__ import annotations

import threading

import numpy as np
import pyarrow as pa
import pytest

from streamcell.sketches import ConcurrentKllDoublesSketch, KllDoublesSketch


def _feed(cs: ConcurrentKllDoublesSketch, parts: list[np.ndarray], chunk: int) -> list[int]:
    seen: list[int] = []
    stop = threading.Event()

    def writer(w: int) -> None:
        p = parts[w]
        for off in range(0, len(p), chunk):
            cs.update_batch(w, p[off : off + chunk])

    def reader() -> None:
        while not stop.is_set():
            seen.append(cs.n)

    q = threading.Thread(target=reader)
    q.start()
    ws = [threading.Thread(target=writer, args=(w,)) for w in range(len(parts))]
    for t in ws:
        t.start()
    for t in ws:
        t.join()
    stop.set()
    q.join()
    return seen


@pytest.mark.parametrize("writers,buffer", [(1, 8), (2, 64), (4, 256)])
def test_no_lost_updates_and_quantiles_within_error(writers, buffer):
    rng = np.random.default_rng(writers * 7 + buffer)
    n = 300_000
    vals = rng.permutation(n).astype(np.float64)
    parts = np.array_split(vals, writers)
    with ConcurrentKllDoublesSketch(200, writers=writers, buffer=buffer, seed=5) as cs:
        assert cs.relaxation == 2 * writers * buffer
        seen = _feed(cs, parts, chunk=5_000)
        assert seen == sorted(seen)  # the published count never goes back
        assert all(0 <= s <= n for s in seen)
        cs.flush()
        assert cs.n == n  # no lost updates after the final flush
        snap = cs.snapshot()
    assert isinstance(snap, KllDoublesSketch) and snap.n == n
    eps = snap.normalized_rank_error(False)
    probes = np.linspace(0, n - 1, 41)
    err = np.abs(snap.get_ranks(probes) - probes / n)
    assert float(err.max()) <= eps
    assert snap.min_value == 0.0 and snap.max_value == n - 1


def test_query_during_ingestion_within_relaxation():
    cs = ConcurrentKllDoublesSketch(200, writers=1, buffer=100, eager_limit=0)
    col = np.arange(10_000, dtype=np.float64)
    for off in range(0, len(col), 1000):
        cs.update_batch(0, col[off : off + 1000])
        done = off + 1000
        assert done - cs.relaxation <= cs.n <= done
    cs.close()
    assert cs.n == 10_000


def test_small_stream_exact_while_live():
    # eager below k: every update is in the global sketch before update_batch returns
    with ConcurrentKllDoublesSketch(200, writers=2, buffer=64) as cs:
        cs.update_batch(0, pa.array([3.0, 1.0, None, 2.0]))
        cs.update_batch(1, [5.0, float("nan"), 4.0])
        assert cs.eager and cs.n == 5
        assert cs.get_quantile(0.5, inclusive=True) == 3.0
        assert cs.get_rank(4.0) == pytest.approx(3 / 5)


def test_errors():
    with pytest.raises(ValueError, match="k must be"):
        ConcurrentKllDoublesSketch(2)
    with pytest.raises(ValueError, match="writers must be"):
        ConcurrentKllDoublesSketch(writers=0)
    with pytest.raises(ValueError, match="buffer must be"):
        ConcurrentKllDoublesSketch(buffer=0)
    cs = ConcurrentKllDoublesSketch(writers=2)
    with pytest.raises(ValueError, match="writer_id 2 not in"):
        cs.update_batch(2, [1.0])
    cs.close()
    with pytest.raises(Exception, match="closed"):
        cs.update_batch(0, [1.0])
