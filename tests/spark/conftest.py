"""The Spark tests' own collection rules: the modules that start a second cluster of their
own run only in the cluster tier (``make test-spark-cluster``), to keep ``make test`` short."""

from __future__ import annotations

import os

collect_ignore = (
    [] if os.environ.get("STREAMCELL_TEST_SPARK_CLUSTER") else ["test_spark_cluster_shipping.py"]
)
