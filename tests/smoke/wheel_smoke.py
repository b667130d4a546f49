"""Smoke test of an installed streamcell: a wheel, or an install from the sdist.

Run it with the environment's Python from outside the source tree (its folder, not the
repository root, goes on ``sys.path``)::

    python tests/smoke/wheel_smoke.py

It checks, failing loudly at the first problem: the package imports from site-packages (not
a checkout); every native extension imports; ``%load_ext streamcell`` works in an IPython
``InteractiveShell``; a ``%%stream`` cell runs on the native engine and a Python-API pipeline
runs on the native engine at 2 workers, both equal to the reference engine's result; a
displayed cell shows the live dashboard and its charts load (ipywidgets, streamcell's
chart widget, vl-convert's offline bundle); the prebuilt labextension is installed with the
package's version. cibuildwheel runs it on every
wheel (``test-command``), ``make dist`` on the wheel and on the sdist, and the slow tier's
lowest-direct install check at the dependency floors.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

# The compiled extensions (hatch_build.EXTENSIONS): all must import from an installed wheel.
EXTENSIONS = ("_native", "_runtime", "_theta", "_hll", "_kll", "_frequent")

CELL = """\
source clickstream(rows=10_000, users=1_000, seed=7)
filter event == "view"
key_by user_id
agg views=count(), spent=sum(price)
sink table
"""


def check(ok: object, what: str) -> None:
    if not ok:
        raise SystemExit(f"wheel smoke FAILED: {what}")
    print(f"ok  {what}")


def main() -> None:
    t0 = time.monotonic()
    vega_cache = tempfile.mkdtemp(prefix="streamcell-smoke-vega-")
    os.environ["STREAMCELL_VEGA_CACHE"] = vega_cache  # build the bundle, leave no trace
    import importlib

    import streamcell as sc

    where = Path(sc.__file__).resolve()
    check(
        {"site-packages", "dist-packages"} & set(where.parts),
        f"streamcell {sc.__version__} imports from an installed location ({where.parent})",
    )
    for name in EXTENSIONS:
        mod = importlib.import_module(f"streamcell.{name}")
        check(Path(mod.__file__ or "").suffix in (".so", ".pyd"), f"native extension {name}")
    check((where.parent / "py.typed").is_file(), "py.typed ships")

    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "streamcell")
    check(
        "stream" in shell.magics_manager.magics["cell"], "%load_ext streamcell registers %%stream"
    )

    shell.run_cell_magic("stream", "smoke_native --engine native --no-display --wait", CELL)
    shell.run_cell_magic("stream", "smoke_ref --engine reference --no-display --wait", CELL)
    native, ref = shell.user_ns.get("smoke_native"), shell.user_ns.get("smoke_ref")
    check(native is not None and ref is not None, "%%stream cells bound their runs")
    check(
        native.status == "finished" and native.engine == "native", "a %%stream cell ran on native"
    )
    got, want = (r.table().sort("user_id") for r in (native, ref))
    check(want.height > 0 and got.equals(want), f"native cell == reference ({want.height} keys)")

    # The dashboard as a notebook shows it: ipywidgets, then streamcell's chart widget (anywidget)
    # with the offline Vega bundle vl-convert builds (into a temporary cache here).
    # throttled to ~1.5 s: a chart draws once it has two samples in time (4 Hz)
    dash_cell = CELL.replace("seed=7)", "seed=7), rate=2_000", 1).replace("10_000", "3_000", 1)
    shell.run_cell_magic("stream", "smoke_dash --engine native --wait", dash_cell)
    dash = getattr(shell.user_ns.get("smoke_dash"), "dashboard", None)
    check(type(dash).__name__ == "Dashboard", "a displayed cell shows the live dashboard")
    from streamcell.widgets import charts

    check(charts.wait(300), f"the charts load (vl-convert bundle): {charts.error()!r}")
    dash.join(60)
    check(dash.throughput is not None, "the dashboard attached its charts")

    def plan():  # noqa: ANN202 - a fresh plan per engine
        return (
            sc.source(sc.clickstream(rows=10_000, users=1_000, seed=3))
            .filter(sc.col("price") > 10)
            .key_by("user_id")
            .agg(n=sc.count(), total=sc.col("price").sum())
        )

    run = plan().start("smoke_api", engine="native", workers=2).wait(60)
    check(
        run.status == "finished" and run.engine == "native", "Python API run on native, 2 workers"
    )
    ref_run = plan().start("smoke_api_ref", engine="reference").wait(60)
    got, want = (r.table().sort("user_id") for r in (run, ref_run))
    check(want.height > 0 and got.equals(want), f"native API run == reference ({want.height} keys)")

    ext = Path(sys.prefix, "share", "jupyter", "labextensions", "streamcell")
    check((ext / "package.json").is_file(), f"labextension installed in {ext}")
    import json

    meta = json.loads((ext / "package.json").read_text(encoding="utf-8"))
    check(meta.get("version") == sc.__version__, "labextension version == package version")
    shell.run_line_magic("unload_ext", "streamcell")
    shutil.rmtree(vega_cache, ignore_errors=True)
    print(f"wheel smoke passed in {time.monotonic() - t0:.1f} s")


if __name__ == "__main__":
    main()
