"""What pyiceberg's public API does not reach: the multi-table transaction endpoint, the error
model on the wire, and authentication and authorization, driven over HTTP."""

from __future__ import annotations

import hashlib
import json
import secrets
import threading
from typing import Any

import urllib3
from pyiceberg.exceptions import ForbiddenError, OAuthError
from pyiceberg.schema import Schema
from pyiceberg.table import CommitTableRequest, TableIdentifier
from pyiceberg.table.update import (
    AddSchemaUpdate,
    AssertCurrentSchemaId,
    SetCurrentSchemaUpdate,
    SetPropertiesUpdate,
)
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


TABLES = ["t0", "t1", "t2"]
WRITERS = 2
ROUNDS = 5


def _pointer_etags(stack: Stack, repo: str) -> dict[str, str]:
    """Each table's pointer ETag on main, from one listing (one consistent read of the branch)."""
    listed = api_call(stack, "GET", f"/repositories/{repo}/refs/main/objects/ls?prefix=db/&amount=1000")
    assert listed.status == 200, listed.data
    return {
        item["path"].split("/")[1]: item["checksum"].strip('"')
        for item in listed.json()["results"]
        if item["path"].endswith("/_iceberg_table.json")
    }


def test_a_transaction_moves_every_table_or_none_and_readers_never_see_part(
    stack: Stack, repo: str, catalog_for: CatalogFactory
) -> None:
    """Writers race multi-table transactions (each adds a column to every table and marks it
    with its name) while a reader lists the tables' pointers: each listing shows every table at
    one transaction's state, losers change nothing, and no two transactions from one state win."""
    catalog = catalog_for(warehouse=f"{repo}.main")
    catalog.create_namespace("db")
    for name in TABLES:
        catalog.create_table(f"db.{name}", SCHEMA, properties={"txn": "created"})
    won: list[tuple[int, str]] = []  # (the schema id it required, its name)
    refused: list[str] = []
    listings: list[dict[str, str]] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def transaction(writer: int, round_: int) -> None:
        mark = f"w{writer}-{round_}"
        changes = []
        schema_ids = set()
        for name in TABLES:
            table = catalog.load_table(f"db.{name}")
            schema = table.schema()
            schema_ids.add(schema.schema_id)
            column = NestedField(table.metadata.last_column_id + 1, f"c_{mark.replace('-', '_')}", LongType())
            grown = Schema(*schema.fields, column, schema_id=schema.schema_id + 1)
            request = CommitTableRequest(
                identifier=TableIdentifier(namespace=["db"], name=name),
                requirements=(AssertCurrentSchemaId(current_schema_id=schema.schema_id),),
                updates=(
                    AddSchemaUpdate(schema=grown),  # type: ignore[call-arg]  # pydantic's alias
                    SetCurrentSchemaUpdate(schema_id=-1),
                    SetPropertiesUpdate(updates={"txn": mark}),
                ),
            )
            changes.append(json.loads(request.model_dump_json(by_alias=True)))
        answer = catalog_call(stack, "POST", f"/{repo}.main/transactions/commit", {"table-changes": changes})
        if answer.status == 204:
            # Every table moved from the schema this writer read: one id for all of them.
            assert len(schema_ids) == 1, schema_ids
            won.append((schema_ids.pop(), mark))
        else:
            error_of(answer, 409, "CommitFailedException")
            refused.append(mark)

    def writer(number: int) -> None:
        try:
            for round_ in range(ROUNDS):
                transaction(number, round_)
        except BaseException as exc:  # reported by the test's thread
            errors.append(exc)

    def reader() -> None:
        try:
            while not stop.is_set():
                listings.append(_pointer_etags(stack, repo))
        except BaseException as exc:
            errors.append(exc)

    writers = [threading.Thread(target=writer, args=(n,)) for n in range(WRITERS)]
    watcher = threading.Thread(target=reader)
    watcher.start()
    for thread in writers:
        thread.start()
    for thread in writers:
        thread.join()
    stop.set()
    watcher.join()
    assert not errors, errors
    assert won, "no transaction won"
    # Never two from one state.
    required = [schema_id for schema_id, _ in won]
    assert len(required) == len(set(required)), won
    final = {name: catalog.load_table(f"db.{name}") for name in TABLES}
    for table in final.values():
        assert table.schema().schema_id == len(won)  # every winner's column, no loser's
        assert len(table.schema().fields) == 1 + len(won)
    assert len({table.properties["txn"] for table in final.values()}) == 1

    # Each pointer ETag a reader saw, resolved to the transaction that wrote it (the pointer
    # names its metadata file; pointers are written compactly by the catalog).
    mark_of: dict[str, str] = {}
    for name in TABLES:
        listed = api_call(stack, "GET", f"/repositories/{repo}/refs/main/objects/ls?prefix=db/{name}/metadata/")
        for item in listed.json()["results"]:
            if not item["path"].endswith(".metadata.json"):
                continue
            value = {"metadata-key": item["path"], "metadata-location": f"s3://{repo}/@main/{item['path']}"}
            pointer = json.dumps(value, separators=(",", ":")).encode()
            got = api_call(stack, "GET", f"/repositories/{repo}/refs/main/objects?path={item['path']}")
            mark_of[hashlib.md5(pointer).hexdigest()] = json.loads(got.data)["properties"]["txn"]
    assert listings
    for listing in listings:
        assert sorted(listing) == TABLES, listing
        marks = {mark_of[etag] for etag in listing.values()}
        assert len(marks) == 1, (listing, marks)
    assert {mark for listing in listings for mark in {mark_of[e] for e in listing.values()}} <= {
        "created",
        *(mark for _, mark in won),
    }


def test_a_transaction_spans_one_branch(stack: Stack, repo: str, catalog_for: CatalogFactory) -> None:
    catalog = catalog_for()
    catalog.create_namespace((repo, "main", "db"))
    api_call(stack, "POST", f"/repositories/{repo}/branches", {"name": "dev", "source": "main"})
    catalog.create_namespace((repo, "dev", "db"))
    catalog.create_table((repo, "main", "db", "a"), SCHEMA)
    catalog.create_table((repo, "dev", "db", "b"), SCHEMA)
    changes = [
        {"identifier": {"namespace": [repo, ref, "db"], "name": name}, "requirements": [], "updates": []}
        for ref, name in (("main", "a"), ("dev", "b"))
    ]
    answer = catalog_call(stack, "POST", "/transactions/commit", {"table-changes": changes})
    error_of(answer, 400, "BadRequestException")


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
    """Each request is authorized for its catalog action first (then for the object reads and
    writes it makes: tests/e2e/iceberg/test_catalog_grants.py)."""
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
        assert "catalog:CreateNamespace" in str(refused)
    else:
        raise AssertionError("a user without permissions created a namespace")
    try:
        outsider.load_namespace_properties((repo, "main", "db"))
    except ForbiddenError as refused:
        assert "catalog:GetNamespace" in str(refused)
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
