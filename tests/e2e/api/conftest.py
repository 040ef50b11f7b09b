"""One stack (auth, graveler, the gateway serving S3 and the REST API on one port) for the API
suite, and lakefs-sdk clients signed in as the admin and as a read-only user."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lakefs_sdk
import pytest
import urllib3

from silt.rpc.signing import Credentials
from tests.support.gateway_stack import GatewayStack, gateway_stack


@dataclass
class Api:
    stack: GatewayStack
    http: urllib3.PoolManager

    @property
    def base(self) -> str:
        return self.stack.endpoint + "/api/v1"

    def sdk(self, credentials: Credentials | None = None) -> lakefs_sdk.ApiClient:
        creds = credentials or self.stack.admin
        config = lakefs_sdk.Configuration(
            host=self.base, username=creds.access_key_id, password=creds.secret_access_key.get_secret_value()
        )
        return lakefs_sdk.ApiClient(config)

    def request(self, method: str, path: str, **kwargs: Any) -> urllib3.BaseHTTPResponse:
        """A raw request, Basic-authenticated as the admin unless headers say otherwise."""
        headers = kwargs.pop("headers", None)
        if headers is None:
            admin = self.stack.admin
            headers = urllib3.make_headers(
                basic_auth=f"{admin.access_key_id}:{admin.secret_access_key.get_secret_value()}"
            )
        return self.http.request(method, self.base + path, headers=headers, retries=False, timeout=30, **kwargs)


# A loopback address the api stack trusts as a proxy.
TRUSTED_PROXY = "127.0.0.3"


@pytest.fixture(scope="session")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    # The suite's webhook receivers are threads of the test on 127.0.0.1: this deployment opts
    # in to webhooks reaching loopback and private addresses (off by default).
    # Auth's caches keep a key for a second rather than five: a test of an IAM change taking
    # effect waits that long.
    # Requests from TRUSTED_PROXY may name their client in X-Forwarded-For (the policy
    # conditions' tests); every other test connects from 127.0.0.1, whose header is ignored.
    overrides = {
        "actions": {"webhook": {"allow_private": True}},
        "auth": {"cache_ttl_seconds": 1.0},
        "gateways": {"trusted_proxies": [TRUSTED_PROXY]},
    }
    with gateway_stack(tmp_path_factory.mktemp("api-stack"), overrides=overrides) as stack:
        yield Api(stack, urllib3.PoolManager())


@pytest.fixture(scope="session")
def import_landing(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory import_api's blockstore imports from: each test lands its files in a
    directory of its own below it."""
    return tmp_path_factory.mktemp("import-landing")


@pytest.fixture(scope="session")
def import_api(tmp_path_factory: pytest.TempPathFactory, import_landing: Path) -> Iterator[Api]:
    """A second stack, whose local blockstore imports from import_landing (api's stays as
    deployed by default: imports off), shared by the suite's import, stage-object and
    key-changing tests (a stack each cost three starts of the services). Auth's caches keep a
    key for a second, as api's do. Its session cookies are Secure, as behind a TLS-terminating
    proxy (api.secure_cookies; api's follow its http scheme): the session-cookie test's second
    deployment, which none of the others signs in to."""
    overrides = {
        "blockstore": {"local": {"import_enabled": True, "allowed_external_prefixes": [str(import_landing)]}},
        "auth": {"cache_ttl_seconds": 1.0},
        "api": {"secure_cookies": True},
    }
    with gateway_stack(tmp_path_factory.mktemp("import-stack"), overrides=overrides) as stack:
        yield Api(stack, urllib3.PoolManager())


@pytest.fixture(scope="session")
def s3_api(s3_stack: GatewayStack) -> Api:
    """The e2e tests' stack on an S3 blockstore (tests/e2e/conftest.py s3_stack), for the suite's
    tests on S3 (presigned URLs, presigned multipart uploads, imports)."""
    return Api(s3_stack, urllib3.PoolManager())


@pytest.fixture(scope="session")
def client(api: Api) -> lakefs_sdk.ApiClient:
    return api.sdk()


@pytest.fixture
def repo(client: lakefs_sdk.ApiClient) -> str:
    """A fresh repository (default branch main) per test."""
    name = f"r-{secrets.token_hex(5)}"
    creation = lakefs_sdk.RepositoryCreation(name=name, storage_namespace=f"local://{name}")
    lakefs_sdk.RepositoriesApi(client).create_repository(creation)
    return name


def error_message(response: urllib3.BaseHTTPResponse, status: int) -> str:
    """The lakeFS error message of a response that must have this status and a JSON body."""
    assert response.status == status, (response.status, response.data)
    assert response.headers["content-type"].startswith("application/json")
    message: str = json.loads(response.data)["message"]
    assert message
    return message


def json_post(api: Api, path: str, body: dict[str, Any], creds: Any = None) -> urllib3.BaseHTTPResponse:
    """A JSON POST, Basic-authenticated as creds (the admin by default)."""
    creds = creds or api.stack.admin
    headers = urllib3.make_headers(basic_auth=f"{creds.access_key_id}:{creds.secret_access_key.get_secret_value()}")
    headers["Content-Type"] = "application/json"
    return api.request("POST", path, body=json.dumps(body).encode(), headers=headers)
