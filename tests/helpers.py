"""Helpers for backend-parametrized tests: run a plan, compare with the reference."""

from __future__ import annotations

import itertools
import time
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import streamcell as sc
from streamcell.options import RunOptions

_names = itertools.count()


def nested(depth: int) -> sc.Expr:
    """``e = (e * 1.0001 + k) % 97.3 + (e / (k + 1.5)) ** 0.5``, ``depth`` times, over column
    ``v``: each level reads the previous one twice, so as a tree it holds 2^depth copies of
    ``v`` and 2^depth - 1 powers (the bench's compute-heavy chain at depth 4)."""
    e = sc.col("v")
    for k in range(depth):
        e = (e * 1.0001 + k) % 97.3 + (e / (k + 1.5)) ** 0.5
    return e


def nested_in_python(values: list[float], depth: int) -> list[float]:
    """:func:`nested` computed by Python's own float arithmetic, value by value."""
    out = []
    for x in values:
        for k in range(depth):
            x = (x * 1.0001 + k) % 97.3 + (x / (k + 1.5)) ** 0.5
        out.append(x)
    return out


def run_plan(plan: sc.Plan, options: RunOptions | None = None, timeout: float = 120) -> sc.Run:
    """Start ``plan`` under a fresh name, wait for it, return the finished run."""
    name = f"t{next(_names)}"
    run = sc.start(plan, name=name, options=options or RunOptions())
    run.wait(timeout)
    assert run.status == "finished", (run.status, run.error)
    return run


def outputs(run: sc.Run) -> dict[str, Any]:
    """Everything a run produced, for exact comparison between backends."""
    return {
        "tables": {n: run.table(n) for n in run.table_names()},
        "counts": run.counts(),
        "late": run.late(),
        "dead": run.dead_letters(),
    }


def assert_same_outputs(a: dict[str, Any], b: dict[str, Any]) -> None:
    # table names default to the run's name, which differs between the two runs
    assert len(a["tables"]) == len(b["tables"])
    for x, y in zip(a["tables"].values(), b["tables"].values()):
        assert_frame_equal(x, y)
    assert_frame_equal(a["counts"], b["counts"])
    assert_frame_equal(a["late"], b["late"], check_column_order=False)
    assert_frame_equal(a["dead"], b["dead"])


def float_bits(df: pl.DataFrame) -> list[tuple[object, ...]]:
    """A frame's rows with each float as its bit pattern: -0.0 is not 0.0, a last-bit
    difference shows, and every NaN is one value (for comparisons to the bit)."""
    import struct

    def b(x: object) -> object:
        if isinstance(x, float):
            return "nan" if x != x else struct.pack("<d", x).hex()
        return x

    return [tuple(b(x) for x in r) for r in df.iter_rows()]


def same_to_the_bit(plan: sc.Plan, options: RunOptions, timeout: float = 300) -> sc.Run:
    """Run on ``options``' engine and on the reference: outputs equal, and the tables' floats
    to the last bit (``assert_frame_equal`` takes -0.0 for 0.0); the engine's run."""
    got = run_plan(plan, options, timeout=timeout)
    a, b = outputs(got), outputs(run_plan(plan, RunOptions(engine="reference")))
    for x, y in zip(a["tables"].values(), b["tables"].values()):
        assert float_bits(x) == float_bits(y)
    assert_same_outputs(a, b)
    return got


def check_against_reference(plan: sc.Plan, options: RunOptions) -> dict[str, Any]:
    """Run on ``options``' engine and on the reference; require identical outputs.

    A plan the engine rejects at compile time (NotSupportedError, e.g. union on native
    before DAG support) is reported as a skip with the engine's reason."""
    if options.engine != "reference":
        from streamcell.backends import get_backend
        from streamcell.compiler import compile_plan
        from streamcell.errors import NotSupportedError

        try:
            get_backend(options.engine).check(compile_plan(plan), options)
        except NotSupportedError as e:
            pytest.skip(str(e))  # the message names the engine and the step
    got = outputs(run_plan(plan, options))
    if options.engine != "reference":
        assert_same_outputs(got, outputs(run_plan(plan, RunOptions(engine="reference"))))
    return got


def table(plan: sc.Plan, options: RunOptions) -> pl.DataFrame:
    """The first table of ``plan`` run on ``options`` (checked against the reference)."""
    out = check_against_reference(plan, options)
    return next(iter(out["tables"].values()))


def ipython_shell() -> Any:
    """The test process's IPython shell with streamcell loaded (started by the first module
    that asks; ``start_ipython`` returns None once a shell exists)."""
    from IPython import get_ipython
    from IPython.testing.globalipapp import start_ipython

    shell = start_ipython() or get_ipython()
    shell.run_line_magic("load_ext", "streamcell")
    return shell


def upload(fs: Any, local: Path, prefix: str) -> None:
    """Copy a local folder's files to ``streamcell-test/<prefix>/`` of a pyarrow filesystem
    (the ``s3`` fixture's)."""
    for f in sorted(local.iterdir()):
        with fs.open_output_stream(f"streamcell-test/{prefix}/{f.name}") as out:
            out.write(f.read_bytes())


def until(cond: Any, timeout: float = 30.0) -> bool:
    """Poll ``cond`` every 5 ms until it holds (True) or ``timeout`` seconds pass (its last
    value). For what a run reaches in the background; never a timing assertion."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.005)
    return bool(cond())
