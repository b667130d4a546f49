"""Backends: the engines a plan can run on. Each provides ``check`` and ``execute``.

- ``reference``: sequential pure-Python interpreter, the oracle for every other backend.
- ``native``: the plan compiled to C operators on the ordered multicore runtime
  (present when the ``streamcell._runtime`` extension is built).
- ``spark``: the plan on Apache Spark through PySpark 4 (always registered; a missing
  PySpark or Java is reported, with how to fix it, when a run asks for it).
"""

from __future__ import annotations

from typing import Any, Protocol

from ..compiler import Compiled
from ..errors import StreamcellError
from ..options import RunOptions


class Backend(Protocol):
    name: str

    def check(self, c: Compiled, options: RunOptions) -> None:
        """Raise NotSupportedError naming the first step this backend cannot run."""

    def execute(self, c: Compiled, env: Any, options: RunOptions) -> bool:
        """Run to completion (True) or until stopped (False); called on the run's thread."""


class ReferenceBackend:
    name = "reference"

    def check(self, c: Compiled, options: RunOptions) -> None:
        return None

    def execute(self, c: Compiled, env: Any, options: RunOptions) -> bool:
        from .reference import execute

        return execute(c, env)


_BACKENDS: dict[str, Backend] = {"reference": ReferenceBackend()}


def _register_native() -> None:
    try:
        from .. import _runtime  # noqa: F401
    except ImportError:  # a build without the native runtime: reference only
        return
    from .native import NativeBackend

    _BACKENDS["native"] = NativeBackend()


_register_native()


def _register_spark() -> None:
    from .spark import SparkBackend  # imports no PySpark until a run uses it

    _BACKENDS["spark"] = SparkBackend()


_register_spark()


def available() -> list[str]:
    """The engines this build can run."""
    return list(_BACKENDS)


def get_backend(engine: str) -> Backend:
    if engine not in _BACKENDS:
        raise StreamcellError(
            f"engine {engine!r} is not available in this build; engines: {', '.join(_BACKENDS)}"
        )
    return _BACKENDS[engine]


def register_backend(backend: Backend) -> None:
    _BACKENDS[backend.name] = backend
