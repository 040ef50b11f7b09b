"""Fixtures of the KV suites. `store` is tests/conftest.py's (one per driver) plus a leg on the
3-node Cassandra cluster (RF 3, QUORUM / SERIAL)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from silt.config import DatabaseConfig, LocalDatabaseConfig
from silt.kv import Store, open_store
from tests.conftest import KV_DRIVERS

# Only the KV suites run on the cluster as well; the other suites' Cassandra leg stays on the
# single node, which costs less (a suite adds a cluster leg through cassandra_cluster_store).
KV_DRIVERS_AND_CLUSTER = [*KV_DRIVERS, pytest.param("cassandra_cluster", marks=pytest.mark.cassandra_cluster)]


@pytest.fixture(params=KV_DRIVERS_AND_CLUSTER)
def store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    """A KV Store of each driver in turn: fresh for mem and local, the shared ones for Cassandra."""
    if request.param in ("cassandra", "cassandra_cluster"):
        yield request.getfixturevalue(f"{request.param}_store")
        return
    path = tmp_path_factory.mktemp("kv") / "metadata.db"
    opened = open_store(DatabaseConfig(type=request.param, local=LocalDatabaseConfig(path=str(path))))
    yield opened
    opened.close()


@pytest.fixture
def partition() -> bytes:
    """A partition no other test touches."""
    return b"p-" + uuid.uuid4().hex.encode()
