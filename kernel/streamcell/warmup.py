"""What a kernel would otherwise do on its first cells' path, done by one background thread
started by ``%load_ext streamcell`` (and by the first dashboard), so that the first
``%%stream`` cell returns as fast as the next ones and an interrupt is answered at once:

1. imports a first cell needs anyway (a cell that needs one meanwhile waits for this import,
   never runs it twice): pandas, which pyarrow imports on its first ``pa.array`` (half a
   second; when pandas is installed), ipywidgets, the dashboard's widgets, and its result
   grid (anywidget);
2. IPython's traceback machinery: the first traceback of a kernel parses every
   source file it shows (stack_data) and maps every module to its file (``inspect``), 0.5-1 s
   for an interrupted ``%%stream --wait`` cell, so that is done here, and the module map is
   brought up to date again at the end;
3. the dashboard's charts (:func:`streamcell.widgets.charts.load`: reads the Vega bundle; the first
   time on a machine, a separate process builds it).

No garbage collection runs while it works: the imports make many long-lived objects,
and each full collection they trigger holds the GIL for 100-600 ms (the kernel then answers
nothing, not even an interrupt). Then, unless a run started meanwhile (its objects must stay
collectable), what is alive is frozen out of later collections (:func:`gc.freeze`): it is
module state, never garbage, and leaving it out keeps every later full collection short.
"""

from __future__ import annotations

import gc
import importlib
import threading
from typing import Any

_LOCK = threading.Lock()
_thread: threading.Thread | None = None

_IMPORTS = ("pandas", "ipywidgets", "streamcell.widgets.grid")


def start() -> None:
    """Start the warm-up thread (once per process; returns at once)."""
    global _thread
    with _LOCK:
        if _thread is None:
            _thread = threading.Thread(target=_work, name="streamcell-warmup", daemon=True)
            _thread.start()


def join(timeout: float | None = None) -> None:
    """Wait for the warm-up to end (tests)."""
    if _thread is not None:
        _thread.join(timeout)


def _work() -> None:
    from .widgets import charts

    collecting = gc.isenabled()
    gc.disable()
    try:
        _format_a_traceback(first=True)  # what an interrupt during run.wait() needs, first
        for name in _IMPORTS:
            try:
                importlib.import_module(name)
            except Exception:  # optional here: whoever needs it reports it
                pass
        _format_a_traceback(first=False)
        charts.load()
        _map_modules()
    finally:
        if collecting:
            from .run import registry

            if not registry():
                gc.freeze()
            gc.enable()


def _map_modules() -> None:
    """Let :func:`inspect.getmodule` (IPython calls it for every frame of a traceback) map the
    modules imported since its last look (hundreds), one ``realpath`` each: asking
    about a file no module has makes it look at every new module."""
    import inspect

    try:
        inspect.getmodule(compile("0", "<streamcell-warmup>", "eval"))
    except Exception:
        pass


def _format_a_traceback(first: bool) -> None:
    """Parse the files an interrupted ``%%stream`` cell's traceback shows and format (and
    drop) one IPython traceback, so the kernel's first real one finds everything cached.

    ``first``: the files of an interrupt during ``run.wait()`` (``magic.py``, ``run.py``:
    0.1-0.3 s), before the imports; then (``first=False``) the rarer ones."""
    try:
        from IPython import get_ipython

        shell = get_ipython()
        if shell is None:
            return
        import IPython
        import IPython.core.interactiveshell as ish
        import stack_data
        from IPython.core.ultratb import VerboseTB

        from . import magic, run

        # the files an interrupted cell's traceback shows, most likely first; IPython 9 leaves
        # its own frames out of tracebacks, so interactiveshell.py (0.5 s to parse) only
        # for older versions
        if first:
            files = [magic.__file__, run.__file__]
        else:
            files = [threading.__file__]
            if int(IPython.__version__.split(".")[0]) < 9:
                files.append(ish.__file__)
        for f in files:
            src: Any = stack_data.Source.for_filename(f)
            src.asttokens()  # what stack_data computes per file shown (all cached per file)
            _ = src.pieces, src.tokens_by_lineno
        if not first:  # the formatting machinery is warm after the first call
            return
        try:
            threading.Event().wait(0)
            raise KeyboardInterrupt
        except KeyboardInterrupt as e:
            tb = VerboseTB(theme_name=getattr(shell, "colors", "nocolor"))
            tb.structured_traceback(type(e), e, e.__traceback__)
    except Exception:  # an IPython without these internals: the first traceback is slower
        pass
