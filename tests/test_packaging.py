"""Packaging invariants the quick tier can check without building a wheel.

The version is written once (kernel/streamcell/_version.py) and package.json must agree; the
wheel checker (tools/check_dist.py, run by ``make dist``) tells a stripped extension from one
with debug info. The wheel itself is checked by ``make dist`` and, at the dependency floors, by
tests/test_install_floors.py (slow tier).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import streamcell
from tools import check_dist

ROOT = Path(__file__).resolve().parent.parent


_NPM_PRE = {"a": "alpha", "b": "beta", "rc": "rc"}


def _npm_version(v: str) -> str:
    """PEP 440 to the npm spelling: 0.2.0a1 -> 0.2.0-alpha.1 (as the extension template does)."""
    m = re.fullmatch(r"(\d+\.\d+\.\d+)(?:(a|b|rc)(\d+))?", v)
    assert m, f"streamcell's version {v!r} is not X.Y.Z[a|b|rcN]"
    if not m[2]:
        return m[1]
    return f"{m[1]}-{_NPM_PRE[m[2]]}.{m[3]}"


def test_one_version_source():
    from streamcell._version import __version__

    assert streamcell.__version__ == __version__
    assert check_dist.version() == __version__  # the wheel checker reads the same file
    package = json.loads((ROOT / "package.json").read_text())
    assert package["version"] == _npm_version(__version__), (
        "package.json's version must follow kernel/streamcell/_version.py"
    )
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'^dynamic = \["version"\]', pyproject, re.M)
    assert not re.search(r"^version = ", pyproject, re.M)


def test_npm_version_spelling():
    assert _npm_version("1.2.3") == "1.2.3"
    assert _npm_version("0.2.0a1") == "0.2.0-alpha.1"
    assert _npm_version("1.0.0rc2") == "1.0.0-rc.2"


def test_py_typed_and_license_ship():
    assert (ROOT / "kernel" / "streamcell" / "py.typed").is_file()
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert re.search(r'^license = "Apache-2.0"', (ROOT / "pyproject.toml").read_text(), re.M)


def test_wheel_checker_tells_debug_info_from_stripped(tmp_path):
    from streamcell import _runtime

    so = Path(_runtime.__file__)
    data = so.read_bytes()
    if data[:4] != b"\x7fELF":
        pytest.skip("ELF shared objects only (the checker leaves Mach-O to the macOS build)")
    sections = check_dist.elf_sections(data)
    assert ".text" in sections and ".dynsym" in sections  # the parser reads real sections
    problems: list[str] = []
    if any(s.startswith(".debug") or s == ".symtab" for s in sections):
        # the in-place (editable) build keeps its debug info: the checker must refuse it
        assert check_dist.check_so(so.name, data, problems) == "NOT stripped"
        assert problems and "not stripped" in problems[0]
    strip = shutil.which("strip")
    if strip is None:
        pytest.skip("no `strip` (binutils) to make a stripped copy")
    stripped = tmp_path / so.name
    subprocess.run([strip, "--strip-all", "-o", str(stripped), str(so)], check=True)
    problems = []
    assert check_dist.check_so(stripped.name, stripped.read_bytes(), problems) == "stripped"
    assert problems == []


def test_every_extension_is_checked():
    """The wheel checker and the smoke test know every extension the build hook compiles."""
    import hatch_build
    from tests.smoke import wheel_smoke

    assert sorted(check_dist.EXTENSIONS) == sorted(hatch_build.EXTENSIONS)
    assert sorted(wheel_smoke.EXTENSIONS) == sorted(hatch_build.EXTENSIONS)
