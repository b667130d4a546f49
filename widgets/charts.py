"""The dashboard's charts: a small anywidget (``linechart.js``) drawing Vega-Lite line
charts, loaded off the cells' path.

The chart front end is Vega-Embed; offline (no CDN) it comes from the bundle vl-convert
builds. vl-convert builds it in native code that holds the GIL for one to three seconds,
during which the kernel cannot even take an interrupt, so that never happens on a cell's
path:

- :func:`prefetch` (called by ``%load_ext streamcell`` and by every dashboard) starts the
  kernel's warm-up thread (:mod:`streamcell.warmup`), which calls :func:`load`: it reads the
  bundle and sets :func:`ready`;
- the bundle is built once per vl-convert version and ``linechart.js`` by a separate Python
  process (so the kernel's GIL stays free) and cached on disk (``$STREAMCELL_VEGA_CACHE``,
  default ``~/.cache/streamcell/vega``); later kernels read the file;
- a dashboard draws its numbers at once and attaches its charts when :func:`ready` is set,
  with the history it recorded since the run's start.

Without vl-convert (or when the bundle cannot be built) the charts load Vega-Embed from a CDN.

A chart is embedded once per view; each refresh only replaces the rows of its data set in the
live Vega view (``rows``), and the front end serialises embeds and updates (see
``linechart.js``).
"""

from __future__ import annotations

import copy
import hashlib
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
_ESM: str | None = None

# the dashboard's line charts: title -> series drawn
THROUGHPUT = "throughput (rows/s)"
LATENCY = "latency (ms)"
CHARTS: dict[str, tuple[str, ...]] = {THROUGHPUT: ("in", "out"), LATENCY: ("p50", "p99")}
# SVG (not canvas), so the dashboard's CSS can colour the text and axes with the theme's
# variables; no actions menu
EMBED_OPTIONS: dict[str, Any] = {"renderer": "svg", "actions": False}
# a transparent background (the slot's, which is the theme's), no view border
CONFIG: dict[str, Any] = {"background": "transparent", "view": {"stroke": None}}

_JS = Path(__file__).with_name("linechart.js")
_CDN = 'import vegaEmbed from "https://esm.sh/vega-embed@7?deps=vega@6&deps=vega-lite@6";\n'


def slug(title: str) -> str:
    """``throughput`` for ``throughput (rows/s)``: a CSS class name for a chart."""
    return title.split(" ")[0]


_BUNDLE_SCRIPT = """
import os, sys
import vl_convert
with open(sys.argv[2], encoding="utf-8") as f:
    snippet = f.read()
bundle = vl_convert.javascript_bundle(snippet)
tmp = f"{sys.argv[1]}.{os.getpid()}.tmp"
with open(tmp, "w", encoding="utf-8") as f:
    f.write(bundle)
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
    """True once charts can be drawn without delay (the front end's bundle is read)."""
    return _DONE.is_set() and _error is None


def wait(timeout: float | None = None) -> bool:
    """Block until loading has ended (ready or failed), at most ``timeout`` s; :func:`ready`."""
    prefetch()
    _DONE.wait(timeout)
    return ready()


def error() -> BaseException | None:
    """Why the charts could not be loaded (``None`` while loading or when ready)."""
    return _error


def spec(title: str) -> dict[str, Any]:
    """The Vega-Lite spec of a dashboard line chart (``series``/``value`` over ``t``); the
    front end adds the data set ``rows``."""
    return {
        "title": title,
        "width": 260,
        "height": 120,
        "mark": {"type": "line"},
        "encoding": {
            "x": {"field": "t", "type": "quantitative", "title": "seconds since start"},
            "y": {"field": "value", "type": "quantitative", "title": None},
            "color": {
                "field": "series",
                "type": "nominal",
                "legend": {"orient": "top", "title": None},
            },
        },
        "config": copy.deepcopy(CONFIG),
    }


def chart(title: str, rows: list[dict[str, Any]]) -> Any:
    """A new chart widget for ``title`` (one of :data:`CHARTS`) drawing ``rows``."""
    if _ESM is None:
        raise RuntimeError("the charts are not loaded (streamcell.widgets.charts.wait())")
    return _widget_class()(spec=spec(title), rows=rows, embed_options=dict(EMBED_OPTIONS))


_CLASS: Any = None


def _widget_class() -> Any:
    """The ``LineChart`` widget class, made once its front end is known."""
    global _CLASS
    if _CLASS is None:
        import anywidget
        import traitlets

        class LineChart(anywidget.AnyWidget):  # type: ignore[misc]
            """A Vega-Lite chart whose ``rows`` are replaced in place by each refresh."""

            _esm = _ESM
            spec = traitlets.Dict().tag(sync=True)
            rows: Any = traitlets.List().tag(sync=True)
            embed_options = traitlets.Dict().tag(sync=True)

        _CLASS = LineChart
    return _CLASS


# ------------------------------------------------------------------------------ loading
def load() -> None:
    """Read (or build) the front end's bundle, then :func:`ready` (or :func:`error`). Run
    once, by the warm-up thread."""
    global _error, _ESM
    try:
        import anywidget  # noqa: F401  (the widget base; fail here, not in a dashboard)

        _ESM = _front_end()
        _widget_class()
    except BaseException as e:  # a broken install: the dashboard keeps its numbers
        _error = e
    finally:
        _DONE.set()


def _front_end() -> str:
    """``linechart.js`` bundled with Vega-Embed (offline), else importing it from a CDN."""
    snippet = _JS.read_text(encoding="utf-8")
    from importlib.metadata import PackageNotFoundError, version

    try:
        vlc = version("vl-convert-python")
    except PackageNotFoundError:  # charts still work where a CDN is reachable
        return _CDN + snippet
    digest = hashlib.sha256(snippet.encode()).hexdigest()[:12]
    path = cache_dir() / f"linechart-{digest}-vlc{vlc}.js"
    if not path.exists() and not _build_bundle(path):
        return _CDN + snippet
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return _CDN + snippet


def cache_dir() -> Path:
    d = os.environ.get("STREAMCELL_VEGA_CACHE")
    if d:
        return Path(d)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "streamcell" / "vega"


def _build_bundle(path: Path) -> bool:
    """Build the bundle in a separate process (its native code would hold our GIL)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            [sys.executable, "-c", _BUNDLE_SCRIPT, str(path), str(_JS)],
            capture_output=True,
            timeout=300,
            start_new_session=True,  # a kernel interrupt (sent to its process group) skips it
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0 and path.exists()
