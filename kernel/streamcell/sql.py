"""SQL over the live tables of every run: Polars' SQL engine on snapshots, or Spark SQL where
the tables live in Spark.

``sc.sql("SELECT ...")`` (and ``%stream sql SELECT ...``) sees every live table of each run in
the kernel (:func:`streamcell.run.registry`). Names: every table under its table name
(``sink table("name")``; by default the run's name); a run with a single table is also
reachable by the run's name. Extra frames can be passed as keyword arguments.

Where the query runs (``engine``):

- ``"polars"``: consistent snapshots of the tables the query names (only those) are registered
  with a :class:`polars.SQLContext` and the query runs there;
- ``"spark"``: the query runs in Spark SQL over the tables a Spark run kept in Spark
  (``engine="spark"`` table sinks), each a temporary view under its name; only the result comes
  to the notebook, as a Polars DataFrame;
- ``"auto"`` (the default): Spark when every table the query names is kept in Spark (and no
  notebook frame is named), else Polars.
"""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from .errors import ArgumentError, StreamcellError

ENGINES = ("auto", "polars", "spark")


class SQLError(StreamcellError):
    """A query that the SQL engine rejected (the message names the tables available)."""


def _stores() -> dict[str, tuple[Any, str]]:
    """Every live table of every run, by name: ``(run, table name)`` (module docstring)."""
    from .run import registry

    found: dict[str, tuple[Any, str]] = {}
    aliases: dict[str, tuple[Any, str]] = {}
    for run_name, run in registry().items():
        names = run.table_names()
        for t in names:
            found[t] = (run, t)
        if len(names) == 1 and run_name not in names:
            aliases[run_name] = (run, names[0])
    for k, v in aliases.items():
        found.setdefault(k, v)
    return found


def live_tables() -> dict[str, pl.DataFrame]:
    """Snapshots of every live table of every run, by name (see the module docstring)."""
    return _snapshots(_stores())


def _snapshots(stores: dict[str, tuple[Any, str]]) -> dict[str, pl.DataFrame]:
    frames: dict[str, pl.DataFrame] = {}
    for name, (run, t) in stores.items():
        try:
            frames[name] = run.table(t)
        except StreamcellError:  # a table no longer readable (its Spark session stopped)
            continue
    return frames


_TOKEN = re.compile(r'"([^"]+)"|`([^`]+)`|([A-Za-z_][\w$]*)|(\S)')
_CLAUSE_END = frozenset(
    {
        "where",
        "group",
        "order",
        "having",
        "limit",
        "on",
        "using",
        "union",
        "except",
        "intersect",
        "window",
        "qualify",
        "select",
        "with",
        "inner",
        "left",
        "right",
        "full",
        "cross",
        "natural",
        "join",
        "lateral",
    }
)


def named_in(query: str, names: set[str]) -> set[str]:
    """The ``names`` that ``query`` reads as tables: after ``FROM`` or ``JOIN``, and in a
    ``FROM a, b`` list (bare or quoted, any case; a column or alias of that name is not one)."""
    lower = {n.lower(): n for n in names}
    out: set[str] = set()
    in_from = expect = False
    for m in _TOKEN.finditer(query):
        quoted = m.group(1) or m.group(2)
        word = m.group(3)
        punct = m.group(4)
        if word is not None and word.lower() in ("from", "join"):
            in_from = word.lower() == "from"
            expect = True
            continue
        if expect and (quoted or word):
            name = (quoted or word or "").lower()
            if name in lower:
                out.add(lower[name])
            expect = False
            continue
        expect = False
        if punct == "," and in_from:
            expect = True
        elif punct == "(" or (word is not None and word.lower() in _CLAUSE_END):
            in_from = False
    return out


def _spark_kept(run: Any, table: str) -> Any:
    """The Spark DataFrame a Spark run kept for ``table``, or None (rows in the notebook)."""
    store = getattr(run, "_tables", {}).get(table)
    remote = getattr(store, "_remote", None)
    df = getattr(remote, "df", None)
    if df is None:
        return None
    from .backends.spark.session import alive

    return df if alive(df.sparkSession) else None


def sql(query: str, *, engine: str = "auto", **frames: Any) -> pl.DataFrame:
    """Run ``query`` over the live tables of every run (plus ``frames``); a Polars DataFrame.

    ``engine``: ``"auto"`` (Spark SQL when every table named is kept in Spark, else Polars),
    ``"polars"`` or ``"spark"`` (see the module docstring).

    Examples
    --------
    >>> sc.sql("SELECT event, sum(n) AS n FROM clicks GROUP BY event")  # doctest: +SKIP
    """
    if not isinstance(query, str) or not query.strip():
        raise SQLError("sql: the query must be a non-empty string")
    if engine not in ENGINES:
        raise ArgumentError(
            f"sql: engine must be one of {', '.join(map(repr, ENGINES))}, got {engine!r}", "engine"
        )
    stores = _stores()
    named = named_in(query, set(stores) | set(frames))
    kept = {
        n: df
        for n in named
        if n in stores and n not in frames and (df := _spark_kept(*stores[n])) is not None
    }
    on_spark = engine == "spark" or (engine == "auto" and named and all(n in kept for n in named))
    if on_spark:
        return _spark_sql(query, named, kept, stores)
    tables: dict[str, Any] = _snapshots({n: stores[n] for n in named if n in stores})
    tables.update(frames)
    ctx = pl.SQLContext(frames=tables)
    try:
        return ctx.execute(query, eager=True)
    except Exception as e:
        avail = ", ".join(sorted(set(stores) | set(frames))) or "none (no run has a table sink)"
        raise SQLError(f"sql: {e}\n  tables available: {avail}") from e


def _spark_sql(
    query: str, named: set[str], kept: dict[str, Any], stores: dict[str, tuple[Any, str]]
) -> pl.DataFrame:
    """``query`` in Spark SQL, each table named as a temporary view of its kept DataFrame."""
    missing = sorted(n for n in named if n not in kept)
    if missing or not kept:
        spark_tables = sorted(n for n in stores if _spark_kept(*stores[n]) is not None)
        raise SQLError(
            "sql: engine='spark' runs over tables a Spark run kept in Spark; "
            + (f"not in Spark: {', '.join(missing)}" if missing else "the query names none")
            + f"\n  Spark tables available: {', '.join(spark_tables) or 'none'}"
        )
    sessions = {id(df.sparkSession): df.sparkSession for df in kept.values()}
    if len(sessions) > 1:
        raise SQLError("sql: the tables were kept by different Spark sessions")
    (spark,) = sessions.values()
    for n, df in kept.items():
        df.createOrReplaceTempView(n)
    try:
        table = spark.sql(query).toArrow()
    except Exception as e:
        msg = str(e).strip().split("\n")[0]
        raise SQLError(f"sql (Spark): {msg}\n  tables: {', '.join(sorted(kept))}") from None
    return pl.from_arrow(table)  # type: ignore[return-value]
