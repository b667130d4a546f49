"""The dashboard's charts (Altair ``JupyterChart``), loaded off the cells' path.

Importing Altair costs seconds (jsonschema builds its format grammars), and the offline Vega
bundle (``JupyterChart.enable_offline``) is built by vl-convert in native code that holds the
GIL for one to three seconds, during which the kernel cannot even take an interrupt. So
neither happens on a cell's path:

- :func:`prefetch` (called by ``%load_ext streamcell`` and by every dashboard) starts the
  kernel's warm-up thread (:mod:`streamcell.warmup`), which calls :func:`load`: it imports
  Altair, installs the offline bundle and builds the chart templates, then sets :func:`ready`;
- the bundle is built once per Altair / vl-convert version by a separate Python process (so
  the kernel's GIL stays free) and cached on disk (``$STREAMCELL_VEGA_CACHE``, default
  ``~/.cache/streamcell/vega``); later kernels read the file;
- a dashboard draws its numbers at once and attaches its charts when :func:`ready` is set,
  with the history it recorded since the run's start.

Without vl-convert (or when the bundle cannot be built) the charts load Vega from a CDN, as
Altair does by default.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Literal

State = Literal["idle", "loading", "ready", "failed"]

_STARTED = threading.Event()
_DONE = threading.Event()
_error: BaseException | None = None
_TEMPLATES: dict[str, dict[str, Any]] = {}

# the dashboard's line charts: title -> series drawn
THROUGHPUT = "throughput (rows/s)"
LATENCY = "latency (ms)"
CHARTS: dict[str, tuple[str, ...]] = {THROUGHPUT: ("in", "out"), LATENCY: ("p50", "p99")}
# SVG (not canvas), so the dashboard's CSS can colour the text and axes with the theme's
# variables; no actions menu
EMBED_OPTIONS: dict[str, Any] = {"renderer": "svg", "actions": False}
# a transparent background (the slot's, which is the theme's), no view border
CONFIG: dict[str, Any] = {"background": "transparent", "view": {"stroke": None}}


def slug(title: str) -> str:
    """``throughput`` for ``throughput (rows/s)``: a CSS class name for a chart."""
    return title.split(" ")[0]


_BUNDLE_SCRIPT = """
import os, sys
import altair as alt
alt.JupyterChart.enable_offline()
if not alt.JupyterChart._is_offline:
    sys.exit(3)
tmp = f"{sys.argv[1]}.{os.getpid()}.tmp"
with open(tmp, "w", encoding="utf-8") as f:
    f.write(alt.JupyterChart._esm)
os.replace(tmp, sys.argv[1])
"""


def prefetch() -> None:
    """Start loading the charts in the background (once per kernel; returns at once)."""
    from .. import warmup

    _STARTED.set()
    warmup.start()


def state() -> State:
    """``idle`` (not asked for yet), ``loading``, ``ready`` or ``failed`` (no charts)."""
    if not _STARTED.is_set():
        return "idle"
    if not _DONE.is_set():
        return "loading"
    return "failed" if _error is not None else "ready"


def ready() -> bool:
    """True once charts can be drawn without delay (Altair imported, templates built)."""
    return _DONE.is_set() and _error is None


def wait(timeout: float | None = None) -> bool:
    """Block until loading has ended (ready or failed), at most ``timeout`` s; :func:`ready`."""
    prefetch()
    _DONE.wait(timeout)
    return ready()


def error() -> BaseException | None:
    """Why the charts could not be loaded (``None`` while loading or when ready)."""
    return _error


def chart(title: str, rows: list[dict[str, Any]]) -> Any:
    """A new ``JupyterChart`` for ``title`` (one of :data:`CHARTS`) drawing ``rows``."""
    import altair as alt

    ch = alt.JupyterChart(None, embed_options=EMBED_OPTIONS)  # type: ignore[arg-type]
    ch.spec = spec(title, rows)  # set after: the constructor would validate with Altair
    return ch


def spec(title: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The Vega-Lite spec of a dashboard line chart (``series``/``value`` over ``t``)."""
    return {**_TEMPLATES[title], "data": {"values": rows}}


# ------------------------------------------------------------------------------ loading
def load() -> None:
    """Import Altair, install the offline bundle, build the templates; then :func:`ready`
    (or :func:`error`). Run once, by the warm-up thread."""
    global _error
    try:
        import altair as alt

        _enable_offline(alt)
        for title in CHARTS:
            _TEMPLATES[title] = _template(alt, title)
    except BaseException as e:  # no Altair, a broken install: the dashboard keeps its numbers
        _error = e
    finally:
        _DONE.set()


def _template(alt: Any, title: str) -> dict[str, Any]:
    """Altair builds (and validates) each chart's spec once per kernel; updates only swap the
    inline data of that spec, so a refresh costs no Altair work."""
    chart = (
        alt.Chart(alt.Data(values=[]), title=title)
        .mark_line()
        .encode(
            x=alt.X("t:Q", title="seconds since start"),
            y=alt.Y("value:Q", title=None),
            color=alt.Color("series:N", legend=alt.Legend(orient="top", title=None)),
        )
        .properties(width=260, height=120)
    )
    out: dict[str, Any] = chart.to_dict()
    out.pop("data", None)
    out["config"] = {**out.get("config", {}), **CONFIG}
    return out


def cache_dir() -> Path:
    d = os.environ.get("STREAMCELL_VEGA_CACHE")
    if d:
        return Path(d)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "streamcell" / "vega"


def _enable_offline(alt: Any) -> None:
    """Charts without a CDN: the Vega bundle vl-convert builds, from the disk cache."""
    if alt.JupyterChart._is_offline:
        return
    from importlib.metadata import PackageNotFoundError, version

    try:
        vlc = version("vl-convert-python")
    except PackageNotFoundError:  # charts still work where a CDN is reachable
        return
    path = cache_dir() / f"jupyterchart-altair{alt.__version__}-vlc{vlc}.js"
    if not path.exists() and not _build_bundle(path):
        return
    try:
        alt.JupyterChart._esm = path.read_text(encoding="utf-8")
    except OSError:
        return
    alt.JupyterChart._is_offline = True


def _build_bundle(path: Path) -> bool:
    """Build the bundle in a separate process (its native code would hold our GIL)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            [sys.executable, "-c", _BUNDLE_SCRIPT, str(path)],
            capture_output=True,
            timeout=300,
            start_new_session=True,  # a kernel interrupt (sent to its process group) skips it
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0 and path.exists()
