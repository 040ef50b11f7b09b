"""Iceberg tables in the object browser, in Chromium: a table that pyiceberg made through the
catalog is badged in its namespace's listing and opens on its schema, its snapshots newest first
and its properties (as text, never markup), its files one tab away; a metadata file too large
for the browser is refused with its size said."""

from __future__ import annotations

import json

import pyarrow as pa
from playwright.sync_api import Page, expect
from pyiceberg.catalog import load_catalog
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

from tests.browser.conftest import Ui
from tests.support.gateway_stack import GatewayStack

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "name", StringType(), required=False),
)
ARROW_SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string())])


def _rows(start: int, count: int) -> pa.Table:
    ids = list(range(start, start + count))
    return pa.table({"id": ids, "name": [f"n{i}" for i in ids]}, schema=ARROW_SCHEMA)


def _make_table(stack: GatewayStack, repo: str) -> None:
    """`db.events` on main through the catalog, written twice (2 rows, then 3)."""
    key, secret = stack.admin.access_key_id, stack.admin.secret_access_key.get_secret_value()
    catalog = load_catalog(
        f"ui-{repo}",
        type="rest",
        uri=f"{stack.endpoint}/iceberg/api",
        credential=f"{key}:{secret}",
        warehouse=f"{repo}.main",
        **{
            "oauth2-server-uri": f"{stack.endpoint}/iceberg/api/v1/oauth/tokens",
            "s3.endpoint": stack.endpoint,
            "s3.access-key-id": key,
            "s3.secret-access-key": secret,
            "s3.region": "us-east-1",
        },
    )
    catalog.create_namespace("db")
    table = catalog.create_table("db.events", SCHEMA, properties={"owner": "<b>ann</b>"})
    table.append(_rows(0, 2))
    table.append(_rows(2, 3))


def test_an_iceberg_table_shows_its_schema_and_snapshots(
    admin_page: Page, ui: Ui, ui_stack: GatewayStack, repo: str
) -> None:
    page = admin_page
    _make_table(ui_stack, repo)
    s3 = ui_stack.client()
    # A plain directory beside the table, and a table whose metadata file is too large to read.
    s3.put_object(Bucket=repo, Key="main/db/notes/a.txt", Body=b"not a table\n")
    huge = "db/huge/metadata/00000-big.metadata.json"
    s3.put_object(Bucket=repo, Key=f"main/{huge}", Body=b" " * (5 * 1024 * 1024))
    s3.put_object(Bucket=repo, Key="main/db/huge/_iceberg_table.json", Body=json.dumps({"metadata-key": huge}).encode())

    page.goto(ui.url(f"/repositories/{repo}/objects?ref=main&path=db%2F"))
    rows = page.locator("tr.directory-row")
    expect(rows.filter(has_text="events/").get_by_test_id("iceberg-badge")).to_have_text("▦ Iceberg table")
    expect(rows.filter(has_text="huge/").get_by_test_id("iceberg-badge")).to_be_visible()
    expect(rows.filter(has_text="notes/").get_by_test_id("iceberg-badge")).to_have_count(0)
    ui.shot(page, "namespace-listing")

    page.get_by_test_id("entry").filter(has_text="events/").click()
    table = page.get_by_test_id("iceberg-table")
    fields = table.get_by_test_id("iceberg-field")
    expect(fields.nth(0).locator("td")).to_have_text(["1", "id", "long", "required"])
    expect(fields.nth(1).locator("td")).to_have_text(["2", "name", "string", "optional"])
    expect(fields).to_have_count(2)
    snapshots = table.get_by_test_id("iceberg-snapshot")
    expect(snapshots).to_have_count(2)
    # Newest first: the second append (3 rows, 5 in all) is the current snapshot.
    expect(snapshots.nth(0).locator("td").nth(2)).to_have_text("append")
    expect(snapshots.nth(0).locator("td").nth(3)).to_have_text("3")
    expect(snapshots.nth(0).locator("td").nth(5)).to_have_text("5")
    expect(snapshots.nth(0)).to_contain_text("current")
    expect(snapshots.nth(1).locator("td").nth(3)).to_have_text("2")
    expect(snapshots.nth(1).locator("td").nth(5)).to_have_text("2")
    expect(snapshots.nth(1)).not_to_contain_text("current")
    properties = table.get_by_test_id("iceberg-properties")
    expect(properties.locator("tr").filter(has_text="owner").locator("td")).to_have_text("<b>ann</b>")
    expect(properties.locator("td b")).to_have_count(0)
    ui.shot(page, "table-view")

    page.get_by_test_id("iceberg-tab-files").click()
    expect(page.get_by_test_id("entry")).to_have_text(["_iceberg_table.json", "data/", "metadata/"])
    page.get_by_test_id("iceberg-tab-table").click()
    expect(page.get_by_test_id("iceberg-snapshot")).to_have_count(2)

    page.goto(ui.url(f"/repositories/{repo}/objects?ref=main&path=db%2Fhuge%2F"))
    expect(page.get_by_test_id("iceberg-refused")).to_contain_text("over the 4.0 MiB the browser reads")
    expect(page.get_by_test_id("iceberg-refused")).to_contain_text("5.0 MiB")
