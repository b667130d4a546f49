"""KLL quantiles: error bound at fixed seeds, DataSketches byte compatibility both ways,
merge laws (hypothesis), round trips, column inputs (NumPy / Arrow / Polars)."""

from __future__ import annotations

import copy
import math
import pickle
import threading

import numpy as np
import pytest

pytestmark = pytest.mark.native

kll = pytest.importorskip("streamcell._kll")
ds = pytest.importorskip("datasketches")
pa = pytest.importorskip("pyarrow")
pl = pytest.importorskip("polars")
hyp = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from streamcell.sketches import KllDoublesSketch, KllFloatsSketch  # noqa: E402

KINDS = [
    (KllDoublesSketch, ds.kll_doubles_sketch, np.float64),
    (KllFloatsSketch, ds.kll_floats_sketch, np.float32),
]
RANKS = np.linspace(0.0, 1.0, 1001)


def true_ranks(sorted_values, points, inclusive):
    side = "right" if inclusive else "left"
    return np.searchsorted(sorted_values, points, side=side) / len(sorted_values)


def max_rank_error(sk, values, inclusive=True):
    s = np.sort(values)
    points = np.unique(s[:: max(1, len(s) // 2000)])
    return float(
        np.max(np.abs(sk.get_ranks(points, inclusive=inclusive) - true_ranks(s, points, inclusive)))
    )


# -- accuracy ---------------------------------------------------------------------------


@pytest.mark.parametrize("cls", [KllDoublesSketch, KllFloatsSketch])
@pytest.mark.parametrize("n", [1, 2, 10, 199, 200, 201, 1_000, 10_000, 100_000, 1_000_000])
def test_rank_error_within_bound_at_fixed_seeds(cls, n):
    rng = np.random.default_rng(n)
    values = rng.permutation(n).astype(np.float64)
    for seed in (1, 2, 3):
        sk = cls(200, seed=seed)
        sk.update(values)
        sk._check()
        assert sk.n == n and sk.min_value == 0 and sk.max_value == n - 1
        eps = sk.normalized_rank_error(False)
        for inclusive in (True, False):
            err = max_rank_error(sk, values, inclusive)
            if n <= 200:
                assert err == 0.0  # exact mode: nothing compacted
            assert err <= eps, (n, seed, err, eps)


def test_quantile_rank_and_pmf_error_on_skewed_data():
    rng = np.random.default_rng(7)
    values = rng.lognormal(0, 2, size=300_000)
    sk = KllDoublesSketch(seed=11)
    sk.update(values)
    s = np.sort(values)
    eps = sk.normalized_rank_error()
    # a quantile's true rank lies within eps of the requested rank
    q = sk.get_quantiles(RANKS[1:-1], inclusive=True)
    lo = np.searchsorted(s, q, side="left") / len(s)
    hi = np.searchsorted(s, q, side="right") / len(s)
    assert np.all(lo - eps <= RANKS[1:-1]) and np.all(RANKS[1:-1] <= hi + eps)
    splits = np.quantile(values, np.linspace(0.05, 0.95, 19))
    pmf = sk.get_pmf(splits)
    truth = np.diff(np.concatenate([[0], true_ranks(s, splits, False), [1]]))
    assert pmf.sum() == pytest.approx(1.0)
    assert np.max(np.abs(pmf - truth)) <= sk.normalized_rank_error(True)


def test_exact_mode_semantics_match_definition():
    sk = KllDoublesSketch(seed=1)
    sk.update(np.arange(1.0, 101.0)[::-1])
    assert not sk.is_estimation_mode and sk.num_retained == 100
    assert sk.get_rank(50) == 0.49 and sk.get_rank(50, inclusive=True) == 0.5
    assert sk.get_quantile(0.5) == 51 and sk.get_quantile(0.5, inclusive=True) == 50
    assert sk.get_quantile(0.0) == 1 and sk.get_quantile(1.0) == 100
    assert list(sk.get_cdf([10, 20], inclusive=True)) == [0.1, 0.2, 1.0]


def test_normalized_rank_error_formula():
    assert KllDoublesSketch.get_normalized_rank_error(200) == pytest.approx(2.296 / 200**0.9723)
    assert KllDoublesSketch.get_normalized_rank_error(200, True) == pytest.approx(
        2.446 / 200**0.9433
    )
    for k in (8, 100, 200, 1000):
        for pmf in (False, True):
            ours = KllDoublesSketch.get_normalized_rank_error(k, pmf)
            assert ours == pytest.approx(ds.kll_doubles_sketch.get_normalized_rank_error(k, pmf))


# -- DataSketches compatibility --------------------------------------------------------


def assert_same_answers(ours, theirs, values, dtype):
    assert ours.n == theirs.n and ours.num_retained == theirs.num_retained
    assert ours.is_estimation_mode == theirs.is_estimation_mode()
    if ours.n == 0:
        assert theirs.is_empty() and ours.is_empty
        return
    assert ours.min_value == theirs.get_min_value() and ours.max_value == theirs.get_max_value()
    points = np.sort(
        np.random.default_rng(0).choice(values, size=min(len(values), 40), replace=False)
    )
    points = np.unique(points.astype(dtype))
    for inclusive in (False, True):
        q = theirs.get_quantiles(list(RANKS), inclusive=inclusive)
        assert np.array_equal(
            np.asarray(q, dtype=np.float64), ours.get_quantiles(RANKS, inclusive=inclusive)
        )
        r = [theirs.get_rank(float(p), inclusive=inclusive) for p in points]
        assert np.array_equal(r, ours.get_ranks(points, inclusive=inclusive))
        sp = [float(p) for p in points]
        assert np.array_equal(
            theirs.get_pmf(sp, inclusive=inclusive), ours.get_pmf(points, inclusive=inclusive)
        )
        assert np.array_equal(
            theirs.get_cdf(sp, inclusive=inclusive), ours.get_cdf(points, inclusive=inclusive)
        )


@pytest.mark.parametrize("ours_cls,their_cls,dtype", KINDS)
@pytest.mark.parametrize("n", [0, 1, 2, 3, 200, 201, 5_000, 123_457])
def test_our_bytes_load_in_datasketches(ours_cls, their_cls, dtype, n):
    values = np.random.default_rng(n).normal(size=n).astype(dtype)
    ours = ours_cls(200, seed=5)
    ours.update(values)
    data = ours.to_bytes()
    theirs = their_cls.deserialize(data)
    assert theirs.serialize() == data  # their re-serialization is byte-identical
    assert_same_answers(ours, theirs, values, dtype)


@pytest.mark.parametrize("ours_cls,their_cls,dtype", KINDS)
@pytest.mark.parametrize("n", [0, 1, 2, 200, 201, 5_000, 123_457])
@pytest.mark.parametrize("k", [8, 200, 1000])
def test_datasketches_bytes_load_here(ours_cls, their_cls, dtype, n, k):
    values = np.random.default_rng(n + k).exponential(size=n).astype(dtype)
    theirs = their_cls(k)
    if n:
        theirs.update(values)
    data = theirs.serialize()
    ours = ours_cls.from_bytes(data)
    ours._check()
    assert ours.k == k and ours.to_bytes() == data
    assert_same_answers(ours, theirs, values, dtype)


def test_merged_datasketches_sketch_loads_and_merges_here():
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=80_000), rng.uniform(-3, 3, size=50_000)
    theirs = ds.kll_doubles_sketch(100)
    theirs.update(a)
    other = ds.kll_doubles_sketch(300)
    other.update(b)
    theirs.merge(other)
    ours = KllDoublesSketch.from_bytes(theirs.serialize())
    assert ours.min_k == 100 and ours.to_bytes() == theirs.serialize()
    c = rng.normal(size=20_000)
    mine = KllDoublesSketch(200, seed=1)
    mine.update(c)
    ours.merge(mine)
    ours._check()
    theirs.merge(ds.kll_doubles_sketch.deserialize(mine.to_bytes()))
    assert ours.n == theirs.n == 150_000 and ours.min_k == 100
    # same inputs, different coin flips: both within the error bound of the truth
    truth = np.sort(np.concatenate([a, b, c]))
    assert max_rank_error(ours, truth) <= ours.normalized_rank_error()
    points = truth[::500]
    theirs_r = np.array([theirs.get_rank(float(p), inclusive=True) for p in points])
    assert (
        np.max(np.abs(theirs_r - true_ranks(truth, points, True))) <= ours.normalized_rank_error()
    )


def test_malformed_bytes_are_rejected():
    sk = KllDoublesSketch(seed=1)
    sk.update(np.arange(1000.0))
    data = sk.to_bytes()
    for cut in (0, 1, 7, 8, 19, 20, len(data) - 1):
        with pytest.raises(ValueError):
            KllDoublesSketch.from_bytes(data[:cut])
    with pytest.raises(ValueError):
        KllDoublesSketch.from_bytes(data + b"\0" * 8)
    bad = bytearray(data)
    bad[2] = 7  # family
    with pytest.raises(ValueError):
        KllDoublesSketch.from_bytes(bytes(bad))
    with pytest.raises(ValueError):  # a floats sketch is not a doubles sketch (sizes differ)
        KllFloatsSketch.from_bytes(data)


# -- merge laws and round trips ---------------------------------------------------------

floats = st.floats(min_value=-1e9, max_value=1e9, allow_nan=False, width=64)


def within_bound(sk, values):
    return max_rank_error(sk, np.asarray(values)) <= sk.normalized_rank_error() + 1e-12


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    st.lists(floats, max_size=600),
    st.lists(floats, max_size=600),
    st.lists(floats, max_size=600),
    st.integers(min_value=8, max_value=64),
    st.integers(min_value=1, max_value=2**32),
)
def test_merge_commutative_and_associative_within_bounds(a, b, c, k, seed):
    def sketch(vals, s):
        sk = KllDoublesSketch(k, seed=seed + s)
        sk.update(np.asarray(vals, dtype=np.float64))
        return sk

    ab = sketch(a, 1)
    ab.merge(sketch(b, 2))
    ba = sketch(b, 2)
    ba.merge(sketch(a, 1))
    ab_c = ab.copy()
    ab_c.merge(sketch(c, 3))
    bc = sketch(b, 2)
    bc.merge(sketch(c, 3))
    a_bc = sketch(a, 1)
    a_bc.merge(bc)
    for sk, vals in ((ab, a + b), (ba, a + b), (ab_c, a + b + c), (a_bc, a + b + c)):
        sk._check()
        assert sk.n == len(vals)
        if vals:
            assert sk.min_value == min(vals) and sk.max_value == max(vals)
            assert within_bound(sk, vals)
    if len(a) + len(b) <= k:  # exact mode: order does not matter at all
        assert np.array_equal(ab.get_quantiles(RANKS), ba.get_quantiles(RANKS), equal_nan=True)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.lists(floats, max_size=3000), st.integers(min_value=8, max_value=300))
def test_serialize_round_trip_is_identity(vals, k):
    for cls in (KllDoublesSketch, KllFloatsSketch):
        sk = cls(k, seed=9)
        sk.update(np.asarray(vals, dtype=np.float64))
        data = sk.to_bytes()
        back = cls.from_bytes(data)
        back._check()
        assert back.to_bytes() == data and back.n == sk.n
        assert pickle.loads(pickle.dumps(sk)).to_bytes() == data
        assert copy.deepcopy(sk).to_bytes() == data


def test_large_merge_tree_within_bound():
    rng = np.random.default_rng(5)
    values = rng.normal(size=1_000_000)
    parts = np.array_split(values, 16)
    sketches = []
    for i, p in enumerate(parts):
        s = KllDoublesSketch(200, seed=100 + i)
        s.update(p)
        sketches.append(s)
    while len(sketches) > 1:  # pairwise tree of merges
        nxt = []
        for i in range(0, len(sketches), 2):
            sketches[i].merge(sketches[i + 1])
            nxt.append(sketches[i])
        sketches = nxt
    total = sketches[0]
    total._check()
    assert total.n == len(values)
    assert max_rank_error(total, values) <= total.normalized_rank_error()


# -- inputs -----------------------------------------------------------------------------


def test_column_inputs_agree():
    rng = np.random.default_rng(1)
    x = rng.normal(size=50_000)
    ref = KllDoublesSketch(seed=3)
    ref.update(x)
    expected = ref.to_bytes()
    chunked = pa.chunked_array([pa.array(x[:1000]), pa.array(x[1000:])])
    for col in (x, pa.array(x), chunked, pl.Series(x), list(x[:0]) + list(x)):
        sk = KllDoublesSketch(seed=3)
        sk.update(col)
        assert sk.to_bytes() == expected
    sk = KllDoublesSketch(seed=3)
    sk.update_batch(pa.array(x))
    assert sk.to_bytes() == expected
    per_item = KllDoublesSketch(seed=3)
    for v in x:
        per_item.update(float(v))
    assert per_item.to_bytes() == expected


def test_nulls_nan_offsets_and_dtypes():
    arr = pa.array([1.0, None, 3.0, float("nan"), 5.0, None, 7.0])
    sk = KllDoublesSketch(seed=1)
    sk.update(arr.slice(1))  # offset 1: None, 3, nan, 5, None, 7
    assert sk.n == 3 and sk.min_value == 3 and sk.max_value == 7
    sk.update(pl.Series([None, 2.5, None], dtype=pl.Float64))
    sk.update(np.array([-4, 9], dtype=np.int64))
    sk.update(np.array([0.5], dtype=np.float32))
    sk.update(np.array([11], dtype=np.int32))
    sk.update(pa.array([12], type=pa.int16()))
    assert sk.n == 9 and sk.min_value == -4 and sk.max_value == 12
    f = KllFloatsSketch(seed=1)
    f.update(0.1)
    assert f.min_value == float(np.float32(0.1))


def test_empty_sketch_and_errors():
    sk = KllDoublesSketch()
    assert sk.is_empty and sk.n == 0 and len(sk) == 0
    assert (
        math.isnan(sk.min_value)
        and math.isnan(sk.get_quantile(0.5))
        and math.isnan(sk.get_rank(1.0))
    )
    assert len(sk.get_pmf([1.0, 2.0])) == 0
    sk.update(1.0)
    with pytest.raises(ValueError):
        sk.get_quantile(1.5)
    with pytest.raises(ValueError):
        sk.get_pmf([2.0, 1.0])
    with pytest.raises(ValueError):
        sk.get_cdf([float("nan")])
    with pytest.raises(ValueError):
        KllDoublesSketch(4)
    with pytest.raises(TypeError):
        sk.merge(KllFloatsSketch())
    sk.reset()
    assert sk.is_empty


def test_same_seed_is_deterministic_and_seeds_differ():
    x = np.random.default_rng(2).normal(size=100_000)
    a, b, c = KllDoublesSketch(seed=42), KllDoublesSketch(seed=42), KllDoublesSketch(seed=43)
    for s in (a, b, c):
        s.update(x)
    assert a.to_bytes() == b.to_bytes() != c.to_bytes()
    d, e = KllDoublesSketch(), KllDoublesSketch()  # automatic seeds are distinct
    d.update(x)
    e.update(x)
    assert d.to_bytes() != e.to_bytes()


def test_threads_update_their_own_sketches():
    x = np.random.default_rng(3).normal(size=2_000_000)
    sketches = [KllDoublesSketch(seed=i + 1) for i in range(2)]
    threads = [threading.Thread(target=s.update, args=(x,)) for s in sketches]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ref = KllDoublesSketch(seed=1)
    ref.update(x)
    assert sketches[0].to_bytes() == ref.to_bytes()
    assert sketches[1].n == len(x)
