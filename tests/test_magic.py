"""%%stream and %stream through a real IPython shell."""

from __future__ import annotations

import time

import polars as pl
import pytest

import streamcell as sc
from tests.helpers import ipython_shell


@pytest.fixture(scope="module")
def ip():
    yield ipython_shell()


def test_cell_returns_at_once_and_binds_a_handle(ip, capsys):
    ip.run_cell_magic(
        "stream",
        "slow --no-display",
        "source clickstream(rows=20000, seed=1), rate=2000\nfilter price > 10\n",
    )
    run = ip.user_ns["slow"]
    assert isinstance(run, sc.Run)
    # ten seconds of throttled input: the cell returned while the run goes on
    assert run.status == "running"
    run.stop()
    assert run.status == "stopped"
    df = run.table()
    assert isinstance(df, pl.DataFrame)
    assert (df["price"] > 10).all()
    assert "filter#2" in run.explain()


def test_namespace_sources_and_callbacks(ip):
    got = []
    ip.user_ns["events"] = pl.DataFrame({"k": ["a", "b", "a"], "v": [1, 2, 3]})
    ip.user_ns["collect"] = got.append
    ip.run_cell_magic(
        "stream",
        "agg_run --no-display --wait",
        "source events\nkey_by k\nagg total=sum(v)\nsink callback(collect)\n",
    )
    run = ip.user_ns["agg_run"]
    assert run.status == "finished"
    rows = pl.concat(got).rows()
    assert rows == [("a", 1), ("b", 2), ("a", 4)]


def test_bad_cell_prints_error_with_caret_and_binds_nothing(ip, capsys):
    ip.user_ns.pop("broken", None)
    ip.run_cell_magic(
        "stream", "broken --no-display", "source clickstream(rows=5)\nfilter prize > 1\n"
    )
    out = capsys.readouterr().out
    # lines count the cell as the user sees it: the %%stream line is line 1
    assert "unknown column 'prize' (did you mean 'price'?)" in out
    assert "line 3, column 8" in out and "^" in out
    assert "broken" not in ip.user_ns


def test_rerun_same_name_stops_and_replaces(ip):
    ip.run_cell_magic("stream", "again --no-display", "source clickstream(seed=1), rate=500\n")
    first = ip.user_ns["again"]
    ip.run_cell_magic("stream", "again --no-display", "source clickstream(rows=10, seed=2)\n")
    second = ip.user_ns["again"]
    assert first is not second
    assert first.status == "stopped"
    assert second.wait(10).status == "finished"
    assert sc.registry()["again"] is second


def test_line_magics_list_status_stop(ip, capsys):
    ip.run_cell_magic("stream", "forever --no-display", "source clickstream(seed=3), rate=1000\n")
    listing = ip.run_line_magic("stream", "list")
    assert "forever" in listing.frame["name"].to_list()
    # formatted once (streamcell.fmt): separators, units, m:ss; no raw floats
    row = [r for r in listing.rows() if r[0] == "forever"][0]
    assert row[5].endswith(" rows/s") and row[7].startswith("0:")
    assert "forever" in repr(listing) and "<table class='sc-run-table'>" in listing._repr_html_()
    ip.run_line_magic("stream", "pause forever")
    time.sleep(0.3)
    assert ip.user_ns["forever"].status == "paused"
    ip.run_line_magic("stream", "resume forever")
    ip.run_line_magic("stream", "stop forever")
    assert ip.user_ns["forever"].status == "stopped"
    ip.run_line_magic("stream", "stop nosuch")
    assert "no run named 'nosuch'" in capsys.readouterr().out


def test_engine_option_validated(ip, capsys):
    ip.run_cell_magic("stream", "x --engine warp --no-display", "source clickstream(rows=1)\n")
    assert "invalid choice: 'warp'" in capsys.readouterr().out


def test_stream_sql_line_magic_over_live_tables_and_notebook_frames(ip, capsys):
    ip.run_cell_magic(
        "stream",
        "by_event --no-display --wait",
        "source clickstream(rows=3000, seed=4)\nkey_by event\nagg n=count()\n",
    )
    ip.user_ns["labels"] = pl.DataFrame({"event": ["view"], "label": ["page view"]})
    got = ip.run_line_magic("stream", "sql SELECT label, n FROM by_event JOIN labels USING (event)")
    expect = ip.user_ns["by_event"].table().filter(pl.col("event") == "view")["n"].to_list()
    assert got["label"].to_list() == ["page view"] and got["n"].to_list() == expect
    assert ip.run_line_magic("stream", "sql SELECT * FROM missing") is None
    assert "tables available" in capsys.readouterr().out


def test_cell_shows_the_dashboard(ip):
    pytest.importorskip("ipywidgets")
    ip.run_cell_magic(
        "stream", "dashed", "source clickstream(rows=2000, seed=1)\nfilter price > 10\n"
    )
    run = ip.user_ns["dashed"]
    run.wait(30)
    run.dashboard.join(10)
    assert "data-status='finished'" in run.dashboard.status.value
    ip.run_cell_magic("stream", "plain --status-line", "source clickstream(rows=200, seed=1)\n")
    from streamcell.widgets.status import StatusLine

    assert isinstance(ip.user_ns["plain"].dashboard, StatusLine)
