"""One local SparkSession per test run, with the S3A connector on its classpath.

Tests point a bucket at an endpoint with `silt.spark.use_endpoint_for_bucket`, so one session
serves tests against Silt's gateway and against moto_server alike. The JVM exits with this
process (PySpark's gateway watches its stdin).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from silt.spark import local_session
from tests.support import spark_cds

# C1 alone and the serial collector: for JVMs that live seconds to minutes over little data; and
# the classes from the archive `make test-deps` builds, when it is there.
SHORT_JVM_OPTIONS = spark_cds.options()


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    # Managed tables and the catalog go to the run's temp dir, never the checkout.
    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    session = local_session(
        None,
        master="local[2]",
        app_name="silt-tests",
        # Per-bucket endpoints are read when a bucket's FileSystem is created: never reuse one.
        extra={
            "spark.hadoop.fs.s3a.impl.disable.cache": "true",
            "spark.sql.warehouse.dir": str(warehouse),
            # The tests' jobs are seconds over a few objects each: C2's compiles and a parallel
            # collector's threads never pay off there, and cost about a fifth of the Spark
            # tests' CPU. What the jobs do, and what the tests check of them, is the same.
            "spark.driver.extraJavaOptions": SHORT_JVM_OPTIONS,
        },
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


_WANTED = pytest.StashKey[bool]()


# Last, after `-m` and `-k` have deselected (`--lf` filters later still): a leg whose selection
# holds no Spark test (the `rest` leg of `make test`) starts no JVM; before, every leg started one
# and kept it idle to its end.
@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    config.stash[_WANTED] = any("spark" in getattr(item, "fixturenames", ()) for item in items)


@pytest.fixture(scope="session", autouse=True)
def _spark_before_grpc(request: pytest.FixtureRequest) -> None:
    """Start the JVM before any test opens a gRPC channel, when the run needs Spark at all.

    PySpark launches its JVM with fork and a Python preexec_fn; forking a process whose gRPC
    threads are running can kill the child before it execs ("Java gateway process exited
    before sending its port number"), which once failed every Spark test of a run.
    """
    if request.config.stash.get(_WANTED, False):
        request.getfixturevalue("spark")
