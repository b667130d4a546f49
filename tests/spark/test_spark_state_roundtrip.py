"""The operator state a streaming run keeps in Spark's state store, without Spark: an
operator fed a stream in one go equals one whose state is pickled (``get_state``), restored
into a fresh operator (``set_state``) and fed the rest, at every cut -- NaN and -0.0 keys,
``count_distinct`` sets, open windows, sessions, late rows and balances included."""

from __future__ import annotations

import math
import pickle
from typing import Any

import polars as pl
import pytest

import streamcell as sc
from streamcell import plan as P
from streamcell.backends.reference import make_op
from streamcell.backends.spark.ops import MiniCompiled, PartitionEnv
from streamcell.backends.spark.state import get_state, set_state
from streamcell.compiler import compile_plan

N = 80
FRAME = pl.DataFrame(
    {
        "k": [[1.5, math.nan, -0.0, 0.0, 2.5][i % 5] for i in range(N)],
        "t": [i * 3 - (20 if i % 9 == 4 else 0) for i in range(N)],
        "v": [float((i * 7) % 11) if i % 13 else math.nan for i in range(N)],
        "a": [i % 4 for i in range(N)],
        "b": [(i * 3) % 4 for i in range(N)],
        "amt": [(i * 5) % 9 for i in range(N)],
    }
)

STEPS = {
    "agg": lambda s: s.key_by("k").agg(
        n=sc.count(),
        d=sc.col("v").count_distinct(),
        f=sc.col("v").first(),
        last=sc.col("v").last(),
        m=sc.col("v").max(),
    ),
    "running": lambda s: s.key_by("k").running(total=sc.col("amt").sum()),
    "top_k": lambda s: s.key_by("k").top_k(2, by="v"),
    "dedup": lambda s: s.dedup("k", "a"),
    "transfer": lambda s: s.key_by_all("a", "b").transfer("amt", initial=5),
    "tumbling": lambda s: s.key_by("k").tumbling(10, time="t", lateness=4).agg(n=sc.count()),
    "sliding": lambda s: (
        s.key_by("k").sliding(12, every=4, time="t", lateness=4).agg(v=sc.col("v").sum())
    ),
    "session": lambda s: (
        s.key_by("k")
        .session(5, time="t", lateness=4)
        .agg(n=sc.count(), d=sc.col("a").count_distinct())
    ),
}


def feed(op: Any, env: PartitionEnv, rows: list[dict[str, Any]]) -> list[Any]:
    out: list[Any] = []
    for r in rows:
        out.append(("out", op.push(dict(r), 0)))
        out.extend(("side", kind, repr(payload)) for kind, _, payload in env.side)
        env.side.clear()
    return out


@pytest.mark.parametrize("name", list(STEPS))
def test_state_survives_a_pickle_round_trip_at_every_cut(name: str) -> None:
    plan = STEPS[name](sc.source(FRAME)).plan()
    c = compile_plan(plan)
    step = next(s for s in c.plan.steps if not isinstance(s, (P.Source, P.Sink)))
    rows = FRAME.to_dicts()

    def fresh() -> tuple[Any, PartitionEnv]:
        env = PartitionEnv()
        return make_op(step, MiniCompiled(c.schemas), env), env  # type: ignore[arg-type]

    op, env = fresh()
    whole = feed(op, env, rows)
    whole.append(("end", op.end()))
    assert any(x[1] for x in whole if x[0] == "out")
    for cut in range(0, N + 1, 7):
        a, env_a = fresh()
        got = feed(a, env_a, rows[:cut])
        blob = pickle.dumps(get_state(a))
        b, env_b = fresh()
        set_state(b, pickle.loads(blob))
        got += feed(b, env_b, rows[cut:])
        got.append(("end", b.end()))
        assert repr(got) == repr(whole), f"cut at row {cut}"
