"""The jobs' Spark sessions fork their Python workers from jobs/worker_daemon.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.spark import SHORT_JVM_OPTIONS

REPO_ROOT = Path(__file__).resolve().parents[3]
# A JVM's start and one task: seconds; far more on a loaded machine.
SUBMIT_TIMEOUT_S = 180


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


SUBMITTED_JOB = """
import json, os, sys
from jobs.entry_point import job_session

spark = job_session(None, "silt-submitted")
paths = spark.sparkContext.parallelize([0], 1).map(lambda _: list(sys.path)).collect()[0]
print(json.dumps({"daemon": spark.conf.get("spark.python.daemon.module"), "path": paths}))
spark.stop()
"""


@pytest.mark.spark
@pytest.mark.parametrize("chosen", [None, "pyspark.daemon"], ids=["ours", "the-submitters"])
def test_a_job_under_spark_submit_forks_its_workers_from_the_jobs_daemon(tmp_path: Path, chosen: str | None) -> None:
    """The session spark-submit starts (jobs/entry_point.py) gets the same worker settings,
    unless spark-submit was given its own."""
    script = tmp_path / "job.py"
    script.write_text(SUBMITTED_JOB)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "PYSPARK_PYTHON": sys.executable}
    submit = [str(Path(sys.executable).parent / "spark-submit"), "--master", "local[1]"]
    if chosen is not None:
        submit += ["--conf", f"spark.python.daemon.module={chosen}"]
    done = subprocess.run(
        [*submit, "--driver-java-options", SHORT_JVM_OPTIONS, str(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=SUBMIT_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    archives = [entry for entry in answer["path"] if entry.endswith((".jar", ".zip")) and os.path.isfile(entry)]
    if chosen is None:
        assert answer["daemon"] == "jobs.worker_daemon"
        assert archives == [], answer["path"]
    else:
        assert answer["daemon"] == chosen
        assert any(entry.endswith("pyspark.zip") for entry in archives), answer["path"]
