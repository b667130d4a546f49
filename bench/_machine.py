"""What the machine was doing while a bench ran: wall time, this process's CPU time, and the
load from everything else (shared by the paper-claim benches: entities, speculate, sketch).

``Window()`` is a context manager that samples, before and after the block,
``time.perf_counter``, this process's CPU time (``os.times``: user + system, all threads) and
``/proc/stat`` (busy jiffies of the whole machine). The outside load is the machine's busy
core-seconds minus this process's, divided by the wall time: 0.0 means nobody else ran, 1.0
means another process kept one core busy throughout. ``os.getloadavg()`` is recorded before
and after as well (a 1-minute average, so it lags).

``timed(fn, repeat)`` runs ``fn`` ``repeat`` times and returns the median wall seconds, the
median CPU seconds and the ``Window`` around all of it.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from typing import Any


def _proc_stat() -> tuple[float, float] | None:
    """(busy, total) seconds of all cores since boot, or None off Linux."""
    try:
        with open("/proc/stat") as f:
            parts = f.readline().split()
    except OSError:
        return None
    v = [int(x) for x in parts[1:]]
    idle = v[3] + (v[4] if len(v) > 4 else 0)  # idle + iowait
    hz = os.sysconf("SC_CLK_TCK")
    total = sum(v[:8])  # guest time is already counted in user
    return (total - idle) / hz, total / hz


def _cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class Window:
    def __init__(self) -> None:
        self.cores = os.cpu_count() or 1

    def __enter__(self) -> Window:
        self.load0 = os.getloadavg()
        self.stat0 = _proc_stat()
        self.cpu0 = _cpu()
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.wall = time.perf_counter() - self.t0
        self.cpu = _cpu() - self.cpu0
        stat1 = _proc_stat()
        self.load1 = os.getloadavg()
        self.outside: float | None = None
        if self.stat0 and stat1 and self.wall > 0:
            busy = stat1[0] - self.stat0[0]
            self.outside = max(0.0, (busy - self.cpu) / self.wall)

    def line(self) -> str:
        """One line for the bench's output."""
        out = "n/a" if self.outside is None else f"{self.outside:.2f} cores"
        return (
            f"machine: {self.cores} cores; outside load during the run {out} "
            f"(/proc/stat busy minus this process); loadavg(1 min) "
            f"{self.load0[0]:.2f} before, {self.load1[0]:.2f} after; "
            f"this process {self.cpu:.1f} s CPU in {self.wall:.1f} s wall"
        )

    @property
    def noisy(self) -> bool:
        """Another process took a noticeable share of the cores during the run."""
        return self.outside is not None and self.outside > 0.25 * self.cores


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, float, Window]:
    """Median wall seconds, median CPU seconds of ``fn()`` over ``repeat`` runs."""
    walls, cpus = [], []
    with Window() as w:
        for _ in range(repeat):
            c0, t0 = _cpu(), time.perf_counter()
            fn()
            walls.append(time.perf_counter() - t0)
            cpus.append(_cpu() - c0)
    return statistics.median(walls), statistics.median(cpus), w


def verdict(ok: bool | None, w: Window | None = None) -> str:
    """'yes' / 'NO' / '-' for a target, with a note when the machine was loaded."""
    if ok is None:
        return "-"
    if ok:
        return "yes"
    return "NO (not reproduced here" + ("; machine loaded)" if w is not None and w.noisy else ")")
