"""SQL over the live tables of all runs (Polars' SQL engine on snapshots)."""

from __future__ import annotations

import time

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import streamcell as sc
from streamcell.sql import SQLError


def test_sql_joins_live_tables_of_two_runs_while_they_run():
    views = (
        sc.source(sc.clickstream(rows=None, users=200, seed=1), rate=50_000)
        .filter(sc.col("event") == "view")
        .key_by("user_id")
        .agg(views=sc.count())
        .plan("views")
    )
    buys = (
        sc.source(sc.clickstream(rows=None, users=200, seed=2), rate=50_000)
        .filter(sc.col("event") == "purchase")
        .key_by("user_id")
        .agg(buys=sc.count(), spent=sc.col("price").sum())
        .plan("buys")
    )
    a, b = sc.start(views), sc.start(buys)
    time.sleep(0.8)
    q = (
        "SELECT v.user_id, v.views, b.buys FROM views v JOIN buys b USING (user_id) "
        "ORDER BY v.user_id"
    )
    first = sc.sql(q)
    assert first.height > 0 and first.columns == ["user_id", "views", "buys"]
    time.sleep(0.5)
    second = sc.sql(q)
    assert second["views"].sum() > first["views"].sum()  # the tables are live
    a.stop(), b.stop()
    # once stopped, SQL equals the same query in Polars on the snapshots
    expect = (
        a.table().join(b.table(), on="user_id").select("user_id", "views", "buys").sort("user_id")
    )
    assert_frame_equal(sc.sql(q), expect)


def test_sql_errors_name_the_tables():
    run = sc.source([{"k": 1}]).plan("tiny").start()
    run.wait()
    with pytest.raises(SQLError, match="tables available: .*tiny"):
        sc.sql("SELECT * FROM nope")
    with pytest.raises(SQLError, match="non-empty"):
        sc.sql("  ")
    extra = pl.DataFrame({"k": [1], "v": ["x"]})
    assert sc.sql("SELECT v FROM tiny JOIN extra USING (k)", extra=extra)["v"].to_list() == ["x"]
