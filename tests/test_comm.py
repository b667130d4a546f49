"""The kernel side of the Streams panel: the "streamcell" comm (streamcell.comm).

Unit tests drive the message handling against a small fake run registry; the last tests
open the comm on a real ipykernel through jupyter_client, as JupyterLab does.
"""

from __future__ import annotations

import math
import queue
import textwrap
import threading
import time
import uuid
from typing import Any

import pytest

from streamcell import comm as sc_comm
from streamcell.comm import (
    COMM_TARGET,
    DEFAULT_INTERVAL_MS,
    MAX_INTERVAL_MS,
    MIN_INTERVAL_MS,
    StreamsChannel,
    handle_message,
    register_comm_target,
    runs_message,
)

RUN_KEYS = {"name", "status", "rows_per_s", "p99_ms", "rows_done", "elapsed_s", "cell_id"}


class FakeRun:
    """The Run API of streamcell.run, reduced to what the comm uses."""

    def __init__(self, name: str, status: str = "running", rows_in: int = 0, **progress: Any):
        self.name = name
        self.status = status
        self.calls: list[str] = []
        self._progress = {
            "rows_in": rows_in,
            "rows_out": rows_in,
            "rows_per_s": 1000.0,
            "p99_ms": 2.5,
            "elapsed_s": 1.0,
            "cell_id": f"cell-{name}",
        }
        self._progress.update(progress)

    def progress(self) -> dict[str, Any]:
        return dict(self._progress)

    def pause(self) -> None:
        self.calls.append("pause")
        self.status = "paused"

    def resume(self) -> None:
        self.calls.append("resume")
        self.status = "running"

    def stop(self) -> None:
        self.calls.append("stop")
        self.status = "stopped"


class FakeComm:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.msg_cb: Any = None
        self.close_cb: Any = None

    def send(self, data: dict[str, Any]) -> None:
        self.sent.append(data)

    def on_msg(self, cb: Any) -> None:
        self.msg_cb = cb

    def on_close(self, cb: Any) -> None:
        self.close_cb = cb

    def deliver(self, data: Any) -> None:
        self.msg_cb({"content": {"comm_id": "x", "data": data}})


@pytest.fixture
def registry() -> dict[str, FakeRun]:
    return {
        "clicks": FakeRun("clicks", "running", rows_in=1234),
        "old": FakeRun("old", "finished", rows_in=10, rows_per_s=None, p99_ms=None),
    }


# ---------------------------------------------------------------- list


def test_list_reports_every_run_in_registry_order(registry):
    reply = handle_message({"type": "list"}, registry)
    assert reply is not None and reply["type"] == "runs"
    assert [r["name"] for r in reply["runs"]] == ["clicks", "old"]
    clicks = reply["runs"][0]
    assert set(clicks) == RUN_KEYS
    assert clicks == {
        "name": "clicks",
        "status": "running",
        "rows_per_s": 1000.0,
        "p99_ms": 2.5,
        "rows_done": 1234,
        "elapsed_s": 1.0,
        "cell_id": "cell-clicks",
    }
    # an ended run reports its average rate (10 rows in 1 s), not the zero of a stopped source
    assert reply["runs"][1]["p99_ms"] is None and reply["runs"][1]["rows_per_s"] == 10.0


def test_list_of_empty_registry():
    assert handle_message({"type": "list"}, {}) == {"type": "runs", "runs": []}


def test_reply_echoes_request_id(registry):
    assert handle_message({"type": "list", "id": 7}, registry)["id"] == 7
    assert handle_message({"type": "list", "id": "a"}, registry)["id"] == "a"
    assert "id" not in handle_message({"type": "list", "id": [1]}, registry)
    assert "id" not in handle_message({"type": "list", "id": True}, registry)


def test_unreportable_numbers_become_none():
    # a rate or latency that is not a finite number is unknown: null
    run = FakeRun("x", rows_per_s=math.inf, p99_ms="fast", elapsed_s=math.nan, cell_id=42)
    info = runs_message({"x": run})["runs"][0]
    assert info["rows_done"] == 0 and info["status"] == "running"
    assert info["rows_per_s"] is None
    assert info["p99_ms"] is None
    assert info["elapsed_s"] is None
    assert info["cell_id"] is None
    # a row count that is not a number: the run is listed, with no numbers at all
    run = FakeRun("x", rows_in=float("nan"))
    info = runs_message({"x": run})["runs"][0]
    assert info["rows_done"] is None
    assert info["rows_per_s"] is None
    assert info["p99_ms"] is None
    assert info["elapsed_s"] is None
    assert info["cell_id"] is None


def test_a_run_whose_progress_raises_is_still_listed():
    class Broken(FakeRun):
        def progress(self):
            raise RuntimeError("boom")

    info = runs_message({"b": Broken("b")})["runs"][0]
    assert info["name"] == "b" and info["status"] == "running" and info["rows_done"] is None


def test_starting_run_is_reported_as_running():
    assert runs_message({"s": FakeRun("s", status="starting")})["runs"][0]["status"] == "running"


def test_unknown_status_is_reported_as_failed():
    assert runs_message({"w": FakeRun("w", status="weird")})["runs"][0]["status"] == "failed"


def test_registry_that_raises_gives_error_reply():
    class Bad(dict):
        def items(self):
            raise ValueError("registry broken")

    reply = handle_message({"type": "list"}, Bad())
    assert reply["type"] == "error" and "registry broken" in reply["message"]


# ---------------------------------------------------------------- control


@pytest.mark.parametrize(
    ("action", "before", "after"),
    [
        ("pause", "running", "paused"),
        ("resume", "paused", "running"),
        ("stop", "running", "stopped"),
        ("stop", "paused", "stopped"),
    ],
)
def test_control_acts_on_a_known_run(action, before, after):
    run = FakeRun("r", before)
    reply = handle_message({"type": "control", "action": action, "name": "r", "id": 3}, {"r": run})
    assert reply == {"type": "ack", "action": action, "name": "r", "status": after, "id": 3}
    assert run.calls == [action]


@pytest.mark.parametrize(
    ("action", "status"),
    [
        ("pause", "paused"),
        ("resume", "running"),
        ("stop", "finished"),
        ("stop", "stopped"),
        ("pause", "failed"),
    ],
)
def test_control_in_the_wrong_state_is_an_error_and_does_nothing(action, status):
    run = FakeRun("r", status)
    reply = handle_message({"type": "control", "action": action, "name": "r"}, {"r": run})
    assert reply["type"] == "error" and status in reply["message"]
    assert run.calls == []


def test_control_of_unknown_run_is_an_error(registry):
    reply = handle_message({"type": "control", "action": "stop", "name": "nope"}, registry)
    assert reply["type"] == "error" and "nope" in reply["message"]
    assert all(run.calls == [] for run in registry.values())


@pytest.mark.parametrize(
    "msg",
    [
        {"type": "control", "action": "delete", "name": "clicks"},
        {"type": "control", "action": "__init__", "name": "clicks"},
        {"type": "control", "action": None, "name": "clicks"},
        {"type": "control", "action": "stop"},
        {"type": "control", "action": "stop", "name": ""},
        {"type": "control", "action": "stop", "name": ["clicks"]},
        {"type": "control", "action": ["stop"], "name": "clicks"},
    ],
)
def test_malformed_control_is_an_error(registry, msg):
    reply = handle_message(msg, registry)
    assert reply["type"] == "error"
    assert all(run.calls == [] for run in registry.values())


def test_a_run_that_refuses_gives_error_reply():
    class Stubborn(FakeRun):
        def stop(self):
            raise RuntimeError("cannot stop now")

    reply = handle_message({"type": "control", "action": "stop", "name": "s"}, {"s": Stubborn("s")})
    assert reply["type"] == "error" and "cannot stop now" in reply["message"]


# ---------------------------------------------------------------- subscribe / ignored


@pytest.mark.parametrize(
    ("asked", "got"),
    [(250, 250), (1, MIN_INTERVAL_MS), (10**9, MAX_INTERVAL_MS), (0, 0), (-5, 0), (333.7, 333)],
)
def test_subscribe_clamps_the_interval(asked, got):
    assert handle_message({"type": "subscribe", "interval_ms": asked}, {}) == {
        "type": "ack",
        "action": "subscribe",
        "interval_ms": got,
    }


@pytest.mark.parametrize("bad", [None, "100", True, float("nan"), [100]])
def test_subscribe_with_bad_interval_is_an_error(bad):
    assert handle_message({"type": "subscribe", "interval_ms": bad}, {})["type"] == "error"


@pytest.mark.parametrize(
    "msg",
    [
        None,
        1,
        "list",
        ["list"],
        {},
        {"type": None},
        {"type": "eval", "code": "1/0"},
        {"type": "LIST"},
        {"kind": "list"},
        {"type": ["list"]},
    ],
)
def test_unknown_or_malformed_messages_are_ignored(registry, msg):
    assert handle_message(msg, registry) is None
    assert all(run.calls == [] for run in registry.values())


# ---------------------------------------------------------------- the channel (one comm)


def test_channel_answers_on_the_comm(registry):
    comm = FakeComm()
    channel = StreamsChannel(comm, lambda: registry, start=False)
    comm.deliver({"type": "list", "id": 1})
    comm.deliver({"type": "control", "action": "pause", "name": "clicks", "id": 2})
    comm.deliver({"type": "nonsense"})
    comm.msg_cb({"content": None})  # malformed envelope: ignored
    comm.msg_cb("garbage")
    assert [m["type"] for m in comm.sent] == ["runs", "ack"]
    assert registry["clicks"].status == "paused"
    assert channel.interval_ms == DEFAULT_INTERVAL_MS


def test_channel_subscribe_changes_the_interval(registry):
    comm = FakeComm()
    channel = StreamsChannel(comm, lambda: registry, start=False)
    comm.deliver({"type": "subscribe", "interval_ms": 200})
    assert channel.interval_ms == 200 and comm.sent[-1]["interval_ms"] == 200


def test_publish_pushes_while_active_and_once_after(registry):
    comm = FakeComm()
    channel = StreamsChannel(comm, lambda: registry, start=False)
    assert channel.publish() and channel.publish()  # a run is running: every tick pushes
    registry["clicks"].status = "finished"
    assert channel.publish()  # the final state is pushed once
    assert not channel.publish() and not channel.publish()
    registry["new"] = FakeRun("new", "finished")
    assert channel.publish()  # a new run appeared
    assert not channel.publish()
    assert channel.publish(force=True)
    assert all(m["type"] == "runs" for m in comm.sent) and len(comm.sent) == 5


def test_channel_survives_a_registry_getter_that_raises():
    comm = FakeComm()

    def getter():
        raise ImportError("streamcell.run is not there")

    channel = StreamsChannel(comm, getter, start=False)
    comm.deliver({"type": "list"})
    assert comm.sent[-1]["type"] == "error"
    assert channel.publish() is False


def test_closed_channel_sends_nothing(registry):
    comm = FakeComm()
    channel = StreamsChannel(comm, lambda: registry, start=False)
    comm.close_cb({})
    assert channel.closed
    comm.deliver({"type": "list"})
    channel.publish(force=True)
    assert comm.sent == []


def test_publisher_thread_pushes_at_the_interval_and_stops_on_close(registry):
    comm = FakeComm()
    channel = StreamsChannel(comm, lambda: registry, interval_ms=MIN_INTERVAL_MS)
    deadline = time.monotonic() + 10
    while len(comm.sent) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(comm.sent) >= 3 and comm.sent[0]["type"] == "runs"
    comm.close_cb({})
    channel._thread.join(timeout=5)
    assert not channel._thread.is_alive()


def test_publisher_thread_sleeps_when_unsubscribed(registry):
    comm = FakeComm()
    channel = StreamsChannel(comm, lambda: registry, interval_ms=MIN_INTERVAL_MS)
    comm.deliver({"type": "subscribe", "interval_ms": 0})
    time.sleep(0.05)
    n = len(comm.sent)
    time.sleep(0.4)
    assert len(comm.sent) == n  # no pushes while the interval is 0
    comm.deliver({"type": "subscribe", "interval_ms": MIN_INTERVAL_MS})
    deadline = time.monotonic() + 10
    while len(comm.sent) < n + 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(comm.sent) >= n + 3
    channel.close()
    channel._thread.join(timeout=5)
    assert not channel._thread.is_alive()


def test_registry_changing_during_iteration_is_retried():
    class Flaky(dict):
        calls = 0

        def items(self):
            Flaky.calls += 1
            if Flaky.calls == 1:
                raise RuntimeError("dictionary changed size during iteration")
            return super().items()

    reply = handle_message({"type": "list"}, Flaky(a=FakeRun("a")))
    assert [r["name"] for r in reply["runs"]] == ["a"]


# ---------------------------------------------------------------- registration


class FakeManager:
    def __init__(self) -> None:
        self.targets: dict[str, Any] = {}

    def register_target(self, name: str, fn: Any) -> None:
        self.targets[name] = fn


class FakeShell:
    def __init__(self) -> None:
        self.kernel = type("K", (), {"comm_manager": FakeManager()})()


def test_register_comm_target_opens_channels(registry):
    shell = FakeShell()
    assert register_comm_target(shell, registry=lambda: registry)
    opener = shell.kernel.comm_manager.targets[COMM_TARGET]
    comm = FakeComm()
    opener(comm, {"content": {"data": {"type": "list", "id": "first"}}})
    assert comm.sent[0]["type"] == "runs" and comm.sent[0]["id"] == "first"
    comm.close_cb({})


def test_register_without_a_kernel_does_nothing():
    assert register_comm_target(object()) is False


def test_default_registry_is_streamcell_run(monkeypatch):
    import sys
    import types

    fake = types.ModuleType("streamcell.run")
    fake.registry = lambda: {"z": FakeRun("z")}  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "streamcell.run", fake)
    assert [r["name"] for r in runs_message(sc_comm._default_registry())["runs"]] == ["z"]


# ---------------------------------------------------------------- through a real kernel

KERNEL_SETUP = textwrap.dedent(
    """
    class _Run:
        def __init__(self, name, status):
            self.name, self.status, self.n = name, status, 0
        def progress(self):
            self.n += 100
            return {"rows_in": self.n, "rows_out": self.n, "rows_per_s": 5000.0,
                    "p99_ms": 1.5, "elapsed_s": 0.5, "cell_id": "c1"}
        def pause(self): self.status = "paused"
        def resume(self): self.status = "running"
        def stop(self): self.status = "stopped"

    _SC_REG = {"live": _Run("live", "running"), "done": _Run("done", "finished")}
    from streamcell.comm import register_comm_target
    assert register_comm_target(get_ipython(), registry=lambda: _SC_REG)
    """
)


@pytest.fixture(scope="module")
def kernel():
    jupyter_client = pytest.importorskip("jupyter_client")
    km, kc = jupyter_client.manager.start_new_kernel(kernel_name="python3")
    try:
        reply = kc.execute_interactive(KERNEL_SETUP, timeout=60)
        assert reply["content"]["status"] == "ok", reply["content"]
        yield kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


class CommClient:
    """A frontend's end of one comm, over jupyter_client's raw channels."""

    def __init__(self, kc: Any, data: Any = None) -> None:
        self.kc = kc
        self.comm_id = uuid.uuid4().hex
        self.closed = threading.Event()
        self._send(
            "comm_open", {"comm_id": self.comm_id, "target_name": COMM_TARGET, "data": data or {}}
        )

    def _send(self, msg_type: str, content: dict[str, Any]) -> None:
        self.kc.shell_channel.send(self.kc.session.msg(msg_type, content))

    def send(self, data: Any) -> None:
        self._send("comm_msg", {"comm_id": self.comm_id, "data": data})

    def close(self) -> None:
        self._send("comm_close", {"comm_id": self.comm_id, "data": {}})

    def next_data(self, timeout: float) -> dict[str, Any] | None:
        """The next comm_msg payload for this comm, or None if none came in ``timeout``."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                msg = self.kc.get_iopub_msg(timeout=left)
            except queue.Empty:
                return None
            content = msg["content"]
            if content.get("comm_id") != self.comm_id:
                continue
            if msg["msg_type"] == "comm_msg":
                return content["data"]
            if msg["msg_type"] == "comm_close":
                self.closed.set()
        return None

    def wait_for(self, pred: Any, timeout: float = 30) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            data = self.next_data(left)
            if data is not None and pred(data):
                return data
        raise AssertionError("no matching comm message within the timeout")


def test_real_kernel_list_control_and_pushes(kernel):
    client = CommClient(kernel, {"type": "subscribe", "interval_ms": 150})
    client.wait_for(lambda d: d.get("type") == "ack" and d.get("interval_ms") == 150)
    client.send({"type": "list", "id": "L"})
    runs = client.wait_for(lambda d: d.get("id") == "L")
    assert [r["name"] for r in runs["runs"]] == ["live", "done"]
    assert set(runs["runs"][0]) == RUN_KEYS

    # pushes keep coming while "live" runs, with rising rows_done
    first = client.wait_for(lambda d: d.get("type") == "runs" and "id" not in d)
    later = client.wait_for(lambda d: d.get("type") == "runs" and "id" not in d)
    assert later["runs"][0]["rows_done"] > first["runs"][0]["rows_done"]

    client.send({"type": "control", "action": "stop", "name": "live", "id": 9})
    ack = client.wait_for(lambda d: d.get("id") == 9)
    assert ack == {"type": "ack", "action": "stop", "name": "live", "status": "stopped", "id": 9}
    client.send({"type": "control", "action": "stop", "name": "ghost", "id": 10})
    assert client.wait_for(lambda d: d.get("id") == 10)["type"] == "error"
    client.close()


def test_real_kernel_survives_garbage(kernel):
    client = CommClient(kernel)
    for junk in [
        None,
        5,
        "x",
        [1, 2],
        {"type": "exec", "code": "import os"},
        {"type": "control", "action": "stop"},
        {"type": "subscribe"},
    ]:
        client.send(junk)
    client.send({"type": "list", "id": "after"})
    assert client.wait_for(lambda d: d.get("id") == "after")["type"] == "runs"
    client.close()
    reply = kernel.execute_interactive("assert 1 + 1 == 2", timeout=30)
    assert reply["content"]["status"] == "ok"


def test_real_kernel_closes_comm_to_unknown_target(kernel):
    """What the frontend sees before %load_ext streamcell: the comm is closed at once."""
    comm_id = uuid.uuid4().hex
    kernel.shell_channel.send(
        kernel.session.msg(
            "comm_open", {"comm_id": comm_id, "target_name": "not-streamcell", "data": {}}
        )
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            msg = kernel.get_iopub_msg(timeout=0.5)
        except queue.Empty:
            continue
        if msg["msg_type"] == "comm_close" and msg["content"].get("comm_id") == comm_id:
            return
    raise AssertionError("the kernel did not close a comm to an unknown target")
