"""Kernel side of the JupyterLab extension: the ``"streamcell"`` comm.

The Streams panel of the JupyterLab extension (``ext/``) opens a comm with target
``"streamcell"`` to the notebook's kernel. :func:`register_comm_target` (called by
``load_ipython_extension``) registers that target. Each opened comm is one
:class:`StreamsChannel`; it answers the documented messages below and nothing else.

Protocol
--------
Every message is a JSON object with a string ``"type"``. A request may carry an ``"id"``
(a string or an integer); the reply to it carries the same ``"id"`` so the frontend can
match them. Pushes carry no ``"id"``.

Frontend → kernel:

``{"type": "list"}``
    Reply: a ``runs`` message (below) with the current state of every run.

``{"type": "control", "action": "pause" | "resume" | "stop", "name": str}``
    Acts on the run called ``name``. ``pause`` needs a running run, ``resume`` a paused
    one, ``stop`` a running or paused one. Reply:
    ``{"type": "ack", "action": ..., "name": ..., "status": <status after the action>}``
    or ``{"type": "error", "message": str}`` (unknown run, wrong state, or the run
    refused).

``{"type": "subscribe", "interval_ms": int}``
    Sets the refresh rate of the pushes for this comm (clamped to
    [``MIN_INTERVAL_MS``, ``MAX_INTERVAL_MS``]; ``0`` turns the pushes off). Reply:
    ``{"type": "ack", "action": "subscribe", "interval_ms": <the rate in force>}``.
    A comm starts subscribed at ``DEFAULT_INTERVAL_MS``.

Kernel → frontend:

``{"type": "runs", "runs": [run, ...]}``
    The reply to ``list``, and a push every ``interval_ms`` while any run is active
    (running or paused), plus one more push whenever the set of runs or their statuses
    changed (so the frontend sees a run start, and sees its final state). Runs are listed
    in registry order. Each ``run`` is::

        {"name": str, "status": "running" | "paused" | "finished" | "stopped" | "failed",
         "rows_per_s": float | None, "p99_ms": float | None, "rows_done": int | None,
         "elapsed_s": float | None, "cell_id": str | None}

    The numbers are the run's :class:`streamcell.snapshot.MetricsSnapshot` (the same the
    dashboard shows): ``rows_per_s`` is the current rate of a live run and the average of an
    ended one, ``p99_ms`` the engine's latency (the native engine's own histogram), and
    ``rows_done`` is the run's ``rows_in`` (rows read from its sources). A number the run
    cannot report (or that is not finite) is ``None``. A run still ``starting`` is reported
    as ``running``; any other status outside the five is reported as ``failed``.

Anything else (a non-object, a missing or unknown ``type``) is ignored. A documented
``type`` with malformed fields gets an ``error`` reply. Nothing a frontend sends can raise
in the kernel: every failure is caught here and reported as an ``error`` reply or logged.

Threads: the pushes come from one daemon thread per comm, which calls ``Run.status`` and
:func:`streamcell.snapshot.metrics_snapshot` (``detail=False``) (the run registry must allow that from another thread) and
``Comm.send`` (ipykernel routes it through its IOPub thread, which is thread-safe).
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Mapping
from typing import Any

from .snapshot import metrics_snapshot

__all__ = [
    "COMM_TARGET",
    "DEFAULT_INTERVAL_MS",
    "MAX_INTERVAL_MS",
    "MIN_INTERVAL_MS",
    "StreamsChannel",
    "handle_message",
    "register_comm_target",
    "runs_message",
]

log = logging.getLogger(__name__)

COMM_TARGET = "streamcell"
DEFAULT_INTERVAL_MS = 500
MIN_INTERVAL_MS = 100
MAX_INTERVAL_MS = 10_000

ACTIVE = frozenset({"running", "paused"})
STATUSES = frozenset({"running", "paused", "finished", "stopped", "failed"})
# registry statuses outside the protocol's five, and what the frontend is told instead
_STATUS_ALIASES = {"starting": "running"}
# action -> statuses in which the action is allowed
_ALLOWED = {
    "pause": frozenset({"running"}),
    "resume": frozenset({"paused"}),
    "stop": frozenset({"running", "paused"}),
}

Registry = Mapping[str, Any]
RegistryGetter = Callable[[], Registry]
Message = dict[str, Any]


def _default_registry() -> Registry:
    from streamcell.run import registry  # the lead's run registry; imported late on purpose

    return registry()


def _number(value: Any) -> float | None:
    """A finite float, or None for anything else (None, NaN, inf, not a number)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _count(value: Any) -> int | None:
    f = _number(value)
    return None if f is None else int(f)


def _runs(registry: Registry) -> list[tuple[str, Any]]:
    """The registry's items; retried if another thread changes it while we copy it."""
    for _ in range(5):
        try:
            return [(str(name), run) for name, run in list(registry.items())]
        except RuntimeError:  # "dictionary changed size during iteration"
            continue
    return []


def run_info(name: str, run: Any) -> Message:
    """One run as the protocol's ``run`` object; never raises.

    The numbers are those of :func:`streamcell.snapshot.metrics_snapshot` (the dashboard's
    source too): on the native engine the latency is the engine's own histogram, and an
    ended run reports its average rows/s."""
    try:
        status = str(run.status)
    except Exception:
        status = "failed"
    status = _STATUS_ALIASES.get(status, status)
    info: Message = {
        "name": name,
        "status": status if status in STATUSES else "failed",
        "rows_per_s": None,
        "p99_ms": None,
        "rows_done": None,
        "elapsed_s": None,
        "cell_id": None,
    }
    try:
        snap = metrics_snapshot(run, detail=False)
    except Exception:
        log.debug("streamcell: the metrics of run %r are not available", name, exc_info=True)
        return info
    info["rows_per_s"] = _number(snap.rows_per_s)
    info["p99_ms"] = _number(snap.latency_p99_ms)
    info["rows_done"] = _count(snap.rows_in)
    info["elapsed_s"] = _number(snap.elapsed_s)
    info["cell_id"] = snap.cell_id
    return info


def runs_message(registry: Registry) -> Message:
    """The ``runs`` message for every run in ``registry``."""
    return {"type": "runs", "runs": [run_info(name, run) for name, run in _runs(registry)]}


def _error(message: str) -> Message:
    return {"type": "error", "message": message}


def _control(data: Mapping[str, Any], registry: Registry) -> Message:
    action, name = data.get("action"), data.get("name")
    if action not in _ALLOWED:
        return _error(f"control: 'action' must be one of pause, resume, stop, not {action!r}")
    if not isinstance(name, str) or not name:
        return _error("control: 'name' must be a non-empty string")
    run = dict(_runs(registry)).get(name)
    if run is None:
        return _error(f"{action}: no run named {name!r}")
    status = run_info(name, run)["status"]
    if status not in _ALLOWED[action]:
        return _error(f"cannot {action} run {name!r}: it is {status}")
    try:
        getattr(run, action)()
    except Exception as exc:  # the run refused: report it, keep the kernel alive
        return _error(f"{action} {name!r} failed: {type(exc).__name__}: {exc}")
    return {"type": "ack", "action": action, "name": name, "status": run_info(name, run)["status"]}


def clamp_interval(value: Any) -> int | None:
    """The push interval for a ``subscribe`` request, or None if ``value`` is not valid."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    if value <= 0:
        return 0
    return int(min(max(value, MIN_INTERVAL_MS), MAX_INTERVAL_MS))


def handle_message(data: Any, registry: Registry) -> Message | None:
    """The reply to one frontend message, or None when the message is to be ignored.

    ``subscribe`` is validated here but acted on by :class:`StreamsChannel`; its reply
    carries the clamped ``interval_ms``. Never raises.
    """
    if not isinstance(data, Mapping):
        return None
    kind = data.get("type")
    try:
        if kind == "list":
            reply = runs_message(registry)
        elif kind == "control":
            reply = _control(data, registry)
        elif kind == "subscribe":
            interval = clamp_interval(data.get("interval_ms"))
            if interval is None:
                reply = _error("subscribe: 'interval_ms' must be a number of milliseconds")
            else:
                reply = {"type": "ack", "action": "subscribe", "interval_ms": interval}
        else:
            return None
    except Exception as exc:  # e.g. the registry itself failed
        log.warning("streamcell: %s request failed", kind, exc_info=True)
        reply = _error(f"{kind}: {type(exc).__name__}: {exc}")
    request_id = data.get("id")
    if isinstance(request_id, (str, int)) and not isinstance(request_id, bool):
        reply["id"] = request_id
    return reply


class StreamsChannel:
    """One open ``"streamcell"`` comm: answers requests and pushes ``runs`` messages.

    ``comm`` is anything with ``send(data)``, ``on_msg(callback)`` and ``on_close(callback)``
    (an ipykernel / ``comm`` package Comm). ``registry`` is called for the current run
    registry each time it is needed. Pushes start at once, at ``interval_ms``.
    """

    def __init__(
        self,
        comm: Any,
        registry: RegistryGetter,
        interval_ms: int = DEFAULT_INTERVAL_MS,
        *,
        start: bool = True,
    ):
        self.comm = comm
        self._registry = registry
        self._interval_ms = clamp_interval(interval_ms) or 0
        self._wake = threading.Event()
        self._closed = threading.Event()
        self._last_signature: tuple[tuple[str, str], ...] | None = None
        self._thread: threading.Thread | None = None
        comm.on_msg(self._on_msg)
        comm.on_close(self._on_close)
        if start:
            self._thread = threading.Thread(
                target=self._loop, name="streamcell-comm-publisher", daemon=True
            )
            self._thread.start()

    @property
    def interval_ms(self) -> int:
        return self._interval_ms

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def handle(self, data: Any) -> Message | None:
        """Answer one message (the reply is also sent on the comm). Never raises."""
        try:
            registry = self._registry()
        except Exception as exc:
            log.warning("streamcell: the run registry is not available", exc_info=True)
            registry = {}
            if isinstance(data, Mapping) and data.get("type") in ("list", "control"):
                return self._send(_error(f"the run registry is not available: {exc}"))
        reply = handle_message(data, registry)
        if reply is None:
            return None
        if reply.get("type") == "ack" and reply.get("action") == "subscribe":
            self._interval_ms = int(reply["interval_ms"])
            self._wake.set()
        if reply.get("type") == "runs":
            self._last_signature = _signature(reply)
        return self._send(reply)

    def publish(self, force: bool = False) -> bool:
        """Push a ``runs`` message if a run is active, the runs changed, or ``force``.

        Returns whether a message was sent. Never raises.
        """
        try:
            message = runs_message(self._registry())
        except Exception:
            log.debug("streamcell: cannot read the run registry", exc_info=True)
            return False
        signature = _signature(message)
        active = any(status in ACTIVE for _, status in signature)
        if not (force or active or signature != self._last_signature):
            return False
        self._last_signature = signature
        self._send(message)
        return True

    def close(self) -> None:
        """Stop the pushes (the comm itself is closed by its owner)."""
        self._closed.set()
        self._wake.set()

    def _send(self, message: Message) -> Message:
        if not self._closed.is_set():
            try:
                self.comm.send(message)
            except Exception:
                log.debug("streamcell: comm.send failed", exc_info=True)
        return message

    def _on_msg(self, msg: Mapping[str, Any]) -> None:
        try:
            data = msg["content"]["data"]
        except (KeyError, TypeError):
            return
        self.handle(data)

    def _on_close(self, msg: Any = None) -> None:
        self.close()

    def _loop(self) -> None:
        while not self._closed.is_set():
            interval = self._interval_ms
            # when pushes are off, sleep until a subscribe (or close) wakes us
            self._wake.wait(interval / 1000 if interval else None)
            self._wake.clear()
            if not self._closed.is_set() and self._interval_ms:
                self.publish()


def _signature(message: Message) -> tuple[tuple[str, str], ...]:
    return tuple((r["name"], r["status"]) for r in message.get("runs", ()))


def register_comm_target(ipython: Any, registry: RegistryGetter | None = None) -> bool:
    """Register the ``"streamcell"`` comm target on ``ipython``'s kernel.

    Called by ``load_ipython_extension``. ``registry`` returns the run registry (default:
    ``streamcell.run.registry``); tests pass a fake. Returns False (and does nothing) when
    there is no kernel with comms, e.g. in a terminal IPython. Calling it again replaces
    the handler, so ``%reload_ext`` is harmless.
    """
    manager = _comm_manager(ipython)
    if manager is None:
        return False
    getter = registry or _default_registry

    def _open(comm: Any, open_msg: Mapping[str, Any]) -> None:
        channel = StreamsChannel(comm, getter)
        try:
            data = open_msg["content"]["data"]
        except (KeyError, TypeError):
            data = None
        if isinstance(data, Mapping) and data:  # the open message may carry a first request
            channel.handle(data)

    manager.register_target(COMM_TARGET, _open)
    return True


def _comm_manager(ipython: Any) -> Any:
    kernel = getattr(ipython, "kernel", None)
    manager = getattr(kernel, "comm_manager", None)
    if manager is not None:
        return manager
    if kernel is None:
        return None
    try:
        from comm import get_comm_manager
    except ImportError:
        return None
    return get_comm_manager()
