"""Time to reply of a fresh kernel's first cells (issue 20: instant cells), and of a kernel
interrupt while a ``%%stream --wait`` cell shows its dashboard (issue 18).

Each repeat starts a fresh kernel (jupyter_client, display on: the dashboard's widgets are
sent over ZMQ as to a frontend) and times, from execute request to execute reply:

- ``%load_ext streamcell``;
- the first ``%%stream`` cell (dashboard displayed), and the charts' loading state at its
  reply (they load in the background, off the cell's path);
- a second ``%%stream`` cell;
- with ``--interrupt``: a ``%%stream --wait`` cell interrupted after 1.5 s, interrupt to reply.

    python bench/bench_first_cell.py [--repeat R] [--engine native|reference] [--interrupt]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from jupyter_client import KernelManager

CELL = (
    "%%stream {name} --engine {engine}\n"
    "source clickstream(users=500, seed=1), rate=20_000\n"
    "filter price > 5\nkey_by event\nagg n=count()\n"
)


def _reply(kc: Any, msg_id: str, timeout: float = 120) -> dict[str, Any]:
    while True:
        m = kc.get_shell_msg(timeout=timeout)
        if m["parent_header"].get("msg_id") == msg_id:
            return m


def _timed(kc: Any, code: str) -> tuple[float, dict[str, Any]]:
    t0 = time.monotonic()
    msg_id = kc.execute(code)
    reply = _reply(kc, msg_id)
    return time.monotonic() - t0, reply["content"]


def _text(kc: Any, code: str) -> str:
    msg_id = kc.execute(code)
    _reply(kc, msg_id)
    out = []
    while True:
        m = kc.get_iopub_msg(timeout=60)
        if m["parent_header"].get("msg_id") != msg_id:
            continue
        if m["msg_type"] == "stream":
            out.append(m["content"]["text"])
        elif m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
            return "".join(out)


def once(engine: str, interrupt: bool) -> dict[str, float | str]:
    env = dict(os.environ)
    kernel_dir = str(Path(__file__).resolve().parent.parent / "kernel")
    env["PYTHONPATH"] = os.pathsep.join([kernel_dir, env.get("PYTHONPATH", "")])
    km = KernelManager(kernel_name="python3")
    km.kernel_cmd = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    km.start_kernel(env=env)
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=60)
    try:
        out: dict[str, float | str] = {}
        out["load_ext"], _ = _timed(kc, "%load_ext streamcell")
        out["first_cell"], c = _timed(kc, CELL.format(name="first", engine=engine))
        assert c["status"] == "ok", c
        out["charts_at_reply"] = _text(
            kc, "from streamcell.widgets import charts; print(charts.state())"
        ).strip()
        out["second_cell"], c = _timed(kc, CELL.format(name="second", engine=engine))
        if interrupt:
            msg_id = kc.execute(
                CELL.format(name="waited", engine=engine).replace(
                    " --engine", " --wait --engine", 1
                )
            )
            time.sleep(1.5)
            t0 = time.monotonic()
            km.interrupt_kernel()
            reply = _reply(kc, msg_id)
            out["interrupt"] = time.monotonic() - t0
            assert reply["content"].get("ename") == "KeyboardInterrupt", reply["content"]
        return out
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--engine", default="native")
    ap.add_argument("--interrupt", action="store_true")
    a = ap.parse_args()
    rows = []
    for i in range(a.repeat):
        r = once(a.engine, a.interrupt)
        print(
            f"run {i}: "
            + ", ".join(
                f"{k} {v * 1e3:,.0f} ms" if isinstance(v, float) else f"{k} {v}"
                for k, v in r.items()
            ),
            flush=True,
        )
        rows.append(r)
    for k in rows[0]:
        vals = [r[k] for r in rows]
        if isinstance(vals[0], float):
            ms = [float(v) * 1e3 for v in vals]
            print(f"{k:>12}: median {statistics.median(ms):,.0f} ms, max {max(ms):,.0f} ms")


if __name__ == "__main__":
    main()
