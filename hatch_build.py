"""Build hook: compile the Cython/C extensions in ``native/``.

Each extension is one ``native/<name>.pyx``; the C sources it wraps are listed in the
``.pyx`` itself with ``# distutils: sources = ...`` so the build list stays next to the code.

Editable installs build in place (next to ``kernel/streamcell``); wheels build in a
temporary folder and force-include the shared objects.

Environment:
  STREAMCELL_CFLAGS   extra compiler flags (e.g. sanitizers, ``-O0 -g``)
  STREAMCELL_DEBUG=1  compile invariant checks in (``-DSC_DEBUG=1``)

Also usable as a script for development: ``python hatch_build.py [names...]`` builds the
named extensions (default: all in EXTENSIONS) in place.
"""

from __future__ import annotations

import os
import shlex
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent
PKG = ROOT / "kernel" / "streamcell"

# Extension modules built into the package, as streamcell.<name>.
EXTENSIONS = ["_native", "_theta", "_hll", "_kll", "_frequent", "_runtime"]


def _compile_args() -> list[str]:
    args = [
        "-O3",
        "-std=gnu11",
        "-pthread",
        "-fno-strict-aliasing",
        "-Wall",
        "-Wno-unused-function",
    ]
    if os.environ.get("STREAMCELL_DEBUG") == "1":
        args.append("-DSC_DEBUG=1")
    args += shlex.split(os.environ.get("STREAMCELL_CFLAGS", ""))
    return args


def build_extensions(names: list[str], out_dir: Path) -> list[Path]:
    """Compile ``native/<name>.pyx`` for each name into ``out_dir/streamcell``."""
    from Cython.Build import cythonize
    from setuptools import Distribution, Extension
    from setuptools.command.build_ext import build_ext

    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        cflags = _compile_args()
        ldflags = ["-pthread"] + [
            f
            for f in shlex.split(os.environ.get("STREAMCELL_CFLAGS", ""))
            if f.startswith("-fsanitize")
        ]
        exts = [
            Extension(
                f"streamcell.{name}",
                [f"native/{name}.pyx"],
                include_dirs=["native", "native/common"],
                depends=[str(h) for h in sorted(Path("native").rglob("*.h"))],
                extra_compile_args=cflags,
                extra_link_args=ldflags,
            )
            for name in names
        ]
        modules = cythonize(
            exts,
            compiler_directives={"language_level": "3", "boundscheck": False, "wraparound": False},
            # cimports resolve under native/: the .pxd beside each C header, e.g. exec/dag.pxd
            include_path=["native"],
            quiet=True,
        )
        dist = Distribution({"ext_modules": modules})
        cmd = build_ext(dist)
        cmd.build_lib = str(out_dir)
        cmd.build_temp = str(ROOT / "native" / "build")
        cmd.ensure_finalized()
        cmd.run()
        return [Path(p) for p in cmd.get_outputs()]
    finally:
        os.chdir(cwd)


try:
    from hatchling.builders.hooks.plugin.interface import BuildHookInterface
except ImportError:  # used as a plain script without hatchling installed
    BuildHookInterface = object  # type: ignore[misc,assignment]


class CustomBuildHook(BuildHookInterface):  # type: ignore[misc,valid-type]
    def initialize(self, version: str, build_data: dict) -> None:
        build_data["pure_python"] = False
        build_data["infer_tag"] = True
        if version == "editable":
            build_extensions(EXTENSIONS, PKG.parent)
            return
        tmp = Path(tempfile.mkdtemp(prefix="streamcell-build-"))
        for so in build_extensions(EXTENSIONS, tmp):
            build_data["force_include"][str(so)] = str(so.relative_to(tmp))


if __name__ == "__main__":
    build_extensions(sys.argv[1:] or EXTENSIONS, PKG.parent)
