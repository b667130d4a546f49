"""The kernel's one local SparkSession, started on first use of the Spark engine.

Start-up (a JVM, ~6 s) is paid once per kernel: :func:`get_session` caches the session.
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
from typing import Any

from ...errors import StreamcellError

_LOCK = threading.Lock()
_SESSION: Any = None

MASTER = os.environ.get("STREAMCELL_SPARK_MASTER", "local[2]")

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
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    ),
    "spark.sql.adaptive.enabled": "false",
    "spark.driver.memory": os.environ.get("STREAMCELL_SPARK_DRIVER_MEMORY", "2g"),
    "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
}


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


def get_session() -> Any:
    """The kernel's SparkSession (``local[2]`` unless ``STREAMCELL_SPARK_MASTER`` says
    otherwise), started on the first call."""
    global _SESSION
    with _LOCK:
        if _SESSION is not None:
            return _SESSION
        problem = pyspark_problem() or java_problem()
        if problem:
            raise StreamcellError(problem)
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        from pyspark.sql import SparkSession

        b = SparkSession.builder.master(MASTER).appName("streamcell")
        for k, v in CONF.items():
            b = b.config(k, v)
        b = b.config("spark.local.dir", tempfile.mkdtemp(prefix="streamcell-spark-"))
        try:
            _SESSION = b.getOrCreate()
        except Exception as e:  # Py4J/JVM start failures: one clear message
            raise StreamcellError(f"could not start local Spark ({MASTER}): {e}") from e
        _SESSION.sparkContext.setLogLevel("ERROR")
        return _SESSION


def session_started() -> bool:
    return _SESSION is not None
