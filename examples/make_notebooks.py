"""Writes the example notebooks (run: python examples/make_notebooks.py)."""

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).parent


def _notebook() -> nbformat.NotebookNode:
    nb = new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    return nb


def quickstart() -> None:
    nb = _notebook()
    nb.cells = [
        new_markdown_cell(
            "# streamcell quickstart\n\nA `%%stream` cell returns at once; the pipeline keeps "
            "running in the kernel. `sessions` becomes a handle you can query from any cell."
        ),
        new_code_cell("%load_ext streamcell\nimport polars as pl\nimport streamcell as sc"),
        new_code_cell(
            "%%stream sessions\n"
            "source clickstream(rows=50_000, users=2_000, seed=1)\n"
            'filter event == "view" and user_id.is_not_null()\n'
            "key_by user_id\n"
            'session gap="30m", time=ts\n'
            "agg pages=count(), items=count_distinct(item_id), spent=sum(price)\n"
            "sink table"
        ),
        new_markdown_cell(
            "Query the live table from another cell (a consistent Polars snapshot), "
            "or wait for the end:"
        ),
        new_code_cell(
            "sessions.wait()\nprint(sessions.status)\nsessions.table().sort('spent', descending=True).head()"
        ),
        new_markdown_cell(
            "Every row is accounted for: passed on, filtered, late (side output) or dead-lettered."
        ),
        new_code_cell("sessions.counts()"),
        new_code_cell("sessions.late().head(3)"),
        new_markdown_cell("The same pipeline from Python builds an equal plan:"),
        new_code_cell(
            "plan = (sc.source(sc.clickstream(rows=50_000, users=2_000, seed=1))\n"
            '        .filter((sc.col("event") == "view") & sc.col("user_id").is_not_null())\n'
            '        .key_by("user_id")\n'
            '        .session("30m", time="ts")\n'
            '        .agg(pages=sc.count(), items=sc.col("item_id").n_unique(), spent=sc.col("price").sum())\n'
            '        .plan("sessions"))\n'
            "assert plan == sessions.plan\n"
            "print(plan.explain())"
        ),
        new_markdown_cell("A stream that never ends, throttled, stopped from another cell:"),
        new_code_cell(
            "%%stream live\nsource clickstream(seed=2), rate=5_000\nkey_by event\nagg n=count(), revenue=sum(price)"
        ),
        new_code_cell("import time; time.sleep(1.0)\nlive.table()"),
        new_code_cell("%stream stop live\nlive.status"),
    ]
    nbformat.write(nb, HERE / "quickstart.ipynb")


def dashboard() -> None:
    nb = _notebook()
    nb.cells = [
        new_markdown_cell(
            "# Live dashboard and queries on clickstream data\n\n"
            "A `%%stream` cell shows a live dashboard: its status with pause / resume / stop "
            "buttons and the headline numbers first, then throughput and latency charts (in "
            "the JupyterLab theme, light or dark), the per-operator table (rows, selectivity, "
            "cost per row, queue depth, workers, state), late and dead-lettered rows, sketches, "
            "and the plan's graph, collapsed. When a run ends, the dashboard keeps a summary: "
            "rows, average rows/s, duration and final latency."
        ),
        new_code_cell("%load_ext streamcell\nimport polars as pl\nimport streamcell as sc"),
        new_markdown_cell(
            "An endless, throttled clickstream on the native engine: per-user activity, live."
        ),
        new_code_cell(
            "%%stream clicks --engine native --workers 2\n"
            "source clickstream(users=5_000, seed=1), rate=20_000\n"
            "filter user_id.is_not_null()\n"
            "key_by user_id\n"
            "agg views=count(), spent=sum(price), last_event=last(event)\n"
            "sink table"
        ),
        new_markdown_cell(
            "A finite sessionization on the reference engine (pure Python, the oracle), next "
            "to it; it ends within a second, and its dashboard shows the run's summary:"
        ),
        new_code_cell(
            "%%stream sessions --engine reference --wait\n"
            "source clickstream(rows=30_000, users=5_000, seed=2)\n"
            'filter event == "view" and user_id.is_not_null()\n'
            "key_by user_id\n"
            'session gap="30m", time=ts\n'
            "agg pages=count(), spent=sum(price)\n"
            "sink table"
        ),
        new_markdown_cell(
            "Snapshots of the live table while the run continues (a Polars DataFrame):"
        ),
        new_code_cell(
            "import time\ntime.sleep(1.0)\nclicks.table().sort('spent', descending=True).head()"
        ),
        new_markdown_cell(
            "SQL over the live tables of all runs (Polars' SQL engine on snapshots), "
            "as a line magic or from Python:"
        ),
        new_code_cell(
            "%stream sql SELECT c.user_id, c.views, count(*) AS sessions, sum(s.pages) AS pages "
            "FROM clicks c JOIN sessions s USING (user_id) GROUP BY c.user_id, c.views "
            "ORDER BY pages DESC LIMIT 5"
        ),
        new_code_cell(
            'sc.sql("SELECT last_event, count(*) AS users, sum(spent) AS spent '
            'FROM clicks GROUP BY last_event ORDER BY users DESC")'
        ),
        new_markdown_cell(
            "The metrics history (names close to Spark's StreamingQueryProgress), "
            "for your own plots:"
        ),
        new_code_cell(
            "m = clicks.metrics()\n"
            "m.select('batchId', 'timestamp', 'numInputRows', 'inputRowsPerSecond', "
            "'totalInputRows').tail(3)"
        ),
        new_code_cell("%stream list"),
        new_code_cell("%stream status clicks"),
        new_markdown_cell("Stop the endless run (the dashboard keeps its final state):"),
        new_code_cell("%stream stop clicks\nclicks.status"),
    ]
    nbformat.write(nb, HERE / "dashboard.ipynb")


def sketches() -> None:
    nb = _notebook()
    nb.cells = [
        new_markdown_cell(
            "# Live sketches in a pipeline\n\n"
            "A `sketch` stage keeps Θ / HLL distinct counts, KLL quantiles and frequent items of "
            "columns while the rows go on. Any cell asks for the current answer while the run "
            "ingests; the dashboard's sketch panel shows them too."
        ),
        new_code_cell("%load_ext streamcell\nimport streamcell as sc"),
        new_code_cell(
            "%%stream clicks --engine native --workers 2\n"
            "source clickstream(users=200_000, seed=1), rate=50_000\n"
            "sketch theta(user_id) as users, kll(price) as prices, frequent(item_id) as top_items\n"
            "key_by event\n"
            "sketch hll(user_id) as users_by_event"
        ),
        new_markdown_cell("From another cell, while it runs:"),
        new_code_cell(
            "import time\ntime.sleep(1.0)\n"
            "users = clicks.sketch('users')\n"
            "print(f'{users.estimate():,.0f} users '\n"
            "      f'(95%: {users.lower_bound(2):,.0f} .. {users.upper_bound(2):,.0f})')\n"
            "print('price p50 / p99:', clicks.sketch('prices').quantiles([0.5, 0.99]))\n"
            "clicks.sketch('top_items').top(5)"
        ),
        new_markdown_cell("A keyed stage has one answer per key:"),
        new_code_cell("clicks.sketch('users_by_event').to_frame()"),
        new_markdown_cell(
            "The bytes are Apache DataSketches' formats, so the `datasketches` library (and "
            "Spark's DataSketches functions) read them:"
        ),
        new_code_cell(
            "import datasketches as ds\n"
            "ds.compact_theta_sketch.deserialize(users.to_bytes()).get_estimate()"
        ),
        new_code_cell("%stream stop clicks\nclicks.status"),
    ]
    nbformat.write(nb, HERE / "sketches.ipynb")


def sensors() -> None:
    nb = _notebook()
    nb.cells = [
        new_markdown_cell(
            "# Correlating two sensor streams\n\n"
            "Sensors A and B report temperatures per region every minute. `correlate` keeps, "
            "per region, each stream's rows of the last hour and emits their aggregates at "
            "every reading; a filter then flags A's 1-hour moving average running more than "
            "2 standard deviations above B's. In the north, A runs 3 degrees hot after 5 hours."
        ),
        new_code_cell(
            "%load_ext streamcell\nimport datetime as dt\nimport random\n"
            "import polars as pl\nimport streamcell as sc"
        ),
        new_code_cell(
            "rng = random.Random(7)\nt0 = dt.datetime(2024, 6, 1)\n"
            "rows = {'a': [], 'b': []}\n"
            "for m in range(600):\n"
            "    for region in ('north', 'south'):\n"
            "        base = 20.0 + (2.0 if region == 'south' else 0.0)\n"
            "        hot = 3.0 if region == 'north' and m >= 300 else 0.0\n"
            "        ts = t0 + dt.timedelta(minutes=m)\n"
            "        rows['a'].append({'region': region, 'ts': ts, 'temp': base + hot + rng.gauss(0, 0.5)})\n"
            "        rows['b'].append({'region': region, 'ts': ts, 'temp': base + rng.gauss(0, 0.5)})\n"
            "sensor_a, sensor_b = pl.DataFrame(rows['a']), pl.DataFrame(rows['b'])"
        ),
        new_code_cell(
            "%%stream alerts --engine native --workers 2 --wait\n"
            "b = source sensor_b\n"
            "source sensor_a\n"
            'correlate b, on=region, time=ts, over="1h", a_avg=mean(temp), b_avg=mean(b.temp), '
            "b_std=std(b.temp)\n"
            "filter a_avg > b_avg + 2 * b_std"
        ),
        new_code_cell(
            "alerts.table().group_by('region').agg(pl.len().alias('alerts'), "
            "pl.col('ts').min().alias('first'))"
        ),
        new_markdown_cell(
            "The same pipeline from Python, and the reference engine's answer (the definition):"
        ),
        new_code_cell(
            "a, b = sc.source(sensor_a), sc.source(sensor_b, name='b')\n"
            "plan = (a.correlate(b, on='region', time='ts', over='1h',\n"
            "                    a_avg=a.col('temp').mean(), b_avg=b.col('temp').mean(),\n"
            "                    b_std=b.col('temp').std())\n"
            "         .filter(sc.col('a_avg') > sc.col('b_avg') + 2 * sc.col('b_std'))\n"
            "         .plan('alerts'))\n"
            "assert plan == alerts.plan\n"
            "ref = plan.start('alerts_ref', engine='reference').wait()\n"
            "assert ref.table().equals(alerts.table())\n"
            "print(plan.explain())"
        ),
        new_code_cell("alerts.counts()"),
    ]
    nbformat.write(nb, HERE / "sensors.ipynb")


if __name__ == "__main__":
    quickstart()
    dashboard()
    sketches()
    sensors()
