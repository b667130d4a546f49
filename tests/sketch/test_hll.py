"""HLL_8: accuracy at fixed seeds, DataSketches bytes both ways, union laws."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

pytestmark = pytest.mark.native

pytest.importorskip("streamcell._hll")
ds = pytest.importorskip("datasketches")
pa = pytest.importorskip("pyarrow")
pl = pytest.importorskip("polars")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from streamcell.sketches import HllSketch, hll_union  # noqa: E402


def ours(column, lg_k=12):
    h = HllSketch(lg_k)
    h.update_batch(column)
    return h


def theirs(items, lg_k=12, tgt=None):
    d = ds.hll_sketch(lg_k, tgt or ds.HLL_8)
    for x in items:
        d.update(x)
    return d


@pytest.mark.parametrize("n", [1, 10, 100, 1000, 10_000, 100_000, 1_000_000])
def test_accuracy_within_bounds(n):
    col = np.random.default_rng(n).choice(2**62, size=n, replace=False).astype(np.int64)
    h = ours(col)
    assert abs(h.estimate() / n - 1) < 3 * 0.8326 / 64 + 0.01
    assert h.lower_bound(3) <= n <= h.upper_bound(3)
    assert (
        h.lower_bound(3) <= h.lower_bound(1) <= h.estimate() <= h.upper_bound(1) <= h.upper_bound(3)
    )


@pytest.mark.parametrize("n", [0, 1, 50, 5000, 200_000])
@pytest.mark.parametrize("lg_k", [10, 12])
def test_bytes_both_ways(n, lg_k):
    col = np.arange(n, dtype=np.int64) * 13 - 99
    h = ours(col, lg_k)
    loaded = ds.hll_sketch.deserialize(h.to_bytes())
    assert loaded.lg_config_k == lg_k
    # both leave coupon mode at the same count (above 3/4 of 2^(lg_k-3) coupons)
    assert h.is_coupon_mode == (n <= 3 * 2 ** (lg_k - 3) // 4)
    assert h.is_coupon_mode == (theirs(col.tolist(), lg_k).serialize_compact()[7] & 3 != 2)
    if h.is_coupon_mode:  # ours is the coupon count; theirs maps it through a table
        assert h.estimate() == n and n <= loaded.get_estimate() <= n * (1 + 0.409 / 2**13)
    else:  # ours -> DataSketches: the same estimate (they read our HIP accumulator)
        assert loaded.get_estimate() == h.estimate()
    # DataSketches (every mode and target type) -> ours: identical registers
    for tgt in (ds.HLL_4, ds.HLL_6, ds.HLL_8):
        d = theirs(col.tolist(), lg_k, tgt)
        for image in (d.serialize_compact(), d.serialize_updatable()):
            back = HllSketch.from_bytes(image)
            assert back.registers() == h.registers()
            if n > 1000:  # both in HLL mode: the same HIP estimate
                assert back.estimate() == d.get_estimate()
    # the estimates agree within the error bound (DataSketches starts with coupon lists)
    rse = 0.8326 / 2 ** (lg_k / 2)
    assert abs(h.estimate() - theirs(col.tolist(), lg_k).get_estimate()) <= 3 * rse * n + 1


def test_items_hash_like_datasketches():
    items = [0, -1, 2**62, 1.5, -0.0, float("nan"), "a", "Grüße", "x" * 40]
    h = HllSketch(10)
    for x in items:
        h.update(x)
    h.update("")
    col_h = HllSketch(10)
    col_h.update_batch(pa.array([0, -1, 2**62]))
    col_h.update_batch(np.array([1.5, -0.0, np.nan]))
    col_h.update_batch(pl.Series(["a", "Grüße", "x" * 40, ""]))
    ref = HllSketch.from_bytes(theirs(items, 10).serialize_compact())
    assert h.registers() == ref.registers() == col_h.registers()


def _same_register_pair(lg_k):
    """Two int64 items whose coupons land in the same register (different 26-bit addresses)."""
    seen = {}
    for x in range(100_000):
        h = HllSketch(lg_k)
        h.update(x)
        slot = h.registers().index(next(b for b in h.registers() if b))
        if slot in seen:
            return seen[slot], x
        seen[slot] = x
    raise AssertionError("no pair")


@pytest.mark.parametrize("lg_k", [4, 8, 12])
def test_small_cardinalities_are_exact_when_items_share_a_register(lg_k):
    """In coupon mode two items sharing a register still count two (a register sketch says 1)."""
    a, b = _same_register_pair(lg_k)
    h = HllSketch(lg_k)
    h.update_batch(np.array([a, b, a], dtype=np.int64))
    assert h.is_coupon_mode and h.estimate() == 2 == h.lower_bound(3)
    assert h.upper_bound(3) == pytest.approx(2, rel=1e-3)
    assert theirs([a, b], lg_k).get_estimate() == pytest.approx(2, rel=1e-6)
    back = HllSketch.from_bytes(h.to_bytes())
    assert back.estimate() == 2 and back.to_bytes() == h.to_bytes()
    u = hll_union([h, back])  # a union of coupon sketches stays exact
    assert u.is_coupon_mode and u.estimate() == 2 and not u.is_out_of_order


def test_union_matches_datasketches_registers():
    a, b = np.arange(0, 30_000), np.arange(20_000, 70_000)
    u = hll_union([ours(a), ours(b)])
    du = ds.hll_union(12)
    du.update(theirs(a.tolist()))
    du.update(theirs(b.tolist()))
    r = du.get_result(ds.HLL_8)
    assert u.registers() == HllSketch.from_bytes(r.serialize_compact()).registers()
    assert u.is_out_of_order
    assert abs(u.estimate() / 70_000 - 1) < 3 * 1.04 / 64
    assert abs(u.estimate() / r.get_estimate() - 1) < 0.03
    folded = hll_union([ours(a, 12), ours(b, 10)])
    assert folded.lg_k == 10 and abs(folded.estimate() / 70_000 - 1) < 3 * 1.04 / 32
    assert ours(a).merge(ours(b)).registers() == u.registers()


def test_round_trip_pickle_and_errors():
    h = ours(np.arange(5000))
    assert HllSketch.from_bytes(h.to_bytes()).to_bytes() == h.to_bytes()
    assert pickle.loads(pickle.dumps(h)).estimate() == h.estimate()
    with pytest.raises(ValueError):
        HllSketch.from_bytes(h.to_bytes()[:-1])
    with pytest.raises(ValueError):
        HllSketch(lg_k=3)
    with pytest.raises(ValueError):
        HllSketch(12, "HLL_4")
    with pytest.raises(TypeError):
        hll_union([h, object()])


ints = st.lists(st.integers(-(2**63), 2**63 - 1), max_size=300)


@settings(max_examples=50, deadline=None)
@given(ints, ints, ints)
def test_union_commutative_associative(a, b, c):
    sa, sb, sc = (ours(np.array(x, dtype=np.int64), 6) for x in (a, b, c))
    assert hll_union([sa, sb]).registers() == hll_union([sb, sa]).registers()
    left = hll_union([hll_union([sa, sb]), sc])
    right = hll_union([sa, hll_union([sb, sc])])
    assert left.registers() == right.registers()
    assert left.estimate() == pytest.approx(right.estimate())
