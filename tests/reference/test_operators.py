"""Operators on the reference backend (and, through ``engine``, on every other backend).

Expected values are hand-computed on small inputs or computed by Polars in batch (e.g. a
keyed ``agg``'s final table is ``group_by(...).agg(...)``; its changelog is the same
aggregate over every prefix of the input).
"""

from __future__ import annotations

import random

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import streamcell as sc
from streamcell.errors import PlanError
from tests.helpers import check_against_reference, table


def frame(**cols) -> pl.DataFrame:
    return pl.DataFrame({n: pl.Series(n, v, dtype=t) for n, (v, t) in cols.items()})


def tables(plan: sc.Plan, engine) -> dict[str, pl.DataFrame]:
    return check_against_reference(plan, engine.options)["tables"]


def counts(out: dict) -> dict[str, dict]:
    return {r["step"]: r for r in out["counts"].to_dicts()}


# ------------------------------------------------------------------ stateless steps


def test_filter_matches_polars(engine):
    df = frame(a=([1, 5, None, 7, 3, 9], pl.Int64), s=(["x", "y", "x", None, "y", "x"], pl.String))
    plan = (
        sc.source(df)
        .filter((sc.col("a") > 2) & (sc.col("s") == "x") | sc.col("a").is_null())
        .plan()
    )
    want = df.filter((pl.col("a") > 2) & (pl.col("s") == "x") | pl.col("a").is_null())
    assert_frame_equal(table(plan, engine.options), want)


def test_select_names_and_order(engine):
    df = frame(a=([1, 2], pl.Int64), b=([3.0, 4.0], pl.Float64), c=(["u", "v"], pl.String))
    plan = (
        sc.source(df)
        .select("c", (sc.col("a") * 10).alias("a10"), sc.col("b") + 1, k=sc.lit(7))
        .plan()
    )
    got = table(plan, engine.options)
    # an unnamed expression is named after its leftmost column (as in Polars)
    want = df.select("c", a10=pl.col("a") * 10, b=pl.col("b") + 1, k=pl.lit(7, dtype=pl.Int64))
    assert_frame_equal(got, want)


def test_with_columns_replaces_in_place_and_appends_new(engine):
    df = frame(a=([1, 2], pl.Int64), b=([3, 4], pl.Int64))
    plan = sc.source(df).with_columns(a=sc.col("a") * -1, z=sc.col("a") + sc.col("b")).plan()
    got = table(plan, engine.options)
    assert got.columns == ["a", "b", "z"]
    # z is computed from the input row (a before it was replaced), like Polars
    assert_frame_equal(got, df.with_columns(a=pl.col("a") * -1, z=pl.col("a") + pl.col("b")))


def test_explode_matches_polars_including_empty_and_null_lists(engine):
    df = pl.DataFrame(
        {"id": [1, 2, 3, 4], "xs": [[10, 20, 30], [], None, [40]]},
        schema={"id": pl.Int64, "xs": pl.List(pl.Int64)},
    )
    got = table(sc.source(df).explode("xs").plan(), engine.options)
    assert got.rows() == [(1, 10), (1, 20), (1, 30), (2, None), (3, None), (4, 40)]
    assert_frame_equal(got, df.explode("xs", empty_as_null=True, keep_nulls=True))


def test_explode_several_columns_in_lockstep(engine):
    df = pl.DataFrame({"id": [1, 2], "a": [["x", "y"], ["z"]], "b": [[1, 2], [3]]})
    got = table(sc.source(df).explode("a", "b").plan(), engine.options)
    assert got.rows() == [(1, "x", 1), (1, "y", 2), (2, "z", 3)]
    assert got.schema == {"id": pl.Int64, "a": pl.String, "b": pl.Int64}


def test_explode_lists_of_different_lengths_is_a_dead_letter(engine):
    df = pl.DataFrame({"id": [1, 2, 3], "a": [[1], [1, 2], [5]], "b": [[1], [1], [6]]})
    out = check_against_reference(sc.source(df).explode("a", "b").plan(), engine.options)
    got = next(iter(out["tables"].values()))
    assert got["id"].to_list() == [1, 3]
    assert out["dead"]["step"].to_list() == ["explode#2"]
    assert "different lengths" in out["dead"]["reason"][0]
    assert counts(out)["explode#2"]["dead"] == 1


def test_explode_then_filter_counts(engine):
    df = pl.DataFrame({"xs": [[1, 2, 3], [4], []]}, schema={"xs": pl.List(pl.Int64)})
    out = check_against_reference(
        sc.source(df).explode("xs").filter(sc.col("xs") > 1).plan(), engine.options
    )
    assert next(iter(out["tables"].values()))["xs"].to_list() == [2, 3, 4]
    c = counts(out)
    assert (c["explode#2"]["rows_in"], c["explode#2"]["rows_out"]) == (3, 5)
    assert (c["filter#3"]["rows_in"], c["filter#3"]["filtered"], c["filter#3"]["rows_out"]) == (
        5,
        2,
        3,
    )


# ----------------------------------------------------------------- keyed aggregates

SALES = frame(
    k=(["a", "b", "a", None, "b", "a", "c", "a", None, "b"], pl.String),
    v=([3, None, 5, 2, 7, None, 1, 3, 4, 7], pl.Int64),
    f=([1.5, 2.0, None, 0.5, 2.5, 3.0, None, 1.0, 1.0, 4.0], pl.Float64),
    s=(["q", "r", "q", "s", None, "t", "u", "q", "s", "r"], pl.String),
)

ALL_AGGS = dict(
    n=sc.count(),
    nv=sc.count("v"),
    sv=sc.col("v").sum(),
    sf=sc.col("f").sum(),
    mn=sc.col("v").min(),
    mx=sc.col("f").max(),
    smin=sc.col("s").min(),
    avg=sc.col("v").mean(),
    fst=sc.col("v").first(),
    lst=sc.col("s").last(),
    nd=sc.col("s").count_distinct(),
    nd2=sc.count_distinct("v"),
)


def polars_aggs() -> list[pl.Expr]:
    v, f, s = pl.col("v"), pl.col("f"), pl.col("s")
    exprs = [
        pl.len().alias("n"),
        v.count().alias("nv"),
        v.sum().alias("sv"),
        f.sum().alias("sf"),
        v.min().alias("mn"),
        f.max().alias("mx"),
        s.min().alias("smin"),
        v.mean().alias("avg"),
        v.first().alias("fst"),
        s.last().alias("lst"),
        s.n_unique().alias("nd"),
        v.n_unique().alias("nd2"),
    ]
    return exprs


def _int_counts(df: pl.DataFrame) -> pl.DataFrame:
    return df.with_columns(pl.col("n", "nv", "nd", "nd2").cast(pl.Int64))


def expected_changelog(df: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """Row i: the aggregates over input rows 0..i that share row i's key."""
    parts = []
    for i in range(df.height):
        prefix = df.head(i + 1)
        row = df.row(i, named=True)
        for k in keys:
            prefix = prefix.filter(pl.col(k).eq_missing(row[k]))
        parts.append(
            prefix.select(
                [pl.lit(row[k], dtype=df.schema[k]).alias(k) for k in keys] + polars_aggs()
            )
        )
    return _int_counts(pl.concat(parts))


def test_keyed_agg_final_table_matches_polars_group_by(engine):
    plan = sc.source(SALES).key_by("k").agg(**ALL_AGGS).plan()
    got = table(plan, engine.options)
    want = _int_counts(SALES.group_by("k", maintain_order=True).agg(polars_aggs()))
    assert_frame_equal(
        got, want
    )  # upsert: one row per key, in first-seen key order (null key included)


def test_keyed_agg_changelog_is_the_aggregate_of_every_prefix(engine):
    keyed = sc.source(SALES).key_by("k").agg(**ALL_AGGS)
    plan = sc.combine(keyed.sink_table("final"), keyed.sink_table("log", mode="append"))
    got = tables(plan, engine)
    assert_frame_equal(got["log"], expected_changelog(SALES, ["k"]))
    assert_frame_equal(
        got["final"], _int_counts(SALES.group_by("k", maintain_order=True).agg(polars_aggs()))
    )


def test_global_agg_final_and_changelog(engine):
    agg = sc.source(SALES).agg(**ALL_AGGS)
    got = tables(sc.combine(agg.sink_table("final"), agg.sink_table("log", mode="append")), engine)
    assert_frame_equal(got["final"], _int_counts(SALES.select(polars_aggs())))
    assert_frame_equal(got["log"], expected_changelog(SALES, []))
    assert got["log"]["n"].to_list() == list(range(1, SALES.height + 1))


def test_agg_with_two_keys(engine):
    df = frame(
        a=([1, 1, 2, 1, 2, 2], pl.Int64),
        b=(["x", "y", "x", "x", "x", "y"], pl.String),
        v=([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], pl.Float64),
    )
    got = table(
        sc.source(df).key_by("a", "b").agg(t=sc.col("v").sum(), n=sc.count()).plan(), engine.options
    )
    want = df.group_by("a", "b", maintain_order=True).agg(
        t=pl.col("v").sum(), n=pl.len().cast(pl.Int64)
    )
    assert_frame_equal(got, want)


def test_agg_of_expression_and_bool_sum(engine):
    df = frame(k=([1, 1, 2], pl.Int64), p=([2.0, 3.0, 4.0], pl.Float64), q=([1, 2, 3], pl.Int64))
    plan = (
        sc.source(df)
        .key_by("k")
        .agg(rev=(sc.col("p") * sc.col("q")).sum(), big=(sc.col("q") > 1).sum())
        .plan()
    )
    got = table(plan, engine.options)
    assert got.rows() == [(1, 8.0, 1), (2, 12.0, 1)]
    assert got.schema == {"k": pl.Int64, "rev": pl.Float64, "big": pl.Int64}


def test_agg_all_null_column(engine):
    df = frame(k=([1, 1], pl.Int64), v=([None, None], pl.Int64))
    got = table(
        sc.source(df)
        .key_by("k")
        .agg(
            s=sc.col("v").sum(),
            m=sc.col("v").mean(),
            mn=sc.col("v").min(),
            c=sc.count("v"),
            n=sc.count(),
        )
        .plan(),
        engine.options,
    )
    # as Polars: the sum of no values is 0, mean/min of no values are null
    assert got.rows() == [(1, 0, None, None, 0, 2)]


def test_agg_on_empty_input_gives_an_empty_table_with_the_schema(engine):
    df = frame(k=([], pl.String), v=([], pl.Int64))
    got = table(
        sc.source(df)
        .key_by("k")
        .agg(n=sc.count(), s=sc.col("v").sum(), m=sc.col("v").mean())
        .plan(),
        engine.options,
    )
    assert got.height == 0
    assert got.schema == {"k": pl.String, "n": pl.Int64, "s": pl.Int64, "m": pl.Float64}


def test_upsert_sink_with_explicit_key_keeps_the_latest_row_in_first_seen_order(engine):
    df = frame(k=(["a", "b", "a", "c", "b"], pl.String), v=([1, 2, 3, 4, 5], pl.Int64))
    got = table(
        sc.combine(sc.source(df).sink_table("latest", mode="upsert", key=["k"])), engine.options
    )
    assert_frame_equal(got, df.group_by("k", maintain_order=True).last())


def test_upsert_without_key_after_a_stateless_step_is_a_plan_error():
    df = frame(k=(["a"], pl.String))
    with pytest.raises(PlanError, match="needs key="):
        sc.start(sc.combine(sc.source(df).sink_table("t", mode="upsert")), name="bad_upsert")


# -------------------------------------------------------------------- running aggs


def test_running_aggregates_are_each_row_plus_its_prefix_aggregate(engine):
    plan = sc.source(SALES).key_by("k").running(**ALL_AGGS).plan()
    got = table(plan, engine.options)
    prefix = expected_changelog(SALES, ["k"]).drop("k")
    assert_frame_equal(got, pl.concat([SALES, prefix], how="horizontal"))


def test_global_running_count_and_sum_match_polars_cumulative(engine):
    df = frame(v=([4, 1, 3, 2], pl.Int64))
    got = table(
        sc.source(df).running(n=sc.count(), tot=sc.col("v").sum(), hi=sc.col("v").max()).plan(),
        engine.options,
    )
    want = df.with_columns(
        n=pl.int_range(1, 5, dtype=pl.Int64), tot=pl.col("v").cum_sum(), hi=pl.col("v").cum_max()
    )
    assert_frame_equal(got, want)


def test_running_name_clash_is_a_plan_error():
    df = frame(v=([1], pl.Int64))
    with pytest.raises(PlanError, match="clash"):
        sc.start(sc.source(df).running(v=sc.count()).plan(), name="bad_running")


# --------------------------------------------------------------------------- top_k


def expected_top_k(
    df: pl.DataFrame, k: int, by: str, keys: list[str], descending: bool
) -> pl.DataFrame:
    """Final top-k per key, ties by arrival, nulls excluded; sorted by (keys, rank)."""
    d = df.with_row_index("_arrival").filter(pl.col(by).is_not_null())
    d = d.sort([by, "_arrival"], descending=[descending, False])
    if keys:
        d = d.group_by(keys, maintain_order=True).head(k)
        d = d.with_columns(rank=pl.int_range(1, pl.len() + 1, dtype=pl.Int64).over(keys))
    else:
        d = d.head(k).with_columns(rank=pl.int_range(1, pl.len() + 1, dtype=pl.Int64))
    return d.sort([*keys, "rank"]).select(*df.columns, "rank")


TOPK = frame(
    g=(["x", "y", "x", "x", "y", "x", "y", "x", "y"], pl.String),
    v=([5, 3, 5, 1, None, 7, 3, 5, 9], pl.Int64),
    id=(list(range(9)), pl.Int64),
)


@pytest.mark.parametrize("descending", [True, False])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_top_k_global_final_table(engine, k, descending):
    got = table(sc.source(TOPK).top_k(k, by="v", descending=descending).plan(), engine.options)
    assert_frame_equal(got.sort("rank"), expected_top_k(TOPK, k, "v", [], descending))


@pytest.mark.parametrize("descending", [True, False])
def test_top_k_per_key_final_table(engine, descending):
    got = table(
        sc.source(TOPK).key_by("g").top_k(2, by="v", descending=descending).plan(), engine.options
    )
    assert_frame_equal(got.sort("g", "rank"), expected_top_k(TOPK, 2, "v", ["g"], descending))


def test_top_k_emits_the_whole_top_k_when_it_changes_ties_by_arrival(engine):
    df = frame(v=([5, 3, 5, 1, 7], pl.Int64), id=(["a", "b", "c", "d", "e"], pl.String))
    plan = sc.combine(sc.source(df).top_k(2, by="v").sink_table("log", mode="append"))
    got = table(plan, engine.options)
    # 5a -> [a]; 3b -> [a, b]; 5c ties a, arrives later: [a, c]; 1d changes nothing; 7e -> [e, a]
    assert got.select("id", "rank").rows() == [
        ("a", 1),
        ("a", 1),
        ("b", 2),
        ("a", 1),
        ("c", 2),
        ("e", 1),
        ("a", 2),
    ]


def test_top_k_null_values_are_filtered_and_counted(engine):
    df = frame(v=([None, 2, None], pl.Int64))
    out = check_against_reference(sc.source(df).top_k(3, by="v").plan(), engine.options)
    assert next(iter(out["tables"].values()))["v"].to_list() == [2]
    assert counts(out)["top_k#2"]["filtered"] == 2


def test_top_k_on_strings_and_floats(engine):
    df = frame(
        s=(["pear", "apple", "zoo", "fig"], pl.String), f=([0.5, 2.5, -1.0, 2.5], pl.Float64)
    )
    got = table(sc.source(df).top_k(2, by="s", descending=False).plan(), engine.options).sort(
        "rank"
    )
    assert got["s"].to_list() == ["apple", "fig"]
    got = table(sc.source(df).top_k(2, by="f").plan(), engine.options).sort("rank")
    assert got["s"].to_list() == ["apple", "fig"]  # the 2.5 tie: apple arrived first


# ---------------------------------------------------------------------------- dedup


def test_dedup_by_column_keeps_the_first_row(engine):
    df = frame(k=(["a", "b", "a", None, "b", None, "c"], pl.String), v=(list(range(7)), pl.Int64))
    out = check_against_reference(sc.source(df).dedup("k").plan(), engine.options)
    want = df.unique(subset="k", keep="first", maintain_order=True)
    assert_frame_equal(next(iter(out["tables"].values())), want)
    assert counts(out)["dedup#2"]["filtered"] == df.height - want.height


def test_dedup_key_by_form_equals_column_form(engine):
    df = frame(
        k=([1, 1, 2, 1, 2], pl.Int64), j=([1, 2, 1, 1, 1], pl.Int64), v=(list(range(5)), pl.Int64)
    )
    got = table(sc.source(df).key_by("k", "j").dedup().plan(), engine.options)
    assert_frame_equal(got, df.unique(subset=["k", "j"], keep="first", maintain_order=True))


def test_dedup_all_columns(engine):
    df = frame(
        a=([1, 1, 2, 1, None, None], pl.Int64), b=(["x", "x", "x", "y", None, None], pl.String)
    )
    got = table(sc.source(df).dedup().plan(), engine.options)
    assert_frame_equal(got, df.unique(keep="first", maintain_order=True))


# ---------------------------------------------------------------------------- union


def test_union_is_round_robin_by_source_in_step_order(engine):
    a = [{"src": "a", "i": i} for i in range(4)]
    b = [{"src": "b", "i": 0}]
    c = [{"src": "c", "i": i} for i in range(2)]
    plan = sc.source(a).union(sc.source(b), sc.source(c)).plan()
    got = table(plan, engine.options)
    assert got.rows() == [("a", 0), ("b", 0), ("c", 0), ("a", 1), ("c", 1), ("a", 2), ("a", 3)]


def test_union_after_filters_keeps_arrival_order(engine):
    a = pl.DataFrame({"v": [1, 2, 3, 4]})
    b = pl.DataFrame({"v": [10, 20, 30, 40]})
    plan = (
        sc.source(a)
        .filter(sc.col("v") % 2 == 0)
        .union(sc.source(b).filter(sc.col("v") > 15))
        .plan()
    )
    # arrival: a1 b10 a2 b20 a3 b30 a4 b40 -> keep a2, b20, b30, a4, b40 in that order
    assert table(plan, engine.options)["v"].to_list() == [2, 20, 30, 4, 40]


def test_union_reorders_columns_to_the_first_input(engine):
    a = pl.DataFrame({"x": [1], "y": ["p"]})
    b = pl.DataFrame({"y": ["q"], "x": [2]})
    got = table(sc.source(a).union(sc.source(b)).plan(), engine.options)
    assert got.columns == ["x", "y"]
    assert got.rows() == [(1, "p"), (2, "q")]


def test_union_with_different_schemas_is_a_plan_error():
    a = pl.DataFrame({"x": [1]})
    b = pl.DataFrame({"x": ["s"]})
    with pytest.raises(PlanError, match="union needs equal schemas"):
        sc.start(sc.source(a).union(sc.source(b)).plan(), name="bad_union")


def test_union_via_dsl(engine):
    a = pl.DataFrame({"v": [1, 2]})
    b = pl.DataFrame({"v": [3]})
    plan = sc.parse("B = source b\nsource a\nunion B", {"a": a, "b": b})
    # step ids number the union's inputs in order (a's chain, then B), so a is source#1
    assert [s.spec.obj.obj is a for s in plan.sources] == [True, False]
    assert table(plan, engine.options)["v"].to_list() == [1, 3, 2]


# --------------------------------------------------------------------- interval join


def _lr(left_rows, right_rows):
    left = pl.DataFrame(
        left_rows, schema={"k": pl.Int64, "t": pl.Int64, "lv": pl.String}, orient="row"
    )
    right = pl.DataFrame(
        right_rows, schema={"k": pl.Int64, "t": pl.Int64, "rv": pl.String}, orient="row"
    )
    return left, right


def test_join_matches_both_directions_with_an_inclusive_bound(engine):
    left, right = _lr([(1, 10, "l1"), (1, 20, "l2")], [(1, 5, "r1"), (1, 14, "r2"), (2, 20, "r3")])
    plan = sc.source(left).join(sc.source(right), on="k", within=5, time="t", lateness=100).plan()
    got = table(plan, engine.options)
    # arrival l1(10) r1(5) l2(20) r2(14) r3: r1 finds l1 at distance exactly 5 (inclusive),
    # l2 finds nothing (r1 is 15 away), r2 finds l1 (4) but not l2 (6); key 2 has no partner
    assert got.columns == ["k", "t", "lv", "t_right", "rv"]
    assert got.rows() == [(1, 10, "l1", 5, "r1"), (1, 10, "l1", 14, "r2")]


def test_join_left_row_arriving_after_its_right_partner(engine):
    left, right = _lr([(7, 0, "l0"), (7, 3, "l1")], [(7, 1, "r0")])
    got = table(
        sc.source(left).join(sc.source(right), on="k", within=2, time="t").plan(), engine.options
    )
    # arrival l0(0) r0(1) l1(3): r0 matches l0; l1 (arriving later) matches the stored r0
    assert got.rows() == [(7, 0, "l0", 1, "r0"), (7, 3, "l1", 1, "r0")]


def test_join_late_rows_go_to_the_side_output(engine):
    left, right = _lr([(1, 10, "l0"), (1, 2, "late")], [(1, 12, "r0")])
    out = check_against_reference(
        sc.source(left).join(sc.source(right), on="k", within=20, time="t").plan(), engine.options
    )
    got = next(iter(out["tables"].values()))
    # arrival l0(10) r0(12) late(2): the watermark is 12, so t=2 is late even though it is within 20
    assert got.rows() == [(1, 10, "l0", 12, "r0")]
    late = out["late"]
    assert late.height == 1
    assert late.select("k", "t", "lv", "_step", "_position").rows() == [
        (1, 2, "late", "join#3", "source#1 row 1")
    ]
    assert counts(out)["join#3"]["late"] == 1


def test_join_lateness_admits_out_of_order_rows(engine):
    left, right = _lr([(1, 10, "l0"), (1, 2, "ok")], [(1, 12, "r0")])
    got = table(
        sc.source(left).join(sc.source(right), on="k", within=20, time="t", lateness=10).plan(),
        engine.options,
    )
    assert got.rows() == [(1, 10, "l0", 12, "r0"), (1, 2, "ok", 12, "r0")]


def test_join_null_keys_never_match(engine):
    left = pl.DataFrame({"k": [None, 1], "t": [0, 0], "lv": ["n", "one"]})
    right = pl.DataFrame({"k": [None, 1], "t": [0, 0], "rv": ["N", "ONE"]})
    got = table(
        sc.source(left).join(sc.source(right), on="k", within=1, time="t").plan(), engine.options
    )
    assert got.rows() == [(1, 0, "one", 0, "ONE")]


def _brute_force_join(left: pl.DataFrame, right: pl.DataFrame, within: int) -> pl.DataFrame:
    j = left.join(right, on="k", suffix="_right")
    return j.filter((pl.col("t") - pl.col("t_right")).abs() <= within)


def test_join_eviction_loses_no_match_for_in_order_rows(engine):
    # Times never decrease in arrival order (round-robin left/right), so nothing is late and
    # the streaming join must find exactly the batch interval join; many matches sit exactly
    # at the `within` bound, right where eviction happens.
    rnd = random.Random(7)
    t = 0
    left_rows, right_rows = [], []
    for i in range(240):
        t += rnd.choice((0, 1, 1, 2, 3))
        row = (rnd.randrange(4), t, f"{'l' if i % 2 == 0 else 'r'}{i}")
        (left_rows if i % 2 == 0 else right_rows).append(row)
    left, right = _lr(left_rows, right_rows)
    within = 3
    out = check_against_reference(
        sc.source(left).join(sc.source(right), on="k", within=within, time="t").plan(),
        engine.options,
    )
    got = next(iter(out["tables"].values()))
    want = _brute_force_join(left, right, within)
    assert out["late"].height == 0
    assert want.height > 50 and (want["t"] - want["t_right"]).abs().eq(within).sum() > 5
    assert_frame_equal(got.sort("lv", "rv"), want.sort("lv", "rv"))


def test_join_with_datetime_time_column_and_string_within(engine):
    import datetime as dt

    t0 = dt.datetime(2024, 1, 1)
    left = pl.DataFrame({"user": [1, 2], "ts": [t0, t0], "page": ["home", "cart"]})
    right = pl.DataFrame(
        {
            "user": [1, 2],
            "ts": [t0 + dt.timedelta(seconds=30), t0 + dt.timedelta(seconds=31)],
            "amount": [9.5, 1.0],
        }
    )
    got = table(
        sc.source(left).join(sc.source(right), on="user", within="30s", time="ts").plan(),
        engine.options,
    )
    assert got.rows() == [(1, t0, "home", t0 + dt.timedelta(seconds=30), 9.5)]


def test_join_int_time_with_string_within_is_a_plan_error():
    left, right = _lr([(1, 1, "a")], [(1, 1, "b")])
    with pytest.raises(PlanError, match="time span"):
        sc.start(
            sc.source(left).join(sc.source(right), on="k", within="5s", time="t").plan(),
            name="bad_join",
        )
