"""The dashboard's live result grid: a window of the run's output table, sortable and
filterable in the browser, fed with Arrow IPC buffers.

Why a small anywidget and not a grid library: ipydatagrid and Perspective's widget are not
installable in every environment streamcell runs in (offline installs, no PyPI mirror of
their front-end bundles), and their bundles are larger than everything else the dashboard
loads. The grid needs little: a bounded window of rows (``window``, 500 by default: the last
rows of an append table, the most recently added keys of an upsert table), sort by a column, filter by a
text. The front end (``grid.js``, no dependencies) reads the Arrow IPC stream itself; the
kernel casts the window to three Arrow types it reads (int64, float64, UTF-8 strings: other
columns are sent as their text).

The dashboard refreshes the grid about once a second (with the charts) and only when the
table changed; the sort and filter stay in force across refreshes.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import anywidget
import polars as pl
import traitlets

ESM = (Path(__file__).with_name("grid.js")).read_text(encoding="utf-8")
CSS = """
.sc-grid { font-family: monospace; font-size: 12px; color: var(--jp-ui-font-color1, #212121); }
.sc-grid-bar { display: flex; gap: 10px; align-items: center; margin: 2px 0 4px; }
.sc-grid-filter { font: inherit; padding: 1px 4px; width: 200px;
  color: var(--jp-ui-font-color1, #212121); background: var(--jp-layout-color1, #fff);
  border: 1px solid var(--jp-border-color1, #bdbdbd); }
.sc-grid-info { color: var(--jp-ui-font-color2, #616161); }
.sc-grid-scroll { max-height: 260px; overflow: auto;
  border: 1px solid var(--jp-border-color2, #e0e0e0); }
.sc-grid-table { border-collapse: collapse; width: max-content; min-width: 100%; }
.sc-grid-table th { position: sticky; top: 0; cursor: pointer; user-select: none;
  background: var(--jp-layout-color2, #eee); color: var(--jp-ui-font-color1, #212121);
  text-align: left; padding: 2px 8px; font-weight: normal; }
.sc-grid-table td { padding: 1px 8px; border-top: 1px solid var(--jp-border-color3, #f0f0f0); }
.sc-grid-table .sc-num { text-align: right; }
"""

WINDOW = 500


class GridWidget(anywidget.AnyWidget):  # type: ignore[misc]
    """The grid's state: ``arrow`` (an Arrow IPC stream of the window), ``total`` (rows in
    the whole table), ``version`` (bumped by every refresh)."""

    _esm = ESM
    _css = CSS
    arrow = traitlets.Bytes(b"").tag(sync=True)
    total = traitlets.Int(0).tag(sync=True)
    version = traitlets.Int(0).tag(sync=True)


def _sendable(df: pl.DataFrame) -> pl.DataFrame:
    """Each column as int64, float64 or a string (what grid.js reads)."""
    cols = []
    for name, dtype in df.schema.items():
        s = df[name]
        if dtype.is_integer():
            s = s.cast(pl.Int64)
        elif dtype.is_float():
            s = s.cast(pl.Float64)
        elif dtype != pl.String:
            try:
                s = s.cast(pl.String)
            except Exception:  # nested types: their Python text
                s = pl.Series(name, [None if v is None else str(v) for v in s.to_list()])
        cols.append(s.alias(name))
    return pl.DataFrame(cols)


def arrow_ipc(df: pl.DataFrame) -> bytes:
    """``df`` as one Arrow IPC stream of int64, float64 and utf8 (32-bit offsets) columns."""
    import pyarrow as pa

    table = _sendable(df).to_arrow()
    fields = []
    for f in table.schema:
        t = f.type
        if not (pa.types.is_int64(t) or pa.types.is_float64(t)):
            t = pa.string()
        fields.append(pa.field(f.name, t))
    table = table.cast(pa.schema(fields)).combine_chunks()
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        for batch in table.to_batches():
            writer.write_batch(batch)
    return sink.getvalue()


class ResultGrid:
    """The live grid of ``run``'s first table; :meth:`refresh` sends the current window."""

    def __init__(self, run: Any, window: int = WINDOW) -> None:
        self.run = run
        self.window = window
        self.widget = GridWidget()
        self.widget.add_class("sc-result-grid")
        self._last: tuple[int, int] | None = None

    def window_frame(self) -> pl.DataFrame:
        """The rows the grid shows: the last ``window`` rows of the run's first table."""
        return self.run.table().tail(self.window)

    def refresh(self) -> bool:
        """Send the window if the table changed since the last refresh; whether it did."""
        df = self.run.table()
        key = (df.height, hash(tuple(df.tail(self.window).hash_rows().to_list())))
        if key == self._last:
            return False
        self._last = key
        payload = arrow_ipc(df.tail(self.window))
        with self.widget.hold_sync():
            self.widget.total = df.height
            self.widget.version += 1
            self.widget.arrow = payload
        return True
