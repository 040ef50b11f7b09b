"""The Iceberg REST catalog's views: pyiceberg's public view API (create, list, load, exists,
register, drop) on a branch and through a merge, and over HTTP what pyiceberg does not reach
(replace with its requirements, rename, the error model, a read-only tag, the view actions)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from pyiceberg.exceptions import ForbiddenError, NoSuchViewError, TableAlreadyExistsError, ViewAlreadyExistsError
from pyiceberg.view.metadata import SQLViewRepresentation, ViewRepresentation, ViewVersion

from silt.launcher import Stack
from tests.e2e.iceberg.conftest import CatalogFactory, api_call
from tests.e2e.iceberg.test_catalog import SCHEMA
from tests.e2e.iceberg.test_catalog_grants import CATALOG, _user_catalog
from tests.e2e.iceberg.test_protocol import catalog_call, error_of


def version(sql: str) -> ViewVersion:
    representation = ViewRepresentation(SQLViewRepresentation(type="sql", sql=sql, dialect="spark"))
    return ViewVersion(schema_id=0, representations=[representation], default_namespace=("db",))


def representation(sql: str) -> dict[str, Any]:
    return {"type": "sql", "sql": sql, "dialect": "spark"}


def test_views_on_a_branch_and_merged(stack: Stack, repo: str, catalog_for: CatalogFactory) -> None:
    """A view created on a branch is there only, through pyiceberg's API; merged, main has it; it
    never takes a table's name, nor a table its name."""
    admin = catalog_for()
    admin.create_namespace((repo, "main", "db"))
    admin.create_table((repo, "main", "db", "events"), SCHEMA)
    assert api_call(stack, "POST", f"/repositories/{repo}/branches/main/commits", {"message": "db"}).status == 201
    assert api_call(stack, "POST", f"/repositories/{repo}/branches", {"name": "dev", "source": "main"}).status == 201
    dev = catalog_for(warehouse=f"{repo}.dev")

    view = dev.create_view("db.recent", SCHEMA, version("SELECT * FROM events"), properties={"comment": "c"})
    assert view.metadata.location == f"s3://{repo}/dev/db/recent"
    assert view.current_version().representations[0].root.sql == "SELECT * FROM events"
    with pytest.raises(ViewAlreadyExistsError):
        dev.create_view("db.recent", SCHEMA, version("SELECT 1"))
    with pytest.raises(ViewAlreadyExistsError):
        dev.create_view("db.events", SCHEMA, version("SELECT 1"))
    with pytest.raises(TableAlreadyExistsError, match="View with same name"):
        dev.create_table("db.recent", SCHEMA)

    assert dev.list_views("db") == [("db", "recent")]
    assert dev.list_tables("db") == [("db", "events")]
    assert dev.view_exists("db.recent") and not dev.view_exists("db.events")
    loaded = dev.load_view("db.recent")
    assert loaded.metadata.view_uuid == view.metadata.view_uuid
    assert loaded.properties == {"comment": "c"}
    with pytest.raises(NoSuchViewError):
        dev.load_view("db.events")

    main = catalog_for(warehouse=f"{repo}.main")
    assert main.list_views("db") == [] and not main.view_exists("db.recent")
    assert api_call(stack, "POST", f"/repositories/{repo}/branches/dev/commits", {"message": "view"}).status == 201
    merged = api_call(stack, "POST", f"/repositories/{repo}/refs/dev/merge/main", {})
    assert merged.status == 200, merged.data
    assert main.load_view("db.recent").metadata.view_uuid == view.metadata.view_uuid

    # A metadata file registers as another view of the same definition; dropped, a view is gone.
    location = main.load_view("db.recent").metadata.location
    registered = catalog_call(stack, "GET", f"/{repo}.main/namespaces/db/views/recent").json()["metadata-location"]
    assert registered.startswith(location + "/metadata/")
    copy = main.register_view("db.copy", registered)
    assert copy.current_version().representations[0].root.sql == "SELECT * FROM events"
    assert main.list_views("db") == [("db", "copy"), ("db", "recent")]
    main.drop_view("db.recent")
    assert not main.view_exists("db.recent")
    with pytest.raises(NoSuchViewError):
        main.drop_view("db.recent")
    assert dev.view_exists("db.recent")


def test_replace_rename_and_errors_over_http(stack: Stack, repo: str, catalog_for: CatalogFactory) -> None:
    catalog = catalog_for(warehouse=f"{repo}.main")
    catalog.create_namespace("db")
    catalog.create_namespace("other")
    catalog.create_table("db.events", SCHEMA)
    base = f"/{repo}.main/namespaces/db/views"
    schema: dict[str, Any] = {
        "type": "struct",
        "schema-id": 0,
        "fields": [{"id": 1, "name": "id", "type": "long", "required": False}],
    }
    first = {
        "version-id": 1,
        "schema-id": 0,
        "timestamp-ms": 1000,
        "summary": {},
        "representations": [representation("SELECT id FROM events")],
        "default-namespace": ["db"],
    }
    created = catalog_call(
        stack, "POST", base, {"name": "v", "schema": schema, "view-version": first, "properties": {}}
    )
    assert created.status == 200, created.data
    uuid = created.json()["metadata"]["view-uuid"]
    first_location = created.json()["metadata-location"]

    # Replace: a new schema and version made current, properties set and removed.
    wider = {**schema, "fields": [*schema["fields"], {"id": 2, "name": "n", "type": "string", "required": False}]}
    second = {**first, "schema-id": -1, "timestamp-ms": 2000, "representations": [representation("SELECT *")]}
    replace = {
        "requirements": [{"type": "assert-view-uuid", "uuid": uuid}],
        "updates": [
            {"action": "add-schema", "schema": wider},
            {"action": "add-view-version", "view-version": second},
            {"action": "set-current-view-version", "view-version-id": -1},
            {"action": "set-properties", "updates": {"owner": "ana", "tier": "1"}},
            {"action": "remove-properties", "removals": ["tier"]},
            {"action": "upgrade-format-version", "format-version": 1},
        ],
    }
    replaced = catalog_call(stack, "POST", f"{base}/v", replace)
    assert replaced.status == 200, replaced.data
    metadata = replaced.json()["metadata"]
    assert metadata["current-version-id"] == 2 and [s["schema-id"] for s in metadata["schemas"]] == [0, 1]
    assert metadata["versions"][1]["schema-id"] == 1 and metadata["properties"] == {"owner": "ana"}
    assert [e["version-id"] for e in metadata["version-log"]] == [1, 2]
    assert replaced.json()["metadata-location"] != first_location
    loaded = catalog.load_view("db.v")
    assert loaded.current_version().representations[0].root.sql == "SELECT *"

    # A stale UUID fails the commit; nothing changes.
    stale = {"requirements": [{"type": "assert-view-uuid", "uuid": "00000000-0000-0000-0000-000000000000"}]}
    refused = catalog_call(
        stack, "POST", f"{base}/v", {**stale, "updates": [{"action": "set-location", "location": "x"}]}
    )
    assert "uuid" in error_of(refused, 409, "CommitFailedException").lower()
    assert catalog.load_view("db.v").metadata.location == f"s3://{repo}/main/db/v"
    error_of(catalog_call(stack, "POST", f"{base}/nothing", {"updates": []}), 404, "NoSuchViewException")
    error_of(catalog_call(stack, "GET", f"{base}/nothing"), 404, "NoSuchViewException")
    assert catalog_call(stack, "HEAD", f"{base}/nothing").status == 404
    bad = catalog_call(
        stack, "POST", f"{base}/v", {"updates": [{"action": "upgrade-format-version", "format-version": 2}]}
    )
    error_of(bad, 400, "BadRequestException")

    # Rename, across namespaces: the old name is free, a taken one refused.
    rename = {"source": {"namespace": ["db"], "name": "v"}, "destination": {"namespace": ["other"], "name": "w"}}
    renamed = catalog_call(stack, "POST", f"/{repo}.main/views/rename", rename)
    assert renamed.status == 204, renamed.data
    assert not catalog.view_exists("db.v") and catalog.view_exists("other.w")
    assert catalog.load_view("other.w").metadata.view_uuid == uuid
    assert catalog.list_views("db") == []
    gone = catalog_call(stack, "POST", f"/{repo}.main/views/rename", rename)
    error_of(gone, 404, "NoSuchViewException")
    onto_table = {"source": rename["destination"], "destination": {"namespace": ["db"], "name": "events"}}
    error_of(catalog_call(stack, "POST", f"/{repo}.main/views/rename", onto_table), 409, "AlreadyExistsException")
    # A table renamed onto a view's name is refused too.
    table_onto_view = {"source": {"namespace": ["db"], "name": "events"}, "destination": rename["destination"]}
    error_of(catalog_call(stack, "POST", f"/{repo}.main/tables/rename", table_onto_view), 409, "AlreadyExistsException")
    # The name a rename freed takes a new view.
    again = catalog_call(stack, "POST", base, {"name": "v", "schema": schema, "view-version": first, "properties": {}})
    assert again.status == 200, again.data
    assert again.json()["metadata"]["view-uuid"] != uuid
    # A namespace that holds a view is not empty.
    error_of(catalog_call(stack, "DELETE", f"/{repo}.main/namespaces/other"), 409, "NamespaceNotEmptyException")

    # A tag reads views and refuses their writes.
    assert api_call(stack, "POST", f"/repositories/{repo}/branches/main/commits", {"message": "v"}).status == 201
    assert api_call(stack, "POST", f"/repositories/{repo}/tags", {"id": "v1", "ref": "main"}).status == 201
    tagged = catalog_for(warehouse=f"{repo}.v1")
    assert tagged.view_exists("other.w")
    with pytest.raises(ForbiddenError, match="read-only"):
        tagged.create_view("db.t", SCHEMA, version("SELECT 1"))
    on_tag = catalog_call(stack, "POST", f"/{repo}.v1/namespaces/other/views/w", {"updates": []})
    assert "read-only" in error_of(on_tag, 403, "ForbiddenException")
    with pytest.raises(ForbiddenError, match="read-only"):
        tagged.drop_view("other.w")


def test_the_view_actions(stack: Stack, repo: str, catalog_for: CatalogFactory) -> None:
    """catalog:ReadView on one view (with its files' reads) loads that view only; creating, or
    dropping, takes catalog:CreateView and catalog:DeleteView."""
    admin = catalog_for(warehouse=f"{repo}.main")
    admin.create_namespace("db")
    admin.create_view("db.mine", SCHEMA, version("SELECT 1"))
    admin.create_view("db.theirs", SCHEMA, version("SELECT 2"))
    user = _user_catalog(
        stack,
        repo,
        [
            {"effect": "allow", "action": ["fs:ReadObject"], "resource": f"arn:lakefs:fs:::repository/{repo}/object/*"},
            {"effect": "allow", "action": ["catalog:ReadView"], "resource": f"{CATALOG}view/{repo}/db/mine"},
        ],
    )
    assert user.load_view("db.mine").current_version().representations[0].root.sql == "SELECT 1"
    with pytest.raises(ForbiddenError, match="catalog:ReadView"):
        user.load_view("db.theirs")
    with pytest.raises(ForbiddenError, match="catalog:ListViews"):
        user.list_views("db")
    with pytest.raises(ForbiddenError, match="catalog:CreateView"):
        user.create_view("db.more", SCHEMA, version("SELECT 3"))
    with pytest.raises(ForbiddenError, match="catalog:DeleteView"):
        user.drop_view("db.mine")
    assert admin.view_exists("db.mine")


def test_racing_replaces_lose_no_update(stack: Stack, repo: str, catalog_for: CatalogFactory) -> None:
    """Replaces sent at once: each is applied to the view as it stands or refused (409), and every
    one that succeeded is in the view afterwards (no last-writer-wins)."""
    catalog = catalog_for(warehouse=f"{repo}.main")
    catalog.create_namespace("db")
    uuid = catalog.create_view("db.v", SCHEMA, version("SELECT 1")).metadata.view_uuid
    path = f"/{repo}.main/namespaces/db/views/v"

    def replace(n: int) -> int:
        body = {
            "requirements": [{"type": "assert-view-uuid", "uuid": uuid}],
            "updates": [{"action": "set-properties", "updates": {f"k{n}": str(n)}}],
        }
        response = catalog_call(stack, "POST", path, body)
        if response.status != 200:
            error_of(response, 409, "CommitFailedException")
        return response.status

    with ThreadPoolExecutor(6) as pool:
        statuses = list(pool.map(replace, range(6)))
    assert 200 in statuses
    won = {f"k{n}" for n, status in enumerate(statuses) if status == 200}
    assert set(catalog.load_view("db.v").properties) == won
