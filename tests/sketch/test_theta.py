"""Θ sketch: accuracy at fixed seeds, DataSketches cross-checks, set operations, laws."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest

pytestmark = pytest.mark.native

theta = pytest.importorskip("streamcell._theta")
ds = pytest.importorskip("datasketches")
pa = pytest.importorskip("pyarrow")
pl = pytest.importorskip("polars")
hyp = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from streamcell.sketches import (  # noqa: E402
    CompactThetaSketch,
    ThetaSketch,
    theta_a_not_b,
    theta_intersection,
    theta_jaccard,
    theta_union,
)


def ds_sketch(items, lg_k=12):
    d = ds.update_theta_sketch(lg_k)
    for x in items:
        d.update(x)
    return d


def ours(column, lg_k=12):
    s = ThetaSketch(lg_k)
    s.update_batch(column)
    return s


# ---------------------------------------------------------------- hashing / items


@pytest.mark.parametrize(
    "item",
    [
        0,
        1,
        -1,
        2**62,
        -(2**63),
        1.5,
        0.0,
        -0.0,
        float("nan"),
        float("inf"),
        1.0,
        "a",
        "Grüße",
        "x" * 100,
        b"raw",
    ],
)
def test_single_item_bytes_match_datasketches(item):
    s = ThetaSketch()
    s.update(item)
    d = ds.update_theta_sketch()
    d.update(item.decode() if isinstance(item, bytes) else item)
    assert s.to_bytes() == d.compact().serialize()


def test_empty_string_is_not_an_update():
    s = ThetaSketch()
    s.update("")
    s.update_batch(pa.array(["", None]))
    assert s.is_empty and s.estimate() == 0.0
    assert s.to_bytes() == ds.update_theta_sketch().compact().serialize()


# ---------------------------------------------------------------- accuracy (pitchfork points)

SIZES = [1, 2, 10, 100, 1000, 4096, 7680, 7681, 10_000, 100_000, 1_000_000]


@pytest.mark.parametrize("n", SIZES)
def test_accuracy_and_exact_below_threshold(n):
    rng = np.random.default_rng(n)
    col = rng.choice(2**62, size=n, replace=False).astype(np.int64)
    s = ours(col)
    k = 4096
    if n <= 15 * 2 * k // 16:  # exact until the first rebuild, hence exact below k
        assert s.estimate() == n and not s.is_estimation_mode
        assert s.lower_bound(3) == n == s.upper_bound(3)
    else:
        rse = 1 / math.sqrt(k - 1)
        assert abs(s.estimate() / n - 1) < 3 * rse
        assert s.lower_bound(3) <= n <= s.upper_bound(3)
        for z in (1, 2):
            assert s.lower_bound(z + 1) <= s.lower_bound(z) < s.estimate()
            assert s.estimate() < s.upper_bound(z) <= s.upper_bound(z + 1)


def test_two_sigma_coverage_over_seeds():
    covered = 0
    for seed in range(100):
        col = np.random.default_rng(1000 + seed).integers(0, 2**62, size=20_000)
        s = ours(col, lg_k=9)
        covered += s.lower_bound(2) <= len(np.unique(col)) <= s.upper_bound(2)
    assert covered >= 90  # nominal 95.4 %


@pytest.mark.parametrize("n", [7681, 20_000, 300_000])
def test_bounds_close_to_datasketches(n):
    col = np.arange(n, dtype=np.int64) * 31 + 7
    s, d = ours(col, lg_k=10), ds_sketch(col.tolist(), lg_k=10)
    for z in (1, 2, 3):
        assert s.lower_bound(z) == pytest.approx(d.get_lower_bound(z), rel=2e-3)
        assert s.upper_bound(z) == pytest.approx(d.get_upper_bound(z), rel=2e-3)


def test_small_count_bounds_close_to_datasketches():
    a, b = np.arange(0, 20_000), np.arange(19_990, 40_000)
    i = theta_intersection([ours(a, 10), ours(b, 10)])
    di = ds.theta_intersection()
    di.update(ds_sketch(a.tolist(), 10))
    di.update(ds_sketch(b.tolist(), 10))
    r = di.get_result()
    assert i.num_retained < 120 and i.estimate() == r.get_estimate()
    for z in (1, 2, 3):
        assert i.lower_bound(z) == pytest.approx(r.get_lower_bound(z), rel=0.15)
        assert i.upper_bound(z) == pytest.approx(r.get_upper_bound(z), rel=0.15)


# ---------------------------------------------------------------- cross-checks


@pytest.mark.parametrize("n", [0, 1, 2, 500, 7681, 50_000])
def test_bytes_and_estimates_agree_both_ways(n):
    col = np.arange(n, dtype=np.int64) * 7919 - 5
    s, d = ours(col), ds_sketch(col.tolist())
    assert s.estimate() == d.get_estimate()
    ours_bytes = s.to_bytes()
    assert ours_bytes == d.compact().serialize()
    assert ds.compact_theta_sketch.deserialize(ours_bytes).get_estimate() == s.estimate()
    theirs = CompactThetaSketch.from_bytes(d.compact(False).serialize())
    assert theirs.estimate() == d.get_estimate() and theirs.num_retained == d.num_retained
    assert s.to_bytes(ordered=False)[:5] == d.compact(False).serialize()[:5]


def test_trim_matches_datasketches():
    col = list(range(9000))
    s, d = ours(np.array(col)), ds_sketch(col)
    s.trim()
    d.trim()
    assert s.to_bytes() == d.compact().serialize()


@pytest.mark.parametrize(
    "make",
    [
        lambda v: pa.array(v),
        lambda v: pa.chunked_array([v[: len(v) // 3], v[len(v) // 3 :]]),
        lambda v: pl.Series(v),
        lambda v: pa.array(v, pa.large_string()) if isinstance(v[0], str) else pa.array(v),
        lambda v: np.array(v, dtype=object),
        lambda v: list(v),
    ],
)
@pytest.mark.parametrize("kind", ["int", "float", "str"])
def test_columns_of_every_kind_match_per_item_updates(make, kind):
    rng = np.random.default_rng(7)
    base = rng.integers(-(10**9), 10**9, size=12_000)
    values = {
        "int": base.tolist(),
        "float": (base / 7.0).tolist(),
        "str": [f"item-{x}" for x in base.tolist()],
    }[kind]
    s = ours(make(values))
    assert s.to_bytes() == ds_sketch(values).compact().serialize()


def test_nulls_are_skipped_and_narrow_types_widen():
    s = ours(pa.array([1, None, 2, None, 3], pa.int32()))
    d = ds_sketch([1, 2, 3])
    assert s.to_bytes() == d.compact().serialize()
    f = ours(np.array([0.5, 1.5], dtype=np.float32))
    assert f.to_bytes() == ds_sketch([0.5, 1.5]).compact().serialize()
    sliced = pa.array(list(range(100)) + [None] * 5)[3:50]
    assert ours(sliced).to_bytes() == ds_sketch(list(range(3, 50))).compact().serialize()
    dict_col = pa.array(["a", "b", "a", None]).dictionary_encode()
    assert ours(dict_col).to_bytes() == ds_sketch(["a", "b"]).compact().serialize()
    with pytest.raises(TypeError):
        ours(pa.array([[1], [2]]))


def test_set_operations_match_datasketches():
    a, b = np.arange(0, 30_000), np.arange(20_000, 60_000)
    sa, sb = ours(a, 10), ours(b, 10)
    da, db = ds_sketch(a.tolist(), 10), ds_sketch(b.tolist(), 10)
    u = ds.theta_union(10)
    u.update(da)
    u.update(db)
    assert theta_union([sa, sb], lg_k=10).to_bytes() == u.get_result().serialize()
    i = ds.theta_intersection()
    i.update(da)
    i.update(db)
    assert theta_intersection([sa, sb]).to_bytes() == i.get_result().serialize()
    assert theta_a_not_b(sa, sb).to_bytes() == ds.theta_a_not_b().compute(da, db).serialize()
    lo, est, hi = theta_jaccard(sa, sb)
    dlo, dest, dhi = ds.theta_jaccard_similarity.jaccard(da, db)
    assert est == dest and lo <= est <= hi
    assert lo == pytest.approx(dlo, abs=0.02) and hi == pytest.approx(dhi, abs=0.02)
    assert abs(est - 10_000 / 60_000) < 0.05
    assert theta_jaccard(sa, sa) == (1.0, 1.0, 1.0)
    assert sa.merge(sb).estimate() == theta_union([sa, sb], lg_k=10).estimate()


def test_serialize_round_trip_and_pickle():
    for n in (0, 1, 3, 20_000):
        c = ours(np.arange(n)).compact()
        back = CompactThetaSketch.from_bytes(c.to_bytes())
        assert back.to_bytes() == c.to_bytes() and back.estimate() == c.estimate()
        assert pickle.loads(pickle.dumps(c)).to_bytes() == c.to_bytes()


def test_bad_bytes_are_rejected():
    good = ours(np.arange(100)).to_bytes()
    with pytest.raises(ValueError):
        CompactThetaSketch.from_bytes(good[:-8])
    with pytest.raises(ValueError):
        CompactThetaSketch.from_bytes(b"\x00" * 4)
    with pytest.raises(ValueError):  # another seed
        CompactThetaSketch.from_bytes(good, seed=1)
    with pytest.raises(ValueError):
        ThetaSketch(lg_k=3)
    with pytest.raises(ValueError):
        ThetaSketch().lower_bound(4)


# ---------------------------------------------------------------- laws (hypothesis)

ints = st.lists(st.integers(-(2**63), 2**63 - 1), max_size=400)


def exact_set(items):
    return len(set(items))


@settings(max_examples=60, deadline=None)
@given(ints, ints, ints)
def test_union_commutative_and_associative(a, b, c):
    # lg_k=5 so small inputs already sample: the laws hold bit for bit, not just within bounds
    sa, sb, sc = (ours(np.array(x, dtype=np.int64), 5) for x in (a, b, c))
    ab = theta_union([sa, sb], lg_k=5)
    assert ab.to_bytes() == theta_union([sb, sa], lg_k=5).to_bytes()
    left = theta_union([ab, sc], lg_k=5)
    right = theta_union([sa, theta_union([sb, sc], lg_k=5)], lg_k=5)
    assert left.to_bytes() == right.to_bytes()
    n = exact_set(a + b + c)
    assert left.lower_bound(3) <= n <= left.upper_bound(3) or n == 0


@settings(max_examples=60, deadline=None)
@given(ints, ints)
def test_intersection_commutative_and_round_trip(a, b):
    sa, sb = ours(np.array(a, dtype=np.int64), 6), ours(np.array(b, dtype=np.int64), 6)
    x = theta_intersection([sa, sb])
    assert x.to_bytes() == theta_intersection([sb, sa]).to_bytes()
    assert CompactThetaSketch.from_bytes(x.to_bytes()).to_bytes() == x.to_bytes()
    if not sa.is_estimation_mode and not sb.is_estimation_mode:
        assert x.estimate() == len(set(a) & set(b))
        assert theta_a_not_b(sa, sb).estimate() == len(set(a) - set(b))
