"""First-run setup: what it creates, that a second run changes nothing, and its command line."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from services.auth import setup as auth_setup
from services.auth.model import IamModel
from services.auth.policies import compile_statements, is_allowed
from services.auth.secrets import SecretBox
from services.auth.setup import ADMINS, ANALYSTS, DEVELOPERS, SERVICES, SetupResult
from silt import actions as a
from silt.kv import Store
from tests.integration.auth.support import ENCRYPT_KEY, remember

# Not named `setup`: pytest would take a module-level `setup` for an xunit fixture.
run_setup = auth_setup.setup


@pytest.fixture
def iam(store: Store) -> IamModel:
    return IamModel(store, SecretBox(ENCRYPT_KEY), partition=b"auth-" + uuid.uuid4().hex.encode())


def snapshot(iam: IamModel) -> list[tuple[bytes, bytes]]:
    return [(e.key, e.value) for e in iam.kv.scan(iam.partition)]


def test_setup_creates_presets_admin_and_services(iam: IamModel) -> None:
    result = run_setup(iam, services=["graveler"])
    assert result is not None
    remember(result.admin.secret_access_key)
    remember(result.services["graveler"].secret_access_key)
    assert [g.id for g in iam.list_groups()[0]] == sorted([ADMINS, ANALYSTS, DEVELOPERS, SERVICES])
    assert [g.id for g in iam.list_user_groups("admin")[0]] == [ADMINS]
    assert [g.id for g in iam.list_user_groups("svc-graveler")[0]] == [SERVICES]
    owner = iam.key_owner(result.admin.access_key_id)
    assert owner.user_id == "admin"
    assert owner.secret.get_secret_value() == result.admin.secret_access_key
    assert result.admin.secret_access_key not in repr(result)

    def may(user: str, action: str, resource: str = "any-repo") -> bool:
        return is_allowed(compile_statements(iam.effective_policies(user)), action, resource)

    assert all(may("admin", action) for action in a.ALL_ACTIONS)
    assert may("svc-graveler", a.READ_SECRET) and not may("svc-graveler", a.CREATE_USER)


def test_second_run_changes_nothing(iam: IamModel) -> None:
    first = run_setup(iam, services=[])
    assert first is not None
    remember(first.admin.secret_access_key)
    before = snapshot(iam)
    shown: list[SetupResult] = []
    assert run_setup(iam, services=["graveler"], announce=shown.append) is None
    assert shown == []
    assert snapshot(iam) == before


def test_interrupted_setup_is_completed_by_running_again(iam: IamModel) -> None:
    def crash(result: SetupResult) -> None:
        remember(result.admin.secret_access_key)
        raise RuntimeError("power cut before the keys were shown")

    with pytest.raises(RuntimeError):
        run_setup(iam, services=[], announce=crash)
    assert iam.setup_record() is None
    unseen = iam.list_credentials("admin")[0][0].access_key_id
    result = run_setup(iam, services=[])
    assert result is not None
    remember(result.admin.secret_access_key)
    # The keys nobody saw are gone; the shown ones work.
    assert [c.access_key_id for c in iam.list_credentials("admin")[0]] == [result.admin.access_key_id]
    assert result.admin.access_key_id != unseen
    assert iam.setup_record() is not None


def test_command_line_prints_secrets_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SILT_DATABASE_TYPE", "local")
    monkeypatch.setenv("SILT_DATABASE_LOCAL_PATH", str(tmp_path / "kv.db"))
    monkeypatch.setenv("SILT_AUTH_ENCRYPT_SECRET_KEY", ENCRYPT_KEY.get_secret_value())
    monkeypatch.delenv("SILT_CONFIG", raising=False)

    assert auth_setup.main(["--json", "--service", "graveler"]) == 0
    printed = json.loads(capsys.readouterr().out)
    secret = remember(printed["admin"]["secret_access_key"])
    remember(printed["services"]["graveler"]["secret_access_key"])
    assert printed["admin"]["user_id"] == "admin"
    assert len(printed["admin"]["access_key_id"]) == 20 and len(secret) == 40

    assert auth_setup.main([]) == 0
    again = capsys.readouterr()
    assert again.out == ""
    assert "set up already" in again.err
    assert secret not in again.err


def test_command_line_needs_an_encryption_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SILT_DATABASE_TYPE", "local")
    monkeypatch.setenv("SILT_DATABASE_LOCAL_PATH", str(tmp_path / "kv.db"))
    monkeypatch.delenv("SILT_AUTH_ENCRYPT_SECRET_KEY", raising=False)
    monkeypatch.delenv("SILT_CONFIG", raising=False)
    assert auth_setup.main([]) == 2
    assert "auth.encrypt_secret_key must be set" in capsys.readouterr().err
