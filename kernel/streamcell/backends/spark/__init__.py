"""The Spark engine: the same plan on Apache Spark through PySpark 4.

Modules:

- :mod:`.backend`: the backend object, the checks that refuse what Spark cannot run, and the
  lowering of a plan to DataFrame operations for finite sources (:class:`.backend.BatchDriver`);
- :mod:`.stream`: Structured Streaming for unbounded sources;
- :mod:`.expr`: expressions as Spark SQL functions;
- :mod:`.ops`: keyed, windowed and sketch steps inside ``mapInArrow`` on the executors;
- :mod:`.sketch`: sketches built per partition and merged;
- :mod:`.session`: the shared Spark session and the environment checks.

Importing this package imports no PySpark; a run does, when it starts.
"""

from __future__ import annotations

from .backend import SparkBackend, environment_problem, is_streaming

__all__ = ["SparkBackend", "environment_problem", "is_streaming"]
