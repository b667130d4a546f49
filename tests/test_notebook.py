"""Every example notebook runs headless in a real kernel (nbclient)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
WIDGET = "application/vnd.jupyter.widget-view+json"


def _check_quickstart(outputs: list[Any], text: str) -> None:
    assert "<svg" in text  # the plan is drawn under the %%stream cell
    assert WIDGET in str(outputs)  # the live dashboard
    assert "finished" in text
    assert "'stopped'" in text  # %stream stop live
    assert "aggregate#3" in text


def _check_dashboard(outputs: list[Any], text: str) -> None:
    assert WIDGET in str(outputs)
    assert "sessions" in text and "pages" in text  # the SQL join over two runs' tables
    assert "numInputRows" in text and "'stopped'" in text


def _check_sensors(outputs: list[Any], text: str) -> None:
    assert "north" in text and "south" not in text  # only the north's A runs hot
    assert "correlate#3" in text  # explain()


CHECKS = {
    "quickstart": _check_quickstart,
    "dashboard": _check_dashboard,
    "sensors": _check_sensors,
}


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.ipynb")), ids=lambda p: p.stem)
def test_example_notebook_executes(tmp_path, path):
    nb = nbformat.read(path, as_version=4)
    NotebookClient(
        nb, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    errors = [o for o in outputs if o.output_type == "error"]
    assert not errors, errors
    text = "\n".join(
        str(o.get("text", ""))
        + str(o.get("data", {}).get("text/plain", ""))
        + str(o.get("data", {}).get("text/html", ""))
        for o in outputs
    )
    CHECKS.get(path.stem, lambda o, t: None)(outputs, text)
