"""The `silt` CLI's configuration cache (cli/config_cache.py): what a client reads from the
validated configuration, stored without secrets, found again only for the same file and SILT_*
variables, and ignored when it cannot be trusted."""

from __future__ import annotations

import os
import stat
import typing
from pathlib import Path

import pytest
from pydantic import SecretStr

from cli import config_cache
from cli.config_cache import cache_path, client_view
from silt.client import resolve_settings
from silt.client_base import ClientView
from silt.config import ClientConfig, _leaf_paths, load_client_config
from silt.errors import ConfigError
from silt.secret import Secret


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for key in list(os.environ):
        if key.startswith(("SILT_", "LAKEFS_", "AWS_")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    config = tmp_path / "config.yaml"
    config.write_text("graveler:\n  endpoint: graveler.example:8102\n")
    return config


def _validations(monkeypatch: pytest.MonkeyPatch) -> list[str | None]:
    calls: list[str | None] = []

    def counted(path: str | None = None, env: typing.Any = None) -> ClientConfig:
        calls.append(path)
        return load_client_config(path, env)

    monkeypatch.setattr("silt.config.load_client_config", counted)
    return calls


def test_a_hit_does_not_validate_again(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _validations(monkeypatch)
    first = client_view(str(env))
    assert first == ClientView.of(load_client_config(env, env={}))
    assert first.graveler == "graveler.example:8102"
    assert client_view(str(env)) == first
    assert calls == [str(env)]
    assert stat.S_IMODE(cache_path().stat().st_mode) == 0o600
    assert stat.S_IMODE(cache_path().parent.stat().st_mode) == 0o700


def test_a_changed_file_is_validated_again(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _validations(monkeypatch)
    client_view(str(env))
    env.write_text("graveler:\n  endpoint: other.example:8102\n")
    assert client_view(str(env)).graveler == "other.example:8102"
    assert len(calls) == 2


def test_a_changed_variable_is_validated_again(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _validations(monkeypatch)
    client_view(str(env))
    monkeypatch.setenv("SILT_GATEWAYS_S3_REGION", "eu-west-1")
    assert client_view(str(env)).region == "eu-west-1"
    monkeypatch.setenv("SILT_ANYTHING_ELSE", "x")  # any SILT_* variable counts
    client_view(str(env))
    assert len(calls) == 3


def test_a_changed_lakefs_variable_is_validated_again(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # lakeFS's variables are read as their Silt keys (silt/lakefs_settings.py), so they are part of the key.
    calls = _validations(monkeypatch)
    client_view(str(env))
    monkeypatch.setenv("LAKEFS_GATEWAYS_S3_REGION", "eu-west-1")
    assert client_view(str(env)).region == "eu-west-1"
    assert len(calls) == 2


def test_every_lakefs_variable_the_client_reads_is_in_the_key() -> None:
    from silt.lakefs_settings import KEYS

    read = [e.variable for e in KEYS if e.silt and e.silt.split(".", 1)[0] in ClientConfig.model_fields]
    assert "LAKEFS_GATEWAYS_S3_REGION" in read
    assert [v for v in read if not v.startswith(config_cache.LAKEFS_CLIENT_PREFIXES)] == []


def test_a_bad_value_is_never_cached(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SILT_GRAVELER_ENDPOINT", "0.0.0.0:8102")
    with pytest.raises(ConfigError) as first:
        client_view(str(env))
    with pytest.raises(ConfigError) as again:
        client_view(str(env))
    assert str(first.value) == str(again.value)
    with pytest.raises(ConfigError) as direct:
        load_client_config(env)
    assert str(first.value) == str(direct.value)  # the validation's own message
    assert not cache_path().exists()


def test_no_secret_is_written(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SILT_SECRET_ACCESS_KEY", "s3cr3t-access-key")
    monkeypatch.setenv("SILT_AUTH_ENCRYPT_SECRET_KEY", "s3cr3t-encrypt-key")
    env.write_text("auth:\n  encrypt_secret_key: s3cr3t-in-file\n")
    client_view(str(env))
    text = cache_path().read_text()
    assert "s3cr3t" not in text
    # Nor is a secret's value part of the key: changing it finds the same entry.
    calls = _validations(monkeypatch)
    monkeypatch.setenv("SILT_SECRET_ACCESS_KEY", "another")
    monkeypatch.setenv("SILT_AUTH_ENCRYPT_SECRET_KEY", "another")
    client_view(str(env))
    assert calls == []


def test_variables_left_out_of_the_key_cannot_fail_validation() -> None:
    # A variable naming a secret is not hashed into the key: in the client's sections it must be
    # a SecretStr without constraints (any string validates), or a cached view could hide an error.
    for var, (path, annotation) in _leaf_paths(ClientConfig).items():
        if any(word in var for word in config_cache._SECRET_WORDS):
            assert SecretStr in typing.get_args(annotation) or annotation is SecretStr, path
            assert load_client_config(env={var: ""}) is not None


@pytest.mark.parametrize(
    "content",
    ["", "not json", "[]", '{"format": 1, "entries": []}', '{"format": 1, "entries": {"KEY": {"graveler": 1}}}'],
)
def test_a_corrupt_cache_is_ignored_and_rewritten(env: Path, monkeypatch: pytest.MonkeyPatch, content: str) -> None:
    expected = client_view(str(env))
    key = config_cache.cache_key(str(env))
    assert key is not None
    cache_path().write_text(content.replace("KEY", key))
    calls = _validations(monkeypatch)
    assert client_view(str(env)) == expected
    assert calls == [str(env)]
    client_view(str(env))
    assert calls == [str(env)]  # rewritten: a hit again


def test_an_unwritable_cache_still_answers(env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "file"))  # a file where the directory goes
    assert client_view(str(env)).graveler == "graveler.example:8102"


def test_defaults_without_a_file(env: Path) -> None:
    assert client_view(None) == ClientView.of(load_client_config(None, env={}))
    assert client_view(None) == ClientView.of(load_client_config(None, env={}))


def test_resolve_settings_takes_a_view(env: Path) -> None:
    config = load_client_config(env)
    assert resolve_settings(ClientView.of(config)) == resolve_settings(config)


def test_secret_shows_nothing() -> None:
    secret = Secret("hunter2")
    assert "hunter2" not in repr(secret) and "hunter2" not in str(secret)
    assert secret.get_secret_value() == "hunter2"
    assert secret == Secret("hunter2") and secret != Secret("other")
