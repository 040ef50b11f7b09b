"""`api.iceberg.commit_per_change`: each catalog change is committed on its branch, the keys it
touched and nothing else. The session stack stages changes (the setting's default), so this
module runs one more REST API process on the stack's services with the setting on: the catalog
through pyiceberg's public API there, data files through the stack's gateway, the commit log
through the REST API."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import urllib3
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.exceptions import ForbiddenError

from silt.free_ports import free_port
from silt.launcher import Stack
from silt.lifeline import PARENT_PID_ENV
from tests.e2e.iceberg.conftest import admin_auth, api_call
from tests.e2e.iceberg.test_catalog import SCHEMA, rows
from tests.e2e.iceberg.test_views import version

START_TIMEOUT_SECONDS = 60.0


@pytest.fixture(scope="module")
def committing_api(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The address of a REST API process that commits each catalog change."""
    port = free_port()
    env = {
        **stack.service_env("gateway"),
        "SILT_API_LISTEN_ADDRESS": f"127.0.0.1:{port}",
        "SILT_API_ICEBERG_COMMIT_PER_CHANGE": "true",
        PARENT_PID_ENV: str(os.getpid()),
    }
    log = Path(tmp_path_factory.mktemp("committing-api")) / "api.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "edge.api.server"], env=env, stdout=out, stderr=subprocess.STDOUT
        )
    address = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while True:
            assert process.poll() is None, log.read_text()
            try:
                if urllib3.request("GET", f"{address}/iceberg/api/v1/config", retries=False).status == 401:
                    break
            except urllib3.exceptions.HTTPError:
                pass
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        yield address
    finally:
        process.terminate()
        process.wait(timeout=10)


def catalog_at(stack: Stack, api: str, warehouse: str, key: str = "", secret: str = "") -> Catalog:
    """A pyiceberg catalog on the API at api, as the admin unless a key and secret are given."""
    assert stack.admin is not None
    if not key:
        key, secret = stack.admin.access_key_id, stack.admin.secret_access_key.get_secret_value()
    gateway = stack.endpoints["gateway"]
    return load_catalog(
        f"silt-{secrets.token_hex(3)}",
        type="rest",
        uri=f"{api}/iceberg/api",
        credential=f"{key}:{secret}",
        warehouse=warehouse,
        **{
            "oauth2-server-uri": f"{api}/iceberg/api/v1/oauth/tokens",
            "s3.endpoint": gateway,
            "s3.access-key-id": key,
            "s3.secret-access-key": secret,
            "s3.region": "us-east-1",
        },
    )


def ok(stack: Stack, method: str, path: str) -> Any:
    answer = api_call(stack, method, path)
    assert answer.status == 200, answer.data
    return answer.json()


def test_each_change_is_committed_alone(stack: Stack, repo: str, committing_api: str) -> None:
    # The user's own staged change, which no catalog commit may take along.
    uploaded = urllib3.request(
        "POST",
        f"{stack.endpoints['gateway']}/api/v1/repositories/{repo}/branches/main/objects?path=notes/todo.txt",
        body=b"mine",
        headers={**admin_auth(stack), "Content-Type": "application/octet-stream"},
        retries=False,
    )
    assert uploaded.status == 201, uploaded.data

    catalog = catalog_at(stack, committing_api, f"{repo}.main")
    catalog.create_namespace("db")
    catalog.create_table("db.events", SCHEMA).append(rows(0, 5))
    catalog.create_view("db.recent", SCHEMA, version("SELECT * FROM events"))
    catalog.drop_view("db.recent")

    log = ok(stack, "GET", f"/repositories/{repo}/refs/main/commits?amount=6")["results"]
    assert [c["message"] for c in log[:5]] == [
        "iceberg: drop view db.recent",
        "iceberg: create view db.recent",
        "iceberg: commit table db.events",
        "iceberg: create table db.events",
        "iceberg: create namespace db",
    ]
    assert [c["metadata"]["iceberg_operation"] for c in log[:5]] == [
        "drop_view",
        "create_view",
        "commit_table",
        "create_table",
        "create_namespace",
    ]
    me = ok(stack, "GET", "/user")["user"]["id"]
    assert {c["committer"] for c in log[:5]} == {me}
    # The append's data files and manifests were committed with its pointer; the user's object
    # is still staged, alone.
    staged = ok(stack, "GET", f"/repositories/{repo}/branches/main/diff")["results"]
    assert [d["path"] for d in staged] == ["notes/todo.txt"]
    committed = ok(stack, "GET", f"/repositories/{repo}/refs/main/diff/main~5?type=two_dot")["results"]
    assert any(d["path"].startswith("db/events/data/") for d in committed)


def test_a_caller_who_may_not_commit_changes_nothing(stack: Stack, repo: str, committing_api: str) -> None:
    user = f"ice-{secrets.token_hex(4)}"
    assert api_call(stack, "POST", "/auth/users", {"id": user}).status == 201
    statements = [
        {"effect": "allow", "action": ["ReadRepo", "WriteRepo"], "resource": repo},
        {"effect": "deny", "action": ["CommitBranch"], "resource": "*"},
    ]
    policy = f"p-{secrets.token_hex(4)}"
    assert api_call(stack, "POST", "/auth/policies", {"id": policy, "statement": statements}).status == 201
    assert api_call(stack, "PUT", f"/auth/users/{user}/policies/{policy}").status == 201
    issued = api_call(stack, "POST", f"/auth/users/{user}/credentials").json()
    writer = catalog_at(stack, committing_api, f"{repo}.main", issued["access_key_id"], issued["secret_access_key"])

    with pytest.raises(ForbiddenError, match="CommitBranch"):
        writer.create_namespace("db")
    assert not catalog_at(stack, committing_api, f"{repo}.main").namespace_exists("db")
    assert ok(stack, "GET", f"/repositories/{repo}/branches/main/diff")["results"] == []
