"""SQL over the live tables of every run, executed by Polars' SQL engine on snapshots.

``sc.sql("SELECT ...")`` (and ``%stream sql SELECT ...``) registers a consistent snapshot of
each live table of each run in the kernel (:func:`streamcell.run.registry`) with a
:class:`polars.SQLContext` and runs the query there. Names: every table under its table name
(``sink table("name")``; by default the run's name); a run with a single table is also
reachable by the run's name. Extra frames can be passed as keyword arguments.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from .errors import StreamcellError


class SQLError(StreamcellError):
    """A query that Polars' SQL engine rejected (the message names the tables available)."""


def live_tables() -> dict[str, pl.DataFrame]:
    """Snapshots of every live table of every run, by name (see the module docstring)."""
    from .run import registry

    frames: dict[str, pl.DataFrame] = {}
    aliases: dict[str, pl.DataFrame] = {}
    for run_name, run in registry().items():
        names = []
        for t in run.table_names():
            try:
                frames[t] = run.table(t)
            except StreamcellError:  # a table no longer readable (its Spark session stopped)
                continue
            names.append(t)
        if len(names) == 1 and run_name not in names:
            aliases[run_name] = frames[names[0]]
    for k, v in aliases.items():
        frames.setdefault(k, v)
    return frames


def sql(query: str, **frames: Any) -> pl.DataFrame:
    """Run ``query`` over snapshots of all live tables (plus ``frames``); a Polars DataFrame."""
    if not isinstance(query, str) or not query.strip():
        raise SQLError("sql: the query must be a non-empty string")
    tables: dict[str, Any] = live_tables()
    tables.update(frames)
    ctx = pl.SQLContext(frames=tables)
    try:
        return ctx.execute(query, eager=True)
    except Exception as e:
        avail = ", ".join(sorted(tables)) or "none (no run has a table sink)"
        raise SQLError(f"sql: {e}\n  tables available: {avail}") from e
