"""Native UDFs: Cython scalar functions compiled from the cell, on every engine configuration.

One module is compiled per test session (into a temporary cache); the error-path tests use
small sources that Cython or the compiler check rejects before any C compilation."""

from __future__ import annotations

import math
import sys

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import streamcell as sc
from streamcell import udf
from streamcell.errors import NotSupportedError, PlanError
from streamcell.expr import to_text
from streamcell.options import RunOptions
from tests.helpers import check_against_reference, run_plan, table

col = sc.col

SOURCE = """
cdef double _cap(double x, double hi) noexcept nogil:
    return hi if x > hi else x

cdef double score(double price, long qty) noexcept nogil:
    if qty <= 0:
        return 0.0
    return _cap(price * qty, 500.0)

cdef bint bulk(long qty) noexcept nogil:
    return qty >= 3

cdef long bucket(int64_t qty, bint flag) noexcept nogil:
    return qty * 10 + (1 if flag else 0)

cdef double hyp(double a, double b) noexcept nogil:
    return sqrt(a * a + b * b)
"""


@pytest.fixture(scope="module")
def udfs(tmp_path_factory: pytest.TempPathFactory):
    mp = pytest.MonkeyPatch()
    mp.setenv("STREAMCELL_UDF_CACHE", str(tmp_path_factory.mktemp("udf-cache")))
    try:
        yield sc.cython_udf(SOURCE)
    finally:
        mp.undo()


def _frame(n: int = 400) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "id": list(range(n)),
            "price": [None if i % 17 == 0 else (i * 7 % 113) / 3.0 for i in range(n)],
            "qty": [None if i % 23 == 5 else i % 6 - 1 for i in range(n)],
            "flag": [None if i % 29 == 3 else i % 3 == 0 for i in range(n)],
        }
    )


def test_udf_pipeline_equals_builtins_and_reference(udfs, engine):
    frame = _frame()
    with_udf = (
        sc.source(frame)
        .filter(udfs.bulk(col("qty")) | col("qty").is_null())
        .with_columns(
            s=udfs.score(col("price"), col("qty")),
            b=udfs.bucket(col("qty"), col("flag")),
            h=udfs.hyp(col("price"), col("qty")),
        )
        .plan()
    )
    got = table(with_udf, engine.options)  # also checked against the reference
    if engine.options.engine == "native":
        assert run_plan(with_udf, engine.options).engine == "native"
    raw = col("price") * col("qty")
    builtin = (
        sc.source(frame)
        .filter((col("qty") >= 3) | col("qty").is_null())
        .with_columns(
            s=sc.when(col("qty") <= 0)
            .then(0.0)
            .when(raw > 500.0)
            .then(500.0)
            .otherwise(raw)
            .cast("float"),
            b=col("qty") * 10 + col("flag").cast("int"),
            h=(col("price") ** 2 + col("qty") ** 2) ** 0.5,
        )
        .plan()
    )
    want = table(builtin, RunOptions(engine="reference"))
    # null in any argument -> null out, like the built-in arithmetic
    assert_frame_equal(got.drop("h"), want.drop("h"))
    for x, y in zip(got["h"].to_list(), want["h"].to_list()):
        assert (x is None and y is None) or math.isclose(x, y, rel_tol=1e-12)
    assert got["s"].null_count() > 0 and got["b"].null_count() > 0


def test_udf_results_and_nulls_row_by_row(udfs):
    frame = pl.DataFrame({"price": [2.5, None, 100.0, 4.0], "qty": [2, 3, 9, None]})
    plan = sc.source(frame).select(s=udfs.score("price", "qty"), q=udfs.bulk("qty")).plan()
    out = table(plan, RunOptions(engine="native", workers=2, batch_size=2))
    assert out["s"].to_list() == [5.0, None, 500.0, None]
    assert out["q"].to_list() == [False, True, True, None]
    assert out.schema == pl.Schema({"s": pl.Float64, "q": pl.Boolean})


def test_udf_in_a_stream_cell(udfs):
    frame = _frame(60)
    plan = sc.parse(
        "source frame\nfilter bulk(qty)\nselect id, s=score(price, qty) + 1\nsink table\n",
        {"frame": frame},
    )
    fluent = (
        sc.source(frame)
        .filter(sc.call("bulk", "qty"))
        .select("id", s=sc.call("score", "price", "qty") + 1)
        .plan()
    )
    assert plan == fluent
    assert to_text(sc.call("score", "price", "qty")._ir) == "score(price, qty)"
    assert_frame_equal(
        table(plan, RunOptions(engine="native", workers=2)),
        table(fluent, RunOptions(engine="reference")),
    )


def test_rerun_of_an_unchanged_source_hits_the_cache(udfs):
    before = udf.compile_count
    mtime = udfs.path.stat().st_mtime_ns
    again = sc.cython_udf(SOURCE)
    assert again.cached and again.path == udfs.path
    assert udf.compile_count == before  # no Cython / C compiler run
    assert udfs.path.stat().st_mtime_ns == mtime
    assert again.functions["score"].kernel == udfs.functions["score"].kernel


def test_cython_error_points_at_the_users_line_and_column(udfs, tmp_path, monkeypatch):
    monkeypatch.setenv("STREAMCELL_UDF_CACHE", str(tmp_path))
    src = "cdef double f(double x) noexcept nogil:\n    cdef double y = x +\n    return y\n"
    with pytest.raises(sc.UdfCompileError) as ei:
        sc.cython_udf(src)
    assert ei.value.line == 2 and ei.value.column is not None
    assert "line 2" in str(ei.value)
    assert not list(tmp_path.glob("*.so"))


def test_undeclared_name_is_reported_in_the_users_source(udfs, tmp_path, monkeypatch):
    monkeypatch.setenv("STREAMCELL_UDF_CACHE", str(tmp_path))
    src = "\ncdef double f(double x) noexcept nogil:\n    return x + undefined_thing\n"
    with pytest.raises(sc.UdfCompileError) as ei:
        sc.cython_udf(src)
    assert (ei.value.line, ei.value.column) == (3, 15)
    assert "undefined_thing" in str(ei.value)


def test_signature_errors_name_the_function_and_line():
    with pytest.raises(sc.UdfCompileError, match=r"line 2: f: .*noexcept nogil"):
        sc.cython_udf("\ncdef double f(double x):\n    return x\n")
    with pytest.raises(sc.UdfCompileError, match=r"line 1: g: argument 'str s'"):
        sc.cython_udf("cdef double g(str s) noexcept nogil:\n    return 0\n")
    with pytest.raises(sc.UdfCompileError, match="no exported function"):
        sc.cython_udf("cdef double _private(double x) noexcept nogil:\n    return x\n")


def test_missing_c_compiler_says_how_to_install_one(tmp_path, monkeypatch):
    monkeypatch.setenv("STREAMCELL_UDF_CACHE", str(tmp_path))
    monkeypatch.setenv("CC", "no-such-compiler-xyz")
    monkeypatch.setenv("PATH", str(tmp_path))  # neither it nor cc can be found
    with pytest.raises(sc.UdfError, match=r"no C compiler found .*apt-get install build-essential"):
        sc.cython_udf("cdef double fresh_fn(double x) noexcept nogil:\n    return x + 42\n")


def test_expression_type_and_arity_errors(udfs):
    frame = pl.DataFrame({"s": ["a"], "x": [1.0]})
    with pytest.raises(
        PlanError, match=r"score\(price: float, qty: int\) -> float: argument x is float, not int"
    ):
        sc.source(frame).select(y=sc.call("score", "x", "x")).start("bad", engine="reference")
    with pytest.raises(sc.UdfError, match="takes 2 argument"):
        sc.call("score", "x")
    with pytest.raises(sc.UdfError, match="unknown native function 'nope'"):
        sc.call("nope", "x")


def test_python_function_is_the_labelled_slow_path(udfs):
    def margin(price, qty):
        return price * qty * 0.1

    f = sc.python_udf(margin, returns="float")
    frame = pl.DataFrame({"price": [2.0, None, 4.0], "qty": [3, 1, None]})
    stream = sc.source(frame).select(m=f("price", "qty"), s=udfs.score("price", "qty"))
    text = stream.plan().explain()
    assert "ƒ margin: Python function, slow path" in text
    assert "ƒ score: native (Cython, nogil)" in text
    run = run_plan(stream.plan())  # auto: falls back to the reference engine and says why
    assert run.engine == "reference"
    assert "Python function margin (the slow path" in run.engine_note
    assert run.table()["m"].to_list() == [pytest.approx(0.6), None, None]
    assert run.table()["s"].to_list() == [6.0, None, None]
    with pytest.raises(NotSupportedError, match="Python function margin"):
        stream.start("slow", engine="native")


def test_argument_errors_and_null_literals_match_the_reference(udfs):
    frame = pl.DataFrame({"price": [1.5, 2.0, 3.0], "q": ["2", "x", None]})
    plan = (
        sc.source(frame)
        .select(
            s=udfs.score("price", col("q").cast("int")),  # "x" fails the cast: a dead letter
            n=udfs.score(sc.lit(None), col("q").cast("int")),
        )
        .plan()
    )
    out = check_against_reference(plan, RunOptions(engine="native", workers=2, batch_size=2))
    t = next(iter(out["tables"].values()))
    assert t["s"].to_list() == [3.0, None] and t["n"].to_list() == [None, None]
    assert out["dead"].height == 1


def test_stream_udf_cell_magic(udfs, capsys):
    from streamcell.magic import StreamMagics

    magics = StreamMagics(shell=None)  # %%stream_udf reads only its cell
    before = udf.compile_count
    mod = magics.stream_udf("", SOURCE)  # unchanged cell: from the cache
    assert mod.cached and udf.compile_count == before
    bad = "cdef double g(double x) noexcept nogil:\n    return x +* 2\n"
    assert magics.stream_udf("", bad) is None
    out = capsys.readouterr().out
    assert "Cython error at line 2, column" in out
    assert "  2 |     return x +* 2" in out and "^" in out


def test_cache_keeps_the_most_recently_used_modules(tmp_path, monkeypatch):
    """Beyond STREAMCELL_UDF_CACHE_SIZE the least recently used modules are deleted, never a
    module this process has loaded; build folders of a killed compiler go after an hour."""
    import os
    import sysconfig
    import time

    from streamcell.udf import prune_cache

    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    now = time.time()
    files = []
    for k in range(5):
        p = tmp_path / f"_scudf_fake{k}{suffix}"
        p.write_bytes(b"x")
        t = now - 100 * (5 - k)  # fake4 is the most recently used
        os.utime(p, (t, t))
        files.append(p)
    old_build = tmp_path / ".build-_scudf_x-1-2"
    old_build.mkdir()
    os.utime(old_build, (now - 7200, now - 7200))
    fresh_build = tmp_path / ".build-_scudf_y-1-2"
    fresh_build.mkdir()
    monkeypatch.setenv("STREAMCELL_UDF_CACHE_SIZE", "2")
    monkeypatch.setitem(sys.modules, "_scudf_fake0", object())  # loaded here: kept
    gone = prune_cache(tmp_path, keep=files[1])
    assert sorted(p.name for p in gone) == sorted(
        [files[2].name, old_build.name]
    )
    assert [p.exists() for p in files] == [True, True, False, True, True]
    assert fresh_build.exists() and not old_build.exists()
