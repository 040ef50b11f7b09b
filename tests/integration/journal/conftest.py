"""Fixtures the journal's integration tests share."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import pytest

from silt.config import DatabaseConfig, LocalDatabaseConfig
from silt.kv.store import Store, open_store


@pytest.fixture
def empty_store(store: Store, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A second, empty store of the same driver: the KV after its loss, to rebuild into (on
    Cassandra a fresh keyspace, which costs seconds: scenarios rebuild their own repository)."""
    if type(store).__name__ == "CassandraStore":
        server = request.getfixturevalue("cassandra_server")
        fresh = open_store(server.database_config(keyspace=f"rebuilt_{uuid.uuid4().hex[:8]}"))
    else:
        driver: Literal["mem", "local"] = "mem" if type(store).__name__ == "MemStore" else "local"
        fresh = open_store(DatabaseConfig(type=driver, local=LocalDatabaseConfig(path=str(tmp_path / "rebuilt.db"))))
    yield fresh
    fresh.close()
