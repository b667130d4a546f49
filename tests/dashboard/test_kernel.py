"""The dashboard through a real kernel (nbclient): the publisher thread's widget updates reach
the frontend while other cells run, and the final state stays after the run ends."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_notebook

pytest.importorskip("ipywidgets")


class _Recorder(NotebookClient):
    """Keeps every widget update the kernel sends, with the cell running when it came."""

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.updates: list[tuple[float, int, dict[str, Any]]] = []

    def handle_comm_msg(self, outs: Any, msg: Any, cell_index: int) -> None:
        data = msg["content"].get("data", {})
        if msg["msg_type"] == "comm_msg" and data.get("method") == "update":
            self.updates.append((time.monotonic(), cell_index, dict(data.get("state", {}))))
        super().handle_comm_msg(outs, msg, cell_index)


def _rows_in(html: str) -> int:
    m = re.search(r"class='sc-rows-in'>([\d,]+)<", html)
    assert m, html[:300]
    return int(m.group(1).replace(",", ""))


@pytest.mark.parametrize("engine", ["reference", "native"])
def test_publisher_thread_updates_reach_the_frontend(tmp_path, engine):
    nb = new_notebook()
    nb.cells = [
        new_code_cell("%load_ext streamcell"),
        new_code_cell(
            f"%%stream clicks --engine {engine}\n"
            "source clickstream(users=500, seed=1), rate=20_000\n"
            "key_by event\nagg n=count()"
        ),
        # the charts attach once their front end is loaded (in the background), then refresh at ~1 Hz
        new_code_cell(
            "import time\nfrom streamcell.widgets import charts\n"
            "assert charts.wait(180)\nwhile clicks.dashboard.throughput is None: time.sleep(0.05)\n"
            "time.sleep(1.5)"
        ),
        new_code_cell("%stream stop clicks\nclicks.dashboard.join(5)\nclicks.status"),
        new_code_cell("import time; time.sleep(0.5)"),
    ]
    client = _Recorder(
        nb,
        timeout=120,
        kernel_name="python3",
        store_widget_state=True,
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()
    outputs = [o for c in nb.cells for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"], outputs
    # the dashboard first, then the plan's graph, collapsed
    view, plan = (o["data"] for o in nb.cells[1].outputs[-2:])
    assert "application/vnd.jupyter.widget-view+json" in view
    assert plan["text/html"].startswith("<details class='sc-plan'>")
    # headline updates sent by the publisher thread while the sleep cell ran
    during = [
        s["value"]
        for _, cell, s in client.updates
        if cell == 2 and "sc-rows-in" in s.get("value", "")
    ]
    assert len(during) >= 4  # ~5 Hz for 1.5 s
    counts = [_rows_in(v) for v in during]
    assert counts == sorted(counts) and counts[-1] > counts[0]
    charts = [s for _, cell, s in client.updates if cell == 2 and "rows" in s]
    assert charts, "the throughput/latency charts were not refreshed"
    # the final state is kept: status stopped, stop button disabled, nothing after the end
    states = client.widget_state.values()
    status = [s["value"] for s in states if "streamcell-dashboard-status" in str(s.get("value"))]
    assert status and "data-status='stopped'" in status[0]
    stop = [s for s in states if s.get("description") == "stop"]
    assert stop and stop[0]["disabled"] is True
    # and the controls are hidden: the box holding the pause / resume / stop buttons
    ids = {f"IPY_MODEL_{k}" for k, s in client.widget_state.items() if s.get("description")}
    boxes = [s for s in states if s.get("children") and set(s["children"]) <= ids]
    layouts = [client.widget_state[b["layout"][len("IPY_MODEL_") :]] for b in boxes]
    assert any(len(b["children"]) == 3 for b in boxes)
    assert any(lay.get("display") == "none" for lay in layouts)
    assert not [1 for _, cell, _ in client.updates if cell == 4]
    assert nb.cells[3].outputs[-1]["data"]["text/plain"] == "'stopped'"
