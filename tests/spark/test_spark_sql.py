"""``sc.sql`` / ``%stream sql`` over tables a Spark run kept in Spark (issue 19, part 2): the
query runs in Spark SQL and only its result comes to the notebook; equal to Polars' SQL over
the reference engine's tables."""

from __future__ import annotations

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import streamcell as sc
from streamcell.run import registry
from streamcell.sql import SQLError, named_in

pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark

QUERY = (
    "SELECT c.event, count(*) AS users, sum(c.n) AS clicks, max(s.spent) AS top "
    "FROM {clicks} c JOIN {spend} s ON c.user_id = s.user_id "
    "GROUP BY c.event ORDER BY c.event"
)


@pytest.fixture
def runs():
    """The same two tables from a Spark run (kept in Spark) and a reference run."""
    src = sc.source(sc.clickstream(rows=20_000, users=300, seed=4))
    made = []
    for engine in ("spark", "reference"):
        clicks = src.key_by("user_id", "event").agg(n=sc.count())
        spend = src.key_by("user_id").agg(spent=sc.col("price").sum())
        plan = sc.combine(
            clicks.sink_table(f"clicks_{engine}"), spend.sink_table(f"spend_{engine}")
        )
        run = plan.start(f"sqlrun_{engine}", engine=engine)
        made.append(run)
    for run in made:
        run.wait(300)
        assert run.status == "finished", run.error
    yield made
    for run in made:
        registry().pop(run.name, None)


def _q(engine: str) -> str:
    return QUERY.format(clicks=f"clicks_{engine}", spend=f"spend_{engine}")


def test_sql_over_spark_tables_runs_in_spark_and_equals_polars_over_the_reference(runs):
    spark_run, _ = runs
    # a notebook run whose name is also an alias and a column of the query: not a table of it
    for name in ("s", "event"):
        sc.source(pl.DataFrame({"x": [1]})).start(name, engine="reference").wait(60)
    got = sc.sql(_q("spark"))  # auto: every table named is kept in Spark
    for name in ("s", "event"):
        registry().pop(name, None)
    want = sc.sql(_q("reference"))
    assert_frame_equal(got, want, check_dtypes=False)
    assert want.height >= 3 and want["users"].min() > 50
    # the tables stayed in Spark: no snapshot was brought to the notebook by the Spark query
    for t in spark_run.table_names():
        assert spark_run._tables[t]._remote._full is None
    assert_frame_equal(sc.sql(_q("spark"), engine="polars"), want, check_dtypes=False)
    assert all(spark_run._tables[t]._remote._full is not None for t in spark_run.table_names())


def test_spark_sql_errors_are_streamcell_errors_naming_the_tables(runs):
    with pytest.raises(SQLError, match="(?s)sql \\(Spark\\).*nope.*tables: clicks_spark"):
        sc.sql("SELECT nope FROM clicks_spark", engine="spark")
    with pytest.raises(SQLError, match="not in Spark: clicks_reference"):
        sc.sql("SELECT * FROM clicks_reference", engine="spark")
    with pytest.raises(sc.errors.ArgumentError) as e:
        sc.sql("SELECT 1", engine="duckdb")
    assert e.value.parameter == "engine"


def test_a_notebook_frame_in_the_query_takes_polars(runs):
    names = pl.DataFrame({"event": ["view", "cart", "purchase", "wishlist"], "w": [1, 2, 3, 4]})
    got = sc.sql(
        "SELECT c.event, sum(c.n * x.w) AS score FROM clicks_spark c JOIN x USING (event) "
        "GROUP BY c.event ORDER BY c.event",
        x=names,
    )
    want = sc.sql(
        "SELECT c.event, sum(c.n * x.w) AS score FROM clicks_reference c JOIN x USING (event) "
        "GROUP BY c.event ORDER BY c.event",
        x=names,
    )
    assert_frame_equal(got, want)


def test_tables_are_the_names_read_after_from_and_join():
    q = 'SELECT s.clicks, "spend" FROM clicks_x JOIN `t` USING (k)'
    assert named_in(q, {"clicks_x", "spend", "t", "clicks", "k2"}) == {"clicks_x", "t"}
    q = "select * from a, b as bb, (select 1 from d) where x in (select * from e)"
    assert named_in(q, {"a", "b", "bb", "d", "e", "x"}) == {"a", "b", "d", "e"}


def test_stream_sql_magic_takes_an_engine(runs, capsys):
    from tests.helpers import ipython_shell

    ip = ipython_shell()
    q = "SELECT event, sum(n) AS n FROM clicks_spark GROUP BY event ORDER BY event"
    on_spark = ip.run_line_magic("stream", f"sql --engine spark {q}")
    on_polars = ip.run_line_magic("stream", f"sql --engine=polars {q}")
    assert on_spark.height >= 3
    assert_frame_equal(on_spark, on_polars, check_dtypes=False)
    assert ip.run_line_magic("stream", f"sql --engine bogus {q}") is None
    assert "engine must be one of" in capsys.readouterr().out
