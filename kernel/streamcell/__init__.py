"""streamcell: Jupyter-native streaming analytics on an ordered multicore runtime.

In a notebook: ``%load_ext streamcell`` then a ``%%stream NAME`` cell. From Python::

    import streamcell as sc
    run = (sc.source(sc.clickstream(rows=100_000, seed=1))
             .filter(sc.col("event") == "view")
             .key_by("user_id")
             .session(gap="30m", time="ts")
             .agg(pages=sc.count(), spent=sc.col("price").sum())
             .start("sessions"))
    run.wait().table()
"""

from ._version import __version__ as __version__
from .backends.spark.session import configure as configure_spark
from .compiler import compile_plan
from .dsl import parse
from .errors import DSLSyntaxError, NotSupportedError, PlanError, RunFailed, StreamcellError
from .expr import Expr, col, count, count_distinct, first, last, lit, max_, mean, min_, sum_, when
from .options import RunOptions
from .plan import (
    Plan,
    Stream,
    clickstream,
    combine,
    csv,
    frequent,
    hll,
    kll,
    ndjson,
    parquet,
    source,
    store_sales,
    theta,
)
from .run import Run, registry, start
from .snapshot import MetricsSnapshot, metrics_snapshot
from .sources import watch
from .sql import sql
from .udf import UdfCompileError, UdfError, call, cython_udf, python_udf

sum = sum_  # noqa: A001 - mirrors polars.sum; the builtin stays available as builtins.sum
min = min_  # noqa: A001
max = max_  # noqa: A001


def load_ipython_extension(ipython):  # type: ignore[no-untyped-def]
    """``%load_ext streamcell``: registers ``%%stream`` / ``%stream``."""
    from .magic import load

    load(ipython)


def unload_ipython_extension(ipython):  # type: ignore[no-untyped-def]
    from .run import stop_all

    stop_all()


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """Where JupyterLab finds the built extension (``jupyter labextension develop``)."""
    return [{"src": "labextension", "dest": "streamcell"}]


__all__ = [
    "DSLSyntaxError",
    "Expr",
    "MetricsSnapshot",
    "NotSupportedError",
    "Plan",
    "PlanError",
    "Run",
    "RunFailed",
    "RunOptions",
    "Stream",
    "StreamcellError",
    "UdfCompileError",
    "UdfError",
    "call",
    "clickstream",
    "col",
    "combine",
    "compile_plan",
    "configure_spark",
    "count",
    "count_distinct",
    "csv",
    "cython_udf",
    "first",
    "frequent",
    "hll",
    "kll",
    "last",
    "lit",
    "max",
    "metrics_snapshot",
    "mean",
    "min",
    "ndjson",
    "parquet",
    "parse",
    "python_udf",
    "registry",
    "source",
    "sql",
    "start",
    "store_sales",
    "sum",
    "theta",
    "watch",
    "when",
]
