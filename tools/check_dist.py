"""Check what ``python -m build`` made, and that it installs: ``make dist`` runs it.

    python tools/check_dist.py DIST_DIR [--release] [--install]

DIST_DIR holds wheels and/or sdists of the current version (``--install``: one of each). Checked:

- the wheel: the production labextension (third-party-licenses.json, no source maps, no
  development chunk names) with the package's version; every native extension, stripped (no
  ``.debug_*`` section, no symbol table); ``py.typed``, ``LICENSE``; no tests, sources, build
  folders or caches; metadata (license, classifiers, floors, extras, URLs). ``--release`` also
  refuses a ``linux_*`` tag, which PyPI rejects (cibuildwheel's auditwheel repair fixes it);
- the sdist: the top-level ``widgets/``, the prebuilt labextension, LICENSE and the build
  files; no node_modules, virtual environments, build folders or compiled objects;
- ``--install``: the wheel, then the sdist (built by pip, reusing its labextension), each into a
  fresh virtual environment, each running ``tests/smoke/wheel_smoke.py`` from outside the tree.

Every problem is listed, then the script exits 1.
"""

from __future__ import annotations

import argparse
import json
import re
import struct
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from email.parser import Parser
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LABEXT = "share/jupyter/labextensions/streamcell/"
# hatch_build.EXTENSIONS (kept literal: this script must not import the build hook)
EXTENSIONS = ("_native", "_theta", "_hll", "_kll", "_frequent", "_runtime")
CLASSIFIERS = (
    "Framework :: Jupyter :: JupyterLab :: 4",
    "Framework :: Jupyter :: JupyterLab :: Extensions :: Prebuilt",
    "Typing :: Typed",
)
# Requirements whose floor the code depends on (see pyproject's comments).
REQUIRES = ("pyarrow>=16", "ipykernel>=7.1", "comm>=", "polars>=", "ipython>=")
EXTRAS = ("spark", "lab", "udf", "dev")
# Paths no wheel may hold: tests, sources, build folders and caches, development builds.
WHEEL_FORBIDDEN = re.compile(
    r"(^|/)(tests?|node_modules|build|__pycache__)/|^(native|kernel|ext|lib|widgets)/"
    r"|\.(pyc|o|c|h|pyx|pxd|map|ts)$"
    r"|^streamcell/labextension/"
    r"|/static/lib_index_js"  # the development build names its chunks after modules
)
SDIST_FORBIDDEN = re.compile(
    r"(^|/)(node_modules|\.venv|\.git|__pycache__|\.mypy_cache|\.pytest_cache|lib)/"
    r"|^native/build/|^native/_[^/]*\.c$|\.(so|o|pyc|map)$|tsconfig\.tsbuildinfo$"
)


def version() -> str:
    text = (ROOT / "kernel" / "streamcell" / "_version.py").read_text(encoding="utf-8")
    m = re.search(r'^__version__ = "([^"]+)"', text, re.M)
    if not m:
        raise SystemExit("check_dist: no __version__ in kernel/streamcell/_version.py")
    return m[1]


def elf_sections(data: bytes) -> list[str]:
    """Section names of an ELF shared object (32/64-bit, either byte order)."""
    e = "<" if data[5] == 1 else ">"
    if data[4] == 2:
        shoff = struct.unpack_from(e + "Q", data, 0x28)[0]
        shentsize, shnum, shstrndx = struct.unpack_from(e + "HHH", data, 0x3A)
        fmt = e + "IIQQQQ"
    else:
        shoff = struct.unpack_from(e + "I", data, 0x20)[0]
        shentsize, shnum, shstrndx = struct.unpack_from(e + "HHH", data, 0x2E)
        fmt = e + "IIIIII"
    headers = [struct.unpack_from(fmt, data, shoff + i * shentsize) for i in range(shnum)]
    _, _, _, _, str_off, str_size = headers[shstrndx]
    strtab = data[str_off : str_off + str_size]
    return [strtab[h[0] : strtab.index(b"\0", h[0])].decode() for h in headers]


def check_so(name: str, data: bytes, problems: list[str]) -> str:
    if data[:4] != b"\x7fELF":
        return "not ELF: stripping not checked here"
    unstripped = [s for s in elf_sections(data) if s.startswith(".debug") or s == ".symtab"]
    if unstripped:
        problems.append(f"wheel: {name} is not stripped ({', '.join(unstripped)})")
    return "stripped" if not unstripped else "NOT stripped"


def check_wheel(whl: Path, ver: str, release: bool, problems: list[str]) -> None:
    tag = whl.name[:-4].split("-")[-1]
    if release and tag.startswith("linux_"):
        problems.append(f"wheel: platform tag {tag} (PyPI refuses it: build with cibuildwheel)")
    with zipfile.ZipFile(whl) as z:
        names = z.namelist()
        data_dir = f"streamcell-{ver}.data/data/"
        info = f"streamcell-{ver}.dist-info/"
        for path in names:
            if WHEEL_FORBIDDEN.search(path.removeprefix(data_dir)):
                problems.append(f"wheel: holds {path}")
        need = [
            "streamcell/__init__.py",
            "streamcell/_version.py",
            "streamcell/py.typed",
            "streamcell/widgets/dashboard.py",
            info + "licenses/LICENSE",
            data_dir + LABEXT + "package.json",
            data_dir + LABEXT + "install.json",
            data_dir + LABEXT + "static/style.js",
            data_dir + LABEXT + "static/third-party-licenses.json",
        ]
        problems += [f"wheel: lacks {p}" for p in need if p not in names]
        for ext in EXTENSIONS:
            found = [n for n in names if re.fullmatch(rf"streamcell/{ext}\.[^/]*\.(so|pyd)", n)]
            if len(found) != 1:
                problems.append(f"wheel: {len(found)} shared objects for streamcell.{ext}")
                continue
            data = z.read(found[0])
            how = check_so(found[0], data, problems)
            print(f"  {found[0]}: {len(data):,} bytes, {how}")
        if data_dir + LABEXT + "package.json" in names:
            meta = json.loads(z.read(data_dir + LABEXT + "package.json"))
            if meta.get("version") != ver:
                problems.append(f"wheel: labextension version {meta.get('version')} != {ver}")
            load = meta.get("jupyterlab", {}).get("_build", {}).get("load", "")
            if data_dir + LABEXT + load not in names:
                problems.append(f"wheel: the labextension's entry point {load!r} is missing")
        check_metadata(Parser().parsestr(z.read(info + "METADATA").decode()), ver, problems)
    print(f"wheel {whl.name}: {whl.stat().st_size:,} bytes, {len(names)} files")


def check_metadata(msg, ver: str, problems: list[str]) -> None:  # type: ignore[no-untyped-def]
    if msg["Version"] != ver:
        problems.append(f"metadata: Version {msg['Version']} != {ver}")
    if msg["License-Expression"] != "Apache-2.0":
        problems.append(f"metadata: License-Expression {msg['License-Expression']!r}")
    if "LICENSE" not in (msg.get_all("License-File") or []):
        problems.append("metadata: no License-File: LICENSE")
    classifiers = msg.get_all("Classifier") or []
    problems += [f"metadata: no classifier {c!r}" for c in CLASSIFIERS if c not in classifiers]
    requires = [r.replace(" ", "") for r in msg.get_all("Requires-Dist") or []]
    for want in REQUIRES:
        if not any(r.startswith(want) for r in requires):
            problems.append(f"metadata: no Requires-Dist {want}...")
    extras = msg.get_all("Provides-Extra") or []
    problems += [f"metadata: no extra {e!r}" for e in EXTRAS if e not in extras]
    if not msg.get_all("Project-URL"):
        problems.append("metadata: no Project-URL")
    if "streamcell developers" not in (msg["Author"] or msg["Author-email"] or ""):
        problems.append("metadata: authors are not 'streamcell developers'")


def check_sdist(sdist: Path, ver: str, problems: list[str]) -> None:
    top = f"streamcell-{ver}/"
    with tarfile.open(sdist) as t:
        names = [n.removeprefix(top) for n in t.getnames()]
    for path in names:
        if SDIST_FORBIDDEN.search(path):
            problems.append(f"sdist: holds {path}")
    need = [
        "pyproject.toml",
        "PKG-INFO",
        "LICENSE",
        "README.md",
        "CHANGELOG.md",
        "hatch_build.py",
        "package.json",
        "yarn.lock",
        "install.json",
        "widgets/__init__.py",
        "widgets/dashboard.py",
        "kernel/streamcell/_version.py",
        "kernel/streamcell/py.typed",
        "kernel/streamcell/widgets/dashboard.py",
        "kernel/streamcell/labextension/package.json",
        "kernel/streamcell/labextension/static/third-party-licenses.json",
        "tests/smoke/wheel_smoke.py",
        "tools/check_dist.py",
    ] + [f"native/{ext}.pyx" for ext in EXTENSIONS]
    problems += [f"sdist: lacks {p}" for p in need if p not in names]
    print(f"sdist {sdist.name}: {sdist.stat().st_size:,} bytes, {len(names)} files")


def install_and_smoke(target: Path, label: str, problems: list[str]) -> None:
    """A fresh venv, ``pip install target``, then the smoke script from a folder outside."""
    target = target.resolve()  # pip runs from the temporary folder
    with tempfile.TemporaryDirectory(prefix=f"streamcell-{label}-") as tmp:
        venv = Path(tmp) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        py = venv / "bin" / "python"
        print(f"--- {label}: pip install {target.name} into a fresh venv", flush=True)
        r = subprocess.run([py, "-m", "pip", "install", "-q", str(target)], cwd=tmp)
        if r.returncode != 0:
            problems.append(f"{label}: pip install {target.name} failed ({r.returncode})")
            return
        smoke = ROOT / "tests" / "smoke" / "wheel_smoke.py"
        r = subprocess.run([py, str(smoke)], cwd=tmp)
        if r.returncode != 0:
            problems.append(f"{label}: the smoke script failed ({r.returncode})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dist", type=Path, help="a folder of wheels and sdists (dist/, wheelhouse/)")
    ap.add_argument("--release", action="store_true", help="refuse a linux_* platform tag")
    ap.add_argument("--install", action="store_true", help="install both into fresh venvs")
    args = ap.parse_args()
    ver = version()
    wheels = sorted(args.dist.glob(f"streamcell-{ver}-*.whl"))
    sdists = sorted(args.dist.glob(f"streamcell-{ver}.tar.gz"))
    problems: list[str] = []
    if not wheels and not sdists:
        problems.append(f"{args.dist}: no wheel or sdist of streamcell {ver}")
    if args.install and (len(wheels) != 1 or len(sdists) != 1):
        problems.append(f"--install: {len(wheels)} wheels and {len(sdists)} sdists (one each)")
    for whl in wheels:
        check_wheel(whl, ver, args.release, problems)
    for sdist in sdists:
        check_sdist(sdist, ver, problems)
    if args.install and not problems:
        install_and_smoke(wheels[0], "wheel", problems)
        install_and_smoke(sdists[0], "sdist", problems)
    if problems:
        print(f"\ncheck_dist FAILED ({len(problems)} problems):", file=sys.stderr)
        for p in problems:
            print(f"  - {p}", file=sys.stderr)
        raise SystemExit(1)
    print("check_dist: ok")


if __name__ == "__main__":
    main()
