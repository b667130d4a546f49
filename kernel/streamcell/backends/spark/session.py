"""The kernel's one SparkSession, started on first use of the Spark engine.

Start-up (a JVM, ~6 s) is paid once per kernel: :func:`get_session` caches the session.
Which Spark it talks to is, in this order: :func:`configure`'s ``master``, the
``STREAMCELL_SPARK_MASTER`` environment variable (read when a session is built), a
SparkSession already active in this process (Databricks, ``spark-submit``, one the user
built), else ``local[2]``. Changing the master or the extra configuration stops the cached
session; the next Spark run builds one for the new settings.

A missing PySpark or Java gives a :class:`~streamcell.errors.StreamcellError` that says
how to fix it, instead of a Py4J stack trace.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping
from typing import Any

from ...errors import StreamcellError

_LOCK = threading.Lock()
_SESSION: Any = None
_BUILT_FOR: tuple[str | None, tuple[tuple[str, str], ...]] | None = None
_ADOPTED = False  # the session was already active (Databricks...): never stopped by streamcell
_MASTER: str | None = None  # configure(master=...)
_EXTRA: dict[str, str] = {}  # configure(conf=...)

DEFAULT_MASTER = "local[2]"
ENV_MASTER = "STREAMCELL_SPARK_MASTER"

CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    # streamcell's datetime is naive UTC microseconds: Spark's TIMESTAMP_NTZ
    "spark.sql.timestampType": "TIMESTAMP_NTZ",
    # wrap-around int arithmetic and null-on-error builtins; streamcell's own error rules
    # (dead letters) are implemented explicitly by the translator
    "spark.sql.ansi.enabled": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "2",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.execution.arrow.pyspark.fallback.enabled": "false",
    # batches for the Python workers are bounded by rows (maxRecordsPerBatch, 10,000); at
    # INT_MAX Spark skips the bytes check, which measures the whole batch after each row (a
    # mapInArrow of 700k rows: 0.44 -> 0.25 s; a third of the executor's time in Q1's top_k)
    "spark.sql.execution.arrow.maxBytesPerBatch": str(2**31 - 1),
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    ),
    "spark.sql.adaptive.enabled": "false",
    "spark.driver.memory": os.environ.get("STREAMCELL_SPARK_DRIVER_MEMORY", "2g"),
    "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
}
# the settings streamcell's results depend on: applied to an adopted session too
SEMANTIC_CONF = (
    "spark.sql.session.timeZone",
    "spark.sql.timestampType",
    "spark.sql.ansi.enabled",
    "spark.sql.execution.arrow.pyspark.enabled",
    "spark.sql.execution.arrow.pyspark.fallback.enabled",
)


def java_problem() -> str | None:
    """Why Spark cannot start here (no Java, or a Java older than 17), or None."""
    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    if not java or not os.path.exists(java):
        return (
            "the Spark engine needs Java 17 or newer, and no `java` was found "
            "(set JAVA_HOME or put java on PATH; e.g. `apt-get install openjdk-17-jre-headless` "
            "or `conda install -c conda-forge openjdk=17`)"
        )
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30).stderr
    except (OSError, subprocess.SubprocessError) as e:
        return f"the Spark engine needs Java 17+, and `{java} -version` failed: {e}"
    version = out.split('"')[1] if '"' in out else ""
    major = version.split(".")[0] if version else ""
    if major.isdigit() and int(major) < 17:
        return f"the Spark engine needs Java 17 or newer; {java} is Java {version} (set JAVA_HOME)"
    return None


def pyspark_problem() -> str | None:
    try:
        import pyspark
    except ImportError:
        return "the Spark engine needs PySpark 4: `pip install 'pyspark>=4,<5' 'pandas<3' protobuf`"
    if int(pyspark.__version__.split(".")[0]) < 4:
        return f"the Spark engine needs PySpark 4.x; found {pyspark.__version__}"
    return None


def configure(master: str | None = None, *, conf: Mapping[str, str] | None = None) -> None:
    """Point the Spark engine at a cluster (and set Spark options) for the next Spark run.

    Parameters
    ----------
    master
        A Spark master URL: ``"local[4]"``, ``"spark://host:7077"`` (standalone),
        ``"yarn"``, ``"k8s://https://host:443"``. ``None`` (the default) restores the
        default: ``STREAMCELL_SPARK_MASTER`` if set, else a SparkSession already active in
        this process (Databricks, ``spark-submit``), else ``local[2]``.
    conf
        Extra Spark settings for the session (they override streamcell's defaults), e.g.
        ``{"spark.executor.memory": "4g", "spark.archives": "env.tar.gz#environment"}``.

    The cached session is stopped when the master or ``conf`` changes (a session that was
    already active when streamcell first needed one is left running), so this is refused
    while a Spark run is in progress (stop it first).

    Examples
    --------
    >>> import streamcell as sc
    >>> sc.configure_spark("spark://127.0.0.1:7077", conf={"spark.executor.cores": "1"})
    >>> sc.configure_spark()  # back to the default (local[2])

    Only the Spark engine reads these settings.
    """
    global _MASTER, _EXTRA
    if master is not None and (not isinstance(master, str) or not master.strip()):
        raise StreamcellError(f"configure_spark: master must be a Spark master URL, got {master!r}")
    extra = {}
    for k, v in (conf or {}).items():
        if not isinstance(k, str) or not k.startswith("spark."):
            raise StreamcellError(
                f"configure_spark: conf key {k!r} is not a Spark setting (spark.*)"
            )
        extra[k] = str(v)
    from ...run import registry

    busy = [n for n, r in registry().items() if r.engine == "spark" and not r.done()]
    with _LOCK:
        changed = (master, extra) != (_MASTER, _EXTRA)
        if changed and busy and _SESSION is not None:
            raise StreamcellError(
                "configure_spark: Spark runs are in progress on the current session "
                f"({', '.join(sorted(busy))}); stop them first"
            )
        _MASTER, _EXTRA = master, extra
        if changed:
            _stop_locked()


def settings() -> tuple[str | None, dict[str, str]]:
    """What :func:`configure` last set: ``(master, conf)`` (to restore it later)."""
    return _MASTER, dict(_EXTRA)


def wanted_master() -> str | None:
    """The master the next session is built for (None: adopt an active session, else local)."""
    return _MASTER or os.environ.get(ENV_MASTER) or None


def current_master() -> str:
    """The master of the running session, or the one the next session will use."""
    s = _SESSION
    if s is not None and alive(s):
        return str(s.sparkContext.master)
    return wanted_master() or DEFAULT_MASTER


def is_local(master: str) -> bool:
    return master == "local" or master.startswith("local[") or master.startswith("local-")


def alive(s: Any) -> bool:
    """Whether a SparkSession still has a running SparkContext."""
    try:
        return s.sparkContext._jsc is not None
    except Exception:  # a torn-down gateway
        return False


def _stop_locked() -> None:
    global _SESSION, _BUILT_FOR, _ADOPTED
    s, _SESSION, _BUILT_FOR = _SESSION, None, None
    adopted, _ADOPTED = _ADOPTED, False
    if s is not None and not adopted and alive(s):
        s.stop()


def stop() -> None:
    """Stop the cached session (the next Spark run starts a new one); a session streamcell
    found already active is left running, only forgotten."""
    with _LOCK:
        _stop_locked()


def get_session() -> Any:
    """The kernel's SparkSession for the configured master, started on the first call."""
    global _SESSION, _BUILT_FOR, _ADOPTED
    with _LOCK:
        key = (wanted_master(), tuple(sorted(_EXTRA.items())))
        if _SESSION is not None and key == _BUILT_FOR and alive(_SESSION):
            return _SESSION
        _stop_locked()
        problem = pyspark_problem() or java_problem()
        if problem:
            raise StreamcellError(problem)
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        from pyspark.sql import SparkSession

        master = key[0]
        active = SparkSession.getActiveSession()
        if (
            active is not None
            and alive(active)
            and master not in (None, active.sparkContext.master)
        ):
            raise StreamcellError(  # one SparkContext per process: getOrCreate would return it
                f"a SparkSession on {active.sparkContext.master} is already active in this "
                f"process; stop it, or call configure_spark() without a master to use it, "
                f"instead of {master}"
            )
        if active is not None and alive(active):  # a notebook on a cluster: use its session
            for k, v in [*((k, CONF[k]) for k in SEMANTIC_CONF), *_EXTRA.items()]:
                try:
                    active.conf.set(k, v)
                except Exception as e:  # a static setting of a running session
                    raise StreamcellError(
                        f"configure_spark: {k} cannot be set on the SparkSession already "
                        f"active in this process ({type(e).__name__}); set it where that "
                        "session is built"
                    ) from e
            _SESSION, _BUILT_FOR, _ADOPTED = active, key, True
            _quiet_own_query_ends(active)
            return active
        master = master or DEFAULT_MASTER
        b = SparkSession.builder.master(master).appName("streamcell")
        for k, v in {**CONF, **_EXTRA}.items():
            b = b.config(k, v)
        if is_local(master) and "spark.local.dir" not in _EXTRA:
            b = b.config("spark.local.dir", tempfile.mkdtemp(prefix="streamcell-spark-"))
        try:
            _SESSION = b.getOrCreate()
        except Exception as e:  # Py4J/JVM start failures: one clear message
            raise StreamcellError(f"could not start Spark (master {master}): {e}") from e
        _BUILT_FOR = key
        _SESSION.sparkContext.setLogLevel("ERROR")
        _quiet_own_query_ends(_SESSION)
        return _SESSION


def _quiet_own_query_ends(s: Any) -> None:
    """Leave out of Spark's log the end of streamcell's own streaming queries (named
    ``streamcell_<hex>``). A stopped run ends its query from inside a micro-batch, which Spark
    logs as "terminated with error" with a Java stack trace; the kernel forwards the driver's
    stderr into the notebook, so every stop would print a page of it. streamcell reports its
    queries' real failures itself (a ``StreamcellError`` from ``run.wait()``). Other queries'
    logs are untouched: one log4j2 regex filter on the message, for this JVM."""
    try:
        log4j = s.sparkContext._jvm.org.apache.logging.log4j
        result = getattr(log4j.core, "Filter$Result")
        flt = log4j.core.filter.RegexFilter.createFilter(
            r"(?s)Query streamcell_[0-9a-f]{8} .*terminated with error.*",
            None,
            False,
            result.DENY,
            result.NEUTRAL,
        )
        ctx = log4j.LogManager.getContext(False)
        ctx.getConfiguration().addFilter(flt)
        ctx.updateLoggers()
    except Exception:  # another logging backend (a cluster's own setup): the log stays
        pass


def session_started() -> bool:
    return _SESSION is not None and alive(_SESSION)
