"""The native join and correlate operators (exec/ops_join.h, exec/ops_correlate.h) against
the reference's JoinOp / CorrelateOp, fed the same merged rows.

Each case draws two or three input frames (int keys with nulls; int or datetime event times
with nulls and disorder; floats with NaN, inf, -0.0 and nulls; extreme ints; strings; lists)
and an arrival order (which input each next row comes from). The reference operator is fed
(row, port) pairs; the native operator, alone in a Program, is fed the same rows in the tagged
layout (backends/native/lowering.py: tagged_schema) in random slices. Output rows, dead
letters (with their reasons) and late rows, in order, and the step's counters must be equal.
"""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

import polars as pl
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

import streamcell as sc
from streamcell import plan as P
from streamcell.backends import native as N
from streamcell.backends.reference import make_op
from streamcell.compiler import compile_plan
from streamcell.stores import StepCounters
from streamcell.types import polars_schema

pytestmark = pytest.mark.native

R = pytest.importorskip("streamcell._runtime")

T0 = dt.datetime(2024, 1, 1)
FLOATS = st.one_of(
    st.none(),
    st.integers(-40, 40).map(lambda x: x / 4),
    st.sampled_from([float("nan"), float("inf"), -0.0, 1e16, 0.1]),
)
INTS = st.one_of(st.none(), st.integers(-9, 9), st.sampled_from([2**63 - 1, -(2**63), 2**53 + 1]))


class _Env:
    """What the reference operator needs from a run: counters, dead and late logs."""

    def __init__(self, sid: str):
        self.counters = {sid: StepCounters()}
        self.events: list[tuple[str, Any]] = []

    def dead_letter(self, step: str, reason: str, raw: str, position: str | None = None) -> None:
        self.events.append(("dead", reason))

    def late_row(self, step: str, row: dict[str, Any]) -> None:
        self.events.append(("late", dict(row)))


@st.composite
def inputs(draw, nports: int, temporal: bool) -> tuple[list[pl.DataFrame], list[int]]:
    frames = []
    for p in range(nports):
        n = draw(st.integers(0, 40))
        clock = draw(st.lists(st.integers(0, 4), min_size=n, max_size=n))
        back = draw(st.lists(st.integers(0, 6), min_size=n, max_size=n))
        null_t = draw(st.lists(st.integers(0, 30), min_size=n, max_size=n))
        ts = []
        acc = 0
        for c, b, z in zip(clock, back, null_t):
            acc += c
            v = acc - b
            ts.append(None if z == 0 else (T0 + dt.timedelta(minutes=v) if temporal else v))
        cols: dict[str, Any] = {
            "k": draw(st.lists(st.one_of(st.none(), st.integers(0, 3)), min_size=n, max_size=n)),
            "t": ts,
            "x": draw(st.lists(FLOATS, min_size=n, max_size=n)),
            "y": draw(st.lists(INTS, min_size=n, max_size=n)),
        }
        schema: dict[str, Any] = {
            "k": pl.Int64,
            "t": pl.Datetime("us") if temporal else pl.Int64,
            "x": pl.Float64,
            "y": pl.Int64,
        }
        if p == 0:
            cols["s"] = draw(
                st.lists(st.sampled_from([None, "", "a", "b", "ab", "é"]), min_size=n, max_size=n)
            )
            schema["s"] = pl.String
        if p == 1:
            cols["li"] = draw(
                st.lists(st.one_of(st.none(), st.lists(INTS, max_size=2)), min_size=n, max_size=n)
            )
            schema["li"] = pl.List(pl.Int64)
        frames.append(pl.DataFrame(cols, schema=schema))
    ports = [p for p, f in enumerate(frames) for _ in range(f.height)]
    order = draw(st.permutations(ports)) if ports else []
    return frames, list(order)


def _arrivals(frames: list[pl.DataFrame], order: list[int]) -> list[tuple[int, dict[str, Any]]]:
    rows = [f.to_dicts() for f in frames]
    nxt = [0] * len(frames)
    out = []
    for p in order:
        out.append((p, rows[p][nxt[p]]))
        nxt[p] += 1
    return out


def _reference(step: P.Step, c: Any, arrivals: list[tuple[int, dict[str, Any]]]):
    env = _Env(step.step_id)
    op = make_op(step, c, env)  # type: ignore[arg-type]
    out: list[dict[str, Any]] = []
    for port, row in arrivals:
        env.counters[step.step_id].rows_in += 1
        out += op.push(row, port)
    frame = pl.DataFrame(out, schema=polars_schema(c.schemas[step.step_id]), orient="row")
    return frame, env.events


def _native(step: P.Step, c: Any, arrivals, workers: int, slices: random.Random):
    tagged = N.tagged_schema(step, c)
    rows = []
    for port, row in arrivals:
        r: dict[str, Any] = {n: None for n, _ in tagged}
        r[N.PORT_COLUMN] = port
        r.update({N.tagged_name(port, n): v for n, v in row.items()})
        rows.append(r)
    rb = pa.RecordBatch.from_pylist(rows, schema=N._arrow_target(tagged))
    prog = R.Program(1, 64)
    try:
        prog.set_input(N._lts(tagged))
        kind, kw = N.lower_fanin(step, c, 0, 7)  # type: ignore[arg-type]
        getattr(prog, f"add_{kind}")(**kw)
        prog.set_output(N._lts(c.schemas[step.step_id]))
        prog.start(workers=workers)
        got: list[pa.RecordBatch] = []
        at = 0
        while at < len(rows):
            m = min(len(rows) - at, slices.randint(1, 9))
            assert prog.push_many(rb, at, m, at, m) == (0, m)
            at += m
            while True:
                rc, eos, b = prog.take(0)
                if b is None:
                    break
                got.append(b)
        while prog.finish(100_000_000) != 0:
            pass
        while True:
            rc, eos, b = prog.take(1_000_000_000)
            if eos:
                break
            assert b is not None, rc
            got.append(b)
        frame = N.to_frame(got, c.schemas[step.step_id]) if got else None
        events: list[tuple[str, Any]] = []
        for _, kinds, _, _, reasons, srb in prog.sides():
            for j, tag in enumerate(N.to_frame(srb, tagged).to_dicts()):  # lists decoded
                port, own = N.untag_row(step, c, tag)
                events.append(("dead", reasons[j]) if kinds[j] == 1 else ("late", own))
        counters = prog.counters()[0]
    finally:
        prog.close()
    if frame is None:
        frame = pl.DataFrame(schema=polars_schema(c.schemas[step.step_id]))
    return frame, events, counters


def _compare(stream: sc.Stream, arrivals, workers: int, seed: int) -> None:
    c = compile_plan(stream.plan())
    step = next(s for s in c.plan.steps if isinstance(s, (P.Join, P.Correlate)))
    want, want_events = _reference(step, c, arrivals)
    got, got_events, (rin, rout, filt, dead, late) = _native(
        step, c, arrivals, workers, random.Random(seed)
    )
    assert_frame_equal(got, want)
    assert repr(got_events) == repr(want_events)  # repr: NaN equals NaN
    assert (rin, rout, filt) == (len(arrivals), want.height, 0)
    assert dead == sum(e[0] == "dead" for e in want_events)
    assert late == sum(e[0] == "late" for e in want_events)


def _sources(frames: list[pl.DataFrame]) -> list[sc.Stream]:
    return [sc.source(f, name=f"in{p}") for p, f in enumerate(frames)]


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    data=st.data(),
    temporal=st.booleans(),
    within=st.integers(0, 5),
    lateness=st.integers(0, 6),
    workers=st.sampled_from([1, 2]),
    seed=st.integers(0, 2**16),
)
def test_native_join_equals_the_reference_join(data, temporal, within, lateness, workers, seed):
    frames, order = data.draw(inputs(2, temporal))
    a, b = _sources(frames)
    dur = (lambda n: f"{n}m") if temporal else (lambda n: n)
    stream = a.join(b, on="k", within=dur(within), time="t", lateness=dur(lateness))
    _compare(stream, _arrivals(frames, order), workers, seed)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    data=st.data(),
    nports=st.sampled_from([2, 3]),
    temporal=st.booleans(),
    over=st.integers(1, 8),
    lateness=st.integers(0, 6),
    workers=st.sampled_from([1, 2]),
    seed=st.integers(0, 2**16),
)
def test_native_correlate_equals_the_reference_correlate(
    data, nports, temporal, over, lateness, workers, seed
):
    frames, order = data.draw(inputs(nports, temporal))
    ins = _sources(frames)
    a, b = ins[0], ins[1]
    dur = (lambda n: f"{n}m") if temporal else (lambda n: n)
    aggs: dict[str, Any] = {
        "n": sc.count(),
        "nx": a.col("x").count(),
        "sx": sc.col("x").sum(),
        "mx": a.col("x").mean(),
        "dx": a.col("x").std(),
        "lox": a.col("x").min(),
        "hix": a.col("x").max(),
        "lx": a.col("x").last(),
        "los": a.col("s").min(),
        "his": a.col("s").max(),
        "ls": a.col("s").last(),
        "nb": b.col().count(),
        "sy": b.col("y").sum(),
        "my": b.col("y").mean(),
        "dy": b.col("y").std(),
        "loy": b.col("y").min(),
        "hiy": b.col("y").max(),
        "lli": b.col("li").last(),
        "bx": b.col("x").std(),
    }
    if nports == 3:
        aggs["cx"] = ins[2].col("x").mean()
        aggs["nc"] = ins[2].col().count()
    stream = a.correlate(*ins[1:], on="k", time="t", over=dur(over), lateness=dur(lateness), **aggs)
    _compare(stream, _arrivals(frames, order), workers, seed)


def test_the_tagged_layout_names_every_input_column_by_port():
    a = sc.source(pl.DataFrame({"k": [1], "t": [0], "x": [1.0]}))
    b = sc.source(pl.DataFrame({"t": [0], "k": [1]}))
    c = compile_plan(a.join(b, on="k", within=1, time="t").plan())
    step = next(s for s in c.plan.steps if isinstance(s, P.Join))
    names = [n for n, _ in N.tagged_schema(step, c)]
    assert names == ["\x00port", "0.k", "0.t", "0.x", "1.t", "1.k"]
    kind, kw = N.lower_fanin(step, c, 3, 16)
    # tagged columns count the hidden seq, pos first: port is column 2
    assert kind == "join" and kw["left_keys"] == [3] and kw["right_keys"] == [7]
    assert kw["time_cols"] == [4, 6] and kw["outs"] == [3, 4, 5, 6]


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    data=st.data(),
    nports=st.sampled_from([2, 3]),
    temporal=st.booleans(),
    over=st.integers(1, 8),
    lateness=st.integers(0, 6),
    join=st.booleans(),
)
def test_whole_runs_through_the_dag_equal_the_reference(
    data, nports, temporal, over, lateness, join
):
    """The operators inside the DAG runtime (merge, phases, source positions of dead and late
    rows, counters): whole runs at 1, 2 and 4 workers equal the reference's."""
    from streamcell.options import RunOptions
    from tests.helpers import check_against_reference

    frames, _ = data.draw(inputs(nports, temporal))
    ins = _sources(frames)
    dur = (lambda n: f"{n}m") if temporal else (lambda n: n)
    a = ins[0].filter(sc.col("y").is_null() | (sc.col("y") != 0))
    if join:
        stream = a.join(ins[1], on="k", within=dur(over), time="t", lateness=dur(lateness))
    else:
        stream = a.correlate(
            *ins[1:],
            on="k",
            time="t",
            over=dur(over),
            lateness=dur(lateness),
            mx=a.col("x").mean(),
            dy=ins[1].col("y").std(),
            ly=ins[-1].col("y").last(),
            n=ins[-1].col().count(),
        ).filter(sc.col("n") > 0)
    plan = stream.plan()
    for options in (
        RunOptions(engine="native", workers=1),
        RunOptions(engine="native", workers=2, batch_size=7),
        RunOptions(engine="native", workers=4, batch_size=1),
    ):
        check_against_reference(plan, options)
