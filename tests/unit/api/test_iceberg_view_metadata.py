"""A view's metadata as a pure function: ids assigned as Iceberg's builder assigns them, the
version log, history expiry and the refusals."""

from __future__ import annotations

from typing import Any

import pytest

from edge.api.iceberg.errors import IcebergError
from edge.api.iceberg.view_metadata import apply_view_updates, check_view_requirements, new_view_metadata

SCHEMA: dict[str, Any] = {"type": "struct", "schema-id": 7, "fields": [{"id": 1, "name": "id", "type": "long"}]}


def version(sql: str, timestamp: int = 1000, schema_id: int = -1) -> dict[str, Any]:
    return {
        "version-id": 99,
        "schema-id": schema_id,
        "timestamp-ms": timestamp,
        "summary": {},
        "representations": [{"type": "sql", "sql": sql, "dialect": "spark"}],
        "default-namespace": ["db"],
    }


def created() -> dict[str, Any]:
    return new_view_metadata({"schema": SCHEMA, "view-version": version("SELECT 1")}, "s3://r/main/db/v")


def test_create_assigns_the_server_s_ids() -> None:
    metadata = created()
    assert [s["schema-id"] for s in metadata["schemas"]] == [0]
    assert metadata["versions"][0]["version-id"] == 1 and metadata["versions"][0]["schema-id"] == 0
    assert metadata["current-version-id"] == 1
    assert metadata["version-log"] == [{"version-id": 1, "timestamp-ms": 1000}]


def test_an_identical_schema_or_version_keeps_its_id_and_rollback_is_logged() -> None:
    base = created()
    second = apply_view_updates(
        base,
        [
            {"action": "add-schema", "schema": {**SCHEMA, "schema-id": 3}},
            {"action": "add-view-version", "view-version": version("SELECT 2", 2000)},
            {"action": "set-current-view-version", "view-version-id": -1},
        ],
    )
    assert len(second["schemas"]) == 1 and [v["version-id"] for v in second["versions"]] == [1, 2]
    assert second["versions"][1]["schema-id"] == 0
    back = apply_view_updates(second, [{"action": "set-current-view-version", "view-version-id": 1}])
    assert back["current-version-id"] == 1
    assert [e["version-id"] for e in back["version-log"]] == [1, 2, 1]
    assert base["current-version-id"] == 1 and len(base["versions"]) == 1  # base untouched


def test_history_keeps_the_newest_versions_and_the_current_one() -> None:
    metadata = apply_view_updates(
        created(), [{"action": "set-properties", "updates": {"version.history.num-entries": "2"}}]
    )
    for n in range(2, 5):
        metadata = apply_view_updates(
            metadata, [{"action": "add-view-version", "view-version": version(f"SELECT {n}", schema_id=0)}]
        )
    # Version 1 stays current while newer ones are only added.
    assert [v["version-id"] for v in metadata["versions"]] == [1, 4]
    metadata = apply_view_updates(metadata, [{"action": "set-current-view-version", "view-version-id": 4}])
    assert metadata["current-version-id"] == 4


def test_refusals() -> None:
    metadata = created()
    with pytest.raises(IcebergError) as stale:
        check_view_requirements(metadata, [{"type": "assert-view-uuid", "uuid": "other"}])
    assert stale.value.status == 409 and stale.value.kind == "CommitFailedException"
    check_view_requirements(metadata, [{"type": "assert-view-uuid", "uuid": metadata["view-uuid"]}])
    for updates in (
        [{"action": "upgrade-format-version", "format-version": 2}],
        [{"action": "set-current-view-version", "view-version-id": 9}],
        [{"action": "add-view-version", "view-version": version("SELECT 5", schema_id=4)}],
        [{"action": "add-snapshot", "snapshot": {}}],
        [{"action": "set-properties"}],
    ):
        with pytest.raises(IcebergError) as refused:
            apply_view_updates(metadata, updates)
        assert refused.value.status == 400, updates
