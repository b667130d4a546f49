"""The declared dependency floors are real: streamcell works with exactly them (slow tier).

A fresh virtual environment gets the wheel and pyproject's dependencies resolved
lowest-direct (``uv pip install --resolution lowest-direct``; without uv, pip with a
constraints file pinning every floor), so each direct dependency sits at its floor; the
test checks that it does, then runs ``tests/smoke/wheel_smoke.py`` there (import, the native
extensions, ``%load_ext``, native runs equal to reference runs, the labextension).

The wheel is ``$STREAMCELL_WHEEL`` when set (e.g. the one ``make dist`` built), else one
built here from the tree (without rebuilding the labextension: this is about Python
dependencies). Skipped only without a network (the floors come from PyPI).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

try:
    import tomllib
except ImportError:  # Python 3.10: pytest's own dependency
    import tomli as tomllib

pytestmark = [pytest.mark.slow, pytest.mark.long]

ROOT = Path(__file__).resolve().parent.parent
SMOKE = ROOT / "tests" / "smoke" / "wheel_smoke.py"


def _offline_reason() -> str | None:
    try:
        socket.create_connection(("pypi.org", 443), timeout=10).close()
    except OSError as e:
        return f"no network: PyPI (pypi.org:443) is unreachable ({e}), and the floors come from it"
    return None


def _floors() -> dict[str, tuple[Requirement, Version]]:
    """Each dependency that applies to this interpreter, with its floor (its ``>=`` bound)."""
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    out = {}
    for line in deps:
        req = Requirement(line)
        if req.marker is not None and not req.marker.evaluate():
            continue
        lows = [Version(s.version) for s in req.specifier if s.operator == ">="]
        assert len(lows) == 1, f"{line!r}: every dependency declares one floor (>=)"
        out[req.name] = (req, lows[0])
    return out


def _wheel(tmp: Path) -> Path:
    if os.environ.get("STREAMCELL_WHEEL"):
        return Path(os.environ["STREAMCELL_WHEEL"])
    if not (ROOT / "kernel" / "streamcell" / "labextension" / "package.json").is_file():
        pytest.fail("no built labextension to package: run `make ext` or `make dist` first")
    out = tmp / "wheel"
    r = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
        + ["-w", str(out), str(ROOT)],
        env={**os.environ, "SKIP_JUPYTER_BUILDER": "1"},
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, f"building the wheel failed:\n{r.stdout}\n{r.stderr}"
    (whl,) = out.glob("streamcell-*.whl")
    return whl


def _install(py: Path, whl: Path, floors: dict[str, tuple[Requirement, Version]], tmp: Path):
    reqs = tmp / "floors.txt"
    reqs.write_text("".join(f"{req}\n" for req, _ in floors.values()))
    uv = shutil.which("uv") or shutil.which("uv", path=str(Path(sys.executable).parent))
    if uv:
        cmd = [uv, "pip", "install", "--python", str(py), "--resolution", "lowest-direct"]
        cmd += ["-r", str(reqs), str(whl)]
    else:  # pip: pin every floor in a constraints file
        pins = tmp / "pins.txt"
        pins.write_text("".join(f"{name}=={low}\n" for name, (_, low) in floors.items()))
        cmd = [str(py), "-m", "pip", "install", "-q", "-c", str(pins), "-r", str(reqs), str(whl)]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp)
    assert r.returncode == 0, f"{' '.join(cmd)} failed:\n{r.stdout}\n{r.stderr}"


def test_the_wheel_works_at_the_declared_floors(tmp_path):
    reason = _offline_reason()
    if reason:
        pytest.skip(reason)
    floors = _floors()
    whl = _wheel(tmp_path)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    _install(py, whl, floors, tmp_path)

    probe = "import json, importlib.metadata as m, sys; print(json.dumps({n: m.version(n) for n in sys.argv[1:]}))"
    r = subprocess.run([py, "-c", probe, *floors], capture_output=True, text=True, check=True)
    installed = json.loads(r.stdout)
    off = {
        name: f"{installed[name]} (floor {low})"
        for name, (_, low) in floors.items()
        if Version(installed[name]) != low
    }
    assert not off, f"not installed at their floors: {off}"
    print(f"installed at the floors: {installed}")

    r = subprocess.run([py, str(SMOKE)], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, (
        f"streamcell at the floors {installed} fails its smoke test:\n{r.stdout}\n{r.stderr}"
    )
    assert "wheel smoke passed" in r.stdout
    print(r.stdout)
