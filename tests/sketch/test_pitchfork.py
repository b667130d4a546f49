"""Accuracy pitchfork (Rinberg et al., Fig. 5): at fixed seeds, over stream sizes from 1 upward,
every estimate lies within the sketch's documented bounds.

- Θ and HLL: lower_bound(3) <= n <= upper_bound(3), and Θ exact (estimate == n) below k.
- Concurrent Θ: the final estimate equals the sequential sketch's on the same data, and a
  small stream (below k) is exact while writers are still live (eager propagation).
- KLL: the rank of every probed value is within the documented normalized rank error.

The quick tier goes to 10^6; the 10^7 tier is marked ``slow``.
"""

from __future__ import annotations

import numpy as np
import pytest

from streamcell.sketches import (
    ConcurrentThetaSketch,
    HllSketch,
    KllDoublesSketch,
    ThetaSketch,
)

LG_K = 12
K = 1 << LG_K
SEEDS = (1, 2, 3)


def _sizes(top: int) -> list[int]:
    out = {1, 2, 3, 5, 7}
    v = 10
    while v <= top:
        out.update({v, 2 * v, 5 * v})
        v *= 10
    out.update({K - 1, K, K + 1})
    return sorted(s for s in out if s <= top)


QUICK = _sizes(10**6)
SLOW = [10**7]


def _distinct(n: int, seed: int) -> np.ndarray:
    # n distinct int64 items; the seed shifts the item space so each seed hashes differently
    return np.arange(n, dtype=np.int64) + np.int64(seed) * (1 << 40)


def _theta_check(n: int, seed: int) -> None:
    vals = _distinct(n, seed)
    sk = ThetaSketch(LG_K)
    sk.update_batch(vals)
    est = sk.estimate()
    where = f"Θ n={n} seed={seed}"
    if n <= K:
        assert est == n, f"{where}: exact mode expected, got {est}"
    assert sk.lower_bound(3) <= n <= sk.upper_bound(3), (
        f"{where}: {n} outside [{sk.lower_bound(3)}, {sk.upper_bound(3)}]"
    )
    assert sk.lower_bound(1) <= est <= sk.upper_bound(1), where


def _hll_check(n: int, seed: int) -> None:
    sk = HllSketch(LG_K)
    sk.update_batch(_distinct(n, seed))
    lb, ub = sk.lower_bound(3), sk.upper_bound(3)
    assert lb <= n <= ub, f"HLL n={n} seed={seed}: {n} outside [{lb}, {ub}]"


def _kll_check(n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    vals = rng.permutation(n).astype(np.float64)
    sk = KllDoublesSketch(200)
    sk.update_batch(vals)
    assert sk.n == n
    eps = sk.normalized_rank_error(False)
    probes = np.unique(np.linspace(0, n - 1, num=min(n, 33)).astype(np.int64)).astype(np.float64)
    got = sk.get_ranks(probes)  # exclusive: fraction of items < v, i.e. v / n here
    err = np.abs(got - probes / n)
    assert float(err.max()) <= eps, f"KLL n={n} seed={seed}: rank error {err.max()} > {eps}"
    if n <= 200:  # below k the sketch keeps every item: ranks are exact
        assert float(err.max()) == 0.0


def _concurrent_check(n: int, seed: int) -> None:
    vals = _distinct(n, seed)
    seq = ThetaSketch(LG_K)
    seq.update_batch(vals)
    if seq.is_estimation_mode:
        seq.trim()  # the concurrent global sketch is a union of writer streams, trimmed to k
    with ConcurrentThetaSketch(LG_K, writers=2, buffer=64) as cs:
        half = n // 2
        cs.update_batch(0, vals[:half])
        cs.update_batch(1, vals[half:])
        live = cs.estimate()
        if n < K:
            # eager propagation: exact while live, up to the one in-flight item per writer
            assert live.eager
            assert n - 2 <= live.estimate <= n, f"concurrent Θ n={n}: live {live.estimate}"
        cs.flush()
        final = cs.estimate()
        same_bytes = cs.snapshot().to_bytes() == seq.to_bytes()
    assert final.estimate == seq.estimate(), (
        f"concurrent Θ n={n} seed={seed}: {final.estimate} != sequential {seq.estimate()}"
    )
    assert same_bytes, f"concurrent Θ n={n} seed={seed}: snapshot bytes differ from sequential"


@pytest.mark.parametrize("seed", SEEDS)
def test_theta_pitchfork(seed: int) -> None:
    for n in QUICK:
        _theta_check(n, seed)


@pytest.mark.parametrize("seed", SEEDS)
def test_hll_pitchfork(seed: int) -> None:
    for n in QUICK:
        _hll_check(n, seed)


@pytest.mark.parametrize("seed", SEEDS)
def test_kll_pitchfork(seed: int) -> None:
    for n in QUICK:
        _kll_check(n, seed)


@pytest.mark.parametrize("seed", SEEDS)
def test_concurrent_theta_pitchfork(seed: int) -> None:
    for n in QUICK:
        _concurrent_check(n, seed)


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_pitchfork_ten_million(seed: int) -> None:
    for n in SLOW:
        _theta_check(n, seed)
        _hll_check(n, seed)
        _kll_check(n, seed)
        _concurrent_check(n, seed)
