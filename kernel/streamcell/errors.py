"""The streamcell exception hierarchy (one place; the native layer maps status codes here)."""

from __future__ import annotations

from collections.abc import Iterable


class StreamcellError(Exception):
    """Base class of every error streamcell raises on purpose."""


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``" (did you mean 'filter'?)"`` for the closest of ``known`` to a misspelt ``name``
    (nothing when none is close)."""
    import difflib

    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


class DSLSyntaxError(StreamcellError):
    """A ``%%stream`` cell that does not parse. Carries line, column and a caret excerpt.

    ``line`` and ``column`` are 1-based and refer to the cell body (the first stage line is 1).
    """

    def __init__(self, message: str, line: int, column: int, text: str = "", length: int = 1):
        self.msg = message
        self.line = line
        self.column = column
        self.text = text
        caret = ""
        if text:
            caret = f"\n    {text}\n    {' ' * (column - 1)}{'^' * max(1, length)}"
        super().__init__(f"line {line}, column {column}: {message}{caret}")


class PlanError(DSLSyntaxError):
    """A plan that parses but is not valid (unknown column, type error, bad option).

    When the plan came from DSL text, ``line``/``column`` point at the offending text;
    for plans built in Python they are 0 and ``step`` names the step.
    """

    def __init__(
        self,
        message: str,
        line: int = 0,
        column: int = 0,
        text: str = "",
        length: int = 1,
        step: str | None = None,
    ):
        self.step = step
        if line:
            super().__init__(message, line, column, text, length)
        else:
            StreamcellError.__init__(self, f"{step}: {message}" if step else message)
            self.msg, self.line, self.column, self.text = message, 0, 0, ""


class ArgumentError(PlanError):
    """A bad argument to a source or sink (``clickstream(users=-5)``); ``parameter`` names it.

    Raised where the spec is built (``sc.clickstream(...)``); in a ``%%stream`` cell it
    carries the line and column of the argument.
    """

    def __init__(self, message: str, parameter: str, **where: object):
        self.parameter = parameter
        super().__init__(message, **where)  # type: ignore[arg-type]


class UnsupportedTypeError(StreamcellError, ValueError):
    """A column whose type streamcell cannot hold (Polars Time, Duration, Binary, Struct...):
    refused when the source is opened, naming the column and its type."""

    def __init__(self, column: str, arrow_type: object, hint: str = ""):
        self.column = column
        self.arrow_type = arrow_type
        super().__init__(
            f"column {column!r} has type {arrow_type}, which streamcell does not support "
            "(columns are int, float, str, bool, datetime, date or list[...])" + hint
        )


class SourceError(StreamcellError):
    """A source that cannot be opened at all (missing file, unsupported type)."""


class NotSupportedError(StreamcellError):
    """A step that a backend cannot run. The message names the step and the backend."""

    def __init__(self, step: str, backend: str, why: str = "", pos: object = None):
        self.step = step
        self.backend = backend
        # where the step is in its cell (a step's ``pos``), when it came from DSL text
        self.line: int = getattr(pos, "line", 0) or 0
        self.column: int = getattr(pos, "column", 0) or 0
        where = f"line {self.line}, column {self.column}: " if self.line else ""
        super().__init__(
            f"{where}not supported on {backend}: step {step}" + (f" ({why})" if why else "")
        )


class RunFailed(StreamcellError):
    """A run ended in the FAILED state; ``__cause__`` holds the original exception."""


class NativeError(StreamcellError):
    """A failure reported by the native runtime through a status code."""

    def __init__(self, message: str, code: int = 0):
        self.code = code
        super().__init__(message)


class StopTimeout(StreamcellError):
    """``run.stop(timeout)`` gave up: the run's thread is still alive (typically a sink
    callback that has not returned). The run is asked to stop and starts no new callback;
    call ``stop()`` again to wait longer."""
