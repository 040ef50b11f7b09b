"""auth.encrypt_secret_key: auth refuses a weak one at start, and `rekey` moves secrets sealed
under one (as earlier releases allowed) to a strong key."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import SecretStr

from services.auth import rekey as auth_rekey
from services.auth import setup as auth_setup
from services.auth.model import IamModel
from services.auth.secrets import SecretBox
from silt.config import DatabaseConfig, LocalDatabaseConfig
from silt.kv import open_store
from tests.integration.auth.support import ENCRYPT_KEY, remember

REPO_ROOT = Path(__file__).resolve().parents[3]
PASSPHRASE = SecretStr("our-old-sixteen-plus-passphrase")  # accepted before: 16+ characters


def _local_kv(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> DatabaseConfig:
    monkeypatch.setenv("SILT_DATABASE_TYPE", "local")
    monkeypatch.setenv("SILT_DATABASE_LOCAL_PATH", str(tmp_path / "kv.db"))
    monkeypatch.delenv("SILT_CONFIG", raising=False)
    return DatabaseConfig(type="local", local=LocalDatabaseConfig(path=str(tmp_path / "kv.db")))


def test_auth_refuses_to_start_with_a_weak_key(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SILT_")}
    env.update(
        SILT_DATABASE_TYPE="local",
        SILT_DATABASE_LOCAL_PATH=str(tmp_path / "kv.db"),
        SILT_AUTH_LISTEN_ADDRESS="127.0.0.1:0",
        SILT_AUTH_ENCRYPT_SECRET_KEY=PASSPHRASE.get_secret_value(),
        PYTHONPATH=str(REPO_ROOT),
    )
    done = subprocess.run(
        [sys.executable, "-m", "services.auth.server"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0, "auth started with a passphrase for a key"
    assert "auth.encrypt_secret_key" in done.stderr and "openssl rand -base64 32" in done.stderr
    assert PASSPHRASE.get_secret_value() not in done.stdout + done.stderr


def test_setup_refuses_a_weak_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _local_kv(monkeypatch, tmp_path)
    monkeypatch.setenv("SILT_AUTH_ENCRYPT_SECRET_KEY", "0123456789abcdef")
    assert auth_setup.main([]) == 2
    assert "auth.encrypt_secret_key" in capsys.readouterr().err


def test_rekey_moves_secrets_from_a_passphrase_to_a_strong_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    database = _local_kv(monkeypatch, tmp_path)
    with open_store(database) as store:
        # What an earlier release stored under its passphrase.
        before = IamModel(store, SecretBox.previous(PASSPHRASE))
        before.create_user("alice")
        issued = [before.create_credentials("alice") for _ in range(3)]
        for one in issued:
            remember(one.secret.get_secret_value())

    monkeypatch.setenv("SILT_AUTH_ENCRYPT_SECRET_KEY", ENCRYPT_KEY.get_secret_value())
    monkeypatch.delenv(auth_rekey.PREVIOUS_KEY_ENV, raising=False)
    assert auth_rekey.main([]) == 2  # the old key is needed
    assert auth_rekey.PREVIOUS_KEY_ENV in capsys.readouterr().err

    monkeypatch.setenv(auth_rekey.PREVIOUS_KEY_ENV, PASSPHRASE.get_secret_value())
    assert auth_rekey.main([]) == 0
    assert "re-encrypted 3 credential secrets (0 " in capsys.readouterr().out
    with open_store(database) as store:
        after = IamModel(store, SecretBox(ENCRYPT_KEY))
        for one in issued:
            assert after.key_owner(one.credential.access_key_id).secret == one.secret

    # Run again (say, after an interruption): nothing left to move.
    assert auth_rekey.main([]) == 0
    assert "re-encrypted 0 credential secrets (3 " in capsys.readouterr().out

    # A wrong old key moves nothing and says which secret it could not open.
    monkeypatch.setenv(auth_rekey.PREVIOUS_KEY_ENV, "not-the-old-key")
    monkeypatch.setenv("SILT_AUTH_ENCRYPT_SECRET_KEY", "h-Ha9f77tfRzLv484y7UIHGuADgj68xfXqzGMjS3srM")
    assert auth_rekey.main([]) == 2
    assert "cannot decrypt the secret of access key" in capsys.readouterr().err
