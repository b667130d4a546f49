"""The example notebook runs headless in a real kernel (nbclient)."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbclient import NotebookClient

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_quickstart_notebook_executes(tmp_path):
    nb = nbformat.read(EXAMPLES / "quickstart.ipynb", as_version=4)
    NotebookClient(
        nb, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "\n".join(
        str(o.get("text", ""))
        + str(o.get("data", {}).get("text/plain", ""))
        + str(o.get("data", {}).get("text/html", ""))
        for o in outputs
    )
    assert "<svg" in text  # the plan is drawn under the %%stream cell
    assert "streamcell-status" in text  # the live status line
    assert "finished" in text
    assert "'stopped'" in text  # %stream stop live
    assert "aggregate#3" in text
