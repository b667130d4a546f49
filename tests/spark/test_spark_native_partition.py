"""The partition functions of Spark's stateful steps, run in-process on the same Arrow
batches (no Spark session): streamcell's native operator (``native_ops``) must emit exactly
the rows, order keys, side rows and counters of the reference operator (``ops``) it
replaces, for any split of the partition into batches."""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pytest
from polars.testing import assert_frame_equal

import streamcell as sc
from streamcell import plan as P
from streamcell.compiler import compile_plan

pytest.importorskip("streamcell._runtime")

from streamcell.backends.spark.native_ops import (  # noqa: E402
    _reference,
    native_keyed_fn,
    native_window_fn,
)
from streamcell.backends.spark.ops import STATS, arrow_schema, keyed_fn, window_fn  # noqa: E402

NAN = float("nan")


def _data(n: int = 300) -> pl.DataFrame:
    rng = np.random.default_rng(3)
    return pl.DataFrame(
        {
            "k": [None if x == 0 else f"k{x}" for x in rng.integers(0, 5, n)],
            "v": [None if i % 7 == 1 else int(x) for i, x in enumerate(rng.integers(-9, 9, n))],
            "f": [NAN if i % 11 == 2 else float(i % 5) for i in range(n)],
            "t": [None if i % 19 == 4 else i * 2 for i in range(n)],
            "s": ["x" if i % 13 == 6 else str(i % 4) for i in range(n)],
        }
    )


def _step(stream: sc.Stream) -> tuple[P.Step, dict[str, Any], Any]:
    c = compile_plan(stream.plan())
    step = next(s for s in c.plan.steps if not isinstance(s, (P.Source, P.Sink)))
    schemas = {x.step_id: c.schemas[x.step_id] for x in (step, *step.inputs)}
    return step, schemas, c.schemas[step.step_id]


def _batches(df: pl.DataFrame, schema: Any, cuts: list[int], extra: dict[str, Any]) -> list:
    tbl = df.to_arrow()
    cols = [tbl.column(n).cast(f.type) for n, f in zip(df.columns, arrow_schema(schema))]
    order = pa.array([[i] for i in range(df.height)], type=pa.list_(pa.int64()))
    names = [*df.columns, "_o", *extra]
    whole = pa.Table.from_arrays([*cols, order, *extra.values()], names=names)
    edges = [0, *sorted(cuts), df.height]
    return [
        whole.slice(a, b - a).combine_chunks().to_batches()[0]
        for a, b in zip(edges, edges[1:])
        if b > a
    ]


def _run(
    fn: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]], batches: list
) -> tuple:
    out = pa.Table.from_batches(list(fn(iter(batches))))
    live = out.filter(pa.compute.equal(out.column("_k"), 0)).drop_columns(["_b"])
    side = []
    for r in out.filter(pa.compute.not_equal(out.column("_k"), 0)).to_pylist():
        payload = pickle.loads(r["_b"])
        if r["_k"] == STATS:  # what the driver reads of it
            payload = {k: payload[k] for k in ("rows_in", "rows_out", "filtered", "late", "dead")}
        side.append((r["_k"], r["_o"], repr(payload)))
    return pl.from_arrow(live), sorted(side)


CUTS = [[], [1, 2, 3], [50, 51, 200], list(range(7, 300, 7))]


@pytest.mark.parametrize("cuts", CUTS, ids=["one", "tiny", "uneven", "many"])
@pytest.mark.parametrize(
    "make",
    [
        lambda s: s.key_by("k").agg(
            n=sc.count(), sv=sc.col("v").sum(), c=sc.col("s").cast("int").max()
        ),
        lambda s: s.agg(
            sf=sc.col("f").sum(), fst=sc.col("v").first(), nd=sc.col("k").count_distinct()
        ),
        lambda s: s.key_by("k").running(n=sc.count(), lo=sc.col("f").min()),
        lambda s: s.key_by("k").top_k(3, by="v"),
        lambda s: s.top_k(2, by="f", descending=False),
        lambda s: s.dedup("k", "s"),
    ],
    ids=["agg", "global-agg", "running", "top_k", "top_k-global", "dedup"],
)
def test_native_keyed_partition_equals_the_reference_partition(make, cuts):
    df = _data()
    step, schemas, out = _step(make(sc.source(df)))
    batches = _batches(df, schemas[step.inputs[0].step_id], cuts, {})
    native = _run(native_keyed_fn(step, 1, schemas, out), batches)
    ref = _run(keyed_fn(step, 1, schemas, out), batches)
    assert_frame_equal(native[0], ref[0])
    assert native[1] == ref[1]
    assert native[0].height > 0


@pytest.mark.parametrize("cuts", CUTS[:3], ids=["one", "tiny", "uneven"])
@pytest.mark.parametrize(
    "make",
    [
        lambda s: s.key_by("k").tumbling(10, time="t"),
        lambda s: s.sliding(12, every=4, time="t"),
        lambda s: s.key_by("k").session(3, time="t"),
    ],
    ids=["tumbling", "sliding", "session"],
)
def test_native_window_partition_equals_the_reference_partition(make, cuts):
    df = _data()
    step, schemas, out = _step(
        make(sc.source(df)).agg(n=sc.count(), c=sc.col("s").cast("int").sum())
    )
    # as Spark flags them: dead (null time, a failing cast), late (never a dead row)
    dead = [t is None or x == "x" for t, x in zip(df["t"].to_list(), df["s"].to_list())]
    late = pa.array([i % 31 == 30 and not d for i, d in enumerate(dead)])
    dead = pa.array(dead)
    batches = _batches(df, schemas[step.inputs[0].step_id], cuts, {"_dead": dead, "_late": late})
    native = _run(native_window_fn(step, 1, schemas, out), batches)  # type: ignore[arg-type]
    ref = _run(window_fn(step, 1, schemas, out), batches)  # type: ignore[arg-type]
    # windows leave in closing order; the driver places them by (_we, _ws, _wq)
    assert_frame_equal(native[0].sort("_we", "_ws", "_wq"), ref[0].sort("_we", "_ws", "_wq"))
    assert native[1] == ref[1]
    assert native[0].height > 0 and any(k == 2 for k, _, _ in native[1])  # windows and late rows


def test_native_transfer_partition_equals_the_reference_partition():
    df = pl.DataFrame(
        {
            "src": ["a", "b", "a", None, "c", "a", "b", "c"],
            "dst": ["b", "a", "b", "a", "a", "c", "c", None],
            "amt": [5, 3, 1, 2, -1, 20, 4, 1],
        }
    )
    step, schemas, out = _step(sc.source(df).key_by_all("src", "dst").transfer("amt", initial=10))
    batches = _batches(df, schemas[step.inputs[0].step_id], [3], {})
    native = _run(native_keyed_fn(step, 1, schemas, out), batches)
    ref = _run(keyed_fn(step, 1, schemas, out), batches)
    assert_frame_equal(native[0], ref[0])
    assert native[1] == ref[1]


def test_an_executor_without_the_native_extension_says_so_in_its_counters():
    df = _data(20)
    step, schemas, out = _step(sc.source(df).key_by("k").agg(n=sc.count()))
    batches = _batches(df, schemas[step.inputs[0].step_id], [], {})
    rows = pa.Table.from_batches(
        list(_reference(keyed_fn(step, 1, schemas, out), iter(batches), "no _runtime"))
    )
    stats = [
        pickle.loads(b)
        for k, b in zip(rows["_k"].to_pylist(), rows["_b"].to_pylist())
        if k == STATS
    ]
    assert [s["engine"] for s in stats] == ["reference: no _runtime"]
    assert stats[0]["rows_in"] == 20
