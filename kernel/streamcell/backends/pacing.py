"""``rate=N`` as a cap: a token bucket with a small burst, shared by every engine's driver.

Row ``i`` of a throttled source is due at ``origin + i / rate``. Where the schedule fell
behind the clock (the run was paused, the pipeline stalled, a slow source), the origin moves
forward so that no row is due more than :data:`BURST_S` of rows in the past: the source never
catches up in a burst, it goes on at ``rate`` from where it is (a bucket of
``max(1, rate * BURST_S)`` tokens, refilled at ``rate``).
"""

from __future__ import annotations

import time
from collections.abc import Callable

BURST_S = 0.05  # the bucket holds 50 ms of rows (at least one row)


class TokenBucket:
    """When row ``i`` of a source throttled to ``rate`` rows/s may enter (:meth:`due`).

    ``clock`` gives seconds (``time.monotonic`` unless the engine paces on its own clock).
    """

    def __init__(self, rate: float, clock: Callable[[], float] = time.monotonic) -> None:
        if not rate > 0:
            raise ValueError(f"rate must be positive, got {rate}")
        self.rate = rate
        self.clock = clock
        self.burst_s = max(1.0, rate * BURST_S) / rate
        self.origin = clock()

    def due(self, i: int) -> float:
        """The time (``clock``) row ``i`` (0-based, in source order) is due; at most
        ``burst_s`` in the past, so what was missed is not made up."""
        at = self.origin + i / self.rate
        behind = self.clock() - at - self.burst_s
        if behind > 0:  # a pause or a stall: the schedule restarts from now (less the burst)
            self.origin += behind
            at += behind
        return at

    def wait(self, i: int) -> None:
        """Sleep until row ``i`` is due."""
        delay = self.due(i) - self.clock()
        if delay > 0:
            time.sleep(delay)
