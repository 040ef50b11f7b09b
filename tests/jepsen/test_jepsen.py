"""The Jepsen-style test of the whole stack (docs/testing/jepsen.md): clients through both edges,
faults from a seeded nemesis, and the checker (tests/jepsen/checker.py) over the history.

Two legs: the 3-node Cassandra cluster (RF 3, QUORUM / SERIAL; the session's, shared with the
other cluster tests) and one SQLite file. `make test` runs one short seeded run per leg; the
nightly variant (`make test-all`, `make test-jepsen`) runs SILT_JEPSEN_RUNS (default 20) runs
with every nemesis, one at a time and mixed. SILT_JEPSEN_SEED reproduces a run's schedule and
operations (each run of the nightly variant uses seed, seed+1, ...).
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.jepsen.nemesis import ALL_KINDS, CASSANDRA_KINDS
from tests.jepsen.runner import Result, run_once, seed_from_env, summary
from tests.jepsen.topology import Topology, start_topology
from tests.support.cassandra_cluster import CassandraCluster

# Real processes driven by real clients, as the end-to-end tests.
pytestmark = pytest.mark.e2e

RUNS_ENV = "SILT_JEPSEN_RUNS"
# The nightly variant's first run: `make test`'s rotating slice (tests/support/rotation.py) runs a
# few of the nightly seeds at a time, the next few on its next turn.
FIRST_RUN_ENV = "SILT_JEPSEN_FIRST_RUN"
SHORT_SEED = 53
# The short runs' faults: those that found violations on the code this harness was written
# against (the ambiguous answer three times: it finds a lost or doubled write only when a
# dropped answer meets a conditional or overwritten key), and on SQLite one of each process;
# kept under `make test`'s budget: no Cassandra node restarts, and on the cluster no kills of
# services, whose restarts take seconds there.
SHORT_FAULT_S = (1.5, 3.0)
SHORT_KINDS = ["proxy-drop", "graveler-kill", "proxy-drop", "clock-offset", "edge-pause", "proxy-refuse", "proxy-drop"]


@pytest.fixture(scope="module")
def sqlite_topology(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Topology]:
    root = tmp_path_factory.mktemp("jepsen-sqlite")
    database = {"type": "local", "local": {"path": str(root / "metadata.db")}}
    topology = start_topology(root, database, random.Random(0))
    try:
        yield topology
    finally:
        topology.stop()


@pytest.fixture(scope="module")
def cassandra_topology(
    cassandra_cluster: CassandraCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Topology]:
    if not cassandra_cluster.controllable:
        pytest.skip("the cluster was not started by this run: its nodes cannot be faulted")
    root = tmp_path_factory.mktemp("jepsen-cassandra")
    config = cassandra_cluster.database_config(keyspace=f"jepsen_{os.getpid()}")
    database = config.model_dump(mode="json", exclude_none=True)
    topology = start_topology(root, database, random.Random(0))
    try:
        yield topology
    finally:
        topology.stop()


def _assert_clean(result: Result) -> None:
    print("\n" + summary(result))
    assert result.report_path is not None
    if result.violations or result.undecided:  # the report says it all: no assertion rewriting
        pytest.fail(f"{summary(result)}\n\n{result.report_path.read_text()}", pytrace=False)


def test_short_run_on_sqlite_loses_nothing(sqlite_topology: Topology) -> None:
    seed = seed_from_env(SHORT_SEED)
    _assert_clean(run_once("sqlite", sqlite_topology, None, seed, SHORT_KINDS, mixed=False, fault_s=SHORT_FAULT_S))


def test_short_run_on_the_cassandra_cluster_loses_nothing(
    cassandra_topology: Topology, cassandra_cluster: CassandraCluster
) -> None:
    kinds = ["proxy-drop", "clock-offset", "proxy-drop", "proxy-refuse", "cassandra-pause", "proxy-drop"]
    seed = seed_from_env(SHORT_SEED)
    result = run_once(
        "cassandra", cassandra_topology, cassandra_cluster, seed, kinds, mixed=False, fault_s=SHORT_FAULT_S
    )
    _assert_clean(result)


def _runs() -> int:
    return int(os.environ.get(RUNS_ENV, "20"))


# The suite's per-test timeout is for one test's worth of work; these make _runs() runs of a few
# minutes each (longer on a loaded machine), so their bound grows with the runs asked for.
MANY_RUNS_TIMEOUT_S = 300 + 480 * _runs()


@pytest.mark.nightly
@pytest.mark.timeout(MANY_RUNS_TIMEOUT_S)
def test_many_runs_with_every_nemesis_on_sqlite(sqlite_topology: Topology) -> None:
    kinds = [kind for kind in ALL_KINDS if kind not in CASSANDRA_KINDS]
    _many("sqlite", sqlite_topology, None, kinds)


@pytest.mark.nightly
@pytest.mark.timeout(MANY_RUNS_TIMEOUT_S)
def test_many_runs_with_every_nemesis_on_the_cassandra_cluster(
    cassandra_topology: Topology, cassandra_cluster: CassandraCluster
) -> None:
    _many("cassandra", cassandra_topology, cassandra_cluster, list(ALL_KINDS))


def _many(leg: str, topology: Topology, cluster: CassandraCluster | None, kinds: list[str]) -> None:
    seed = seed_from_env(1000) + int(os.environ.get(FIRST_RUN_ENV, "0"))
    results = [run_once(leg, topology, cluster, seed + i, kinds) for i in range(_runs())]
    table = [summary(result) for result in results]
    Path(results[-1].report_path or ".").with_name(f"{leg}-summary.txt").write_text("\n".join(table) + "\n")
    print("\n" + "\n".join(table))
    failing = [r for r in results if r.violations or r.undecided]
    assert not failing, "runs with violations:\n" + "\n".join(summary(r) for r in failing)
