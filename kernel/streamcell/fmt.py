"""How streamcell writes numbers for people: one format, used by every display.

The dashboard, the status line, ``%stream list`` and ``%stream status`` format through this
module; the JupyterLab extension has the same rules in ``ext/src/format.ts``, and both are
checked against one table of cases (``tests/format_cases.json``).

- counts: thousands separators (``1,234,567``);
- rates: a count of rows per second (``20,000 rows/s``; one decimal below 100);
- latencies: milliseconds with two decimals below 10 ms, one below 100, none above
  (``0.42 ms``, ``9.44 ms``, ``31.5 ms``, ``1,140 ms``);
- elapsed time as m:ss (``1:05``, ``1:02:03``), with tenths under a minute (``0:07.3``) and
  hundredths under a second (``0:00.04``), so a short finished run never reads "0".

``None`` (a number the engine does not know) is written ``–`` everywhere.
"""

from __future__ import annotations

import math

NONE = "–"


def _round(x: float) -> int:
    """Round half up (as JavaScript's ``Math.round``), not Python's half-to-even."""
    return math.floor(x + 0.5)


def _fixed(x: float, digits: int) -> str:
    """``x`` with ``digits`` decimals and thousands separators, rounded half up."""
    scaled = _round(abs(x) * 10**digits)
    whole, frac = divmod(scaled, 10**digits)
    sign = "-" if x < 0 and scaled else ""
    text = f"{sign}{whole:,}"
    return f"{text}.{frac:0{digits}d}" if digits else text


def _known(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def count(n: float | None) -> str:
    """``1,234,567``."""
    return _fixed(n, 0) if n is not None and _known(float(n)) else NONE


def rate(r: float | None, unit: str = " rows/s") -> str:
    """``20,000 rows/s``; ``12.5 rows/s`` below 100."""
    if r is None or not _known(r):
        return NONE
    return _fixed(r, 1 if abs(r) < 100 else 0) + unit


def ms(v: float | None) -> str:
    """``0.42 ms``, ``9.44 ms``, ``31.5 ms``, ``1,140 ms``."""
    if v is None or not _known(v):
        return NONE
    digits = 2 if abs(v) < 10 else 1 if abs(v) < 100 else 0
    return _fixed(v, digits) + " ms"


def elapsed(s: float | None) -> str:
    """``0:00.04``, ``0:07.3``, ``1:05``, ``1:02:03``."""
    if s is None or not _known(s):
        return NONE
    s = max(0.0, s)
    if _round(s * 100) < 100:  # under a second: hundredths
        return f"0:00.{_round(s * 100):02d}"
    if _round(s * 10) < 600:  # under a minute: tenths
        tenths = _round(s * 10)
        return f"0:{tenths // 10:02d}.{tenths % 10}"
    whole = _round(s)
    h, rest = divmod(whole, 3600)
    m, sec = divmod(rest, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


def share(x: float | None) -> str:
    """A fraction as a percentage: ``12.5%``."""
    if x is None or not _known(x):
        return NONE
    return _fixed(x * 100, 1) + "%"
