"""The jobs' Spark sessions fork their Python workers from jobs/worker_daemon.py."""

from __future__ import annotations

import os
import sys
from typing import Any


def _worker_view(_: int) -> tuple[list[str], str]:
    import pyspark

    return list(sys.path), pyspark.__file__ or ""


def test_workers_import_pyspark_from_its_package_with_no_archive_on_their_path(spark: Any) -> None:
    [(path, pyspark_file)] = spark.sparkContext.parallelize([0], 1).map(_worker_view).collect()
    # Spark puts pyspark's zip, py4j's and the spark-core jar first on a worker's PYTHONPATH; each
    # would cost a read of its directory at every task, and none of them is needed. (Python's
    # own pythonNN.zip is on every path and, not being there, costs nothing.)
    archives = [entry for entry in path if entry.endswith((".jar", ".zip")) and os.path.isfile(entry)]
    assert archives == [], path
    assert "site-packages" in pyspark_file, pyspark_file
