"""The dashboard's live result grid: Arrow IPC windows of the output table, read back by the
grid's own front-end reader (widgets/grid.js, run with Node) and by pyarrow."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import subprocess
import time
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest

import streamcell as sc

pytest.importorskip("anywidget")

from streamcell.widgets.grid import ResultGrid, arrow_ipc  # noqa: E402

GRID_JS = Path(__file__).resolve().parents[2] / "widgets" / "grid.js"

FRAME = pl.DataFrame(
    {
        "user_id": [1, None, 3, 2**40],
        "price": [1.5, 2.0, None, -0.25],
        "event": ["view", None, "cart", "größe"],
        "flag": [True, False, None, True],
        "day": [dt.date(2020, 1, 1), None, dt.date(2021, 2, 3), dt.date(2022, 3, 4)],
        "n": pl.Series([1, 2, 3, 4], dtype=pl.UInt16),
    }
)
EXPECTED_TYPES = ["int64", "float64", "utf8", "utf8", "utf8", "int64"]


def test_arrow_ipc_sends_three_types():
    table = pa.ipc.open_stream(arrow_ipc(FRAME)).read_all()
    assert [str(t) for t in table.schema.types] == [
        "int64",
        "double",
        "string",
        "string",
        "string",
        "int64",
    ]
    assert table.column("flag").to_pylist() == ["true", "false", None, "true"]
    assert table.column("day").to_pylist() == ["2020-01-01", None, "2021-02-03", "2022-03-04"]
    assert table.column("user_id").to_pylist() == FRAME["user_id"].to_list()


@pytest.mark.skipif(shutil.which("node") is None, reason="needs Node to run grid.js")
def test_grid_js_reads_what_the_kernel_sends(tmp_path):
    data = tmp_path / "window.arrow"
    data.write_bytes(arrow_ipc(FRAME))
    module = tmp_path / "grid.mjs"
    module.write_text(GRID_JS.read_text())
    script = (
        f"import('{module}').then(m => {{ const b = require('fs').readFileSync('{data}');"
        " const r = m.readArrowStream(new Uint8Array(b.buffer, b.byteOffset, b.length));"
        " console.log(JSON.stringify(r)); })"
    )
    out = subprocess.run(["node", "-e", script], capture_output=True, text=True, check=True)
    got = json.loads(out.stdout)
    assert [c["name"] for c in got["columns"]] == FRAME.columns
    assert [c["type"] for c in got["columns"]] == EXPECTED_TYPES
    want = pa.ipc.open_stream(arrow_ipc(FRAME)).read_all().to_pylist()
    assert got["rows"] == [list(r.values()) for r in want]


def test_the_grid_follows_the_run_in_a_bounded_window():
    plan = (
        sc.source(sc.clickstream(rows=None, users=2_000, seed=5), rate=20_000)
        .select("user_id", "event", "price")
        .plan("appended")
    )
    run = sc.start(plan, name="grid_live")
    try:
        grid = ResultGrid(run, window=50)
        deadline = time.monotonic() + 30
        while run.table().height < 200 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert grid.refresh()
        first = (grid.widget.version, grid.widget.total)
        window = pa.ipc.open_stream(grid.widget.arrow).read_all()
        assert window.num_rows == 50 and first[1] >= 200  # the last 50 rows only
        assert window.column_names == ["user_id", "event", "price"]
        time.sleep(0.3)
        assert grid.refresh() and grid.widget.version == first[0] + 1
        assert grid.widget.total > first[1]
    finally:
        run.stop()
    grid.refresh()
    assert not grid.refresh()  # nothing changed: nothing sent
    tail = run.table().tail(50)
    sent = pl.from_arrow(pa.ipc.open_stream(grid.widget.arrow).read_all())
    assert sent.equals(tail.cast({"user_id": pl.Int64, "price": pl.Float64}))


def test_the_dashboard_shows_the_output_grid():
    from streamcell.widgets.dashboard import Dashboard

    plan = sc.source(sc.clickstream(rows=300, users=20, seed=1)).key_by("event").agg(n=sc.count())
    run = sc.start(plan.plan("grid_dash"), name="grid_dash")
    run.wait(60)
    d = Dashboard(run, display=False)
    d.join(5)
    assert d.grid is not None and d.grid_box.children[1] is d.grid.widget
    sent = pa.ipc.open_stream(d.grid.widget.arrow).read_all()
    assert sent.num_rows == run.table().height == d.grid.widget.total
    kids = d.widget.children
    assert kids.index(d.chart_box) < kids.index(d.grid_box) < kids.index(d.operators)
    assert Dashboard(run, display=False, grid_enabled=False).grid is None
