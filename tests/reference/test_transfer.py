"""Multi-entity events (the lazy topological sorting design): ``key_by_all FROM, TO`` + ``transfer AMOUNT``.

Every engine configuration (native at 1, 2 and 4 workers, batch sizes down to 1, each
scheduler; Spark) must equal the reference's sequential run exactly: balances in every
output row, rejected transfers in the dead letters, conservation counts. Uniform and skewed
account popularity; int and float amounts; overdraft on and off.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

import streamcell as sc
from streamcell.errors import DSLSyntaxError, PlanError
from streamcell.options import RunOptions
from tests.conftest import ENGINE_CONFIGS
from tests.helpers import check_against_reference, run_plan

NATIVE = [c for c in ENGINE_CONFIGS if c.options.engine == "native"]


def transfers(n: int, accounts: int, skew: float | None, seed: int, floats: bool) -> pl.DataFrame:
    """Bank transfers: account ids uniform or Zipf(skew)-popular, amounts mostly small with
    a few large ones (rejections), and a sprinkling of bad rows (nulls, negative, NaN)."""
    rng = np.random.default_rng(seed)
    if skew is None:
        src = rng.integers(0, accounts, n)
        dst = rng.integers(0, accounts, n)
    else:
        src = (rng.zipf(skew, n) - 1) % accounts
        dst = (rng.zipf(skew, n) - 1) % accounts
    amt = rng.integers(1, 40, n).astype(np.float64)
    amt[rng.random(n) < 0.05] = 500.0
    src_l: list[int | None] = src.tolist()
    dst_l: list[int | None] = dst.tolist()
    amt_l: list[float | None] = amt.tolist()
    for i in rng.choice(n, size=max(1, n // 100), replace=False).tolist():
        kind = i % 4
        if kind == 0:
            src_l[i] = None
        elif kind == 1:
            amt_l[i] = None
        elif kind == 2:
            amt_l[i] = -5.0
        else:
            amt_l[i] = float("nan") if floats else 7.0
    if floats:
        return pl.DataFrame({"src": src_l, "dst": dst_l, "amount": amt_l})
    ints = [None if a is None else int(a) for a in amt_l]
    return pl.DataFrame({"src": src_l, "dst": dst_l, "amount": ints})


@pytest.mark.parametrize(
    "accounts, skew, floats, overdraft",
    [
        (50, None, True, False),
        (2_000, None, False, False),
        (300, 1.3, True, False),  # hot accounts: tickets contend
        (40, 1.1, False, True),
    ],
)
def test_transfers_equal_the_sequential_run(engine, accounts, skew, floats, overdraft):
    df = transfers(3_000, accounts, skew, seed=accounts, floats=floats)
    plan = (
        sc.source(df)
        .key_by_all("src", "dst")
        .transfer("amount", initial=100.0 if floats else 100, overdraft=overdraft)
        .plan()
    )
    out = check_against_reference(plan, engine.options)
    table = next(iter(out["tables"].values()))
    dead = out["dead"]
    assert table.height + dead.height == df.height  # nothing lost
    if not overdraft:
        assert (table["src_balance"] >= 0).all()  # no negative balances allowed
        assert dead["reason"].str.contains("balance below amount").sum() > 0
    else:
        assert (table["src_balance"] < 0).any()


def test_balances_are_conserved():
    df = transfers(5_000, 100, 1.2, seed=3, floats=False)
    run = run_plan(
        sc.source(df).key_by_all("src", "dst").transfer("amount", initial=1_000).plan(),
        RunOptions(engine="native", workers=2),
    )
    t = run.table()
    last: dict[int, int] = {}
    for s, d, sb, db in t.select("src", "dst", "src_balance", "dst_balance").iter_rows():
        last[s], last[d] = sb, db
    touched = set(df["src"].drop_nulls()) | set(df["dst"].drop_nulls())
    # money only moves: the balances of the accounts touched still sum to the initial total
    untouched_by_ok = touched - set(last)
    assert sum(last.values()) + 1_000 * len(untouched_by_ok) == 1_000 * len(touched)


@pytest.mark.parametrize("cfg", NATIVE, ids=[c.id for c in NATIVE])
def test_serial_baseline_and_tickets_agree(cfg):
    """entity_order='serial' (one global ticket lock) gives the same result; the ticket run
    reports how many events waited for an entity."""
    df = transfers(4_000, 20, 1.2, seed=9, floats=True)
    plan = sc.source(df).key_by_all("src", "dst").transfer("amount", initial=50.0).plan()
    a = run_plan(plan, cfg.options)
    b = run_plan(plan, cfg.options.with_(entity_order="serial"))
    assert_frame_equal(a.table(), b.table())
    assert_frame_equal(a.dead_letters(), b.dead_letters())
    stats = a.native_metrics["entities"]["transfer#2"]
    assert stats["entities"] == len(set(df["src"].drop_nulls()) | set(df["dst"].drop_nulls()))
    assert 0 <= stats["waited"] <= df.height


def test_dsl_round_trip_errors_and_fluent():
    text = "source df\nkey_by_all src, dst\ntransfer amount, initial=10.5, overdraft=True\n"
    df = transfers(10, 5, None, seed=1, floats=True)
    p = sc.parse(text, {"df": df})
    assert sc.parse(p.to_dsl(), {"df": df}) == p
    fluent = sc.source(df).key_by_all("src", "dst").transfer("amount", initial=10.5, overdraft=True)
    assert fluent.plan().sinks[0].inputs[0] == p.sinks[0].inputs[0]
    with pytest.raises(DSLSyntaxError, match="transfer needs the entities first") as e:
        sc.parse("source df\ntransfer amount\n", {"df": df})
    assert (e.value.line, e.value.column) == (2, 1)
    with pytest.raises(DSLSyntaxError, match="key_by_all on line 2 must be followed by 'transfer'"):
        sc.parse("source df\nkey_by_all src, dst\nfilter amount > 1\n", {"df": df})
    with pytest.raises(DSLSyntaxError, match="key_by_all on line 2 must be followed by 'transfer'"):
        sc.parse("source df\nkey_by_all src, dst\n", {"df": df})
    with pytest.raises(DSLSyntaxError, match="initial= must be a number"):
        sc.parse('source df\nkey_by_all src, dst\ntransfer amount, initial="x"\n', {"df": df})
    bad = pl.DataFrame({"src": [1], "dst": ["a"], "amount": [1.0], "note": ["x"]})
    with pytest.raises(PlanError, match="must have the same type"):
        sc.compile_plan(sc.source(bad).key_by_all("src", "dst").transfer("amount").plan())
    with pytest.raises(PlanError, match="amount 'note' must be int or float"):
        sc.compile_plan(sc.source(bad).key_by_all("src", "src").transfer("note").plan())
    with pytest.raises(PlanError, match="two entity columns"):
        sc.compile_plan(sc.source(bad).key_by_all("src", "src", "src").transfer("amount").plan())
