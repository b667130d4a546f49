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


def _selected() -> list[EngineConfig]:
    wanted = os.environ.get("STREAMCELL_TEST_ENGINES")
    if not wanted:
        return ENGINE_CONFIGS
    names = set(wanted.split(","))
    return [c for c in ENGINE_CONFIGS if c.id in names or c.options.engine in names]


@pytest.fixture(params=_selected(), ids=lambda c: c.id)
def engine(request: pytest.FixtureRequest) -> EngineConfig:
    return request.param


@pytest.fixture(autouse=True)
def _stop_runs():
    yield
    from streamcell.run import stop_all

    stop_all()
