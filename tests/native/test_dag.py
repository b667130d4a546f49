"""DAG pipelines on the native engine (Zimmerman and Chandy): several sources, union, fan-out.

Every native run is compared with the reference's sequential phase-by-phase definition
(tables, counts, late rows, dead letters), at 1, 2 and 4 workers and several phase sizes;
Δ-propagation is checked by counting vertex executions.
"""

from __future__ import annotations

import time

import polars as pl
import pytest

import streamcell as sc
from streamcell.backends.native import _vertices
from streamcell.sources import merged_serials
from streamcell.compiler import compile_plan
from streamcell.options import RunOptions

from tests.helpers import check_against_reference, run_plan

hyp = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

CONFIGS = [
    RunOptions(engine="native", workers=1, batch_size=5),
    RunOptions(engine="native", workers=2, batch_size=3),
    RunOptions(engine="native", workers=4, batch_size=64),
    RunOptions(engine="native", workers=2, batch_size=4096),
]


def frame(n: int, seed: int, keys: int = 5) -> pl.DataFrame:
    import random

    r = random.Random(seed)
    return pl.DataFrame(
        {
            "k": [r.randrange(keys) if r.random() > 0.05 else None for _ in range(n)],
            "v": [round(r.uniform(-10, 10), 2) if r.random() > 0.05 else None for _ in range(n)],
            "t": list(range(n)),
        },
        schema={"k": pl.Int64, "v": pl.Float64, "t": pl.Int64},
    )


# ------------------------------------------------------------------ hand-written DAGs


def diamond() -> sc.Plan:
    """One source fanned out into two branches that meet again in a union, a second source
    into the same union, and a keyed running aggregate after it; every branch also sinks."""
    a = sc.source(frame(300, 1), name="a")
    b = sc.source(frame(170, 2), name="b")
    hi = a.filter(sc.col("v") > 0)
    lo = a.filter(sc.col("v") <= 0).with_columns(v=sc.col("v") * -1)
    u = hi.union(lo, b.with_columns(k=sc.col("k") + 100))
    run = u.key_by("k").running(s=sc.sum("v"), n=sc.count())
    return sc.combine(
        run.sink_table("running"), hi.sink_table("hi"), u.dedup("k").sink_table("firsts")
    )


@pytest.mark.parametrize("opts", CONFIGS, ids=lambda o: f"w{o.workers}-b{o.batch_size}")
def test_diamond_equals_reference(opts: RunOptions) -> None:
    out = check_against_reference(diamond(), opts)
    assert len(out["tables"]) == 3
    assert all(t.height > 0 for t in out["tables"].values())


@pytest.mark.parametrize("opts", CONFIGS[:2], ids=lambda o: f"w{o.workers}-b{o.batch_size}")
def test_three_sources_windows_and_fan_out(opts: RunOptions) -> None:
    srcs = [sc.source(frame(n, s), name=f"s{s}") for n, s in ((120, 3), (40, 4), (75, 5))]
    u = srcs[0].union(srcs[1], srcs[2])
    win = u.key_by("k").tumbling(10, time="t", lateness=30).agg(total=sc.sum("v"))
    plan = sc.combine(win.sink_table("win"), u.top_k(3, by="v").sink_table("top"))
    check_against_reference(plan, opts)


def test_dead_letters_and_late_rows_keep_source_positions(tmp_path) -> None:
    path = tmp_path / "in.csv"
    path.write_text("k,v,t\n1,1.5,0\n2,oops,1\n3,2.5,2\nbad line\n4,3.5,30\n5,1.0,1\n")
    a = sc.source(sc.csv(str(path), schema={"k": "int", "v": "float", "t": "int"}), name="a")
    b = sc.source(frame(20, 9), name="b")
    u = a.union(b).with_columns(r=1 / sc.col("v").cast("int"))
    plan = sc.combine(u.key_by("k").tumbling(5, time="t").agg(n=sc.count()).sink_table("w"))
    for opts in CONFIGS[:2]:
        out = check_against_reference(plan, opts)
        assert out["dead"]["row"].to_list() == ["2,oops,1", "bad line"]
        late = out["late"]["_position"].to_list()  # rows of either source, after t=30
        assert "source#1 row 5" in late  # the csv's sixth item (bad lines count)
        assert "source#2 row 4" in late


# ------------------------------------------------------------------ random DAGs


@st.composite
def random_dag(draw: st.DrawFn, lists: bool = True) -> sc.Plan:
    """A random DAG over 1-3 sources whose streams all have columns (k, v, t): filters,
    projections, unions, stateful steps that map back to (k, v, t), fan-out, several sinks."""
    nsrc = draw(st.integers(1, 3))
    streams = [
        sc.source(frame(draw(st.integers(0, 60)), draw(st.integers(0, 99))), name=f"s{i}")
        for i in range(nsrc)
    ]
    used = [0] * len(streams)
    for _ in range(draw(st.integers(1, 7))):
        i = draw(st.integers(0, len(streams) - 1))
        s = streams[i]
        kinds = ["filter", "project", "union", "running", "dedup"] + (["explode"] if lists else [])
        op = draw(st.sampled_from(kinds))
        if op == "filter":
            new = s.filter(sc.col("v") > draw(st.integers(-8, 8)))
        elif op == "project":
            new = s.with_columns(v=sc.col("v") * 2 + sc.col("k"), k=sc.col("k") % 3)
        elif op == "union":
            j = draw(st.integers(0, len(streams) - 1))
            new = s.union(streams[j])
            used[j] += 1
        elif op == "running":
            new = (
                s.key_by("k")
                .running(total=sc.sum("v"))
                .select("k", "t", v=sc.col("total"))
                .select("k", "v", "t")
            )
        elif op == "explode":
            new = (
                s.with_columns(l=sc.when(sc.col("k") > 2).then([1, 2]).otherwise([]))
                .explode("l")
                .select("k", "v", "t")
            )
        else:
            new = s.dedup("k", "v")
        used[i] += 1
        streams.append(new)
        used.append(0)
    sinks = [s.sink_table(f"o{k}") for k, s in enumerate(streams) if used[k] == 0]
    extra = draw(st.lists(st.integers(0, len(streams) - 1), max_size=2, unique=True))
    sinks += [streams[k].sink_table(f"x{k}") for k in extra if used[k]]
    return sc.combine(*sinks)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(plan=random_dag(), k=st.integers(0, 3))
def test_random_dags_equal_reference(plan: sc.Plan, k: int) -> None:
    check_against_reference(plan, CONFIGS[k])


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(plan=random_dag())
def test_vertex_numbering_satisfies_seed_restriction(plan: sc.Plan) -> None:
    """Topological, and S(x) (vertices whose inputs all lie below x) is always a prefix."""
    verts, of = _vertices(compile_plan(plan))
    last = [max((i + 1 for i in v.inputs), default=0) for v in verts]
    for w, v in enumerate(verts):
        assert all(i < w for i in v.inputs)
    assert last == sorted(last)
    for x in range(len(verts) + 1):
        members = [w for w in range(len(verts)) if last[w] <= x]
        assert members == list(range(len(members)))


@given(counts=st.lists(st.integers(0, 6), min_size=1, max_size=4), base=st.integers(0, 99))
def test_merged_serials_follow_round_robin(counts: list[int], base: int) -> None:
    got = merged_serials(base, counts)
    want: dict[tuple[int, int], int] = {}
    n = base
    for j in range(max(counts)):
        for i, c in enumerate(counts):
            if j < c:
                want[(i, j)] = n
                n += 1
    assert {(i, j): int(s) for i, a in enumerate(got) for j, s in enumerate(a)} == want


# ------------------------------------------------------------------ Δ-propagation


def test_vertices_with_unchanged_inputs_do_not_execute() -> None:
    """A branch fed by a selective filter runs only in the phases where the filter passed
    a row (plus the end-of-stream phase); the other branch runs in every phase."""
    n, batch = 1000, 10
    df = pl.DataFrame({"k": [i % 7 for i in range(n)], "v": [float(i) for i in range(n)]})
    a = sc.source(df, name="a")
    rare = a.filter(sc.col("v") % 97 == 0)  # rows 0, 97, 194, ...
    plan = sc.combine(
        rare.key_by("k").running(s=sc.sum("v")).sink_table("rare"),
        rare.sink_table("rare_rows"),
        a.key_by("k").running(s=sc.sum("v")).sink_table("all"),
    )
    opts = RunOptions(engine="native", workers=2, batch_size=batch)
    run = run_plan(plan, opts)
    dag = run.native_metrics["dag"]
    phases = n // batch + 1  # the data phases and the end-of-stream phase
    assert dag["phases"] == phases
    passing = {i // batch for i in range(n) if i % 97 == 0}
    by_name = {v["name"]: v for v in dag["per_vertex"]}
    # the vertices downstream of the filter start at its consumers
    consumers = [s for s in plan.steps if any(i.step_id.startswith("filter") for i in s.inputs)]
    assert len(consumers) == 2
    for s in consumers:
        assert by_name[s.step_id]["executions"] == len(passing) + 1
    full = [s for s in plan.steps if s.inputs and s.inputs[0].step_id.startswith("source")]
    for s in full:
        if s.step_id in by_name:
            assert by_name[s.step_id]["executions"] == phases
    assert dag["skipped"] == dag["possible"] - dag["pairs"] > 0
    ref = run_plan(plan, RunOptions(engine="reference"))
    for name in ("rare", "rare_rows", "all"):
        assert run.table(name).equals(ref.table(name))


def test_stop_an_unbounded_two_source_dag_promptly() -> None:
    a = sc.source(sc.clickstream(rows=None, seed=1), name="a")
    b = sc.source(sc.clickstream(rows=None, seed=2), name="b")
    plan = sc.combine(a.union(b).key_by("user_id").agg(n=sc.count()).sink_table("n"))
    run = sc.start(plan, name="dag_stop", options=RunOptions(engine="native", workers=2))
    deadline = time.monotonic() + 30
    # running, and its table published at least once (the first publish comes after ~0.1 s)
    while (
        run.progress()["rows_in"] < 50_000 or run.table("n").height == 0
    ) and time.monotonic() < deadline:
        time.sleep(0.05)
    published = run.table("n").height
    assert published > 0
    t0 = time.monotonic()
    run.stop()
    run.wait(10)
    assert run.status == "stopped"
    assert time.monotonic() - t0 < 5
    assert run.table("n").height >= published  # a stop keeps what was published


@pytest.mark.parametrize("workers", [1, 2])
def test_fan_out_to_an_aggregate_and_sketches(workers: int) -> None:
    """One branch aggregates, the others feed sketches (keyed and not): Θ is exact at this
    size; HLL holds the exact per-key answer (the reference's) within its bounds."""
    src = sc.source(sc.clickstream(rows=3000, users=300, seed=3), name="clicks")
    plan = sc.combine(
        src.key_by("event").agg(n=sc.count()).sink_table("per_event"),
        src.sketch(users=sc.theta("user_id"), top=sc.frequent("item_id")).sink_none(),
        src.key_by("event").sketch(u=sc.hll("user_id")).sink_none(),
    )
    opts = RunOptions(engine="native", workers=workers, batch_size=256)
    out = check_against_reference(plan, opts)
    assert out["tables"]
    nat, ref = run_plan(plan, opts), run_plan(plan, RunOptions(engine="reference"))
    assert nat.native_metrics["dag"]["vertices"] == 4
    assert nat.sketch("users").estimate() == ref.sketch("users").estimate()
    want = ref.sketch("u").to_frame().sort("event")
    got = nat.sketch("u").to_frame().sort("event")
    assert got["event"].to_list() == want["event"].to_list()
    for exact, lo, hi in zip(want["estimate"], got["lower_bound"], got["upper_bound"]):
        assert lo <= exact <= hi


def _spark() -> RunOptions:
    pytest.importorskip("pyspark")
    from streamcell.backends.spark import environment_problem

    if environment_problem() is not None:
        pytest.skip(environment_problem())
    return RunOptions(engine="spark")


@pytest.mark.spark
def test_dags_on_spark_batch_equal_reference(tmp_path) -> None:
    """Several sources, unions and fan-out run as one Spark batch job (a fan-out point is
    computed once) and equal the reference: tables, counts, late rows, dead letters."""
    opts = _spark()
    check_against_reference(diamond(), opts)
    path = tmp_path / "in.csv"
    path.write_text("k,v,t\n1,1.5,0\n2,oops,1\n3,2.5,2\nbad line\n4,3.5,30\n5,1.0,1\n")
    a = sc.source(sc.csv(str(path), schema={"k": "int", "v": "float", "t": "int"}), name="a")
    u = a.union(sc.source(frame(20, 9), name="b"))
    plan = sc.combine(
        u.key_by("k").tumbling(5, time="t").agg(n=sc.count()).sink_table("w"),
        u.filter(sc.col("v") > 0).sink_table("pos"),
    )
    out = check_against_reference(plan, opts)
    assert "source#1 row 5" in out["late"]["_position"].to_list()


@pytest.mark.spark
@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(plan=random_dag(lists=False))  # Spark refuses list columns (tests/spark)
def test_random_dags_on_spark_equal_reference(plan: sc.Plan) -> None:
    check_against_reference(plan, _spark())


def nested_unions() -> sc.Plan:
    """A source unioned with itself, then with a projection of itself; and window rows
    emitted at the end of the stream meeting again in unions (ties between branches)."""
    s0 = sc.source(frame(40, 3), name="s0")
    u = s0.union(s0).union(s0.with_columns(v=sc.col("v") * 2, k=sc.col("k") % 3))
    w = s0.key_by("k").tumbling(3, time="t").agg(n=sc.count())
    u2 = w.select("k", "n").union(w.select("k", n=sc.col("n") + 1)).union(w.select("k", "n"))
    return sc.combine(u.sink_table("u"), u2.sink_table("u2"))


@pytest.mark.parametrize("opts", CONFIGS[:3], ids=lambda o: f"w{o.workers}-b{o.batch_size}")
def test_nested_unions_order_ties_by_input(opts: RunOptions) -> None:
    check_against_reference(nested_unions(), opts)


@pytest.mark.spark
def test_nested_unions_on_spark_order_ties_by_input() -> None:
    check_against_reference(nested_unions(), _spark())


def test_throttled_sources_keep_their_rate_and_equal_reference() -> None:
    a = sc.source(frame(150, 11), name="a", rate=1500)
    b = sc.source(frame(100, 12), name="b", rate=1000)
    plan = sc.combine(a.union(b).key_by("k").running(s=sc.sum("v")).sink_table("s"))
    t0 = time.monotonic()
    check_against_reference(plan, RunOptions(engine="native", workers=2))
    assert time.monotonic() - t0 >= 0.09 * 2  # both runs are paced (about 0.1 s each)
