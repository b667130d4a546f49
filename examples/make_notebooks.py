"""Writes the example notebooks (run: python examples/make_notebooks.py)."""

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).parent


def quickstart() -> None:
    nb = new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [
        new_markdown_cell(
            "# streamcell quickstart\n\nA `%%stream` cell returns at once; the pipeline keeps "
            "running in the kernel. `sessions` becomes a handle you can query from any cell."
        ),
        new_code_cell("%load_ext streamcell\nimport polars as pl\nimport streamcell as sc"),
        new_code_cell(
            "%%stream sessions\n"
            "source clickstream(rows=50_000, users=2_000, seed=1)\n"
            'filter event == "view" and user_id.is_not_null()\n'
            "key_by user_id\n"
            'session gap="30m", time=ts\n'
            "agg pages=count(), items=count_distinct(item_id), spent=sum(price)\n"
            "sink table"
        ),
        new_markdown_cell(
            "Query the live table from another cell (a consistent Polars snapshot), "
            "or wait for the end:"
        ),
        new_code_cell(
            "sessions.wait()\nprint(sessions.status)\nsessions.table().sort('spent', descending=True).head()"
        ),
        new_markdown_cell(
            "Every row is accounted for: passed on, filtered, late (side output) or dead-lettered."
        ),
        new_code_cell("sessions.counts()"),
        new_code_cell("sessions.late().head(3)"),
        new_markdown_cell("The same pipeline from Python builds an equal plan:"),
        new_code_cell(
            "plan = (sc.source(sc.clickstream(rows=50_000, users=2_000, seed=1))\n"
            '        .filter((sc.col("event") == "view") & sc.col("user_id").is_not_null())\n'
            '        .key_by("user_id")\n'
            '        .session("30m", time="ts")\n'
            '        .agg(pages=sc.count(), items=sc.col("item_id").n_unique(), spent=sc.col("price").sum())\n'
            '        .plan("sessions"))\n'
            "assert plan == sessions.plan\n"
            "print(plan.explain())"
        ),
        new_markdown_cell("A stream that never ends, throttled, stopped from another cell:"),
        new_code_cell(
            "%%stream live\nsource clickstream(seed=2), rate=5_000\nkey_by event\nagg n=count(), revenue=sum(price)"
        ),
        new_code_cell("import time; time.sleep(1.0)\nlive.table()"),
        new_code_cell("%stream stop live\nlive.status"),
    ]
    nbformat.write(nb, HERE / "quickstart.ipynb")


if __name__ == "__main__":
    quickstart()
