"""Instant cells (issue 20): ``%load_ext`` and the first ``%%stream`` cell of a fresh kernel
do not wait for the dashboard's charts (their front end loads in the background), and the charts'
history starts at the run's t=0 whenever they attach.

Through real kernels (jupyter_client, display on); the times to reply are printed (``-s``),
never asserted: what is asserted is that the cell returned while the charts were still loading, and
what the charts drew once attached.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import streamcell as sc
from streamcell.backends import available

ENGINES = ["reference"] + (["native"] if "native" in available() else [])

CELL = (
    "%%stream first --engine {engine}\n"
    "source clickstream(rows=4_000, users=50, seed=1), rate=2_000\n"
    "filter price > 5\nkey_by event\nagg n=count()\n"
)


class _Kernel:
    def __init__(self) -> None:
        jupyter_client = pytest.importorskip("jupyter_client")
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(Path(sc.__file__).resolve().parent.parent), env.get("PYTHONPATH", "")]
        )
        self.km = jupyter_client.KernelManager(kernel_name="python3")
        self.km.kernel_cmd = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
        self.km.start_kernel(env=env)
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)

    def close(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)

    def timed(self, code: str) -> tuple[float, dict[str, Any]]:
        """Execute request to execute reply, in seconds, and the reply's content."""
        t0 = time.monotonic()
        msg_id = self.kc.execute(code)
        while True:
            reply = self.kc.get_shell_msg(timeout=120)
            if reply["parent_header"]["msg_id"] == msg_id:
                return time.monotonic() - t0, reply["content"]

    def text(self, code: str) -> str:
        """What ``code`` printed (stdout), after asserting it ran without error."""
        msg_id = self.kc.execute(code)
        out: list[str] = []
        while True:
            m = self.kc.get_iopub_msg(timeout=120)
            if m["parent_header"].get("msg_id") != msg_id:
                continue
            if m["msg_type"] == "stream":
                out.append(m["content"]["text"])
            elif m["msg_type"] == "error":
                raise AssertionError("\n".join(m["content"]["traceback"]))
            elif m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
                return "".join(out)


@pytest.fixture
def kernel() -> Any:
    k = _Kernel()
    yield k
    k.close()


_CHARTS_DRAWN = (
    "from streamcell.widgets import charts\n"
    "assert charts.wait(180), charts.error()\n"
    "first.wait(60); first.dashboard.join(60)\n"
    "d = first.dashboard\n"
    "values = d.throughput.rows\n"
    "slots = tuple(s.children[0] for s in d.slots.values())\n"
    "print(slots == (d.throughput, d.latency), values[0]['t'],"
    " sorted({v['series'] for v in values}), max(v['value'] for v in values) > 0)\n"
)


@pytest.mark.parametrize("engine", ENGINES)
def test_first_cell_returns_before_the_charts_are_loaded(kernel, engine):
    """The charts' loading is held back until the first cell has returned: the cell shows
    its dashboard (numbers, "loading charts") without charts; released, the charts attach
    and draw the run from t=0."""
    gate = (
        "import threading, streamcell.widgets.charts as _charts\n"
        "_gate, _load = threading.Event(), _charts.load\n"
        "_charts.load = lambda: (_gate.wait(), _load())\n"
    )
    kernel.text(gate)
    t_load, reply = kernel.timed("%load_ext streamcell")
    assert reply["status"] == "ok", reply
    t_cell, reply = kernel.timed(CELL.format(engine=engine))
    assert reply["status"] == "ok", reply
    state = kernel.text(
        "import sys\n"
        "d = first.dashboard\n"
        "print(_charts.state() == 'loading', d.throughput is None,"
        " all('loading charts' in s.children[0].value for s in d.slots.values()),"
        " 'sc-rows-in' in d.headline.value)"
    )
    assert state.split() == ["True", "True", "True", "True"], state
    kernel.text("_gate.set()")
    drawn = kernel.text(_CHARTS_DRAWN)
    assert drawn.split("\n")[0] == "True 0.0 ['in', 'out'] True", drawn
    print(
        f"\n[{engine}, charts held back] %load_ext {t_load * 1e3:.0f} ms, "
        f"first %%stream cell {t_cell * 1e3:.0f} ms"
    )


@pytest.mark.parametrize("engine", ENGINES[-1:])
def test_fresh_kernel_first_cells(kernel, engine):
    """As a user meets it (nothing held back): times printed; the charts attach by
    themselves and their history starts at t=0."""
    t_load, reply = kernel.timed("%load_ext streamcell")
    assert reply["status"] == "ok", reply
    t_cell, reply = kernel.timed(CELL.format(engine=engine))
    assert reply["status"] == "ok", reply
    t_second, reply = kernel.timed(CELL.format(engine=engine).replace("first", "second", 1))
    assert reply["status"] == "ok", reply
    drawn = kernel.text(_CHARTS_DRAWN)
    assert drawn.split("\n")[0] == "True 0.0 ['in', 'out'] True", drawn
    print(
        f"\n[{engine}] %load_ext {t_load * 1e3:.0f} ms, first %%stream cell "
        f"{t_cell * 1e3:.0f} ms, second {t_second * 1e3:.0f} ms"
    )


def test_a_late_dashboard_draws_the_run_from_t0():
    """A dashboard made while the run has been going for a while starts its charts' history
    at t=0, with the run's own samples from before it existed."""
    pytest.importorskip("ipywidgets")
    from streamcell.widgets.dashboard import Dashboard

    plan = sc.source(sc.clickstream(rows=None, users=50, seed=2), rate=5_000).plan("late_dash")
    run = sc.start(plan, name="late_dash", engine="reference")
    try:
        deadline = time.monotonic() + 30
        while len(run._metrics) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(run._metrics) >= 2
        d = Dashboard(run, display=False)
        ts = [h["t"] for h in d.history]
        assert ts[0] == 0.0 and ts == sorted(ts)
        before = [h for h in d.history if 0 < h["t"] < ts[-1]]
        assert before and all(h["in"] is not None for h in before)
    finally:
        run.stop()
    d.join(60)
