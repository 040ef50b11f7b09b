"""Session-wide servers and stores shared by every test that needs them.

One real Apache Cassandra, one 3-node Cassandra cluster, one moto_server, one Azurite and one
fake-gcs-server per test run,
each started on first use.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import pytest

from silt.config import DatabaseConfig, LocalDatabaseConfig
from silt.kv import Store, open_store
from tests.support.cassandra import cassandra_server  # noqa: F401
from tests.support.cassandra_cluster import cassandra_cluster, cassandra_cluster_store  # noqa: F401
from tests.support.emulators import azurite_server, fake_gcs_server  # noqa: F401
from tests.support.moto import moto_server  # noqa: F401

# Fails the run if anything it started is still running at its end (a leaked process or
# thread outlives the test that started it and skews every later one); starts
# Spark's JVM first when the run needs it; adds the services' recent errors to a failure's report.
pytest_plugins = [
    "tests.support.leaks",
    "tests.support.spark",
    "tests.support.service_logs",
    "tests.support.cpu_times",
    "tests.support.cluster_last",
]

# Every KV-backed suite runs on each driver; the Cassandra leg is marked so it can be selected.
KV_DRIVERS = ["mem", "local", pytest.param("cassandra", marks=pytest.mark.cassandra)]


@pytest.fixture(scope="session")
def cassandra_store(request: pytest.FixtureRequest) -> Iterator[Store]:
    # One store (one keyspace) per run: Cassandra schema changes cost seconds, so tests get
    # isolation from fresh partitions (and fresh repository ids) instead.
    server = request.getfixturevalue("cassandra_server")
    store = open_store(server.database_config(keyspace="silt_tests"))
    yield store
    store.close()


@pytest.fixture(scope="module")
def module_cassandra_store(request: pytest.FixtureRequest) -> Iterator[Store]:
    """The `store` fixture's Cassandra store: a keyspace of the test module's own. Not one for
    the run: every graveler started on a keyspace reads each repository's partition there for
    drops left to do (engine/core/cleanup.py, resume), and its close and a flush wait for that;
    on one keyspace for the run, each graveler of a module late in the run read the partitions
    of every repository the modules before it had made (about a second a graveler in the
    journal's tests). A keyspace costs about half a second."""
    server = request.getfixturevalue("cassandra_server")
    module = request.path.relative_to(request.config.rootpath).as_posix()
    keyspace = f"silt_{request.path.stem[:30]}_{hashlib.sha1(module.encode()).hexdigest()[:6]}"
    store = open_store(server.database_config(keyspace=keyspace))
    yield store
    store.close()


@pytest.fixture(params=KV_DRIVERS)
def store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    """A KV Store of each driver in turn: fresh for mem and local, the test module's for
    Cassandra (shared by its tests: repository names are each test's own)."""
    if request.param == "cassandra":
        yield request.getfixturevalue("module_cassandra_store")
        return
    path = tmp_path_factory.mktemp("kv") / "metadata.db"
    opened = open_store(DatabaseConfig(type=request.param, local=LocalDatabaseConfig(path=str(path))))
    yield opened
    opened.close()


# Marks that follow from where a test lives or what it needs, so `-m` selects them without
# every module remembering to say so (a module marks itself only where no rule can tell).
_MARK_BY_DIRECTORY = [
    # Everything under tests/e2e runs the services as processes, driven by real clients: the
    # gateway's and the REST API's suites (e2e/gateway, e2e/api) and the whole-stack tests.
    (("tests", "e2e"), "e2e"),
    (("tests", "e2e", "api"), "api"),
    (("tests", "unit", "api"), "api"),
    # The web UI in a real browser, over the services as processes.
    (("tests", "browser"), "browser"),
    (("tests", "browser"), "e2e"),
    (("tests", "jepsen"), "jepsen"),
]
_MARK_BY_FIXTURE = {
    "spark": "spark",
    "cassandra_server": "cassandra",
    "cassandra_store": "cassandra",
    # The 3-node cluster has its own mark: it costs three JVMs, started once per run.
    "cassandra_cluster": "cassandra_cluster",
    "cassandra_cluster_store": "cassandra_cluster",
}


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by mark
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        parts = item.path.relative_to(config.rootpath).parts
        for prefix, mark in _MARK_BY_DIRECTORY:
            if parts[: len(prefix)] == prefix:
                item.add_marker(mark)
        for fixture in getattr(item, "fixturenames", ()):
            if fixture in _MARK_BY_FIXTURE:
                item.add_marker(_MARK_BY_FIXTURE[fixture])
