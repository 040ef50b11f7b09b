"""`silt check` (and every service opening the store) warns about a keyspace that cannot keep
acknowledged writes through the loss of one node: the test node's keyspace has one replica."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from cli.common import State
from cli.main import cli
from silt.kv.cassandra import CassandraStore
from tests.support.cassandra import CassandraServer

pytestmark = pytest.mark.cassandra


def test_single_replica_keyspace_warns(
    cassandra_server: CassandraServer, cassandra_store: CassandraStore, tmp_path: Path
) -> None:
    # cassandra_store: the keyspace exists (`silt check` creates none).
    database = cassandra_server.database_config(keyspace="silt_tests")
    config = {
        "database": {"type": "cassandra", "cassandra": database.cassandra.model_dump(exclude_none=True)},
        "blockstore": {"type": "local", "local": {"path": str(tmp_path / "data")}},
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    (tmp_path / "data").mkdir()
    env = {"SILT_CONFIG": str(path), "HOME": str(tmp_path / "home")}
    result = CliRunner().invoke(cli, ["check"], obj=State(), env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "kv: cassandra ok" in result.stdout
    assert "replication factor 1 (< 3)" in result.stderr


def test_store_reports_the_keyspace_as_created(cassandra_store: CassandraStore) -> None:
    assert any("replication factor 1" in w for w in cassandra_store.durability_warnings())
