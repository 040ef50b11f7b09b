"""The CLI's REST transport without a server: where the endpoint and key come from (Silt's
settings, lakectl's file and variables), lakectl's endpoint forms, and the API's errors as the
CLI's one-line errors and exit codes. The transport against a running stack: tests/e2e."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.lakectl_config import base_url
from cli.lakectl_config import load as load_lakectl
from cli.rest import Connection, RestClient, api_error, resolve_connection, segment
from silt.client_base import EXIT_CONFLICT, EXIT_DENIED, EXIT_NOT_FOUND, EXIT_UNAVAILABLE, EXIT_USAGE, ClientError


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No SILT_* or LAKECTL_* variable, an empty home and cache; the home's path."""
    import os

    for name in list(os.environ):
        if name.startswith(("SILT_", "LAKECTL_")):
            monkeypatch.delenv(name)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return home


def _lakectl_yaml(home: Path, endpoint: str = "https://lakefs.example.com/api/v1") -> None:
    (home / ".lakectl.yaml").write_text(
        "credentials:\n  access_key_id: AKIALAKECTL\n  secret_access_key: lakectl-secret\n"
        f"server:\n  endpoint_url: {endpoint}\n"
    )


def test_lakectl_file_alone_configures_the_cli(clean_env: Path) -> None:
    _lakectl_yaml(clean_env)
    connection = resolve_connection(None, None)
    assert connection.endpoint == "https://lakefs.example.com"  # /api/v1 is the client's to add
    assert (connection.access_key_id, connection.secret_access_key) == ("AKIALAKECTL", "lakectl-secret")
    assert connection.source == str(clean_env / ".lakectl.yaml")


def test_lakectl_variables_override_its_file(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _lakectl_yaml(clean_env)
    monkeypatch.setenv("LAKECTL_SERVER_ENDPOINT_URL", "http://127.0.0.1:8000/")
    monkeypatch.setenv("LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY", "from-env")
    config = load_lakectl()
    assert (config.endpoint_url, config.access_key_id, config.secret_access_key) == (
        "http://127.0.0.1:8000",
        "AKIALAKECTL",
        "from-env",
    )
    assert "LAKECTL_" in config.source


def test_lakectl_variables_without_a_file(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAKECTL_CREDENTIALS_ACCESS_KEY_ID", "AKIAENV")
    monkeypatch.setenv("LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY", "env-secret")
    monkeypatch.setenv("LAKECTL_SERVER_ENDPOINT_URL", "http://edge:8000/api/v1")
    connection = resolve_connection(None, None)
    assert (connection.endpoint, connection.access_key_id) == ("http://edge:8000", "AKIAENV")


def test_silt_credentials_named_explicitly_win_over_lakectl(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _lakectl_yaml(clean_env)
    monkeypatch.setenv("SILT_ACCESS_KEY_ID", "AKIASILT")
    monkeypatch.setenv("SILT_SECRET_ACCESS_KEY", "silt-secret")
    connection = resolve_connection(None, "http://127.0.0.1:9999")
    assert (connection.endpoint, connection.access_key_id, connection.source) == (
        "http://127.0.0.1:9999",
        "AKIASILT",
        "SILT_ACCESS_KEY_ID/SILT_SECRET_ACCESS_KEY",
    )


def test_the_endpoint_flag_overrides_lakectls(clean_env: Path) -> None:
    _lakectl_yaml(clean_env)
    assert resolve_connection(None, "http://other:1/api/v1/").endpoint == "http://other:1"


def test_no_credentials_anywhere_names_both_configurations(clean_env: Path) -> None:
    with pytest.raises(ClientError) as err:
        resolve_connection(None, None)
    assert err.value.exit_code == EXIT_USAGE
    assert "SILT_ACCESS_KEY_ID" in str(err.value) and ".lakectl.yaml" in str(err.value)


def test_invalid_lakectl_yaml_is_a_usage_error(clean_env: Path) -> None:
    (clean_env / ".lakectl.yaml").write_text("credentials: [unclosed\n")
    with pytest.raises(ClientError) as err:
        load_lakectl()
    assert err.value.exit_code == EXIT_USAGE and ".lakectl.yaml" in str(err.value)


@pytest.mark.parametrize(
    ("endpoint", "expected"),
    [
        ("http://h:8000", "http://h:8000"),
        ("http://h:8000/", "http://h:8000"),
        ("http://h:8000/api/v1", "http://h:8000"),
        ("https://h/lakefs/api/v1/", "https://h/lakefs"),
    ],
)
def test_base_url(endpoint: str, expected: str) -> None:
    assert base_url(endpoint) == expected


@pytest.mark.parametrize(
    ("status", "body", "code", "text"),
    [
        (404, {"message": "branch not found"}, EXIT_NOT_FOUND, "branch not found"),
        (404, {"message": "no such repository"}, EXIT_NOT_FOUND, "not found: no such repository"),
        (401, {"message": "bad key"}, EXIT_DENIED, "not authenticated: bad key"),
        (403, {"message": "branch main is protected"}, EXIT_DENIED, "permission denied: branch main is protected"),
        (409, {"message": "conflict found"}, EXIT_CONFLICT, "conflict found"),
        (400, {"message": "invalid ref"}, EXIT_USAGE, "invalid ref"),
        (503, {"message": "graveler unavailable"}, EXIT_UNAVAILABLE, "graveler unavailable"),
    ],
)
def test_api_errors_are_their_message_and_exit_code(status: int, body: dict[str, str], code: int, text: str) -> None:
    error = api_error(status, json.dumps(body).encode(), "GET /x")
    assert (error.exit_code, str(error), error.status) == (code, text, status)


def test_an_error_without_json_is_its_text_in_one_line() -> None:
    error = api_error(502, b"<html>\nbad gateway\n</html>", "GET /x")
    assert str(error) == "<html> bad gateway </html>" and error.exit_code == 1


def test_unreachable_endpoint_is_exit_3_in_one_line() -> None:
    api = RestClient(Connection("http://127.0.0.1:1", "a", "b", None, "test"))
    with pytest.raises(ClientError) as err:
        api.get("/repositories")
    assert err.value.exit_code == EXIT_UNAVAILABLE and "http://127.0.0.1:1" in str(err.value)
    assert "\n" not in str(err.value)


def test_refs_and_paths_are_one_escaped_segment() -> None:
    assert segment("main~1") == "main~1"
    assert segment("feature/x") == "feature%2Fx"
    assert segment("a b?c#d") == "a%20b%3Fc%23d"


def test_lakectls_settings_can_be_set_aside(clean_env: Path) -> None:
    # `silt migrate lakefs` reads lakectl's settings as its source: its target is never them.
    _lakectl_yaml(clean_env)
    with pytest.raises(ClientError) as err:
        resolve_connection(None, None, lakectl=False)
    assert "no credentials" in str(err.value)
