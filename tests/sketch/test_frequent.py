"""Frequent items (int64): bounds hold for every item, error-type rules, merge laws,
DataSketches byte compatibility (frequent_items_sketch + PyLongsSerDe), column inputs."""

from __future__ import annotations

import collections
import pickle

import numpy as np
import pytest

pytestmark = pytest.mark.native

pytest.importorskip("streamcell._frequent")
ds = pytest.importorskip("datasketches")
pa = pytest.importorskip("pyarrow")
pl = pytest.importorskip("polars")
hyp = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from streamcell.sketches import FrequentItemsSketch, FrequentStringsSketch  # noqa: E402

NFP = "no_false_positives"
NFN = "no_false_negatives"


def zipf_stream(n, universe, seed, a=1.2):
    rng = np.random.default_rng(seed)
    return (rng.zipf(a, size=n) % universe).astype(np.int64)


def assert_bounds(sk, truth, apriori=True, unseen=-(2**62)):
    """lower <= true <= upper for every item seen (and unseen ones), rules of both types."""
    sk._check()
    err = sk.maximum_error
    for item, count in truth.items():
        lo, hi = sk.get_lower_bound(item), sk.get_upper_bound(item)
        assert lo <= count <= hi and hi - lo == err
        if count > err:
            assert lo > 0  # every item heavier than the error is tracked
    assert sk.get_upper_bound(unseen) == err  # an unseen item
    if apriori:
        assert err <= sk.get_apriori_error(sk.lg_max_map_size, sk.total_weight)
    nfp = sk.get_frequent_items(NFP)
    assert all(truth[item] > err for item, *_ in nfp)
    assert all(lo <= truth[item] <= hi for item, _, lo, hi in nfp)
    nfn = {row[0] for row in sk.get_frequent_items(NFN)}
    assert {item for item, c in truth.items() if c > err} <= nfn
    estimates = [row[1] for row in sk.get_frequent_items(NFN, threshold=0)]
    assert estimates == sorted(estimates, reverse=True)


@pytest.mark.parametrize("lg", [3, 6, 10])
@pytest.mark.parametrize("n,universe", [(1_000, 50), (200_000, 10_000), (1_000_000, 1_000_000)])
def test_bounds_hold_for_every_item(lg, n, universe):
    items = zipf_stream(n, universe, seed=lg * 7 + n)
    sk = FrequentItemsSketch(lg)
    sk.update(items)
    assert sk.total_weight == n
    assert_bounds(sk, collections.Counter(items.tolist()))


def test_weighted_updates_and_exact_when_small():
    sk = FrequentItemsSketch(6)
    truth = collections.Counter()
    for i in range(40):  # at most 48 counters at lg 6: never purges
        sk.update(i, i + 1)
        truth[i] += i + 1
    sk.update(5, 0)
    assert sk.maximum_error == 0 and sk.total_weight == sum(truth.values())
    assert [r[0] for r in sk.get_frequent_items(NFP)][:3] == [39, 38, 37]
    assert sk.get_estimate(39) == 40 and sk.get_estimate(1000) == 0
    assert_bounds(sk, truth)


# -- DataSketches compatibility --------------------------------------------------------


def rows(x):
    return sorted(x)


@pytest.mark.parametrize("lg,n", [(5, 0), (5, 2), (6, 100_000), (10, 300_000)])
def test_our_bytes_load_in_datasketches(lg, n):
    items = zipf_stream(n, 50_000, seed=n)
    ours = FrequentItemsSketch(lg)
    ours.update(items)
    theirs = ds.frequent_items_sketch.deserialize(ours.to_bytes(), ds.PyLongsSerDe())
    assert theirs.total_weight == ours.total_weight
    assert theirs.num_active_items == ours.num_active_items
    assert theirs.is_empty() == ours.is_empty
    for et, name in (
        (ds.frequent_items_error_type.NO_FALSE_POSITIVES, NFP),
        (ds.frequent_items_error_type.NO_FALSE_NEGATIVES, NFN),
    ):
        assert rows(theirs.get_frequent_items(et)) == rows(ours.get_frequent_items(name))
        assert rows(theirs.get_frequent_items(et)) == rows(ours.get_frequent_items(et))
    for item in set(items[:200].tolist()):
        assert theirs.get_estimate(item) == ours.get_estimate(item)
        assert theirs.get_lower_bound(item) == ours.get_lower_bound(item)
        assert theirs.get_upper_bound(item) == ours.get_upper_bound(item)


@pytest.mark.parametrize("lg,n", [(5, 0), (5, 2), (6, 100_000), (12, 50_000)])
def test_datasketches_bytes_load_here(lg, n):
    items = zipf_stream(n, 20_000, seed=n + 1)
    theirs = ds.frequent_items_sketch(lg)
    for x in items.tolist():
        theirs.update(x)
    data = theirs.serialize(ds.PyLongsSerDe())
    ours = FrequentItemsSketch.from_bytes(data)
    ours._check()
    assert ours.total_weight == theirs.total_weight
    assert ours.maximum_error == theirs.get_upper_bound(-(2**62))  # unseen item: the offset
    assert rows(ours.get_frequent_items(NFN)) == rows(
        theirs.get_frequent_items(ds.frequent_items_error_type.NO_FALSE_NEGATIVES)
    )
    assert_bounds(ours, collections.Counter(items.tolist()), apriori=False)
    # their bytes -> ours -> theirs again: same content (map order may differ)
    again = ds.frequent_items_sketch.deserialize(ours.to_bytes(), ds.PyLongsSerDe())
    assert again.total_weight == theirs.total_weight
    if n <= 2:
        assert ours.to_bytes() == data


def test_golden_bytes_match_datasketches():
    ours = FrequentItemsSketch(5)
    theirs = ds.frequent_items_sketch(5)
    assert ours.to_bytes() == theirs.serialize(ds.PyLongsSerDe())  # empty
    ours.update(7, 3)
    theirs.update(7, 3)
    assert ours.to_bytes() == theirs.serialize(ds.PyLongsSerDe())


def test_merge_here_and_in_datasketches_keep_bounds():
    a_items, b_items = zipf_stream(80_000, 5_000, 1), zipf_stream(60_000, 5_000, 2)
    a, b = FrequentItemsSketch(7), FrequentItemsSketch(8)
    a.update(a_items)
    b.update(b_items)
    serde = ds.PyLongsSerDe()
    theirs = ds.frequent_items_sketch.deserialize(a.to_bytes(), serde)
    theirs.merge(ds.frequent_items_sketch.deserialize(b.to_bytes(), serde))
    a.merge(b)
    assert a.total_weight == theirs.total_weight == 140_000
    truth = collections.Counter(np.concatenate([a_items, b_items]).tolist())
    assert_bounds(a, truth, apriori=False)
    for item, count in list(truth.items())[:500]:
        assert theirs.get_lower_bound(item) <= count <= theirs.get_upper_bound(item)


def test_malformed_bytes_are_rejected():
    sk = FrequentItemsSketch(6)
    sk.update(zipf_stream(10_000, 1000, 3))
    data = sk.to_bytes()
    for cut in (0, 7, 8, 31, 32, len(data) - 1):
        with pytest.raises(ValueError):
            FrequentItemsSketch.from_bytes(data[:cut])
    bad = bytearray(data)
    bad[2] = 15
    with pytest.raises(ValueError):
        FrequentItemsSketch.from_bytes(bytes(bad))


# -- merge laws, round trips ------------------------------------------------------------

streams = st.lists(st.tuples(st.integers(-50, 50), st.integers(1, 5)), max_size=400)


@settings(max_examples=50, deadline=None, derandomize=True)
@given(streams, streams, streams, st.integers(3, 6))
def test_merge_commutative_associative_within_bounds(a, b, c, lg):
    def sketch(pairs):
        s = FrequentItemsSketch(lg)
        for item, w in pairs:
            s.update(item, w)
        return s

    def truth(*parts):
        t = collections.Counter()
        for part in parts:
            for item, w in part:
                t[item] += w
        return t

    ab, ba = sketch(a), sketch(b)
    ab.merge(sketch(b))
    ba.merge(sketch(a))
    ab_c = ab.copy()
    ab_c.merge(sketch(c))
    bc = sketch(b)
    bc.merge(sketch(c))
    a_bc = sketch(a)
    a_bc.merge(bc)
    for sk, parts in ((ab, (a, b)), (ba, (a, b)), (ab_c, (a, b, c)), (a_bc, (a, b, c))):
        assert sk.total_weight == sum(w for p in parts for _, w in p)
        assert_bounds(sk, truth(*parts), apriori=False)
    if ab.maximum_error == 0 and ba.maximum_error == 0:  # no purge: exact, order-free
        assert rows(ab.get_frequent_items(NFP)) == rows(ba.get_frequent_items(NFP))


@settings(max_examples=50, deadline=None, derandomize=True)
@given(streams, st.integers(3, 8))
def test_round_trip_is_identity(pairs, lg):
    sk = FrequentItemsSketch(lg)
    for item, w in pairs:
        sk.update(item, w)
    data = sk.to_bytes()
    back = FrequentItemsSketch.from_bytes(data)
    back._check()
    assert back.to_bytes() == data
    assert pickle.loads(pickle.dumps(sk)).to_bytes() == data
    assert rows(back.get_frequent_items(NFN, 0)) == rows(sk.get_frequent_items(NFN, 0))


# -- inputs -----------------------------------------------------------------------------


def test_column_inputs_agree_and_nulls_are_skipped():
    items = zipf_stream(30_000, 3_000, 4)
    ref = FrequentItemsSketch(8)
    ref.update(items)
    expected = ref.to_bytes()
    chunked = pa.chunked_array([pa.array(items[:100]), pa.array(items[100:])])
    for col in (
        items,
        pa.array(items),
        chunked,
        pl.Series(items),
        items.astype(np.int32),
        items.tolist(),
    ):
        sk = FrequentItemsSketch(8)
        sk.update_batch(col)
        assert sk.to_bytes() == expected
    sk = FrequentItemsSketch(8)
    sk.update(pa.array([1, None, 1, 2, None], type=pa.int64()).slice(1))
    sk.update(pl.Series([None, 3], dtype=pl.Int32))
    assert sk.total_weight == 3 and sk.get_lower_bound(1) == 1 and sk.get_lower_bound(3) == 1


def test_weights_column():
    sk = FrequentItemsSketch(6)
    sk.update(np.array([1, 2, 1]), weights=np.array([10, 1, 5]))
    assert sk.get_lower_bound(1) == 15 and sk.total_weight == 16
    with pytest.raises(ValueError):
        sk.update(np.array([1, 2]), weights=np.array([1]))
    with pytest.raises(ValueError):
        sk.update(np.array([1]), weights=np.array([-1]))


def test_errors():
    with pytest.raises(ValueError):
        FrequentItemsSketch(2)
    sk = FrequentItemsSketch()
    with pytest.raises(TypeError):
        sk.update(np.array([1.5]))
    with pytest.raises(TypeError):
        sk.update(pa.array(["a"]))
    with pytest.raises(ValueError):
        sk.get_frequent_items("most")
    with pytest.raises(OverflowError):
        sk.update(2**70)
    assert sk.is_empty and sk.get_frequent_items(NFN) == []
    assert FrequentItemsSketch.get_epsilon_for_lg_size(10) == pytest.approx(
        ds.frequent_items_sketch.get_epsilon_for_lg_size(10)
    )


# -- string items -----------------------------------------------------------------------


def string_stream(n, universe, seed):
    names = np.array(
        [f"user-{i}" + ("-é" if i % 5 == 0 else "") for i in range(universe)], dtype=object
    )
    names[0] = ""  # the empty string is an item too
    return names[zipf_stream(n, universe, seed)]


@pytest.mark.parametrize("lg", [4, 8])
def test_string_bounds_hold_for_every_item(lg):
    items = string_stream(100_000, 5_000, lg)
    sk = FrequentStringsSketch(lg)
    sk.update(pa.array(items.tolist()))
    assert sk.total_weight == len(items) and sk.maximum_error > 0
    assert_bounds(sk, collections.Counter(items.tolist()), unseen="never seen")


def test_string_column_inputs_agree():
    items = string_stream(20_000, 2_000, 1).tolist()
    ref = FrequentStringsSketch(7)
    for x in items:
        ref.update(x)
    expected = ref.to_bytes()
    chunked = pa.chunked_array([pa.array(items[:10]), pa.array(items[10:])])
    for col in (
        items,
        pa.array(items),
        pa.array(items, type=pa.large_string()),
        chunked,
        pl.Series(items),
        np.array(items, dtype=object),
    ):
        sk = FrequentStringsSketch(7)
        sk.update_batch(col)
        assert sk.to_bytes() == expected
    sk = FrequentStringsSketch(7)
    sk.update(pa.array(["x", None, "y", "x"]).slice(1))
    sk.update(pl.Series([None, "x"]))
    sk.update(["z", "z"], weights=[2, 3])
    assert sk.total_weight == 8 and sk.get_lower_bound("x") == 2 and sk.get_lower_bound("z") == 5


@pytest.mark.parametrize("n", [0, 1, 50_000])
def test_string_bytes_compatible_with_datasketches(n):
    items = string_stream(n, 3_000, 2).tolist()
    ours = FrequentStringsSketch(6)
    ours.update(items)
    theirs = ds.frequent_strings_sketch.deserialize(ours.to_bytes())
    generic = ds.frequent_items_sketch.deserialize(ours.to_bytes(), ds.PyStringsSerDe())
    for t in (theirs, generic):
        assert t.total_weight == ours.total_weight and t.num_active_items == ours.num_active_items
        et = ds.frequent_items_error_type.NO_FALSE_NEGATIVES
        assert rows(t.get_frequent_items(et)) == rows(ours.get_frequent_items(NFN))
    # theirs -> ours
    t = ds.frequent_strings_sketch(6)
    for x in items:
        t.update(x)
    back = FrequentStringsSketch.from_bytes(t.serialize())
    back._check()
    assert back.total_weight == t.total_weight
    et = ds.frequent_items_error_type.NO_FALSE_POSITIVES
    assert rows(back.get_frequent_items(NFP)) == rows(t.get_frequent_items(et))
    assert_bounds(back, collections.Counter(items), apriori=False, unseen="never seen")


def test_strings_unicode_bytes_and_type_errors():
    sk = FrequentStringsSketch(5)
    sk.update("naïve ☃")
    sk.update(b"\xff\xfe")  # not UTF-8: round-trips through surrogateescape
    sk.update("")
    names = {row[0] for row in sk.get_frequent_items(NFN, 0)}
    assert names == {"naïve ☃", b"\xff\xfe".decode("utf-8", "surrogateescape"), ""}
    back = FrequentStringsSketch.from_bytes(sk.to_bytes())
    assert back.get_lower_bound(b"\xff\xfe") == 1 and back.to_bytes() == sk.to_bytes()
    with pytest.raises(TypeError):
        sk.merge(FrequentItemsSketch(5))
    with pytest.raises(TypeError):
        sk.update(pa.array([1, 2]))
    with pytest.raises(TypeError):
        sk.update_batch("abc")
    sk.update("abc")  # 4 items: the string bytes no longer happen to fit the int64 layout
    with pytest.raises(ValueError):  # the bytes do not record the item type
        FrequentItemsSketch.from_bytes(sk.to_bytes())


def test_purge_that_drops_every_counter_keeps_weight_and_error():
    sk = FrequentItemsSketch(3)  # 6 counters: the 7th distinct unit item purges them all
    for i in range(7):
        sk.update(i)
    assert sk.num_active_items == 0 and sk.total_weight == 7 and sk.maximum_error == 1
    assert not sk.is_empty and sk.get_upper_bound(3) == 1
    back = FrequentItemsSketch.from_bytes(sk.to_bytes())
    assert back.total_weight == 7 and back.maximum_error == 1
    theirs = ds.frequent_items_sketch.deserialize(sk.to_bytes(), ds.PyLongsSerDe())
    assert theirs.total_weight == 7 and theirs.get_upper_bound(3) == 1
    other = FrequentItemsSketch(3)
    other.merge(sk)
    assert other.total_weight == 7 and other.get_upper_bound(3) == 1
