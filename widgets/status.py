"""The simple live status line a ``%%stream`` cell shows (the full dashboard comes later).

A background thread refreshes an IPython display handle a few times per second until the
run ends, then shows the final state once more. Safe from threads with ipykernel >= 7.1.
"""

from __future__ import annotations

import html
import threading
from typing import Any

_COLORS = {
    "running": "#2e7d32",
    "paused": "#f9a825",
    "finished": "#1565c0",
    "stopped": "#6d4c41",
    "failed": "#c62828",
    "starting": "#757575",
}


def _fmt_rate(r: float) -> str:
    if r >= 1e6:
        return f"{r / 1e6:.2f}M"
    if r >= 1e3:
        return f"{r / 1e3:.1f}K"
    return f"{r:.0f}"


def status_text(run: Any) -> str:
    p = run.progress()
    parts = [p["status"], f"{p['rows_in']:,} rows in", f"{p['rows_out']:,} out"]
    if p["status"] in ("running", "paused"):
        parts.append(f"{_fmt_rate(p['rows_per_s'])} rows/s")
    parts.append(f"{p['elapsed_s']:.1f} s")
    if p["late"]:
        parts.append(f"{p['late']:,} late")
    if p["dead"]:
        parts.append(f"{p['dead']:,} dead-lettered")
    return " · ".join(parts)


def status_html(run: Any) -> str:
    color = _COLORS.get(run.status, "#757575")
    text = html.escape(f"{run.name}: {status_text(run)}")
    err = ""
    if run.status == "failed" and run.error is not None:
        err = f"<div style='color:#c62828'>{html.escape(type(run.error).__name__ + ': ' + str(run.error))}</div>"
    return (
        f"<div class='streamcell-status' data-status='{run.status}' style='font-family:monospace'>"
        f"<span style='color:{color}'>●</span> {text}{err}</div>"
    )


class StatusLine:
    """Shows ``status_html(run)`` and keeps it updated while the run is live."""

    def __init__(self, run: Any, interval: float = 0.25):
        from IPython.display import HTML, display

        self.run = run
        self.interval = interval
        self._HTML = HTML
        self.handle = display(HTML(status_html(run)), display_id=True)
        self._thread = threading.Thread(
            target=self._loop, name=f"streamcell-status-{run.name}", daemon=True
        )
        self._thread.start()

    def _loop(self) -> None:
        while not self.run.done():
            self.run._done.wait(self.interval)
            self._update()
        self._update()

    def _update(self) -> None:
        if self.handle is not None:
            self.handle.update(self._HTML(status_html(self.run)))
