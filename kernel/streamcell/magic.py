"""``%%stream`` and ``%stream``: a thin layer that parses arguments, builds the plan, starts
it and displays it. No language logic lives here (that is ``dsl.py``)."""

from __future__ import annotations

import argparse
import re
import shlex
from typing import Any

from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.display import HTML, display

from .dsl import parse
from .errors import StreamcellError
from .options import RunOptions
from .run import registry, start


class _ArgError(StreamcellError):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse would exit the kernel
        raise _ArgError(f"%%stream: {message}\nusage: {self.format_usage().strip()}")


def _cell_parser() -> _Parser:
    p = _Parser(prog="%%stream", add_help=False)
    p.add_argument("name", help="run name: the handle is bound to this variable")
    p.add_argument("--engine", choices=["auto", "reference", "native", "spark"], default=None)
    p.add_argument("--workers", type=int, default=None)
    p.add_argument("--batch-size", type=int, default=None, dest="batch_size")
    p.add_argument("--scheduler", choices=["CT", "QST", "LP", "ET"], default=None)
    p.add_argument("--no-display", action="store_true", dest="no_display")
    p.add_argument(
        "--status-line",
        action="store_true",
        dest="status_line",
        help="a one-line status instead of the dashboard",
    )
    p.add_argument("--wait", action="store_true", help="block until the run ends")
    return p


def _cell_id(shell: Any) -> str | None:
    try:
        meta = shell.kernel.get_parent("shell").get("metadata", {})  # ipykernel >= 6
        return meta.get("cellId")
    except Exception:
        return None


@magics_class
class StreamMagics(Magics):
    @cell_magic
    def stream(self, line: str, cell: str) -> None:
        """Start the pipeline in this cell: ``%%stream NAME [--engine E] [--workers N] ...``."""
        try:
            args = _cell_parser().parse_args(shlex.split(line))
        except StreamcellError as e:
            print(e)
            return
        if not args.name.isidentifier():
            print(f"%%stream: run name {args.name!r} must be a Python identifier")
            return
        assert self.shell is not None
        ns = self.shell.user_ns
        opts = RunOptions().with_(
            engine=args.engine,
            workers=args.workers,
            batch_size=args.batch_size,
            scheduler=args.scheduler,
        )
        try:
            plan = parse(cell, ns, name=args.name, first_line=2)  # line 1: %%stream
            run = start(plan, name=args.name, options=opts, cell_id=_cell_id(self.shell))
        except StreamcellError as e:
            # a clear message with line/column and caret; no traceback noise
            print(f"streamcell: {type(e).__name__}: {e}")
            return
        try:  # an interrupt anywhere from here on (display included) stops the run
            ns[args.name] = run
            if not args.no_display:  # the live numbers first, the plan's graph collapsed below
                run.dashboard = _show_live(run, args.status_line)
                from .widgets.status import plan_html

                display(HTML(plan_html(plan)))
            if args.wait:
                run.wait()
        except KeyboardInterrupt:
            run.stop()
            raise

    @cell_magic
    def stream_udf(self, line: str, cell: str) -> Any:
        """Compile the Cython functions in this cell for use in pipelines (``%%stream_udf``).

        Each ``cdef <ret> name(<type> a, ...) noexcept nogil`` becomes callable by name in
        ``%%stream`` cells and via ``sc.call("name", ...)``; unchanged cells load from the cache."""
        from .udf import UdfCompileError, cython_udf

        try:
            mod = cython_udf(cell)
        except UdfCompileError as e:
            print(f"streamcell: {e}")
            if e.line is not None:
                lines = cell.splitlines()
                if 1 <= e.line <= len(lines):
                    print(f"  {e.line} | {lines[e.line - 1]}")
                    print("  " + " " * len(str(e.line)) + " | " + " " * ((e.column or 1) - 1) + "^")
            return None
        except StreamcellError as e:
            print(f"streamcell: {type(e).__name__}: {e}")
            return None
        return mod

    @line_magic("stream")  # type: ignore[arg-type]
    def stream_line(self, line: str) -> Any:
        """``%stream list`` | ``%stream stop NAME`` | ``%stream status NAME`` | ``%stream pause/resume NAME``."""
        if line.strip().split(None, 1)[:1] == ["sql"]:
            from .sql import sql

            query, engine = line.strip()[3:].strip(), "auto"
            m = re.match(r"--engine[= ]\s*(\S+)\s*", query)
            if m:
                query, engine = query[m.end() :], m.group(1)
            if not query:
                print(
                    "usage: %stream sql [--engine auto|polars|spark] SELECT ... "
                    "(tables: the live tables of all runs)"
                )
                return None
            try:
                return sql(query, engine=engine, **_user_frames(self.shell))
            except StreamcellError as e:
                print(f"streamcell: {e}")
                return None
        parts = shlex.split(line)
        if not parts or parts[0] == "list":
            from .snapshot import metrics_snapshot
            from .widgets.status import RunTable

            return RunTable([metrics_snapshot(r, detail=False) for r in registry().values()])
        cmd, rest = parts[0], parts[1:]
        if cmd in ("stop", "status", "pause", "resume"):
            if len(rest) != 1:
                print(f"usage: %stream {cmd} NAME")
                return None
            run = registry().get(rest[0])
            if run is None:
                print(f"%stream: no run named {rest[0]!r}; runs: {', '.join(registry()) or 'none'}")
                return None
            if cmd == "status":
                from .widgets.status import status_html

                display(HTML(status_html(run)))
                return None
            getattr(run, cmd)()
            return None
        print(
            "usage: %stream list | sql QUERY | stop NAME | status NAME | pause NAME | resume NAME"
        )
        return None


def _show_live(run: Any, status_line: bool) -> Any:
    """The live dashboard (ipywidgets), or the plain status line when asked or unavailable."""
    if not status_line:
        try:
            from .widgets.dashboard import Dashboard

            return Dashboard(run)
        except ImportError:
            pass
    from .widgets.status import StatusLine

    return StatusLine(run)


def _user_frames(shell: Any) -> dict[str, Any]:
    """Polars DataFrames of the notebook namespace, so SQL can join them with live tables."""
    import polars as pl

    ns = shell.user_ns if shell is not None else {}
    return {k: v for k, v in ns.items() if isinstance(v, pl.DataFrame) and not k.startswith("_")}


def load(ipython: Any) -> None:
    ipython.register_magics(StreamMagics)
    from .widgets import charts

    charts.prefetch()  # the charts' front end: load it now, off the cells' path
    try:
        from .comm import register_comm_target

        register_comm_target(ipython)
    except ImportError:
        pass
