"""Run the C tests of the native components (runtime structures, sketches).

Each C test (native/tests/test_*.c) is built and run by native/tests/Makefile in one mode:
``debug`` (invariant checks compiled in), ``asan`` (AddressSanitizer + UBSan, leak checks)
and ``tsan`` (ThreadSanitizer). The Makefile compiles each source once per mode and links it
into every test that lists it, and runs on every core (pytest runs one test at a time).
Measured on the 2-core dev machine, build included: debug ~26 s, asan ~42 s, tsan ~62 s, so
none is marked slow.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# every C test in native/tests (runtime structures and sketches)
C_TESTS = tuple(sorted(p.stem for p in (ROOT / "native" / "tests").glob("test_*.c")))

pytestmark = pytest.mark.skipif(
    shutil.which("make") is None or shutil.which("cc") is None,
    reason="needs make and a C compiler",
)


@pytest.mark.parametrize("mode", ["debug", "asan", "tsan"])
def test_runtime_components(mode: str) -> None:
    # -B: always rebuild and rerun (the Makefile's .run stamps would otherwise skip tests);
    # -j: the tests of a mode build and run side by side.
    cmd = [
        "make",
        f"-j{min(os.cpu_count() or 1, 8)}",
        "-B",
        "-C",
        str(ROOT / "native" / "tests"),
        mode,
        "TESTS=" + " ".join(C_TESTS),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (
        f"{' '.join(cmd)} failed ({proc.returncode})\n"
        f"--- stdout ---\n{proc.stdout[-6000:]}\n--- stderr ---\n{proc.stderr[-6000:]}"
    )
