"""lakeFS's first-run setup (getSetupState, setup, setupCommPrefs) on a stack whose auth setup
left the admin to the REST API (`services.auth.setup --defer-admin`): the state reads
not_initialized until one setup creates the admin, racing setups make exactly one admin, and
nothing makes a second one afterwards, neither the API nor the setup command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import lakefs_sdk
import pytest
import urllib3
from google.protobuf.timestamp_pb2 import Timestamp
from lakefs_sdk.exceptions import ApiException
from pydantic import SecretStr

from services.auth import model as auth_model
from services.auth.model import IamModel, IssuedCredential
from services.auth.secrets import SecretBox
from services.auth.setup import ADMINS
from silt.config import load_config
from silt.kv import open_store
from silt.launcher import Stack
from tests.e2e.api.conftest import error_message

JSON = {"Content-Type": "application/json"}
RACERS = 8


@dataclass
class Fresh:
    stack: Stack
    http: urllib3.PoolManager

    @property
    def base(self) -> str:
        return self.stack.endpoints["gateway"] + "/api/v1"

    def post(self, path: str, body: object, headers: dict[str, str] | None = None) -> urllib3.BaseHTTPResponse:
        data = json.dumps(body).encode()
        return self.http.request("POST", self.base + path, body=data, headers={**JSON, **(headers or {})})

    def sdk(self, access_key_id: str = "", secret: str = "") -> lakefs_sdk.ApiClient:
        return lakefs_sdk.ApiClient(lakefs_sdk.Configuration(host=self.base, username=access_key_id, password=secret))


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fresh]:
    stack = Stack(
        tmp_path_factory.mktemp("setup-stack"),
        ports={"auth": 0, "graveler": 0, "gateway": 0},
        services=["auth", "graveler", "gateway"],
        restart=False,
        log_level="WARN",
        defer_admin=True,
    )
    stack.prepare()
    stack.start()
    try:
        yield Fresh(stack, urllib3.PoolManager())
    finally:
        stack.stop()


def _setup_command(fresh: Fresh) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SILT_AUTH_ENCRYPT_SECRET_KEY": (fresh.stack.data_dir / "secret.key").read_text().strip()}
    return subprocess.run(
        [sys.executable, "-m", "services.auth.setup", "--config", str(fresh.stack.config_path), "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def test_first_run_setup_creates_one_admin_once(fresh: Fresh) -> None:
    assert fresh.stack.admin is None  # the stack started without an admin
    internal = lakefs_sdk.InternalApi(fresh.sdk())  # no credentials: these calls are public
    state = internal.get_setup_state()
    assert state.state == "not_initialized" and state.comm_prefs_missing is False
    raw = json.loads(fresh.http.request("GET", fresh.base + "/setup_lakefs").data)
    assert raw["login_config"]["login_cookie_names"] == ["internal_auth_session"]
    assert raw["login_config"]["RBAC"] == "internal"

    # Before setup: no preferences to set, and bad setups change nothing.
    prefs = fresh.post("/setup_comm_prefs", {"featureUpdates": False, "securityUpdates": False})
    assert error_message(prefs, 412) == "lakeFS is not initialized"
    assert "empty user display name" in error_message(fresh.post("/setup_lakefs", {"username": ""}), 400)
    assert "username" in error_message(fresh.post("/setup_lakefs", {}), 400)
    assert error_message(fresh.post("/setup_lakefs", {"username": "bad/name"}), 400)
    key = {"access_key_id": "AKIAIOSFODNN7EXAMPLE", "secret_access_key": "x" * 40}
    assert "key" in error_message(fresh.post("/setup_lakefs", {"username": "chosen", "key": key}), 400)
    taken = fresh.post("/setup_lakefs", {"username": "svc-api"})  # a service user's id
    assert "already exists" in error_message(taken, 409)
    assert internal.get_setup_state().state == "not_initialized"

    # Racing setups: exactly one makes an admin.
    names = [f"racer-{i}" for i in range(RACERS)]
    with ThreadPoolExecutor(RACERS) as pool:
        answers = list(pool.map(lambda name: fresh.post("/setup_lakefs", {"username": name}), names))
    won = [(name, a) for name, a in zip(names, answers, strict=True) if a.status == 200]
    assert len(won) == 1, [(a.status, a.data) for a in answers]
    assert all(error_message(a, 409) == "lakeFS already initialized" for a in answers if a.status != 200), [
        a.data for a in answers
    ]
    winner, answer = won[0]
    assert answer.headers["Cache-Control"] == "no-store"
    credentials = lakefs_sdk.CredentialsWithSecret.parse_obj(json.loads(answer.data))
    assert credentials.creation_date > 0

    admin = fresh.sdk(credentials.access_key_id, credentials.secret_access_key)
    assert lakefs_sdk.AuthApi(admin).get_current_user().user.id == winner
    members = lakefs_sdk.AuthApi(admin).list_group_members("Admins").results
    assert [m.id for m in members] == [winner]
    for loser in set(names) - {winner}:
        with pytest.raises(ApiException) as gone:
            lakefs_sdk.AuthApi(admin).get_user(loser)
        assert gone.value.status == 404
    # The admin can do what an admin does.
    lakefs_sdk.RepositoriesApi(admin).create_repository(
        lakefs_sdk.RepositoryCreation(name="first", storage_namespace="local://first")
    )

    # After setup: initialized, and nothing makes another admin.
    assert internal.get_setup_state().state == "initialized"
    again = fresh.post("/setup_lakefs", {"username": "late"})
    assert error_message(again, 409) == "lakeFS already initialized"
    prefs = fresh.post("/setup_comm_prefs", {"featureUpdates": True, "securityUpdates": False, "email": "a@b.c"})
    assert error_message(prefs, 409) == "communication preferences already set"
    done = _setup_command(fresh)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "" and "set up already" in done.stderr
    assert [m.id for m in lakefs_sdk.AuthApi(admin).list_group_members("Admins").results] == [winner]


def test_setup_bodies_are_bounded_and_json(fresh: Fresh) -> None:
    huge = fresh.post("/setup_lakefs", {"username": "x" * (64 * 1024)})
    assert error_message(huge, 413)
    form = fresh.http.request(
        "POST", fresh.base + "/setup_lakefs", body=b"username=x", headers={"Content-Type": "text/plain"}
    )
    assert error_message(form, 415)


@pytest.fixture
def unfinished(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[Fresh]:
    """A stack whose first-run setup died half way: auth claimed the admin `boss` and stopped
    before issuing its key (the model's own code, stopped there, on the stack's KV), longer
    ago than a setup under way could be (CLAIM_SECONDS: a younger claim no one may finish)."""
    stack = Stack(
        tmp_path_factory.mktemp("unfinished-setup"),
        ports={"auth": 0, "graveler": 0, "gateway": 0},
        services=["auth", "graveler", "gateway"],
        restart=False,
        log_level="WARN",
        defer_admin=True,
    )
    stack.prepare()
    stack.start()
    try:
        key = (stack.data_dir / "secret.key").read_text().strip()
        store = open_store(load_config(stack.config_path).database)
        try:
            iam = IamModel(store, SecretBox(SecretStr(key)))

            def stopped(user_id: str) -> IssuedCredential:
                raise RuntimeError("auth stopped before issuing the admin's key")

            iam.create_credentials = stopped  # type: ignore[method-assign]
            long_ago = int(time.time() - 2 * auth_model.CLAIM_SECONDS)
            with monkeypatch.context() as patched:
                patched.setattr(auth_model, "_now", lambda: Timestamp(seconds=long_ago))
                with pytest.raises(RuntimeError):
                    iam.create_first_admin("boss", ADMINS)
        finally:
            store.close()
        yield Fresh(stack, urllib3.PoolManager())
    finally:
        stack.stop()


def test_a_setup_that_died_half_way_is_finished_by_setting_up_again(unfinished: Fresh) -> None:
    internal = lakefs_sdk.InternalApi(unfinished.sdk())
    assert internal.get_setup_state().state == "not_initialized"  # no admin key was ever shown
    answer = unfinished.post("/setup_lakefs", {"username": "boss"})
    assert answer.status == 200, answer.data
    credentials = lakefs_sdk.CredentialsWithSecret.parse_obj(json.loads(answer.data))
    admin = unfinished.sdk(credentials.access_key_id, credentials.secret_access_key)
    assert lakefs_sdk.AuthApi(admin).get_current_user().user.id == "boss"
    assert [m.id for m in lakefs_sdk.AuthApi(admin).list_group_members("Admins").results] == ["boss"]
    assert [c.access_key_id for c in lakefs_sdk.AuthApi(admin).list_user_credentials("boss").results] == [
        credentials.access_key_id
    ]
    assert internal.get_setup_state().state == "initialized"
    assert error_message(unfinished.post("/setup_lakefs", {"username": "boss"}), 409) == "lakeFS already initialized"
