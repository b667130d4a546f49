"""The compiled native extension is built and its status mapping works."""

from __future__ import annotations

import pytest

from streamcell import _native
from streamcell.errors import NativeError


def test_native_extension_loads_and_runs_without_gil():
    assert _native.atomic_counter_selftest(100_000) == 100_000
    assert isinstance(_native.build_info()["debug"], bool)


@pytest.mark.parametrize(
    ("code", "exc"),
    [
        (-1, MemoryError),
        (-2, ValueError),
        (-6, ValueError),
        (-9, TypeError),
        (-3, NativeError),
        (-8, NativeError),
    ],
)
def test_check_status_maps_codes_to_exceptions(code, exc):
    with pytest.raises(exc):
        _native.raise_status(code)
    assert _native.raise_status(0) is None
