"""The catalog's own actions (`catalog:*`, lakeFS's names and resources) through pyiceberg's public
API: asked before the object actions, on namespaces and tables named without their ref, and held
through the repository's actions too."""

from __future__ import annotations

import secrets
from typing import Any

import pytest
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.exceptions import ForbiddenError

from silt.launcher import Stack
from tests.e2e.iceberg.conftest import CatalogFactory, api_call
from tests.e2e.iceberg.test_catalog import SCHEMA, rows

CATALOG = "arn:lakefs:catalog:::"
REPOSITORY = "arn:lakefs:fs:::repository/"


def _user_catalog(stack: Stack, repo: str, statements: list[dict[str, Any]], group: str = "") -> Catalog:
    """A pyiceberg catalog on `<repo>.main` signed in as a new user holding statements (or in group)."""
    user = f"ice-{secrets.token_hex(4)}"
    assert api_call(stack, "POST", "/auth/users", {"id": user}).status == 201
    if statements:
        policy = f"p-{secrets.token_hex(4)}"
        made = api_call(stack, "POST", "/auth/policies", {"id": policy, "statement": statements})
        assert made.status == 201, made.data
        assert api_call(stack, "PUT", f"/auth/users/{user}/policies/{policy}").status == 201
    if group:
        assert api_call(stack, "PUT", f"/auth/groups/{group}/members/{user}").status == 201
    issued = api_call(stack, "POST", f"/auth/users/{user}/credentials").json()
    key, secret = issued["access_key_id"], issued["secret_access_key"]
    endpoint = stack.endpoints["gateway"]
    return load_catalog(
        f"as-{user}",
        type="rest",
        uri=f"{endpoint}/iceberg/api",
        credential=f"{key}:{secret}",
        warehouse=f"{repo}.main",
        **{
            "oauth2-server-uri": f"{endpoint}/iceberg/api/v1/oauth/tokens",
            "s3.endpoint": endpoint,
            "s3.access-key-id": key,
            "s3.secret-access-key": secret,
            "s3.region": "us-east-1",
        },
    )


@pytest.fixture
def tables(repo: str, catalog_for: CatalogFactory) -> str:
    """`sales.orders` and `sales.refunds` on main, made by the admin."""
    admin = catalog_for(warehouse=f"{repo}.main")
    admin.create_namespace("sales")
    admin.create_table("sales.orders", SCHEMA).append(rows(0, 3))
    admin.create_table("sales.refunds", SCHEMA)
    return repo


def test_the_repository_s_actions_hold_its_catalog(stack: Stack, tables: str) -> None:
    """ReadRepo holds the catalog's reads in that repository and WriteRepo its changes, as a table is
    files of it; without them every request is refused before it reads anything, so a refusal
    tells nothing of what exists."""
    reader = _user_catalog(stack, tables, [{"effect": "allow", "action": ["ReadRepo"], "resource": tables}])
    assert reader.list_tables("sales") == [("sales", "orders"), ("sales", "refunds")]
    assert reader.load_table("sales.orders").scan().to_arrow().num_rows == 3
    with pytest.raises(ForbiddenError, match="catalog:CreateNamespace"):
        reader.create_namespace("more")
    outsider = _user_catalog(stack, tables, [{"effect": "allow", "action": ["ReadRepo"], "resource": "elsewhere"}])
    for call in (
        lambda: outsider.list_namespaces(),
        lambda: outsider.load_table("sales.orders"),
        lambda: outsider.load_table("sales.nothing-here"),
    ):
        with pytest.raises(ForbiddenError):
            call()


def test_lakefs_catalog_statements_grant_one_table(stack: Stack, tables: str) -> None:
    """lakeFS's catalog: statements on its ARNs, with fs:ReadObject on the table's files: the user
    loads and scans that table and no other, and may not commit to it."""
    user = _user_catalog(
        stack,
        tables,
        [
            {"effect": "allow", "action": ["fs:ReadObject"], "resource": f"{REPOSITORY}{tables}/object/sales/orders/*"},
            {"effect": "allow", "action": ["catalog:ReadTable"], "resource": f"{CATALOG}table/{tables}/sales/orders"},
        ],
    )
    orders = user.load_table("sales.orders")
    assert orders.scan().to_arrow().num_rows == 3
    with pytest.raises(ForbiddenError, match="catalog:ReadTable"):
        user.load_table("sales.refunds")
    with pytest.raises(ForbiddenError, match="catalog:CreateTable"):
        user.create_table("sales.more", SCHEMA)


def test_a_deny_on_a_table_beats_the_preset_developers(stack: Stack, tables: str) -> None:
    """The Developers preset holds catalog:* (and writes); a lakeFS Deny of catalog:UpdateTable on
    one table keeps its commits out, on every branch, while the other table takes them."""
    user = _user_catalog(
        stack,
        tables,
        [{"effect": "deny", "action": ["catalog:UpdateTable"], "resource": f"{CATALOG}table/{tables}/sales/orders"}],
        group="Developers",
    )
    refunds = user.load_table("sales.refunds")
    refunds.append(rows(0, 2))
    assert user.load_table("sales.refunds").scan().to_arrow().num_rows == 2
    with pytest.raises(ForbiddenError):
        user.load_table("sales.orders").append(rows(10, 1))
    assert user.load_table("sales.orders").scan().to_arrow().num_rows == 3
