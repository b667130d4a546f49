"""One number format: kernel/streamcell/fmt.py passes the same cases as ext/src/format.ts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamcell import fmt

CASES = json.loads((Path(__file__).parent / "format_cases.json").read_text(encoding="utf-8"))
KINDS = [k for k in CASES if not k.startswith("_")]


@pytest.mark.parametrize(("kind", "value", "text"), [(k, v, t) for k in KINDS for v, t in CASES[k]])
def test_format_cases(kind, value, text):
    assert getattr(fmt, kind)(value) == text


def test_unknown_numbers_are_a_dash_everywhere():
    for kind in KINDS:
        assert getattr(fmt, kind)(float("nan")) == "–"
        assert getattr(fmt, kind)(float("inf")) == "–"
