"""Correlating two sensor streams with ``correlate`` (run: python examples/correlate_sensors.py).

Sensor A and sensor B report temperatures per region every minute. The pipeline flags the
moments where A's 1-hour moving average is more than 2 standard deviations above B's: the
README's example of a condition over several streams.
"""

from __future__ import annotations

import datetime as dt
import random

import polars as pl

import streamcell as sc

PIPELINE = """
b = source sensor_b
source sensor_a
correlate b, on=region, time=ts, over="1h", a_avg=mean(temp), b_avg=mean(b.temp), b_std=std(b.temp)
filter a_avg > b_avg + 2 * b_std
sink table("alerts")
"""


def sensors(minutes: int = 600, seed: int = 7) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Readings of A and B for regions north / south; A runs hot in the north after 5 h."""
    rng = random.Random(seed)
    t0 = dt.datetime(2024, 6, 1)
    rows: dict[str, list[dict]] = {"a": [], "b": []}
    for m in range(minutes):
        for region in ("north", "south"):
            base = 20.0 + (2.0 if region == "south" else 0.0)
            hot = 3.0 if region == "north" and m >= 300 else 0.0
            ts = t0 + dt.timedelta(minutes=m)
            rows["a"].append({"region": region, "ts": ts, "temp": base + hot + rng.gauss(0, 0.5)})
            rows["b"].append({"region": region, "ts": ts, "temp": base + rng.gauss(0, 0.5)})
    return pl.DataFrame(rows["a"]), pl.DataFrame(rows["b"])


def alerts(minutes: int = 600) -> pl.DataFrame:
    a, b = sensors(minutes)
    run = sc.parse(PIPELINE, {"sensor_a": a, "sensor_b": b}).start("sensors")
    run.wait()
    return run.table("alerts")


if __name__ == "__main__":
    found = alerts()
    print(found.group_by("region").agg(pl.len(), pl.col("ts").min().alias("first")))
