"""The REST API as its own process (`python -m edge.api.server`), signed in to auth and
graveler as svc-api, next to the stack's gateway."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import lakefs_sdk
import pytest
import urllib3

from silt.free_ports import free_port
from silt.launcher import SERVICE_KEYS_FILE
from tests.e2e.api.conftest import Api
from tests.support.wait import wait_until

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def own_api(api: Api) -> Iterator[str]:
    stack = api.stack.stack
    key = json.loads((stack.data_dir / SERVICE_KEYS_FILE).read_text())["api"]
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("SILT_")},
        "SILT_CONFIG": str(stack.config_path),
        "SILT_AUTH_ENDPOINT": stack.endpoints["auth"],
        "SILT_GRAVELER_ENDPOINT": stack.endpoints["graveler"],
        "SILT_API_LISTEN_ADDRESS": f"127.0.0.1:{port}",
        "SILT_CREDENTIALS_ACCESS_KEY_ID": key["access_key_id"],
        "SILT_CREDENTIALS_SECRET_ACCESS_KEY": key["secret_access_key"],
        "PYTHONPATH": str(ROOT),
    }
    proc = subprocess.Popen([sys.executable, "-m", "edge.api.server"], env=env, cwd=ROOT)
    endpoint = f"http://127.0.0.1:{port}"
    http = urllib3.PoolManager()

    def up() -> bool:
        try:
            return http.request("GET", endpoint + "/api/v1/healthcheck", retries=False, timeout=1).status == 204
        except urllib3.exceptions.HTTPError:
            return False

    try:
        wait_until(up, timeout=30, message="the API process answers")
        yield endpoint
    finally:
        proc.terminate()
        proc.wait(timeout=15)


def test_the_api_runs_on_its_own(api: Api, own_api: str, repo: str) -> None:
    admin = api.stack.admin
    config = lakefs_sdk.Configuration(
        host=own_api + "/api/v1", username=admin.access_key_id, password=admin.secret_access_key.get_secret_value()
    )
    client = lakefs_sdk.ApiClient(config)
    assert lakefs_sdk.AuthApi(client).get_current_user().user.id == "admin"
    assert lakefs_sdk.RepositoriesApi(client).get_repository(repo).id == repo
    made = lakefs_sdk.CommitsApi(client).commit(
        repo, "main", lakefs_sdk.CommitCreation(message="from the API process", allow_empty=True)
    )
    assert made.committer == "admin"
