"""pyiceberg's REST catalog against the Iceberg catalog that the edge serves at /iceberg/api, on
the e2e suite's session stack (tests/e2e/conftest.py): a repository per test, catalogs signed in
with the admin's access key as an OAuth2 client credential, data files written by pyarrow through
the gateway's S3."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

import pytest
import urllib3
from pyiceberg.catalog import Catalog, load_catalog

from silt.launcher import Stack


def admin_auth(stack: Stack) -> dict[str, str]:
    assert stack.admin is not None
    secret = stack.admin.secret_access_key.get_secret_value()
    return urllib3.make_headers(basic_auth=f"{stack.admin.access_key_id}:{secret}")


def api_call(stack: Stack, method: str, path: str, body: Any = None) -> urllib3.BaseHTTPResponse:
    """A call to the lakeFS REST API as the admin (urllib3.request's own read timeout is 3
    seconds: a merge that combines tables on a loaded machine may take longer)."""
    return urllib3.request(
        method,
        stack.endpoints["gateway"] + "/api/v1" + path,
        json=body,
        headers=admin_auth(stack),
        retries=False,
        timeout=60,
    )


@pytest.fixture
def repo(stack: Stack) -> str:
    """A fresh repository (default branch main)."""
    name = f"ice-{secrets.token_hex(4)}"
    created = api_call(stack, "POST", "/repositories", {"name": name, "storage_namespace": f"local://{name}"})
    assert created.status == 201, created.data
    return name


CatalogFactory = Callable[..., Catalog]


@pytest.fixture
def catalog_for(stack: Stack) -> CatalogFactory:
    """A pyiceberg catalog; warehouse `<repository>.<ref>` makes namespaces relative to it."""
    assert stack.admin is not None
    endpoint = stack.endpoints["gateway"]
    key, secret = stack.admin.access_key_id, stack.admin.secret_access_key.get_secret_value()

    def make(warehouse: str = "", **properties: str) -> Catalog:
        config = {
            "type": "rest",
            "uri": f"{endpoint}/iceberg/api",
            "credential": f"{key}:{secret}",
            "oauth2-server-uri": f"{endpoint}/iceberg/api/v1/oauth/tokens",
            "s3.endpoint": endpoint,
            "s3.access-key-id": key,
            "s3.secret-access-key": secret,
            "s3.region": "us-east-1",
            **properties,
        }
        if warehouse:
            config["warehouse"] = warehouse
        return load_catalog(f"silt-{secrets.token_hex(3)}", **config)

    return make
