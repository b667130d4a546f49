"""Sketch stages in pipelines: ``sketch theta(user_id) as users`` and friends.

Every engine configuration runs the same plans; the reference engine's exact answers are
the oracle: a native sketch's estimate must hold the exact answer within the sketch's own
documented bounds (Θ / HLL at 3 standard deviations, KLL within its normalized rank error,
frequent items within [lower, upper] for every item). Rows pass a sketch stage unchanged,
so the tables after it equal the reference's exactly.
"""

from __future__ import annotations

import threading
import time

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import streamcell as sc
from streamcell.errors import DSLSyntaxError, PlanError
from streamcell.options import RunOptions
from tests.conftest import ENGINE_CONFIGS
from tests.helpers import check_against_reference, run_plan

ds = pytest.importorskip("datasketches")

# small sketch sizes so a few thousand rows are in estimation mode
CELL = """
source clickstream(rows=4000, users=3000, items=300, seed=11)
sketch theta(user_id, lg_k=6) as users, hll(user_id, lg_k=6) as users_hll, kll(price, k=40) as prices, frequent(item_id, lg_max_map_size=3) as items, frequent(event, lg_max_map_size=3) as events
sink table
"""

KEYED = """
source clickstream(rows=3000, users=2000, items=200, seed=5)
key_by event
sketch theta(user_id, lg_k=5) as users, kll(price, k=40) as prices, frequent(item_id, lg_max_map_size=3) as items
"""


NATIVE = [c for c in ENGINE_CONFIGS if c.options.engine == "native"]


def _distinct_within(got, exact: float) -> None:
    assert got.lower_bound(3) <= exact <= got.upper_bound(3), (
        got.lower_bound(3),
        exact,
        got.upper_bound(3),
    )


def _quantiles_within(got, exact) -> None:
    eps = got.rank_error()
    assert got.n == exact.n
    for q in (0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99):
        r = exact.rank(got.quantile(q), inclusive=True)
        r0 = exact.rank(got.quantile(q))
        # the item returned has a true rank interval [r0, r] that must come within eps of q
        assert r0 - eps <= q <= r + eps, (q, r0, r, eps)


def _frequent_within(got, exact) -> None:
    assert got.n == exact.n
    truth = exact.top(10_000)
    for item, count in zip(truth["item"], truth["estimate"]):
        sk = got.snapshot()
        assert sk.get_lower_bound(item) <= count <= sk.get_upper_bound(item), item
    # every item heavier than the error bound is reported
    offset = got.snapshot().maximum_error
    reported = set(got.top(10_000)["item"])
    heavy = {i for i, c in zip(truth["item"], truth["estimate"]) if c > offset}
    assert heavy <= reported


# ------------------------------------------------------------------------- DSL / plans


def test_dsl_round_trip_and_fluent_equal():
    p = sc.parse(CELL)
    assert sc.parse(p.to_dsl()) == p
    fluent = (
        sc.source(sc.clickstream(rows=4000, users=3000, items=300, seed=11))
        .sketch(
            users=sc.theta("user_id", lg_k=6),
            users_hll=sc.hll("user_id", lg_k=6),
            prices=sc.kll("price", k=40),
            items=sc.frequent("item_id", lg_max_map_size=3),
            events=sc.frequent("event", lg_max_map_size=3),
        )
        .sink_table()
    )
    assert sc.Plan.of((fluent,)) == p
    k = sc.parse(KEYED)
    assert sc.parse(k.to_dsl()) == k
    assert k.sinks[0].target == "none"  # a final sketch stage keeps no table
    assert "key_by event\nsketch theta(user_id, lg_k=5) as users" in k.to_dsl()


@pytest.mark.parametrize(
    "stage, message, column",
    [
        ("sketch theta(user_id)", "expected a sketch such as theta(user_id) as users", 8),
        ("sketch median(price) as m", "unknown sketch 'median'", 8),
        ("sketch theta(user_id, lg_k=40) as u", "lg_k must be an integer in [5, 26]", 8),
        ("sketch theta(user_id, k=4) as u", "theta() takes lg_k=, not k", 8),
        ("sketch theta(user_id) as u, hll(user_id) as u", "sketch name 'u' is used twice", 45),
        ("sketch theta(user_id, event) as u", "theta() takes one column", 8),
        ("sketch", "sketch needs a sketch such as", 1),
    ],
)
def test_dsl_errors_point_at_the_text(stage, message, column):
    with pytest.raises(DSLSyntaxError) as e:
        sc.parse(f"source clickstream(rows=10)\n{stage}\n")
    assert message in str(e.value)
    assert e.value.line == 2
    assert e.value.column == column


@pytest.mark.parametrize(
    "stage, message",
    [
        (
            "sketch kll(event) as p",
            "sketch p: kll(event) needs int, float or bool, but 'event' is str",
        ),
        ("sketch frequent(price) as p", "frequent(price) needs int, bool, str, datetime or date"),
        ("sketch theta(nope) as p", "unknown column 'nope'"),
    ],
)
def test_plan_errors_name_the_column(stage, message):
    with pytest.raises(PlanError) as e:
        sc.compile_plan(sc.parse(f"source clickstream(rows=10)\n{stage}\n"))
    assert message in str(e.value)


def test_sketch_names_are_unique_across_stages():
    with pytest.raises(PlanError, match="two sketch stages are named 'u'"):
        sc.compile_plan(
            sc.parse(
                "source clickstream(rows=10)\nsketch theta(user_id) as u\n"
                "filter price > 1\nsketch hll(user_id) as u\n"
            )
        )


def test_fluent_rejects_non_sketch():
    with pytest.raises(TypeError, match="expected sc.theta"):
        sc.source(sc.clickstream(rows=1)).sketch(u=sc.col("user_id"))
    with pytest.raises(ValueError, match="k must be an integer"):
        sc.kll("price", k=2)


# --------------------------------------------------------------- against the reference


def test_rows_pass_unchanged_and_estimates_hold_the_truth(engine):
    plan = sc.parse(CELL)
    check_against_reference(plan, engine.options)  # the table after the stage is exact
    got = run_plan(plan, engine.options)
    ref = run_plan(plan, RunOptions(engine="reference"))
    assert ref.sketch("users").exact
    exact_users = ref.sketch("users").estimate()
    assert exact_users == ref.table().filter(pl.col("user_id").is_not_null())["user_id"].n_unique()
    assert ref.sketch("items").n == 4000
    assert ref.sketch("prices").n == 4000
    if engine.options.engine == "reference":
        return
    assert not got.sketch("users").exact
    assert got.sketch("users").estimate() != exact_users  # estimation mode at lg_k=6
    _distinct_within(got.sketch("users"), exact_users)
    _distinct_within(got.sketch("users_hll"), exact_users)
    _quantiles_within(got.sketch("prices"), ref.sketch("prices"))
    _frequent_within(got.sketch("items"), ref.sketch("items"))
    _frequent_within(got.sketch("events"), ref.sketch("events"))
    assert got.sketch("events").top(1)["item"][0] == ref.sketch("events").top(1)["item"][0]


def test_keyed_sketches_one_per_key(engine):
    plan = sc.parse(KEYED)
    got = run_plan(plan, engine.options)
    ref = run_plan(plan, RunOptions(engine="reference"))
    assert got.table_names() == []
    gk, rk = got.sketch("users"), ref.sketch("users")
    assert_frame_equal(gk.keys(), rk.keys())  # same keys, in order of first arrival
    assert len(gk) == 3 and sorted(gk.keys()["event"]) == ["cart", "purchase", "view"]
    frame = gk.to_frame()
    assert frame.columns == ["event", "estimate", "lower_bound", "upper_bound"]
    for (event,) in rk.keys().iter_rows():
        _distinct_within(gk[event], rk[event].estimate())
        if engine.options.engine != "reference":
            _quantiles_within(got.sketch("prices")[event], ref.sketch("prices")[event])
            _frequent_within(got.sketch("items")[event], ref.sketch("items")[event])
    with pytest.raises(KeyError, match="no rows with key"):
        gk["refund"]


def test_small_streams_are_exact(engine):
    # below k every Θ sketch counts exactly; the HLL sketch is exact-ish at these sizes
    plan = sc.parse(
        "source clickstream(rows=500, users=200, seed=2)\n"
        "filter user_id < 50\n"
        "sketch theta(user_id) as u, hll(user_id) as h\n"
    )
    got = run_plan(plan, engine.options)
    ref = run_plan(plan, RunOptions(engine="reference"))
    assert got.sketch("u").estimate() == ref.sketch("u").estimate()
    assert abs(got.sketch("h").estimate() - ref.sketch("h").estimate()) <= 1


def test_nulls_and_empty_strings_are_skipped(engine):
    df = pl.DataFrame(
        {
            "s": ["a", None, "", "b", "a", None, ""],
            "x": [1.0, None, float("nan"), -0.0, 0.0, 2.0, None],
            "k": [1, 1, 2, 2, 1, 2, 2],
        }
    )
    plan = (
        sc.source(df)
        .sketch(
            s=sc.theta("s"),
            x=sc.theta("x"),
            q=sc.kll("x"),
            f=sc.frequent("s"),
            h=sc.hll("s"),
        )
        .plan()
    )
    run = run_plan(plan, engine.options)
    assert run.sketch("s").estimate() == 2  # "a", "b"
    assert run.sketch("h").estimate() == pytest.approx(2, abs=0.01)
    assert run.sketch("x").estimate() == 4  # 1.0, NaN, 0.0 (= -0.0), 2.0
    assert run.sketch("q").n == 4  # NaN ignored
    assert run.sketch("q").quantile(1.0) == 2.0
    assert run.sketch("f").n == 5  # "" is an item for frequent items
    assert run.sketch("f").estimate("a") == 2


# --------------------------------------------------------------------- native specifics


@pytest.mark.parametrize("engine", NATIVE, ids=[c.id for c in NATIVE])
def test_native_runs_are_deterministic(engine):
    """The stage sees rows in arrival order, so bytes are equal for any workers/batches."""
    plan = sc.parse(CELL)
    one = run_plan(plan, RunOptions(engine="native", workers=1, batch_size=1024))
    got = run_plan(plan, engine.options)
    for name in ("users", "users_hll", "prices", "items", "events"):
        assert got.sketch(name).to_bytes() == one.sketch(name).to_bytes(), name
    keyed = sc.parse(KEYED)
    a = run_plan(keyed, RunOptions(engine="native", workers=1))
    b = run_plan(keyed, engine.options)
    for (event,) in a.sketch("users").keys().iter_rows():
        assert a.sketch("prices")[event].to_bytes() == b.sketch("prices")[event].to_bytes()


def test_native_bytes_load_in_datasketches():
    run = run_plan(sc.parse(CELL), RunOptions(engine="native", workers=2))
    u = run.sketch("users")
    theirs = ds.compact_theta_sketch.deserialize(u.to_bytes())
    assert theirs.get_estimate() == pytest.approx(u.estimate())
    h = ds.hll_sketch.deserialize(run.sketch("users_hll").to_bytes())
    assert h.get_estimate() == pytest.approx(run.sketch("users_hll").estimate())
    k = ds.kll_doubles_sketch.deserialize(run.sketch("prices").to_bytes())
    assert k.n == 4000
    assert k.get_quantile(0.5) == run.sketch("prices").quantile(0.5)
    f = ds.frequent_items_sketch.deserialize(run.sketch("items").to_bytes(), ds.PyLongsSerDe())
    top = run.sketch("items").top(1)
    assert f.get_estimate(top["item"][0]) == top["estimate"][0]
    e = ds.frequent_strings_sketch.deserialize(run.sketch("events").to_bytes())
    assert e.get_estimate("view") == run.sketch("events").estimate("view")
    # and they merge with a sketch built by datasketches from the same rows
    mine = ds.update_theta_sketch(6)
    for v in run.table()["user_id"].drop_nulls():
        mine.update(int(v))
    assert mine.compact().get_estimate() == pytest.approx(u.estimate())


@pytest.mark.parametrize("eng", ["reference", "native"])
def test_live_queries_while_the_run_ingests(eng):
    """Queries from another thread during ingestion: counts grow and never exceed the
    final answer; after the run the answer stays."""
    plan = sc.parse(
        "source clickstream(rows=6000, users=100000, seed=9), rate=20000\n"
        "sketch theta(user_id) as users, kll(price) as prices\n"
        "key_by event\nsketch frequent(item_id) as items\n"
    )
    run = sc.start(plan, name=f"live-{eng}", options=RunOptions(engine=eng))
    seen: list[tuple[float, int]] = []
    errors: list[BaseException] = []

    def query() -> None:
        try:
            while not run.done():
                seen.append((run.sketch("users").estimate(), run.sketch("prices").n))
                run.sketch("items").to_frame()
                time.sleep(0.01)
        except BaseException as e:  # surfaced below
            errors.append(e)

    t = threading.Thread(target=query)
    t.start()
    run.wait(60)
    t.join()
    assert not errors, errors
    assert run.status == "finished"
    final_users, final_n = run.sketch("users").estimate(), run.sketch("prices").n
    assert final_n == 6000
    mids = [s for s in seen if 0 < s[1] < final_n]
    assert mids, "no query landed while the run was live"
    assert all(a[1] <= b[1] for a, b in zip(seen, seen[1:]))  # monotone
    assert all(est <= final_users for est, _ in seen)
    assert run.sketch("items").to_frame().height == 3
    assert set(run.sketches()) >= {"users", "prices"}


def test_unknown_sketch_name():
    run = run_plan(sc.parse(KEYED), RunOptions(engine="reference"))
    with pytest.raises(KeyError, match="no sketch 'nope'.*sketches: users, prices, items"):
        run.sketch("nope")
    with pytest.raises(TypeError, match="is theta; this query is for kll"):
        run.sketch("users")["view"].quantile(0.5)
    with pytest.raises(TypeError, match="exact answer"):
        run.sketch("users")["view"].to_bytes()


@pytest.mark.parametrize("eng", ["reference", "native"])
def test_dashboard_snapshot_shows_the_sketches(eng):
    run = run_plan(sc.parse(CELL), RunOptions(engine=eng))
    snap = sc.metrics_snapshot(run)
    kinds = {s.name: s.kind for s in snap.sketches}
    assert kinds == {
        "users": "theta",
        "users_hll": "hll",
        "prices": "kll",
        "items": "frequent",
        "events": "frequent",
    }
    by = {s.name: s for s in snap.sketches}
    assert by["users"].lower <= by["users"].estimate <= by["users"].upper
    assert by["users"].estimate == pytest.approx(run.sketch("users").estimate())
    assert by["prices"].n == 4000 and by["prices"].quantiles
    assert by["events"].top_items[0][0] == run.sketch("events").top(1)["item"][0]
    keyed = run_plan(sc.parse(KEYED), RunOptions(engine=eng))
    names = [s.name for s in sc.metrics_snapshot(keyed).sketches]
    events = keyed.sketch("users").keys()["event"].to_list()
    assert names == [f"{n}[{e}]" for n in ("users", "prices", "items") for e in events]


@pytest.mark.parametrize("cfg", NATIVE, ids=[c.id for c in NATIVE])
def test_hll_counts_two_values_sharing_a_register(cfg):
    """Two distinct floats whose coupons land in one HLL register count 2 (the reference is
    exact): a register-only sketch would say 1, far outside its own bounds."""
    from streamcell.sketches import HllSketch

    seen, pair = {}, None
    for i in range(100_000):
        x = i / 7 - 3000.5
        h = HllSketch(12)
        h.update(x)
        slot = next(j for j, b in enumerate(h.registers()) if b)
        if slot in seen:
            pair = (seen[slot], x)
            break
        seen[slot] = x
    df = pl.DataFrame({"f": [None] * 45 + list(pair)}, schema={"f": pl.Float64})
    plan = sc.Plan.of((sc.source(df).sketch(h=sc.hll("f")).sink_table(),))
    got = run_plan(plan, cfg.options).sketch("h")
    assert run_plan(plan, RunOptions(engine="reference")).sketch("h").estimate() == 2
    assert got.lower_bound(3) <= 2 == got.estimate() <= got.upper_bound(3)


# ------------------------------------------------------------------ random small inputs

hyp = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@st.composite
def small_frames(draw):
    n = draw(st.integers(0, 120))
    ints = st.one_of(st.none(), st.integers(-30, 30), st.sampled_from([2**63 - 1, -(2**63)]))
    floats = st.one_of(
        st.none(),
        st.floats(-50, 50, allow_nan=False),
        st.sampled_from([float("nan"), -0.0, 0.0, float("inf"), -float("inf")]),
    )
    strs = st.one_of(st.none(), st.sampled_from(["", "a", "b", "ß", "abc", "x" * 30]))
    return pl.DataFrame(
        {
            "k": draw(st.lists(st.one_of(st.none(), st.integers(0, 3)), min_size=n, max_size=n)),
            "i": draw(st.lists(ints, min_size=n, max_size=n)),
            "f": draw(st.lists(floats, min_size=n, max_size=n)),
            "s": draw(st.lists(strs, min_size=n, max_size=n)),
            "b": draw(st.lists(st.one_of(st.none(), st.booleans()), min_size=n, max_size=n)),
        },
        schema={"k": pl.Int64, "i": pl.Int64, "f": pl.Float64, "s": pl.String, "b": pl.Boolean},
    )


SPECS = [
    ("theta", "i"),
    ("theta", "f"),
    ("theta", "s"),
    ("theta", "b"),
    ("kll", "i"),
    ("kll", "f"),
    ("kll", "b"),
    ("frequent", "i"),
    ("frequent", "s"),
    ("frequent", "b"),
    ("hll", "s"),
    ("hll", "f"),
]


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    small_frames(),
    st.lists(st.sampled_from(SPECS), min_size=1, max_size=4, unique=True),
    st.sampled_from([(), ("k",), ("k", "b")]),
    st.booleans(),
    st.sampled_from(
        [
            RunOptions(engine="native", workers=1),
            RunOptions(engine="native", workers=2, batch_size=1),
            RunOptions(engine="native", workers=4, batch_size=5, scheduler="QST"),
        ]
    ),
)
def test_small_random_inputs_native_equals_exact(df, specs, keys, filtered, options):
    """Below the sketches' exact limits (Θ: k, KLL: k items, frequent: map capacity) the
    native answers equal the reference's exact answers, whatever the values: nulls, NaN,
    -0.0, empty strings, extreme ints, per key."""
    s = sc.source(df)
    if filtered:
        s = s.filter(sc.col("i").is_null() | (sc.col("i") > -10))
    calls = {f"{fn}_{c}": getattr(sc, fn)(c) for fn, c in specs}
    plan = (s.key_by(*keys) if keys else s).sketch(**calls).sink_table()
    plan = sc.Plan.of((plan,))
    got = run_plan(plan, options)
    ref = run_plan(plan, RunOptions(engine="reference"))
    assert_frame_equal(got.table(), ref.table())
    for name, call in calls.items():
        g, r = got.sketch(name), ref.sketch(name)
        if keys:
            assert_frame_equal(g.keys(), r.keys())
            pairs = [(g[k], r[k]) for k in r.keys().iter_rows()]
        else:
            pairs = [(g, r)]
        for a, b in pairs:
            if call.fn == "theta":
                assert a.estimate() == b.estimate()
            elif call.fn == "hll":
                assert a.lower_bound(3) <= b.estimate() <= a.upper_bound(3)
            elif call.fn == "kll":
                assert a.n == b.n
                for q in (0.0, 0.1, 0.5, 0.9, 1.0):
                    for inc in (False, True):
                        x, y = a.quantile(q, inclusive=inc), b.quantile(q, inclusive=inc)
                        assert x == y or (x != x and y != y), (q, inc, x, y)
            else:
                assert a.n == b.n
                assert_frame_equal(a.top(1000), b.top(1000))
