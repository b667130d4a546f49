"""The version of streamcell: the one place it is written.

The build reads it (``[tool.hatch.version]`` in pyproject.toml) and ``package.json`` must
match it (``tests/test_packaging.py`` checks).
"""

__version__ = "0.1.0"
