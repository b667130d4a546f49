"""ConcurrentFrequentItemsSketch: N Python threads update one frequent-items sketch through
Rinberg et al.'s framework; queries during ingestion stay within the relaxation, nothing is lost
after the flush, and every item's true count lies within the merged sketch's bounds."""

from __future__ import annotations

import threading
from collections import Counter

import numpy as np
import pytest

from streamcell.sketches import ConcurrentFrequentItemsSketch, FrequentItemsSketch

ds = pytest.importorskip("datasketches")


def _zipf_parts(n: int, writers: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    vals = np.minimum(rng.zipf(1.3, n), 10_000).astype(np.int64)
    return np.array_split(vals, writers)


@pytest.mark.parametrize("writers,buffer", [(1, 16), (2, 128), (4, 512)])
def test_no_lost_updates_and_bounds_hold(writers, buffer):
    n = 200_000
    parts = _zipf_parts(n, writers, writers * 13 + buffer)
    truth = Counter(np.concatenate(parts).tolist())
    seen: list[int] = []
    stop = threading.Event()
    with ConcurrentFrequentItemsSketch(6, writers=writers, buffer=buffer) as cs:
        assert cs.relaxation == 2 * writers * buffer

        def writer(w: int) -> None:
            for off in range(0, len(parts[w]), 4_000):
                cs.update_batch(w, parts[w][off : off + 4_000])

        def reader() -> None:
            while not stop.is_set():
                seen.append(cs.total_weight)

        q = threading.Thread(target=reader)
        q.start()
        ws = [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
        for t in ws:
            t.start()
        for t in ws:
            t.join()
        stop.set()
        q.join()
        assert seen == sorted(seen)  # the published weight never goes back
        cs.flush()
        assert cs.total_weight == n  # nothing lost after the final flush
        snap = cs.snapshot()
    assert isinstance(snap, FrequentItemsSketch)
    # merged errors add up but stay within DataSketches' a-priori bound for the total weight
    assert snap.maximum_error <= 3.5 / 2**6 * n
    for item, count in truth.items():
        assert snap.get_lower_bound(item) <= count <= snap.get_upper_bound(item)
    reported = {i for i, *_ in snap.get_frequent_items("no_false_negatives")}
    assert {i for i, c in truth.items() if c > snap.maximum_error} <= reported
    # the bytes load in datasketches with the same answers
    theirs = ds.frequent_items_sketch.deserialize(snap.to_bytes(), ds.PyLongsSerDe())
    top = snap.get_frequent_items("no_false_positives")[0]
    assert theirs.get_estimate(top[0]) == top[1]


def test_small_streams_are_exact_while_eager():
    with ConcurrentFrequentItemsSketch(6, writers=2, buffer=1_000) as cs:
        cs.update_batch(0, np.array([1, 1, 2], dtype=np.int64))
        cs.update_batch(1, np.array([1, 3], dtype=np.int64))
        # eager below the map's capacity: no flush needed
        assert cs.total_weight == 5
        assert cs.get_frequent_items("no_false_positives", threshold=0) == [
            (1, 3, 3, 3),
            (2, 1, 1, 1),
            (3, 1, 1, 1),
        ]


def test_bad_arguments():
    with pytest.raises(ValueError, match="lg_max_map_size"):
        ConcurrentFrequentItemsSketch(2)
    with pytest.raises(ValueError, match="writers"):
        ConcurrentFrequentItemsSketch(6, writers=0)
    with ConcurrentFrequentItemsSketch(6, writers=1) as cs:
        with pytest.raises(ValueError, match="writer_id 1 not in"):
            cs.update_batch(1, np.array([1]))
        with pytest.raises(TypeError, match="expected integers"):
            cs.update_batch(0, np.array([1.5]))
