"""Configuration: one YAML file, SILT_* overrides, one-line errors naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.open import actions_options
from silt import config_reference
from silt.config import env_keys, load_config
from silt.errors import ConfigError

EXAMPLE = """
logging:
  format: json
  level: DEBUG
database:
  type: cassandra
  cassandra:
    contact_points: [10.0.0.1, 10.0.0.2]
    keyspace: lake
    replication_strategy: NetworkTopologyStrategy
    datacenters: {dc1: 3}
blockstore:
  type: s3
  s3:
    region: eu-west-1
gateways:
  s3:
    listen_address: "127.0.0.1:9000"
    domain_name: s3.example.com
graveler:
  listen_address: "127.0.0.1:7000"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "silt.yaml"
    path.write_text(text)
    return path


def test_defaults_without_a_file() -> None:
    config = load_config(env={})
    assert config.database.type == "local"
    assert config.blockstore.type == "local"
    assert config.gateways.s3.listen_address == "0.0.0.0:8000"
    assert config.database.cassandra.consistency == "LOCAL_QUORUM"
    assert config.database.cassandra.serial_consistency == "LOCAL_SERIAL"


def test_file_is_read(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, EXAMPLE), env={})
    assert config.logging.format == "json"
    assert config.database.type == "cassandra"
    assert config.database.cassandra.contact_points == ["10.0.0.1", "10.0.0.2"]
    assert config.database.cassandra.datacenters == {"dc1": 3}
    assert config.blockstore.s3.region == "eu-west-1"
    assert config.gateways.s3.domain_name == "s3.example.com"
    assert config.graveler.listen_address == "127.0.0.1:7000"


def test_config_path_from_environment(tmp_path: Path) -> None:
    config = load_config(env={"SILT_CONFIG": str(write(tmp_path, EXAMPLE))})
    assert config.database.cassandra.keyspace == "lake"


def test_environment_overrides_file(tmp_path: Path) -> None:
    env = {
        "SILT_DATABASE_TYPE": "mem",
        "SILT_DATABASE_CASSANDRA_PORT": "9142",
        "SILT_DATABASE_CASSANDRA_CONTACT_POINTS": "a.example, b.example",
        "SILT_DATABASE_CASSANDRA_DATACENTERS": "east:3,west:2",
        "SILT_DATABASE_CASSANDRA_CREATE_SCHEMA": "false",
        "SILT_GATEWAYS_S3_REGION": "ap-south-1",
    }
    config = load_config(write(tmp_path, EXAMPLE), env=env)
    assert config.database.type == "mem"
    assert config.database.cassandra.port == 9142
    assert config.database.cassandra.contact_points == ["a.example", "b.example"]
    assert config.database.cassandra.datacenters == {"east": 3, "west": 2}
    assert config.database.cassandra.create_schema is False
    assert config.gateways.s3.region == "ap-south-1"
    assert config.logging.format == "json"  # untouched keys keep the file's value


def test_every_key_has_an_environment_variable() -> None:
    keys = env_keys()
    assert keys["database.type"] == "SILT_DATABASE_TYPE"
    assert keys["blockstore.s3.credentials.secret_access_key"] == "SILT_BLOCKSTORE_S3_CREDENTIALS_SECRET_ACCESS_KEY"
    assert len(set(keys.values())) == len(keys), "two keys must never share a variable"


@pytest.mark.parametrize(
    ("env", "text", "expected"),
    [
        ({"SILT_DATABASE_TYPE": "postgres"}, "", "database.type (from SILT_DATABASE_TYPE): Input should be"),
        ({"SILT_DATABASE_CASSANDRA_PORT": "abc"}, "", "database.cassandra.port (from SILT_DATABASE_CASSANDRA_PORT)"),
        ({"SILT_DATABASE_CASSANDRA_PORT": "70000"}, "", "less than or equal to 65535"),
        ({}, "database:\n  typo: 1\n", "database.typo (in "),
        ({}, "gateways:\n  s3:\n    listen_address: nowhere\n", "gateways.s3.listen_address"),
        ({}, "database: [1, 2]\n", "database (in "),
        ({"SILT_DATABASE_CASSANDRA_DATACENTERS": "dc1"}, "", "expected key:value pairs"),
        ({"SILT_GRAVELER_COMMIT_WORKER_CPUS": "3-1"}, "", "graveler.commit_worker_cpus (from SILT_GRAVELER"),
        ({}, "graveler:\n  commit_worker_cpus: some\n", 'expected "auto", "all" or CPU ids'),
        # Written into CREATE TABLE: only CQL's own forms pass, never a quote.
        ({"SILT_DATABASE_CASSANDRA_SPECULATIVE_RETRY": "50ms' AND x=1"}, "", "database.cassandra.speculative_retry"),
        ({"SILT_DATABASE_CASSANDRA_SPECULATIVE_RETRY": "50"}, "", "database.cassandra.speculative_retry"),
    ],
)
def test_bad_values_name_the_key(tmp_path: Path, env: dict[str, str], text: str, expected: str) -> None:
    path = write(tmp_path, text) if text else None
    with pytest.raises(ConfigError) as err:
        load_config(path, env=env)
    message = str(err.value)
    assert expected in message
    assert "\n" not in message


def test_unreadable_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read configuration file"):
        load_config(tmp_path / "absent.yaml", env={})
    with pytest.raises(ConfigError, match="not valid YAML at line 2"):
        load_config(write(tmp_path, "a: 1\n  b: [\n"), env={})
    with pytest.raises(ConfigError, match="mapping at the top level"):
        load_config(write(tmp_path, "- 1\n- 2\n"), env={})


def test_secrets_are_not_shown_in_repr(tmp_path: Path) -> None:
    config = load_config(env={"SILT_DATABASE_CASSANDRA_PASSWORD": "hunter2-very-secret"})
    assert "hunter2-very-secret" not in repr(config)
    assert config.database.cassandra.password is not None
    assert config.database.cassandra.password.get_secret_value() == "hunter2-very-secret"


def test_the_configuration_reference_is_generated_from_the_schema() -> None:
    # docs/snippets/config-keys.md is the manual's reference; `make docs` regenerates it.
    assert config_reference.OUTPUT.read_text() == config_reference.render(), (
        "docs/snippets/config-keys.md is stale: run `python -m silt.config_reference --write`"
    )


def test_the_reference_lists_every_key_with_its_variable_and_a_description() -> None:
    rows = {key: (variable, description) for key, variable, _, _, description in config_reference.rows()}
    assert rows.keys() == env_keys().keys()
    for key, variable in env_keys().items():
        assert rows[key][0] == variable
        assert rows[key][1].strip(), key


def test_rejected_secrets_are_not_echoed(tmp_path: Path) -> None:
    path = write(tmp_path, "database:\n  cassandra:\n    password: [hunter2-leaked]\n")
    with pytest.raises(ConfigError) as err:
        load_config(path, env={})
    assert "database.cassandra.password" in str(err.value)
    assert "hunter2-leaked" not in str(err.value)


def test_hooks_read_no_environment_variable_and_reach_no_private_address_unless_configured(tmp_path: Path) -> None:
    defaults = load_config(None, env={})
    assert defaults.actions.env.repositories == {}
    assert defaults.actions.webhook.allow_private is False
    options = actions_options(defaults)
    assert not options.env.for_repository("any").granted("SILTACTION_TOKEN")
    assert options.webhook.allow_private is False

    path = tmp_path / "silt.yaml"
    path.write_text(
        "actions:\n  webhook:\n    allow_private: true\n"
        "  env:\n    repositories:\n      SILTACTION_TOKEN: [ci-*, data]\n"
    )
    options = actions_options(load_config(path, env={}))
    assert options.webhook.allow_private is True
    assert [options.env.for_repository(r).granted("SILTACTION_TOKEN") for r in ("ci-x", "data", "other")] == [
        True,
        True,
        False,
    ]
    from_env = load_config(None, env={"SILT_ACTIONS_ENV_REPOSITORIES": "SILTACTION_TOKEN:ci-*|data"})
    assert from_env.actions.env.repositories == {"SILTACTION_TOKEN": ["ci-*", "data"]}
    with pytest.raises(ConfigError, match="does not start with the prefix"):
        load_config(None, env={"SILT_ACTIONS_ENV_REPOSITORIES": "HOME:data"})
