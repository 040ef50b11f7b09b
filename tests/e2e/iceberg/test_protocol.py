"""What pyiceberg's public API does not reach: the multi-table transaction endpoint, the error
model on the wire, and authentication and authorization, driven over HTTP."""

from __future__ import annotations

import secrets
from typing import Any

import urllib3
from pyiceberg.exceptions import ForbiddenError, OAuthError
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField

from silt.launcher import Stack
from tests.e2e.iceberg.conftest import CatalogFactory, admin_auth, api_call

SCHEMA = Schema(NestedField(1, "id", LongType(), required=False))


def catalog_call(
    stack: Stack, method: str, path: str, body: Any = None, headers: Any = None
) -> urllib3.BaseHTTPResponse:
    return urllib3.request(
        method,
        stack.endpoints["gateway"] + "/iceberg/api/v1" + path,
        json=body,
        headers=admin_auth(stack) if headers is None else headers,
        retries=False,
    )


def error_of(response: urllib3.BaseHTTPResponse, status: int, kind: str) -> str:
    assert response.status == status, response.data
    error = response.json()["error"]
    assert error["code"] == status and error["type"] == kind
    message: str = error["message"]
    return message


def test_transaction_commits_every_table_or_none(stack: Stack, repo: str, catalog_for: CatalogFactory) -> None:
    catalog = catalog_for(warehouse=f"{repo}.main")
    catalog.create_namespace("db")
    one, two = catalog.create_table("db.one", SCHEMA), catalog.create_table("db.two", SCHEMA)

    def change(name: str, uuid: str, value: str) -> dict[str, Any]:
        return {
            "identifier": {"namespace": ["db"], "name": name},
            "requirements": [{"type": "assert-table-uuid", "uuid": uuid}],
            "updates": [{"action": "set-properties", "updates": {"batch": value}}],
        }

    both = [change("one", str(one.metadata.table_uuid), "1"), change("two", str(two.metadata.table_uuid), "1")]
    committed = catalog_call(stack, "POST", f"/{repo}.main/transactions/commit", {"table-changes": both})
    assert committed.status == 204, committed.data
    assert catalog.load_table("db.one").properties["batch"] == "1"
    assert catalog.load_table("db.two").properties["batch"] == "1"

    # One requirement that fails refuses the whole transaction: neither table changes.
    stale = [
        change("one", str(one.metadata.table_uuid), "2"),
        change("two", "00000000-0000-0000-0000-000000000000", "2"),
    ]
    refused = catalog_call(stack, "POST", f"/{repo}.main/transactions/commit", {"table-changes": stale})
    assert "uuid" in error_of(refused, 409, "CommitFailedException").lower()
    assert catalog.load_table("db.one").properties["batch"] == "1"
    assert catalog.load_table("db.two").properties["batch"] == "1"


def test_error_model_and_credentials(stack: Stack, repo: str, catalog_for: CatalogFactory) -> None:
    # A load in a missing namespace is a missing table (the spec's answer; Spark's metadata tables rely on it).
    missing = catalog_call(stack, "GET", f"/namespaces/{repo}%1Fmain%1Fnone/tables/t")
    error_of(missing, 404, "NoSuchTableException")
    catalog_for().create_namespace((repo, "main", "db"))
    missing = catalog_call(stack, "GET", f"/namespaces/{repo}%1Fmain%1Fdb/tables/t")
    error_of(missing, 404, "NoSuchTableException")
    unknown = catalog_call(
        stack,
        "POST",
        f"/namespaces/{repo}%1Fmain%1Fdb/tables",
        {"name": "bad", "schema": {"type": "struct", "fields": []}, "properties": {"format-version": "9"}},
    )
    error_of(unknown, 400, "BadRequestException")

    assert catalog_call(stack, "GET", f"/config?warehouse={repo}.main").json()["overrides"] == {
        "prefix": f"{repo}.main"
    }
    assert catalog_call(stack, "GET", "/config?warehouse=s3://lake").json()["overrides"] == {}

    anonymous = catalog_call(stack, "GET", "/config", headers={})
    error_of(anonymous, 401, "NotAuthorizedException")
    wrong = urllib3.make_headers(basic_auth=f"{stack.admin.access_key_id}:not-the-secret")  # type: ignore[union-attr]
    error_of(catalog_call(stack, "GET", "/config", headers=wrong), 401, "NotAuthorizedException")
    try:
        catalog_for(credential=f"{stack.admin.access_key_id}:not-the-secret")  # type: ignore[union-attr]
    except OAuthError:
        pass
    else:
        raise AssertionError("a wrong secret got a token")


def test_a_user_without_permissions_is_refused(stack: Stack, repo: str, catalog_for: CatalogFactory) -> None:
    """Each request is authorized as the object reads and writes it makes."""
    user = f"nobody-{secrets.token_hex(3)}"
    assert api_call(stack, "POST", "/auth/users", {"id": user}).status == 201
    made = api_call(stack, "POST", f"/auth/users/{user}/credentials")
    assert made.status == 201, made.data
    key, secret = made.json()["access_key_id"], made.json()["secret_access_key"]
    catalog_for().create_namespace((repo, "main", "db"))

    outsider = catalog_for(credential=f"{key}:{secret}")
    try:
        outsider.create_namespace((repo, "main", "mine"))
    except ForbiddenError as refused:
        assert "WriteObject" in str(refused)
    else:
        raise AssertionError("a user without permissions created a namespace")
    try:
        outsider.load_namespace_properties((repo, "main", "db"))
    except ForbiddenError as refused:
        assert "ReadObject" in str(refused)
    else:
        raise AssertionError("a user without permissions read a namespace")


def test_lists_page_by_page_size_and_token(stack: Stack, repo: str, catalog_for: CatalogFactory) -> None:
    catalog = catalog_for()
    for name in ("a", "b", "c"):
        catalog.create_namespace((repo, "main", name))
    first = catalog_call(stack, "GET", f"/{repo}.main/namespaces?pageSize=2").json()
    assert first["namespaces"] == [["a"], ["b"]] and first["next-page-token"] == "b"
    second = catalog_call(stack, "GET", f"/{repo}.main/namespaces?pageSize=2&pageToken=b").json()
    assert second == {"namespaces": [["c"]], "next-page-token": None}
    error_of(catalog_call(stack, "GET", f"/{repo}.main/namespaces?pageSize=0"), 400, "BadRequestException")
