"""``rate=N`` is a cap (issue 20): a token bucket with a small burst, so a throttled source
never catches up after a pause or a stall, on every engine; the dashboard says so."""

from __future__ import annotations

import itertools
import time

import pytest

import streamcell as sc
from streamcell.backends.pacing import BURST_S, TokenBucket

_names = itertools.count()


class _Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_the_bucket_paces_and_does_not_make_up_for_lost_time():
    clock = _Clock()
    b = TokenBucket(1_000, clock)
    assert [b.due(i) - 100.0 for i in (0, 1, 500)] == pytest.approx([0.0, 0.001, 0.5])
    clock.t += 10.0  # paused (or stalled) for 10 s at row 501
    at = b.due(501)
    assert at == pytest.approx(clock.t - BURST_S)  # due now, less the burst: 50 rows at once
    burst = [i for i in range(501, 2_000) if b.due(i) <= clock.t]
    assert len(burst) == pytest.approx(1_000 * BURST_S, abs=1)
    assert b.due(501 + 1_000) - clock.t == pytest.approx(1.0 - BURST_S)  # then 1,000 rows/s
    slow = TokenBucket(2.0, clock)  # a burst is at least one row
    clock.t += 5.0
    assert slow.due(0) == pytest.approx(clock.t - 0.5)
    with pytest.raises(ValueError):
        TokenBucket(0)


def _rows_in(run: sc.Run) -> int:
    return int(run.progress()["rows_in"])


def test_no_catch_up_after_a_pause(engine):
    if engine.options.engine == "spark":
        pytest.skip("Spark paces micro-batches itself")
    rate = 4_000
    plan = sc.source(sc.clickstream(rows=None, users=50, seed=3), rate=rate).plan("capped")
    run = sc.start(plan, name=f"capped{next(_names)}", options=engine.options)
    try:
        time.sleep(0.5)
        run.pause()
        time.sleep(0.2)
        paused_at = _rows_in(run)
        time.sleep(1.0)  # 4,000 rows' worth of time: a schedule from t=0 would owe them all
        t0 = time.monotonic()
        run.resume()
        time.sleep(0.3)
        got, dt = _rows_in(run) - paused_at, time.monotonic() - t0
    finally:
        run.stop()
    # a cap: what 0.3 s are worth at the rate, plus the burst and one paced push (20 ms);
    # a catch-up would add the 4,000 rows owed for the pause
    allowed = rate * dt + rate * BURST_S + rate * 0.02 + 400
    print(f"\n[{engine.id}] {got:,} rows in {dt * 1e3:.0f} ms after resume (cap {allowed:,.0f})")
    assert 0 < got <= allowed


def test_the_dashboard_says_throttled():
    pytest.importorskip("ipywidgets")
    from streamcell.widgets.dashboard import Dashboard

    plan = sc.source(sc.clickstream(rows=2_000, seed=4), rate=20_000).plan("shown")
    run = sc.start(plan, name="shown", engine="reference")
    d = Dashboard(run, display=False)
    assert "throttled to 20,000 rows/s" in d.status.value
    run.wait(30)
    d.join(120)
    unthrottled = sc.start(sc.source(sc.clickstream(rows=10)).plan("free"), name="free")
    d2 = Dashboard(unthrottled, display=False)
    assert "throttled" not in d2.status.value
    unthrottled.wait(30)
    d2.join(120)
