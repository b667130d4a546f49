"""A real Spark standalone cluster on 127.0.0.1 for the tests: one master and N workers, each
a separate JVM started by PySpark's own launcher (``$SPARK_HOME/bin/spark-class``), with
SPARK_HOME = the installed pyspark package.

:class:`StandaloneCluster` starts them, waits until every worker has registered with the
master (the master's JSON status page), and stops them by the ids of the processes it
started. Each JVM is started as the leader of its own process group; ``stop`` signals the
groups, then checks ``/proc`` until none of the processes below the JVMs (the executors a
worker launched, their Python daemons and workers) is left, killing what outlives a timeout.

The workers get ``PYSPARK_PYTHON`` = this interpreter and ``PYTHONPATH`` = the directory
streamcell is imported from plus the repository root, so the executors' Python workers import
this checkout's streamcell (an in-place build) and the tests' own modules, as a cluster
whose nodes have streamcell installed would.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import streamcell

REPO = Path(__file__).resolve().parents[2]


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the process that started it dies (Linux
    ``PR_SET_PDEATHSIG``, kept across exec), so a test run killed without its teardown
    (a CI timeout) leaves no JVM behind; the worker's shutdown hook stops its executors."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spark_home() -> str:
    import pyspark

    return os.path.dirname(os.path.abspath(pyspark.__file__))


def _stat(pid: int) -> list[str] | None:
    """Fields of /proc/PID/stat after the command name (state, ppid, pgrp, ...), or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2 :].split()


def _processes() -> dict[int, tuple[int, str]]:
    """Live processes (not zombies): pid -> (parent pid, start time)."""
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            f = _stat(int(entry))
            if f is not None and f[0] != "Z":
                out[int(entry)] = (int(f[1]), f[19])
    return out


def descendants(roots: set[int]) -> dict[int, str]:
    """Every live process below ``roots`` (roots included): pid -> start time."""
    procs = _processes()
    found = {p: procs[p][1] for p in roots if p in procs}
    grew = True
    while grew:
        grew = False
        for pid, (ppid, start) in procs.items():
            if ppid in found and pid not in found:
                found[pid] = start
                grew = True
    return found


def ancestors(pid: int) -> list[int]:
    """The parent chain of ``pid``, nearest first."""
    out = []
    while True:
        f = _stat(pid)
        if f is None or int(f[1]) <= 1:
            return out
        pid = int(f[1])
        out.append(pid)


def _still_alive(seen: dict[int, str]) -> list[int]:
    procs = _processes()
    return [p for p, start in seen.items() if p in procs and procs[p][1] == start]


class StandaloneCluster:
    """A standalone master and ``workers`` workers (``cores`` cores, ``memory`` each)."""

    def __init__(
        self, workers: int = 2, cores: int = 1, memory: str = "1g", with_streamcell: bool = True
    ) -> None:
        """``with_streamcell=False``: the nodes' PYTHONPATH lacks this checkout (streamcell
        must then be shipped to the executors, e.g. with ``spark.archives``)."""
        self.n_workers, self.cores, self.memory = workers, cores, memory
        self.with_streamcell = with_streamcell
        self.dir = Path(tempfile.mkdtemp(prefix="streamcell-cluster-"))
        self.procs: list[subprocess.Popen[bytes]] = []
        self.port = free_port()
        self.webui = free_port()
        self.master_url = f"spark://127.0.0.1:{self.port}"

    # ----------------------------------------------------------------- environment
    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        kernel = os.path.dirname(os.path.dirname(os.path.abspath(streamcell.__file__)))
        path = [kernel, str(REPO)] if self.with_streamcell else []
        path += [p for p in env.get("PYTHONPATH", "").split(":") if p and p != kernel]
        env.update(
            SPARK_HOME=spark_home(),
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_LOG_DIR=str(self.dir / "logs"),
            SPARK_WORKER_DIR=str(self.dir / "work"),
            SPARK_DAEMON_MEMORY="256m",
            PYSPARK_PYTHON=sys.executable,
            PYTHONPATH=":".join(dict.fromkeys(path)),
        )
        if not path:
            del env["PYTHONPATH"]
        return env

    def session_conf(self) -> dict[str, str]:
        """What a session on this cluster asks for: one 1-core executor per worker."""
        return {
            "spark.executor.cores": str(self.cores),
            "spark.cores.max": str(self.cores * self.n_workers),
            "spark.executor.memory": "768m",
            "spark.driver.host": "127.0.0.1",
        }

    def _launch(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        log = open(self.dir / f"{name}.log", "wb")  # noqa: SIM115 - the child owns it
        cmd = [os.path.join(spark_home(), "bin", "spark-class"), *args]
        p = subprocess.Popen(
            cmd,
            env=self.env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: the worker's executors too
            preexec_fn=_die_with_parent,
            cwd=self.dir,
        )
        log.close()
        self.procs.append(p)
        return p

    # ----------------------------------------------------------------- lifecycle
    def start(self, timeout: float = 180.0) -> StandaloneCluster:
        try:
            self._launch(
                "master",
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--webui-port",
                str(self.webui),
            )
            self._wait(lambda st: st.get("status") == "ALIVE", timeout, "the master")
            for i in range(self.n_workers):
                self._launch(
                    f"worker{i}",
                    "org.apache.spark.deploy.worker.Worker",
                    self.master_url,
                    "--cores",
                    str(self.cores),
                    "--memory",
                    self.memory,
                    "--host",
                    "127.0.0.1",
                    "--webui-port",
                    str(free_port()),
                    "--work-dir",
                    str(self.dir / f"work{i}"),
                )
            self._wait(
                lambda st: len(self.alive_workers(st)) == self.n_workers,
                timeout,
                f"{self.n_workers} workers",
            )
        except BaseException:
            self.stop()
            raise
        return self

    def status(self) -> dict[str, Any]:
        """The master's JSON status page (workers, applications)."""
        url = f"http://127.0.0.1:{self.webui}/json/"
        with urllib.request.urlopen(url, timeout=5) as r:
            return dict(json.loads(r.read()))

    @staticmethod
    def alive_workers(st: dict[str, Any]) -> list[dict[str, Any]]:
        return [w for w in st.get("workers", []) if w.get("state") == "ALIVE"]

    def _wait(self, ok: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while True:
            for p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"{p.args[1]} exited ({p.returncode}): {self.logs()}")
            with contextlib.suppress(OSError, ValueError):
                if ok(self.status()):
                    return
            if time.monotonic() > deadline:
                raise RuntimeError(f"timed out waiting for {what}: {self.logs()}")
            time.sleep(0.25)

    def logs(self, tail: int = 2000) -> str:
        out = []
        for f in sorted(self.dir.glob("*.log")):
            out.append(f"--- {f.name}\n{f.read_text(errors='replace')[-tail:]}")
        return "\n".join(out)

    def pids(self) -> list[int]:
        """Every live process of the cluster: the JVMs started here and their descendants
        (executors, their Python daemons and workers)."""
        return sorted(descendants({p.pid for p in self.procs}))

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the workers, then the master, by process id (and their process groups);
        escalate to SIGKILL after ``timeout`` seconds; return when none of the processes
        they had started (executors, Python workers) is left."""
        seen = descendants({p.pid for p in self.procs})
        for p in reversed(self.procs):  # workers (and their executors) first
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for p in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(max(0.1, deadline - time.monotonic()))
        while left := _still_alive(seen):
            if time.monotonic() > deadline:
                for pid in left:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
            if time.monotonic() > deadline + 10:
                raise RuntimeError(f"cluster processes left: {left}")
            time.sleep(0.1)
        for p in self.procs:
            p.wait()  # reap
