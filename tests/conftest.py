"""Shared test fixtures.

The ``engine`` fixture runs a test once per backend configuration. Today that is the
reference backend; the native backend (several worker counts, schedulers, batch sizes)
and Spark join by adding entries to ``ENGINE_CONFIGS`` — every operator test then runs on
them and is compared against the reference, the oracle.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest

from streamcell.options import RunOptions


@dataclass(frozen=True)
class EngineConfig:
    id: str
    options: RunOptions


ENGINE_CONFIGS: list[EngineConfig] = [EngineConfig("reference", RunOptions(engine="reference"))]

try:
    import streamcell._runtime  # noqa: F401

    ENGINE_CONFIGS += [
        EngineConfig("native-w1", RunOptions(engine="native", workers=1)),
        EngineConfig("native-w2-b7", RunOptions(engine="native", workers=2, batch_size=7)),
        EngineConfig(
            "native-w4-b1-lp", RunOptions(engine="native", workers=4, batch_size=1, scheduler="LP")
        ),
        EngineConfig(
            "native-w2-b3-qst",
            RunOptions(engine="native", workers=2, batch_size=3, scheduler="QST"),
        ),
        EngineConfig(
            "native-w4-b64-et",
            RunOptions(engine="native", workers=4, batch_size=64, scheduler="ET"),
        ),
    ]
except ImportError:  # a build without the native runtime
    pass


try:
    import pyspark  # noqa: F401

    from streamcell.backends.spark import environment_problem

    if environment_problem() is None:  # PySpark 4 and Java 17: one local[2] session
        ENGINE_CONFIGS.append(EngineConfig("spark", RunOptions(engine="spark")))
except ImportError:  # no PySpark in this environment
    pass


def _selected() -> list[EngineConfig]:
    wanted = os.environ.get("STREAMCELL_TEST_ENGINES")
    if not wanted:
        return ENGINE_CONFIGS
    names = set(wanted.split(","))
    return [c for c in ENGINE_CONFIGS if c.id in names or c.options.engine in names]


def _param(c: EngineConfig) -> object:
    marks = [pytest.mark.spark] if c.options.engine == "spark" else []
    return pytest.param(c, id=c.id, marks=marks)


@pytest.fixture(params=[_param(c) for c in _selected()])
def engine(request: pytest.FixtureRequest) -> EngineConfig:
    return request.param


@pytest.fixture(autouse=True)
def _stop_runs():
    yield
    from streamcell.run import stop_all

    stop_all()
