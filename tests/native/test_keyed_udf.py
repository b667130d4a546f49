"""Keyed steps over a typed state struct (the ``apply`` stage): a Cython function whose first
argument is a pointer to a ``cdef struct`` runs once per row with its key's zero-initialised
state. The reference engine calls the compiled function through its Python wrapper with a
``bytearray`` per key; the native engine runs a keyed operator (partitioned on the hybrid
queue, one instance in a DAG vertex). Every native run is compared with the reference's, and
the steps are checked against the same logic written with built-in ``running`` aggregates
or plain Python. One module is compiled per test session (into a temporary cache)."""

from __future__ import annotations

import random
import time

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

import streamcell as sc
from streamcell import udf
from streamcell.errors import DSLSyntaxError, NotSupportedError, PlanError
from streamcell.expr import Call, Expr, _ir
from streamcell.options import RunOptions
from tests.helpers import run_plan

SOURCE = """
cdef struct Stats:
    double total
    long n
    double hi
    bint seen

cdef struct Last3:
    double v[3]
    long n

cdef struct Count:
    long n

cdef double run_sum(Stats *st, double x) noexcept nogil:
    st.total += x
    return st.total

cdef long run_count(Stats *st, double x) noexcept nogil:
    st.n += 1
    return st.n

cdef double run_mean(Stats *st, double x) noexcept nogil:
    st.total += x
    st.n += 1
    return st.total / st.n

cdef double run_max(Stats *st, double x) noexcept nogil:
    if not st.seen or x > st.hi:
        st.hi = x
    st.seen = True
    return st.hi

cdef double moving3(Last3 *st, double x) noexcept nogil:
    # the mean of the key's last (up to) three values: a fixed-size array field
    cdef long i, m
    cdef double s = 0
    st.v[st.n % 3] = x
    st.n += 1
    m = st.n if st.n < 3 else 3
    for i in range(m):
        s += st.v[i]
    return s / m

cdef bint rising(Stats *st, long x) noexcept nogil:
    # True when x exceeds every earlier value of the key
    cdef bint up = not st.seen or x > st.hi
    if up:
        st.hi = x
    st.seen = True
    return up

cdef long nth(Count *st, long x) noexcept nogil:
    st.n += 1
    return st.n

cdef double plain(double x) noexcept nogil:
    return x + 1
"""


@pytest.fixture(scope="module")
def udfs(tmp_path_factory: pytest.TempPathFactory):
    mp = pytest.MonkeyPatch()
    mp.setenv("STREAMCELL_UDF_CACHE", str(tmp_path_factory.mktemp("keyed-udf-cache")))
    try:
        yield sc.cython_udf(SOURCE)
    finally:
        mp.undo()


NATIVE = [
    RunOptions(engine="native", workers=1, batch_size=7),
    RunOptions(engine="native", workers=2, batch_size=3),
    RunOptions(engine="native", workers=4, batch_size=64),
    RunOptions(engine="native", workers=2, batch_size=4096),
]
IDS = [f"w{o.workers}-b{o.batch_size}" for o in NATIVE]
REFERENCE = RunOptions(engine="reference")


def _tables(plan: sc.Plan, options: RunOptions) -> tuple[dict[str, pl.DataFrame], sc.Run]:
    run = run_plan(plan, options)
    assert run.engine == options.engine  # never a silent fallback to the reference
    return {n: run.table(n) for n in sorted(run.table_names())}, run


def _same_as_reference(plan: sc.Plan, options: RunOptions) -> dict[str, pl.DataFrame]:
    want, _ = _tables(plan, REFERENCE)
    got, _ = _tables(plan, options)
    assert len(got) == len(want)  # a default table is named after its run
    for g, w in zip(got.values(), want.values()):
        assert_frame_equal(g, w)
    return got


def _one(plan: sc.Plan, options: RunOptions) -> pl.DataFrame:
    (t,) = _tables(plan, options)[0].values()
    return t


def prices(n: int, seed: int, keys: int = 13, nulls: bool = False) -> pl.DataFrame:
    r = random.Random(seed)
    return pl.DataFrame(
        {
            "user": [r.randrange(keys) for _ in range(n)],
            "shop": [f"s{r.randrange(3)}" for _ in range(n)],
            "price": [
                None if nulls and r.random() < 0.1 else round(r.uniform(-50, 100), 2)
                for _ in range(n)
            ],
            "qty": [r.randrange(-5, 20) for _ in range(n)],
        },
        schema={"user": pl.Int64, "shop": pl.String, "price": pl.Float64, "qty": pl.Int64},
    )


# ------------------------------------------------------------ equal to built-ins


def _steps(s: sc.Stream, keys: tuple[str, ...]) -> sc.Stream:
    for fn, name in (("run_sum", "s"), ("run_count", "n"), ("run_mean", "m"), ("run_max", "hi")):
        s = (
            s.key_by(*keys).apply(fn, "price", name=name)
            if keys
            else s.apply(fn, "price", name=name)
        )
    return s


@pytest.mark.parametrize(
    "keys", [("user",), ("user", "shop"), ()], ids=["user", "user-shop", "global"]
)
def test_running_sum_count_mean_max_equal_the_built_in_running(udfs, keys):
    """Per key (or one global state), the Cython steps give what running sum / count / mean
    / max give, on every engine configuration."""
    frame = prices(700, seed=1)
    src = sc.source(frame)
    built = (src.key_by(*keys) if keys else src).running(
        s=sc.sum("price"), n=sc.count(), m=sc.mean("price"), hi=sc.max("price")
    )
    want = _one(built.plan(), REFERENCE)
    plan = _steps(src, keys).plan()
    for options in [REFERENCE, *NATIVE]:
        got = _one(plan, options)
        assert_frame_equal(got, want, check_exact=False, rel_tol=1e-12)
        assert_frame_equal(got, _one(plan, REFERENCE))  # bit for bit: the same function


def test_a_fixed_size_array_field_and_int_and_bool_results(udfs):
    """A moving mean over the key's last three values (a double[3] field), a bool step and
    an int step, against the same logic in plain Python."""
    frame = prices(500, seed=2, keys=7)
    plan = (
        sc.source(frame)
        .key_by("user")
        .apply("moving3", "price", name="mov")
        .key_by("shop")
        .apply("rising", "qty", name="up")
        .key_by("user", "shop")
        .apply("nth", "qty", name="i")
        .plan()
    )
    last: dict[int, list[float]] = {}
    best: dict[str, int] = {}
    seen: dict[tuple[int, str], int] = {}
    mov, up, nth = [], [], []
    for u, s, p, q in frame.iter_rows():
        last.setdefault(u, []).append(p)
        w = last[u][-3:]
        mov.append(sum(w) / len(w))
        up.append(s not in best or q > best[s])
        best[s] = max(q, best.get(s, q))
        seen[(u, s)] = seen.get((u, s), 0) + 1
        nth.append(seen[(u, s)])
    for options in [REFERENCE, *NATIVE[:3]]:
        got = _one(plan, options)
        assert got["mov"].to_list() == pytest.approx(mov, rel=1e-12)
        assert got["up"].to_list() == up and got["i"].to_list() == nth
        assert got.schema["up"] == pl.Boolean and got.schema["i"] == pl.Int64
    _same_as_reference(plan, NATIVE[1])


@pytest.mark.parametrize("options", NATIVE, ids=IDS)
def test_null_arguments_give_null_and_null_keys_are_a_key(udfs, options):
    frame = prices(600, seed=3, nulls=True).with_columns(
        user=pl.when(pl.col("qty") < 0).then(None).otherwise(pl.col("user"))
    )
    plan = sc.source(frame).key_by("user").apply("run_count", "price", name="n").plan()
    got = _same_as_reference(plan, options)
    (t,) = got.values()
    assert t["n"].null_count() == frame["price"].null_count() > 0
    # a null argument does not call the function: n counts the key's non-null prices
    counts: dict[int | None, int] = {}
    want = []
    for u, p in zip(frame["user"], frame["price"]):
        if p is None:
            want.append(None)
            continue
        counts[u] = counts.get(u, 0) + 1
        want.append(counts[u])
    assert t["n"].to_list() == want
    assert None in counts


def test_inside_a_dag_with_fan_out_and_union(udfs):
    """Two sources merged by union, fanned out into a keyed step and a global one (each a
    DAG vertex: one operator instance), every branch sinking: native = reference."""
    a = sc.source(prices(300, seed=4), name="a")
    b = sc.source(prices(200, seed=5, nulls=True), name="b")
    u = a.union(b)
    plan = sc.combine(
        u.key_by("user").apply("run_mean", "price", name="m").sink_table("per_user"),
        u.apply("run_count", "price", name="n").sink_table("overall"),
        a.key_by("shop").apply("moving3", "price", name="mov").sink_table("per_shop"),
    )
    for options in NATIVE:
        got = _same_as_reference(plan, options)
        assert {n: t.height for n, t in got.items()} == {
            "overall": 500,
            "per_shop": 300,
            "per_user": 500,
        }
        counts = got["overall"]["n"].drop_nulls().to_list()
        assert counts == list(range(1, 501 - got["overall"]["n"].null_count()))
    _, run = _tables(plan, NATIVE[1])
    assert run.native_metrics is not None and run.native_metrics["dag"]["vertices"] >= 4


def test_state_size_gauge_counts_keys(udfs):
    frame = prices(400, seed=6, keys=37)
    plan = sc.source(frame).key_by("user").apply("nth", "qty").plan()
    for options in (NATIVE[0], NATIVE[2]):
        _, run = _tables(plan, options)
        (op,) = [o for o in run.native_metrics["ops"] if o["op"] == "apply"]
        # one state per key, over all partitions; the split and merge around it hold none
        assert op["state_size"] == frame["user"].n_unique() == 37
        assert op["rows_in"] == op["rows_out"] == 400


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    rows=st.lists(
        st.tuples(
            st.one_of(st.none(), st.integers(-3, 3)),
            st.one_of(st.none(), st.floats(-1e6, 1e6, allow_nan=False)),
        ),
        min_size=1,
        max_size=200,
    ),
    workers=st.sampled_from([1, 2, 4]),
    batch=st.sampled_from([1, 5, 64]),
)
def test_random_keys_and_nulls(udfs, rows, workers, batch):
    frame = pl.DataFrame(rows, schema={"k": pl.Int64, "x": pl.Float64}, orient="row")
    plan = (
        sc.source(frame)
        .key_by("k")
        .apply("run_mean", "x", name="m")
        .key_by("k")
        .apply("moving3", "x", name="mov")
        .plan()
    )
    _same_as_reference(plan, RunOptions(engine="native", workers=workers, batch_size=batch))


# ------------------------------------------------------------------- the language


def test_dsl_stage_equals_the_fluent_api_and_round_trips(udfs):
    frame = prices(10, seed=7)
    text = (
        "source frame\n"
        "key_by user\n"
        "apply avg=run_mean(price)\n"
        "key_by user, shop\n"
        "apply nth(qty)\n"
        "apply total=run_sum(price)\n"
    )
    p = sc.parse(text, {"frame": frame})
    fluent = (
        sc.source(frame)
        .key_by("user")
        .apply("run_mean", "price", name="avg")
        .key_by("user", "shop")
        .apply("nth", "qty")
        .apply("run_sum", "price", name="total")
        .plan()
    )
    assert p == fluent
    assert sc.parse(p.to_dsl(), {"frame": frame}) == p
    bare = sc.parse("source frame\nkey_by user\napply nth", {"frame": frame.rename({"qty": "x"})})
    assert bare.steps[1].args == () and bare.to_dsl().splitlines()[2] == "apply nth"
    got = _one(bare, NATIVE[1])
    assert got["nth"].to_list() == _one(bare, REFERENCE)["nth"].to_list()


def test_explain_labels_the_function(udfs):
    plan = sc.source(prices(5, seed=8)).key_by("user").apply("run_mean", "price", name="m").plan()
    text = plan.explain()
    assert "apply#2   m = run_mean(price) per user" in text
    assert "hash(user), partitioned" in text
    # double, long, double, bint (a C int) and 4 bytes of padding
    assert (
        "ƒ run_mean: native keyed step (Cython, nogil; state struct Stats, 32 bytes per key)"
        in text
    )
    glob = sc.source(prices(5, seed=8)).apply("nth", "qty").plan().explain()
    assert "nth(qty) (one state)" in glob and "stateful" in glob


def test_wrong_kind_of_function_points_at_the_cell(udfs):
    frame = prices(5, seed=9)
    with pytest.raises(DSLSyntaxError) as ei:
        sc.parse("source frame\nkey_by user\napply no_such(price)", {"frame": frame})
    assert (ei.value.line, ei.value.column) == (3, 7)
    assert "unknown function 'no_such'" in str(ei.value)
    with pytest.raises(DSLSyntaxError, match="plain.* is not a keyed step") as ei:
        sc.parse("source frame\nkey_by user\napply plain(price)", {"frame": frame})
    assert (ei.value.line, ei.value.column) == (3, 7)
    with pytest.raises(DSLSyntaxError, match="takes 1 column") as ei:
        sc.parse("source frame\napply run_mean(price, qty)", {"frame": frame})
    assert ei.value.line == 2
    # a keyed step is not a scalar function: not in an expression
    with pytest.raises(DSLSyntaxError, match="run_mean is a keyed step") as ei:
        sc.parse("source frame\nwith_columns y=run_mean(price) + 1", {"frame": frame})
    assert (ei.value.line, ei.value.column) == (2, 16)
    with pytest.raises(udf.UdfError, match="keyed step"):
        udf.call("run_mean", "price")
    raw = Expr(Call(udf.UDF_PREFIX + "run_mean", (_ir(sc.col("price")),)))
    with pytest.raises(PlanError, match="run_mean is a keyed step"):
        run_plan(sc.source(frame).with_columns(y=raw).plan(), REFERENCE)


def test_compile_errors_name_the_step(udfs):
    frame = pl.DataFrame({"user": [1], "price": ["a"], "m": [1.0]})
    with pytest.raises(PlanError, match="needs float for column 'price', which is str"):
        run_plan(sc.source(frame).key_by("user").apply("run_mean", "price").plan(), REFERENCE)
    with pytest.raises(PlanError, match="unknown function 'nope'"):
        run_plan(sc.source(frame).apply("nope", "user").plan(), REFERENCE)
    with pytest.raises(PlanError, match="adds column 'm' but the input has it"):
        run_plan(sc.source(frame).apply("nth", "user", name="m").plan(), REFERENCE)
    with pytest.raises(PlanError, match="not a keyed step"):
        run_plan(sc.source(frame).apply("plain", "user").plan(), REFERENCE)


def _compile_error(src: str, monkeypatch, tmp_path) -> sc.UdfCompileError:
    monkeypatch.setenv("STREAMCELL_UDF_CACHE", str(tmp_path))
    with pytest.raises(sc.UdfCompileError) as ei:
        sc.cython_udf(src)
    assert not list(tmp_path.glob("*.so"))  # checked before any compiler runs
    return ei.value


def test_bad_state_structs_and_signatures_give_line_and_column(tmp_path, monkeypatch):
    e = _compile_error(
        "cdef double f(Missing *st, double x) noexcept nogil:\n    return x\n",
        monkeypatch,
        tmp_path,
    )
    assert "state struct 'Missing' is not declared in this source" in str(e)
    assert (e.line, e.column) == (1, 15)
    src = (
        "cdef struct S:\n"
        "    double a\n"
        "    char *name\n"
        "\n"
        "cdef double f(S *st, double x) noexcept nogil:\n"
        "    return x\n"
    )
    e = _compile_error(src, monkeypatch, tmp_path)
    assert "field 'char *name' of struct S (the state of f) is not supported" in str(e)
    assert (e.line, e.column) == (3, 5)
    src = "cdef struct S:\n    long n\ncdef long g(S st, long x) noexcept nogil:\n    return x\n"
    e = _compile_error(src, monkeypatch, tmp_path)
    assert "as a pointer first: S *st" in str(e) and (e.line, e.column) == (3, 13)
    src = "cdef struct S:\n    long n\ncdef long h(long x, S *st) noexcept nogil:\n    return x\n"
    e = _compile_error(src, monkeypatch, tmp_path)
    assert "only the first argument may be a state pointer" in str(e)
    assert (e.line, e.column) == (3, 21)
    src = "cdef struct S:\n    long n\ncdef long k(S *st) noexcept nogil:\n    return 0\n"
    e = _compile_error(src, monkeypatch, tmp_path)
    assert "data argument after S *st" in str(e)


def test_cython_errors_in_a_step_body_point_at_the_user_line(tmp_path, monkeypatch):
    monkeypatch.setenv("STREAMCELL_UDF_CACHE", str(tmp_path))
    src = (
        "cdef struct S:\n"
        "    long n\n"
        "\n"
        "cdef long f(S *st, long x) noexcept nogil:\n"
        "    st.missing += x\n"
        "    return st.n\n"
    )
    with pytest.raises(sc.UdfCompileError) as ei:
        sc.cython_udf(src)
    assert ei.value.line == 5


def test_compile_cache_hit_on_rerun(udfs, tmp_path, monkeypatch):
    monkeypatch.setenv("STREAMCELL_UDF_CACHE", str(tmp_path))
    src = "cdef struct C:\n    long n\n    double seen[2]\n\ncdef long bump(C *st, long x) noexcept nogil:\n    st.n += x\n    return st.n\n"
    before = udf.compile_count
    first = sc.cython_udf(src)
    assert not first.cached and udf.compile_count == before + 1
    again = sc.cython_udf(src)
    assert again.cached and udf.compile_count == before + 1  # no second compile
    spec = again.functions["bump"]
    assert spec.state == "C" and spec.state_size == 24  # long + double[2]
    # the reference wrapper: the compiled function over a bytearray state
    buf = bytearray(spec.state_size)
    assert [spec.row(buf, 5), spec.row(buf, None), spec.row(buf, 2)] == [5, None, 7]
    with pytest.raises(ValueError, match="bytearray of 24 bytes"):
        spec.row(bytearray(3), 1)


@pytest.mark.spark
def test_spark_refuses_the_stage_at_compile_time(udfs):
    pytest.importorskip("pyspark")
    from streamcell.backends import get_backend
    from streamcell.compiler import compile_plan

    plan = sc.source(prices(5, seed=10)).key_by("user").apply("nth", "qty").plan()
    with pytest.raises(NotSupportedError) as ei:
        get_backend("spark").check(compile_plan(plan), RunOptions(engine="spark"))
    msg = str(ei.value)
    assert "not supported on spark: step apply#2" in msg and "apply nth" in msg


def test_many_rows_over_many_keys(udfs):
    """100k rows over 1000 keys, each key once per block of 1000 rows, on 4 workers: the
    i-th row of a key gets i (states stay apart across partitions and batches)."""
    n = 100_000
    frame = pl.DataFrame(
        {"user": [i * 7919 % 1000 for i in range(n)], "qty": [i % 11 for i in range(n)]}
    )
    plan = sc.source(frame).key_by("user").apply("nth", "qty").plan()
    got = _one(plan, RunOptions(engine="native", workers=4, batch_size=4096))
    assert got["nth"].to_list() == [i // 1000 + 1 for i in range(n)]


README_CELL = """\
cdef struct Avg:
    double total
    long n

cdef double running_avg(Avg *st, double price) noexcept nogil:
    st.total += price
    st.n += 1
    return st.total / st.n
"""


def test_the_readme_example_through_the_cell_magics(tmp_path, monkeypatch, capsys):
    """%%stream_udf defines the struct and step; a %%stream-style pipeline applies it per
    key; the mean equals running mean's. A bad field is shown at its line with a caret."""
    from streamcell.magic import StreamMagics

    monkeypatch.setenv("STREAMCELL_UDF_CACHE", str(tmp_path))
    magics = StreamMagics(shell=None)
    mod = magics.stream_udf("", README_CELL)
    assert mod is not None and mod.functions["running_avg"].state_size == 16
    clicks = prices(300, seed=12, keys=20).rename({"user": "user_id"})
    plan = sc.parse(
        "source clicks\nkey_by user_id\napply avg=running_avg(price)", {"clicks": clicks}
    )
    assert "ƒ running_avg: native keyed step (Cython, nogil; state struct Avg, 16 bytes" in (
        plan.explain()
    )
    want = _one(sc.source(clicks).key_by("user_id").running(avg=sc.mean("price")).plan(), REFERENCE)
    for options in (REFERENCE, NATIVE[2]):
        assert_frame_equal(_one(plan, options), want, check_exact=False, rel_tol=1e-12)
    bad = README_CELL.replace("    long n\n", "    long n\n    str name\n")
    assert magics.stream_udf("", bad) is None
    out = capsys.readouterr().out
    assert "field 'str name' of struct Avg" in out and "  4 |     str name" in out


def test_float_keys_nan_and_negative_zero_are_one_key_each(udfs):
    nan = float("nan")
    keys = [1.5, nan, -0.0, 0.0, nan, None, 1.5, None, -0.0]
    frame = pl.DataFrame({"k": keys, "q": list(range(len(keys)))})
    plan = sc.source(frame).key_by("k").apply("nth", "q").plan()
    want = [1, 1, 1, 2, 2, 1, 2, 2, 3]
    for options in (REFERENCE, *NATIVE[:2]):
        assert _one(plan, options)["nth"].to_list() == want
