"""load_client_config: the sections the `silt` CLI dials the services with, validated alone.

The same file, SILT_* overrides and messages as load_config for those sections; a bad value in
another section is the services' to report (they validate the whole file at start), not a
reason for `silt repo list` to refuse to start.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.common import State
from cli.main import cli
from silt.client import resolve_settings
from silt.client_base import EXIT_USAGE
from silt.config import ClientConfig, Config, load_client_config, load_config
from silt.errors import ConfigError


def _message(load: object, *args: object, **kwargs: object) -> str:
    with pytest.raises(ConfigError) as err:
        load(*args, **kwargs)  # type: ignore[operator]
    return str(err.value)


def test_its_fields_are_configs_own() -> None:
    for name, field in ClientConfig.model_fields.items():
        full = Config.model_fields[name]
        assert field.annotation is full.annotation, name
        assert field.default_factory is not None and full.default_factory is not None
        assert field.default_factory() == full.default_factory(), name  # type: ignore[call-arg]


def test_the_same_values_as_load_config(tmp_path: Path) -> None:
    path = tmp_path / "silt.yaml"
    path.write_text(
        "graveler:\n  listen_address: 0.0.0.0:9102\n"
        "gateways:\n  s3:\n    region: eu-west-3\n    listen_address: 0.0.0.0:9000\n"
        "tls:\n  enabled: true\n  ca_file: /etc/ca.pem\n"
        "database:\n  type: mem\n"
    )
    env = {"SILT_AUTH_ENDPOINT": "auth.example:8101", "SILT_COMPACTOR_LISTEN_ADDRESS": "10.0.0.1:9103"}
    client, full = load_client_config(path, env=env), load_config(path, env=env)
    for name in ClientConfig.model_fields:
        assert getattr(client, name) == getattr(full, name), name
    assert client.graveler.dial_address == "127.0.0.1:9102"
    assert client.auth.endpoint == "auth.example:8101"
    assert client.compactor.dial_address == "10.0.0.1:9103"
    assert client.tls.enabled and client.gateways.s3.region == "eu-west-3"


def test_defaults_without_a_file() -> None:
    client, full = load_client_config(env={}), load_config(env={})
    for name in ClientConfig.model_fields:
        assert getattr(client, name) == getattr(full, name), name


def test_the_config_file_variable_is_read(tmp_path: Path) -> None:
    path = tmp_path / "silt.yaml"
    path.write_text("auth:\n  endpoint: auth.example:8101\n")
    assert load_client_config(env={"SILT_CONFIG": str(path)}).auth.endpoint == "auth.example:8101"


@pytest.mark.parametrize(
    ("text", "env"),
    [
        ("api:\n  max_body_bytes: 1\n", {}),
        ("database:\n  cassandra:\n    port: 0\n", {}),
        ("actions:\n  lua:\n    timeout_seconds: -1\n", {}),
        ("", {"SILT_LOGGING_LEVEL": "LOUD"}),
        ("", {"SILT_DATABASE_CASSANDRA_DATACENTERS": "dc1"}),  # not even parsed
        ("blockstore:\n  nonsense: 1\n", {}),
    ],
)
def test_a_bad_value_elsewhere_is_the_services_to_report(tmp_path: Path, text: str, env: dict[str, str]) -> None:
    path = tmp_path / "silt.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError):
        load_config(path, env=env)
    assert load_client_config(path, env=env).graveler.dial_address == "127.0.0.1:8102"


@pytest.mark.parametrize(
    ("text", "env"),
    [
        ("graveler:\n  endpoint: 0.0.0.0:8102\n", {}),  # a wildcard is no endpoint
        ("", {"SILT_GRAVELER_ENDPOINT": "graveler.silt.svc"}),  # no port
        ("graveler:\n  history:\n    max_streams: 0\n", {}),
        ("graveler: 5\n", {}),
        ("gateways:\n  s3:\n    listen_address: nowhere\n", {}),
        ("tls:\n  enabled: true\n  cert_file: /a.pem\n", {}),
        ("compactor:\n  bogus: 1\n", {}),
        ("gravler:\n  endpoint: graveler.example:8102\n", {}),  # a misspelt section
        ("auth:\n  cache_ttl_seconds: -1\n  endpoint: 0.0.0.0:1\n", {}),  # two errors: "(and 1 more)"
    ],
)
def test_a_bad_value_in_a_section_it_reads_fails_as_before(tmp_path: Path, text: str, env: dict[str, str]) -> None:
    path = tmp_path / "silt.yaml"
    path.write_text(text)
    expected = _message(load_config, path, env=env)
    assert expected.startswith("invalid configuration: ")
    assert _message(load_client_config, path, env=env) == expected


def test_repo_list_starts_despite_a_bad_value_elsewhere(tmp_path: Path) -> None:
    # No credentials: the command gets past the configuration and stops at the next step.
    (tmp_path / "config.yaml").write_text("api:\n  max_body_bytes: 1\n")
    env = {"SILT_DATA_DIR": str(tmp_path), "SILT_ACCESS_KEY_ID": None, "SILT_SECRET_ACCESS_KEY": None}
    result = CliRunner().invoke(cli, ["repo", "list"], obj=State(), env=env)
    assert result.exit_code == EXIT_USAGE
    assert result.stderr.startswith("silt: no credentials")


def test_repo_list_stops_at_a_bad_graveler_endpoint(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("graveler:\n  endpoint: 0.0.0.0:8102\n")
    env = {"SILT_DATA_DIR": str(tmp_path), "SILT_ACCESS_KEY_ID": "a", "SILT_SECRET_ACCESS_KEY": "b"}
    expected = _message(load_config, tmp_path / "config.yaml", env={})
    result = CliRunner().invoke(cli, ["repo", "list"], obj=State(), env=env)
    assert result.exit_code == EXIT_USAGE
    assert result.stderr == f"silt: {expected}\n"
    assert "graveler.endpoint" in expected and "not a wildcard listen address" in expected


def test_resolve_settings_takes_either() -> None:
    client, full = load_client_config(env={}), load_config(env={})
    assert resolve_settings(client) == resolve_settings(full)
