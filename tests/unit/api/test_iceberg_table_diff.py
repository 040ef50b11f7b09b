"""A table's diff from its two metadata files: nested fields matched by id, counts from the
snapshots' summaries, tables on one side only."""

from __future__ import annotations

from typing import Any

from edge.api.iceberg.table_diff import schema_changes, table_diff


def _schema(schema_id: int, fields: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "struct", "schema-id": schema_id, "fields": fields}


def _snapshot(snapshot_id: int, added: int, deleted: int = 0) -> dict[str, Any]:
    summary = {"operation": "append", "added-records": str(added), "total-records": str(added)}
    if deleted:
        summary["deleted-records"] = str(deleted)
    return {"snapshot-id": snapshot_id, "timestamp-ms": snapshot_id, "summary": summary}


def test_nested_fields_are_matched_by_id() -> None:
    point = {"type": "struct", "fields": [{"id": 3, "name": "x", "type": "int"}]}
    before = _schema(0, [{"id": 1, "name": "tags", "type": {"type": "list", "element-id": 2, "element": point}}])
    moved = {
        "type": "struct",
        "fields": [{"id": 3, "name": "lon", "type": "long"}, {"id": 4, "name": "y", "type": "int"}],
    }
    after = _schema(1, [{"id": 1, "name": "labels", "type": {"type": "list", "element-id": 2, "element": moved}}])
    assert schema_changes(before, after) == [
        {"change": "renamed", "field_id": 1, "name": "labels", "previous_name": "tags", "type": "list"},
        {
            "change": "renamed",
            "field_id": 3,
            "name": "labels.element.lon",
            "previous_name": "tags.element.x",
            "type": "long",
        },
        {"change": "type_changed", "field_id": 3, "name": "labels.element.lon", "type": "long", "previous_type": "int"},
        {"change": "added", "field_id": 4, "name": "labels.element.y", "type": "int"},
    ]


def test_counts_come_from_the_added_snapshots() -> None:
    schema = _schema(0, [{"id": 1, "name": "id", "type": "long"}])
    left = {"schemas": [schema], "current-schema-id": 0, "snapshots": [_snapshot(1, 5)], "current-snapshot-id": 1}
    right = {**left, "snapshots": [_snapshot(1, 5), _snapshot(2, 3), _snapshot(3, 0, 2)], "current-snapshot-id": 3}
    diff = table_diff(left, right)
    assert (diff["type"], diff["rows_added"], diff["rows_deleted"]) == ("changed", 3, 2)
    assert [s["snapshot_id"] for s in diff["snapshots_added"]] == [2, 3]
    assert diff["schema_changes"] == []
    gone = table_diff(right, None)
    assert (gone["type"], gone["right"], gone["snapshots_removed_count"]) == ("removed", None, 3)
    assert table_diff(None, left)["left"] is None
