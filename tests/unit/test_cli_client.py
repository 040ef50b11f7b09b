"""The CLI's client layer without a server: URIs, error mapping, where settings come from."""

from __future__ import annotations

import json
from pathlib import Path

import grpc
import pytest
from click.testing import CliRunner

from cli.common import State, directory_prefix, repository_argument
from cli.main import cli
from cli.run import _hint_data_dir
from silt.client import error_of_rpc, resolve_settings
from silt.client_base import (
    EXIT_CONFLICT,
    EXIT_DENIED,
    EXIT_NOT_FOUND,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    ClientError,
    find_config_path,
    parse_uri,
)
from silt.config import load_config


class FakeRpcError(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("silt://repo/main/a/b.csv", ("repo", "main", "a/b.csv")),
        ("silt://repo/main/", ("repo", "main", "")),
        ("silt://repo/main", ("repo", "main", "")),
        ("silt://repo/main~2/dir/", ("repo", "main~2", "dir/")),
        ("lakefs://repo/main/a/b.csv", ("repo", "main", "a/b.csv")),  # lakectl's scheme
        ("lakefs://repo/v1", ("repo", "v1", "")),
    ],
)
def test_parse_uri(uri: str, expected: tuple[str, str, str]) -> None:
    assert parse_uri(uri) == expected


@pytest.mark.parametrize(
    "uri", ["s3://repo/main/x", "silt://", "silt://repo", "repo/main", "lakefs://", "lakefs:/repo/main", "lakefs:repo"]
)
def test_parse_uri_rejects(uri: str) -> None:
    with pytest.raises(ClientError) as err:
        parse_uri(uri)
    assert err.value.exit_code == EXIT_USAGE


def test_repository_only_uri() -> None:
    assert parse_uri("silt://repo", need_ref=False) == ("repo", "", "")
    assert parse_uri("lakefs://repo", need_ref=False) == ("repo", "", "")
    assert parse_uri("repo", need_ref=False) == ("repo", "", "")


@pytest.mark.parametrize("uri", ["silt://repo", "lakefs://repo", "repo", "silt://repo/"])
def test_a_repository_argument(uri: str) -> None:
    assert repository_argument(uri) == "repo"


@pytest.mark.parametrize(
    "args",
    [
        ["gc", "rules", "show", "silt://repo/main"],
        ["repo", "show", "silt://repo/main"],
        ["actions", "runs", "list", "silt://repo/main"],
        ["branch-protect", "list", "lakefs://repo/main/x"],
    ],
)
def test_a_ref_after_a_repository_argument_is_a_usage_error(args: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    # Credentials, and nothing listening at the graveler address: a call made would exit with
    # EXIT_UNAVAILABLE; the argument is refused before any.
    monkeypatch.setenv("SILT_ACCESS_KEY_ID", "AKIAEXAMPLE")
    monkeypatch.setenv("SILT_SECRET_ACCESS_KEY", "secret")
    result = CliRunner().invoke(cli, ["--graveler", "127.0.0.1:1", *args], obj=State())
    assert result.exit_code == EXIT_USAGE, result.output


@pytest.mark.parametrize(("path", "prefix"), [("", ""), ("dir", "dir/"), ("dir/", "dir/"), ("a/b", "a/b/")])
def test_a_path_as_a_directory_prefix(path: str, prefix: str) -> None:
    assert directory_prefix(path) == prefix


@pytest.mark.parametrize(
    ("code", "details", "exit_code", "words"),
    [
        (grpc.StatusCode.NOT_FOUND, "repository 'x' not found", EXIT_NOT_FOUND, "repository 'x' not found"),
        (grpc.StatusCode.ALREADY_EXISTS, "branch 'b'", EXIT_CONFLICT, "already exists: branch 'b'"),
        (grpc.StatusCode.PERMISSION_DENIED, "WriteRepo on r", EXIT_DENIED, "permission denied: WriteRepo on r"),
        (grpc.StatusCode.UNAUTHENTICATED, "unknown access key", EXIT_DENIED, "not authenticated: unknown access key"),
        (grpc.StatusCode.INVALID_ARGUMENT, "bad name", EXIT_USAGE, "bad name"),
        (grpc.StatusCode.UNAVAILABLE, "failed to connect to all addresses", EXIT_UNAVAILABLE, "graveler unavailable"),
    ],
)
def test_rpc_errors_become_one_line_and_an_exit_code(
    code: grpc.StatusCode, details: str, exit_code: int, words: str
) -> None:
    err = error_of_rpc(FakeRpcError(code, details), "graveler", "127.0.0.1:1")
    assert err.exit_code == exit_code
    assert words in str(err) and "\n" not in str(err)


def _credentials_file(path: Path, key: str, graveler: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"access_key_id": key, "secret_access_key": "s" * 40, "graveler": graveler}))
    return path


def test_settings_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("SILT_ACCESS_KEY_ID", "SILT_SECRET_ACCESS_KEY", "SILT_CLIENT_CREDENTIALS_FILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SILT_DATA_DIR", str(tmp_path / "data"))
    config = load_config(env={})
    assert resolve_settings(config).credentials is None
    assert resolve_settings(config).graveler == "127.0.0.1:8102"  # the configuration's, last

    _credentials_file(tmp_path / "data" / "credentials.json", "AKIAFROMDATADIR00000", "127.0.0.1:9102")
    settings = resolve_settings(config)
    assert settings.credentials is not None and settings.credentials.access_key_id == "AKIAFROMDATADIR00000"
    assert settings.graveler == "127.0.0.1:9102"
    assert resolve_settings(config, graveler="10.0.0.1:1").graveler == "10.0.0.1:1"  # flags first

    monkeypatch.setenv("SILT_ACCESS_KEY_ID", "AKIAFROMENVIRONMENT0")
    monkeypatch.setenv("SILT_SECRET_ACCESS_KEY", "e" * 40)
    assert resolve_settings(config).credentials.access_key_id == "AKIAFROMENVIRONMENT0"  # type: ignore[union-attr]


def _hostile_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A home with the user's own stack, and a current directory (a repository someone else
    controls) whose .silt-data names the attacker's endpoints and configuration."""
    for var in ("SILT_ACCESS_KEY_ID", "SILT_SECRET_ACCESS_KEY", "SILT_CLIENT_CREDENTIALS_FILE", "SILT_DATA_DIR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delenv("SILT_CONFIG", raising=False)
    home, checkout = tmp_path / "home", tmp_path / "checkout"
    monkeypatch.setenv("HOME", str(home))
    _credentials_file(home / ".silt" / "credentials.json", "AKIAHOMEUSER00000000", "127.0.0.1:8102")
    (home / ".silt" / "config.yaml").write_text("auth:\n  endpoint: 127.0.0.1:8101\n")
    _credentials_file(checkout / ".silt-data" / "credentials.json", "AKIAATTACKER00000000", "evil.example:443")
    (checkout / ".silt-data" / "config.yaml").write_text("auth:\n  endpoint: evil.example:443\n")
    monkeypatch.chdir(checkout)
    return home, checkout


def test_the_current_directory_is_never_read_unasked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home, _ = _hostile_checkout(tmp_path, monkeypatch)
    config_path = find_config_path(None)
    assert config_path == str(home / ".silt" / "config.yaml")
    settings = resolve_settings(load_config(config_path, env={}))
    assert settings.graveler == "127.0.0.1:8102" and settings.auth == "127.0.0.1:8101"
    assert settings.credentials is not None and settings.credentials.access_key_id == "AKIAHOMEUSER00000000"

    # The user's own key from the environment is not sent to the checkout's endpoints either.
    monkeypatch.setenv("SILT_ACCESS_KEY_ID", "AKIAFROMENVIRONMENT0")
    monkeypatch.setenv("SILT_SECRET_ACCESS_KEY", "e" * 40)
    (home / ".silt" / "credentials.json").unlink()
    settings = resolve_settings(load_config(find_config_path(None), env={}))
    assert "evil" not in settings.graveler + settings.auth + settings.s3_endpoint


def test_the_current_directory_when_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, checkout = _hostile_checkout(tmp_path, monkeypatch)
    monkeypatch.setenv("SILT_DATA_DIR", ".silt-data")  # `make run`'s stack, named explicitly
    assert find_config_path(None) == ".silt-data/config.yaml"
    settings = resolve_settings(load_config(find_config_path(None), env={}))
    assert settings.graveler == "evil.example:443" and settings.auth == "evil.example:443"
    assert (checkout / ".silt-data").is_dir()


def test_make_run_tells_how_to_reach_its_stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    assert _hint_data_dir((tmp_path / "home" / ".silt").resolve()) is None
    assert _hint_data_dir(Path(".silt-data").resolve()) == f"export SILT_DATA_DIR={tmp_path / '.silt-data'}"


def test_cli_without_credentials_says_so_in_one_line(tmp_path: Path) -> None:
    env = {"SILT_DATA_DIR": str(tmp_path), "SILT_ACCESS_KEY_ID": None, "SILT_SECRET_ACCESS_KEY": None}
    result = CliRunner().invoke(cli, ["repo", "list"], obj=State(), env=env)
    assert result.exit_code == EXIT_USAGE
    assert result.stderr.startswith("silt: no credentials") and result.stderr.count("\n") == 1


def test_cli_usage_errors_exit_2() -> None:
    result = CliRunner().invoke(cli, ["merge", "silt://r/a", "b", "--strategy", "ours"], obj=State())
    assert result.exit_code == 2
