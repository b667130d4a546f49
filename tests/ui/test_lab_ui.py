"""The JupyterLab extension in a real browser, run from pytest.

Runs the Playwright suite (tests/ui/*.ui.ts, configured by tests/ui/playwright.config.ts)
once per session: it starts a real ``jupyter lab`` on a free port of 127.0.0.1 and drives
Debian's Chromium against it. Each pytest test below reports one Playwright test.
Screenshots, the Playwright report and its log stay under ``test-artifacts/ui/``.

Needs: ``/usr/bin/chromium`` (``apt-get install chromium``), ``jlpm install`` and the built
labextension (``jlpm build``). Without them the browser tests are skipped, except under CI
(``CI`` set), where a missing prerequisite is a failure.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "ui"
PLAYWRIGHT = ROOT / "node_modules" / ".bin" / "playwright"
LABEXTENSION = ROOT / "kernel" / "streamcell" / "labextension" / "package.json"
CHROMIUM = os.environ.get("STREAMCELL_CHROMIUM", "/usr/bin/chromium")
TIMEOUT_S = 900

HIGHLIGHT_TEST = "highlights a %%stream cell"
RUN_TEST = "runs a stream, watches it in the Streams panel and stops it"
DASHBOARD_TEST = "runs the dashboard notebook: live numbers, charts, stop button"
FINISHED_TEST = "a finished 1,000-row run shows its summary and no console errors"
THEME_TEST = "the charts follow the JupyterLab theme, light and dark"
GRID_TEST = "sorts the live grid while the run continues"
SKETCH_TEST = "shows sketches readably and names every operator once"


def _missing() -> list[str]:
    missing = []
    if not Path(CHROMIUM).exists():
        missing.append(f"Chromium at {CHROMIUM} (apt-get install chromium)")
    if not PLAYWRIGHT.exists():
        missing.append("node_modules/.bin/playwright (jlpm install)")
    if not LABEXTENSION.exists():
        missing.append("the built labextension kernel/streamcell/labextension (jlpm build)")
    return missing


def _can_run_streams() -> bool:
    return all(
        importlib.util.find_spec(m) is not None for m in ("streamcell.run", "streamcell.magic")
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _collect(suite: dict[str, Any], out: dict[str, dict[str, Any]]) -> None:
    for spec in suite.get("specs", []):
        for test in spec.get("tests", []):
            results = test.get("results") or [{}]
            last = results[-1]
            errors = [e.get("message", "") for e in last.get("errors", [])]
            out[spec["title"]] = {
                "status": last.get("status", test.get("status", "unknown")),
                "errors": errors,
                "annotations": test.get("annotations", []),
            }
    for child in suite.get("suites", []):
        _collect(child, out)


@pytest.fixture(scope="module")
def ui_results() -> dict[str, dict[str, Any]]:
    missing = _missing()
    if missing:
        message = "browser test prerequisites missing: " + "; ".join(missing)
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    shutil.rmtree(ARTIFACTS, ignore_errors=True)
    ARTIFACTS.mkdir(parents=True)
    env = dict(os.environ)
    env.update(
        STREAMCELL_PYTHON=sys.executable,
        STREAMCELL_CHROMIUM=CHROMIUM,
        STREAMCELL_UI_PORT=str(_free_port()),
        STREAMCELL_UI_ARTIFACTS=str(ARTIFACTS),
        STREAMCELL_UI_RUN="1" if _can_run_streams() else "0",
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        FORCE_COLOR="0",
    )
    cmd = [str(PLAYWRIGHT), "test", "-c", "tests/ui/playwright.config.ts"]
    start = time.monotonic()
    try:
        proc = subprocess.run(
            cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT_S
        )
        output, returncode = proc.stdout + proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as exc:
        output = f"{exc.stdout or ''}{exc.stderr or ''}\nTIMED OUT after {TIMEOUT_S}s"
        returncode = -1
    log = f"$ {' '.join(cmd)}\nexit {returncode} after {time.monotonic() - start:.0f}s\n{output}"
    (ARTIFACTS / "playwright.log").write_text(log)
    report = ARTIFACTS / "report.json"
    if not report.exists():
        pytest.fail(f"Playwright wrote no report (exit {returncode}):\n{output[-4000:]}")
    results: dict[str, dict[str, Any]] = {}
    for suite in json.loads(report.read_text()).get("suites", []):
        _collect(suite, results)
    results["_log"] = {"status": str(returncode), "errors": [output[-4000:]]}
    return results


def _check(results: dict[str, dict[str, Any]], title: str) -> dict[str, Any]:
    result = results.get(title)
    if result is None:
        pytest.fail(f"Playwright did not run {title!r}:\n{results['_log']['errors'][0]}")
    if result["status"] == "skipped":
        reasons = [a.get("description", "") for a in result["annotations"]]
        pytest.skip(f"{title}: skipped in Playwright: {'; '.join(reasons)}")
    if result["status"] != "passed":
        pytest.fail(
            f"{title}: {result['status']}\n"
            + "\n".join(result["errors"])[-6000:]
            + f"\n(screenshots and log in {ARTIFACTS})"
        )
    return result


@pytest.mark.browser
@pytest.mark.slow
def test_stream_cell_highlighting_in_lab(ui_results):
    _check(ui_results, HIGHLIGHT_TEST)
    assert (ARTIFACTS / "screenshots" / "01-highlighting.png").stat().st_size > 0
    assert (ARTIFACTS / "screenshots" / "02-panel-not-loaded.png").stat().st_size > 0


@pytest.mark.browser
@pytest.mark.slow
def test_streams_panel_run_and_stop_in_lab(ui_results):
    if not _can_run_streams():
        pytest.skip("streamcell.run / streamcell.magic are not importable yet")
    _check(ui_results, RUN_TEST)
    for name in ("03-panel-running", "04-panel-stopped"):
        assert (ARTIFACTS / "screenshots" / f"{name}.png").stat().st_size > 0


@pytest.mark.browser
@pytest.mark.slow
def test_dashboard_notebook_in_lab(ui_results):
    if not _can_run_streams():
        pytest.skip("streamcell.run / streamcell.magic are not importable yet")
    _check(ui_results, DASHBOARD_TEST)
    for name in ("05-dashboard-running", "06-dashboard-stopped"):
        assert (ARTIFACTS / "screenshots" / f"{name}.png").stat().st_size > 0


@pytest.mark.browser
@pytest.mark.slow
def test_finished_dashboard_has_summary_and_no_console_errors(ui_results):
    if not _can_run_streams():
        pytest.skip("streamcell.run / streamcell.magic are not importable yet")
    _check(ui_results, FINISHED_TEST)
    assert (ARTIFACTS / "screenshots" / "07-dashboard-finished.png").stat().st_size > 0


@pytest.mark.browser
@pytest.mark.slow
def test_dashboard_charts_follow_the_theme(ui_results):
    if not _can_run_streams():
        pytest.skip("streamcell.run / streamcell.magic are not importable yet")
    _check(ui_results, THEME_TEST)
    for name in ("08-dashboard-light", "09-dashboard-dark", "10-dashboard-stopped-summary"):
        assert (ARTIFACTS / "screenshots" / f"{name}.png").stat().st_size > 0


@pytest.mark.browser
@pytest.mark.slow
def test_live_grid_sorts_while_the_run_continues(ui_results):
    if not _can_run_streams():
        pytest.skip("streamcell.run / streamcell.magic are not importable yet")
    _check(ui_results, GRID_TEST)
    for name in ("11-grid-sorted-live", "12-grid-filtered"):
        assert (ARTIFACTS / "screenshots" / f"{name}.png").stat().st_size > 0


@pytest.mark.browser
@pytest.mark.slow
def test_sketches_are_readable_in_the_dashboard(ui_results):
    if not _can_run_streams():
        pytest.skip("streamcell.run / streamcell.magic are not importable yet")
    _check(ui_results, SKETCH_TEST)
    assert (ARTIFACTS / "screenshots" / "13-dashboard-sketches.png").stat().st_size > 0


def test_highlighted_stages_match_the_dsl():
    """ext/src/language.ts STAGES is a copy of streamcell.dsl.STAGES: keep them equal."""
    dsl = pytest.importorskip("streamcell.dsl")
    source = (ROOT / "ext" / "src" / "language.ts").read_text()
    block = re.search(r"export const STAGES = \[(.*?)\] as const;", source, re.S)
    assert block, "STAGES not found in ext/src/language.ts"
    assert re.findall(r"'(\w+)'", block.group(1)) == list(dsl.STAGES)
