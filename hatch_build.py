"""Build hook: compile the Cython/C extensions in ``native/``.

Each extension is one ``native/<name>.pyx``; the C sources it wraps are listed in the
``.pyx`` itself with ``# distutils: sources = ...`` so the build list stays next to the code.

Editable installs build in place (next to ``kernel/streamcell``), with debug info; wheels
build in a temporary folder, stripped (``-g0``, and the symbol table dropped at link), and
force-include the shared objects.

Environment:
  STREAMCELL_CFLAGS   extra compiler flags (e.g. sanitizers, ``-O0 -g``)
  STREAMCELL_DEBUG=1  compile invariant checks in (``-DSC_DEBUG=1``); wheels keep debug info
  STREAMCELL_STRIP=0  wheels keep debug info and symbols (e.g. to profile a wheel's build)
  STREAMCELL_BUILD_JOBS  C files compiled at once (default: the CPUs this process may use)

Also usable as a script for development: ``python hatch_build.py [names...]`` builds the
named extensions (default: all in EXTENSIONS) in place.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
PKG = ROOT / "kernel" / "streamcell"

# Extension modules built into the package, as streamcell.<name>.
EXTENSIONS = ["_native", "_theta", "_hll", "_kll", "_frequent", "_runtime"]


def _strip_wheel() -> bool:
    """Whether a (non-editable) wheel build strips its extensions: yes unless asked not to."""
    return (
        os.environ.get("STREAMCELL_STRIP", "1") != "0" and os.environ.get("STREAMCELL_DEBUG") != "1"
    )


def _compile_args(strip: bool = False) -> list[str]:
    args = [
        "-O3",
        "-std=gnu11",
        "-pthread",
        "-fno-strict-aliasing",
        # a multiply and an add stay two roundings, as Python and Polars compute them, also in
        # the kernels built for CPUs with fused multiply-add (exec/expr_fast.c)
        "-ffp-contract=off",
        "-Wall",
        "-Wno-unused-function",
    ]
    if os.environ.get("STREAMCELL_DEBUG") == "1":
        args.append("-DSC_DEBUG=1")
    if strip:
        args.append("-g0")  # after Python's own CFLAGS (which carry -g): no DWARF in the objects
    args += shlex.split(os.environ.get("STREAMCELL_CFLAGS", ""))
    return args


def _strip_link_args() -> list[str]:
    # -s: the linker drops the symbol table (PyInit_* stays exported in the dynamic one);
    # Apple's ld has no -s: -x drops the local symbols (the objects carry no DWARF with -g0).
    return ["-Wl,-x"] if sys.platform == "darwin" else ["-s"]


def _build_jobs() -> int:
    env = os.environ.get("STREAMCELL_BUILD_JOBS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _compile_side_by_side(compiler: Any, jobs: int) -> None:
    """Make ``compiler.compile`` (distutils' ``CCompiler``) compile an extension's C files
    ``jobs`` at a time, the largest first (Cython's generated module, then the runtime's
    sources; one compiler process each): ``_runtime`` alone lists about forty files, which
    distutils compiles one after another."""
    if jobs <= 1:
        return

    def compile(  # the signature of CCompiler.compile
        sources: list[str],
        output_dir: str | None = None,
        macros: Any = None,
        include_dirs: Any = None,
        debug: Any = 0,
        extra_preargs: Any = None,
        extra_postargs: Any = None,
        depends: Any = None,
    ) -> list[str]:
        from concurrent.futures import ThreadPoolExecutor

        # Extensions build side by side (cmd.parallel) and several list the same C files
        # (native/sketch/concurrent.c is in five): each compiles into a folder of its own, named
        # after its first source (Cython's module), so no link reads an object another
        # extension's compiler is still writing.
        if output_dir is not None and sources:
            output_dir = os.path.join(output_dir, Path(sources[0]).stem)
        macros, objects, extra_postargs, pp_opts, build = compiler._setup_compile(
            output_dir, macros, include_dirs, sources, depends, extra_postargs
        )
        cc_args = compiler._get_cc_args(pp_opts, debug, extra_preargs)
        todo = sorted(
            ((obj, *build[obj]) for obj in objects if obj in build),
            key=lambda job: -os.path.getsize(job[1]),
        )
        with ThreadPoolExecutor(jobs) as pool:
            running = [
                pool.submit(compiler._compile, obj, src, ext, cc_args, extra_postargs, pp_opts)
                for obj, src, ext in todo
            ]
            for job in running:
                job.result()  # a compiler error stops the build, as it does one file at a time
        return objects

    compiler.compile = compile


def build_extensions(names: list[str], out_dir: Path, strip: bool = False) -> list[Path]:
    """Compile ``native/<name>.pyx`` for each name into ``out_dir/streamcell``.

    ``strip`` builds release objects (no debug info, no symbol table) in a folder of their own
    (``native/build/release``), so they never mix with the in-place build's debug objects.
    """
    from Cython.Build import cythonize
    from setuptools import Distribution, Extension
    from setuptools.command.build_ext import build_ext

    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        cflags = _compile_args(strip)
        env_flags = shlex.split(os.environ.get("STREAMCELL_CFLAGS", ""))
        sanitizers = [f for f in env_flags if f.startswith("-fsanitize")]
        ldflags = ["-pthread", *(_strip_link_args() if strip else []), *sanitizers]
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
        jobs = _build_jobs()

        class BuildExt(build_ext):  # type: ignore[misc,valid-type]
            def build_extensions(self) -> None:
                _compile_side_by_side(self.compiler, jobs)
                super().build_extensions()

        dist = Distribution({"ext_modules": modules})
        cmd = BuildExt(dist)
        cmd.parallel = jobs  # the extensions side by side too: each has one large generated file
        cmd.build_lib = str(out_dir)
        cmd.build_temp = str(ROOT / "native" / "build" / ("release" if strip else ""))
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
        tmp = self._tmp = Path(tempfile.mkdtemp(prefix="streamcell-build-"))
        for so in build_extensions(EXTENSIONS, tmp, strip=_strip_wheel()):
            build_data["force_include"][str(so)] = str(so.relative_to(tmp))

    def finalize(self, version: str, build_data: dict, artifact_path: str) -> None:
        # the wheel holds the shared objects now: leave no build folder behind in /tmp
        tmp = getattr(self, "_tmp", None)
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    build_extensions(sys.argv[1:] or EXTENSIONS, PKG.parent)
