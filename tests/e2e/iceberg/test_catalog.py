"""The Iceberg REST catalog through pyiceberg's public API only."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyiceberg.exceptions import (
    BadRequestError,
    CommitFailedException,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NoSuchNamespaceError,
    NoSuchTableError,
    TableAlreadyExistsError,
)
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

from silt.launcher import Stack
from tests.e2e.iceberg.conftest import CatalogFactory, api_call

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "name", StringType(), required=False),
)


def rows(start: int, count: int) -> pa.Table:
    ids = list(range(start, start + count))
    return pa.table({"id": pa.array(ids, pa.int64()), "name": pa.array([f"n{i}" for i in ids], pa.string())})


def test_namespaces_nested_properties_and_drop(repo: str, catalog_for: CatalogFactory) -> None:
    catalog = catalog_for()
    catalog.create_namespace((repo, "main", "sales"), {"owner": "ana"})
    catalog.create_namespace((repo, "main", "sales", "eu"))
    with pytest.raises(NamespaceAlreadyExistsError):
        catalog.create_namespace((repo, "main", "sales"))
    with pytest.raises(BadRequestError, match="parent namespace does not exist"):
        catalog.create_namespace((repo, "main", "nowhere", "child"))

    assert catalog.list_namespaces((repo, "main")) == [(repo, "main", "sales")]
    assert catalog.list_namespaces((repo, "main", "sales")) == [(repo, "main", "sales", "eu")]
    assert catalog.namespace_exists((repo, "main", "sales", "eu"))
    assert not catalog.namespace_exists((repo, "main", "marketing"))

    summary = catalog.update_namespace_properties(
        (repo, "main", "sales"), removals={"owner", "gone"}, updates={"tier": "1"}
    )
    assert summary.removed == ["owner"] and summary.missing == ["gone"] and summary.updated == ["tier"]
    assert catalog.load_namespace_properties((repo, "main", "sales")) == {"tier": "1"}

    with pytest.raises(NamespaceNotEmptyError):
        catalog.drop_namespace((repo, "main", "sales"))
    catalog.drop_namespace((repo, "main", "sales", "eu"))
    catalog.drop_namespace((repo, "main", "sales"))
    assert catalog.list_namespaces((repo, "main")) == []
    with pytest.raises(NoSuchNamespaceError):
        catalog.load_namespace_properties((repo, "main", "sales"))


def test_create_append_load_and_errors(stack: Stack, repo: str, catalog_for: CatalogFactory) -> None:
    catalog = catalog_for(warehouse=f"{repo}.main")
    catalog.create_namespace("db")
    table = catalog.create_table("db.events", SCHEMA)
    assert table.location() == f"s3://{repo}/main/db/events"
    with pytest.raises(TableAlreadyExistsError):
        catalog.create_table("db.events", SCHEMA)
    with pytest.raises(NoSuchNamespaceError):
        catalog.create_table("nodb.events", SCHEMA)

    table.append(rows(0, 10))
    table.append(rows(10, 5))

    loaded = catalog.load_table("db.events")
    assert loaded.scan().to_arrow().num_rows == 15
    assert len(loaded.history()) == 2
    assert catalog.table_exists("db.events")
    assert not catalog.table_exists("db.missing")
    assert catalog.list_tables("db") == [("db", "events")]
    with pytest.raises(NoSuchTableError):
        catalog.load_table("db.missing")
    # The catalog's files and the data are objects on the branch, staged (not committed).
    changes = api_call(stack, "GET", f"/repositories/{repo}/branches/main/diff?amount=1000").json()["results"]
    paths = {change["path"] for change in changes}
    assert {"db/_iceberg_namespace.json", "db/events/_iceberg_table.json"} <= paths
    assert any(p.startswith("db/events/metadata/") and p.endswith(".metadata.json") for p in paths)
    assert any(p.startswith("db/events/data/") and p.endswith(".parquet") for p in paths)
