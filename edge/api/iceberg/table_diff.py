"""What changed in one Iceberg table between two of its metadata files: snapshots added and
removed, the rows those snapshots added and deleted (from their summaries), and the changes of
the current schema, field by field (matched by field id, as Iceberg tracks columns)."""

from __future__ import annotations

from typing import Any

Metadata = dict[str, Any]

# Snapshots listed per side of one table's diff; the counts always cover all of them.
MAX_LISTED_SNAPSHOTS = 100


def table_diff(left: Metadata | None, right: Metadata | None) -> dict[str, Any]:
    """The diff of a table from left to right (None: the table is not there on that side)."""
    left_snapshots = _snapshots(left)
    right_snapshots = _snapshots(right)
    added = [s for sid, s in right_snapshots.items() if sid not in left_snapshots]
    removed = [s for sid, s in left_snapshots.items() if sid not in right_snapshots]
    added.sort(key=lambda s: (s.get("timestamp-ms", 0), s.get("snapshot-id", 0)))
    removed.sort(key=lambda s: (s.get("timestamp-ms", 0), s.get("snapshot-id", 0)))
    return {
        "type": "added" if left is None else "removed" if right is None else "changed",
        "left": _state(left),
        "right": _state(right),
        "snapshots_added": [_snapshot(s) for s in added[-MAX_LISTED_SNAPSHOTS:]],
        "snapshots_added_count": len(added),
        "snapshots_removed": [_snapshot(s) for s in removed[-MAX_LISTED_SNAPSHOTS:]],
        "snapshots_removed_count": len(removed),
        "rows_added": sum(_count(s, "added-records") for s in added),
        "rows_deleted": sum(_count(s, "deleted-records") for s in added),
        "schema_changes": schema_changes(_current_schema(left), _current_schema(right)),
    }


def schema_changes(left: dict[str, Any] | None, right: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Fields added, removed, renamed and whose type changed from left's schema to right's, in
    field id order; nested fields by their dotted names. A table on one side only has no
    schema changes: its columns are the table's, not changes."""
    if left is None or right is None:
        return []
    before, after = _fields(left), _fields(right)
    changes: list[dict[str, Any]] = []
    for field_id in sorted(before.keys() | after.keys()):
        old, new = before.get(field_id), after.get(field_id)
        if old is None and new is not None:
            changes.append({"change": "added", "field_id": field_id, "name": new[0], "type": new[1]})
        elif new is None and old is not None:
            changes.append({"change": "removed", "field_id": field_id, "name": old[0], "type": old[1]})
        elif old is not None and new is not None:
            # Renamed: its own name changed (a field under a renamed one is not renamed itself).
            if old[2] != new[2]:
                changes.append(
                    {"change": "renamed", "field_id": field_id, "name": new[0], "previous_name": old[0], "type": new[1]}
                )
            if old[1] != new[1]:
                changes.append(
                    {
                        "change": "type_changed",
                        "field_id": field_id,
                        "name": new[0],
                        "type": new[1],
                        "previous_type": old[1],
                    }
                )
    return changes


def _snapshots(metadata: Metadata | None) -> dict[int, dict[str, Any]]:
    if metadata is None:
        return {}
    return {int(s["snapshot-id"]): s for s in metadata.get("snapshots") or [] if "snapshot-id" in s}


def _state(metadata: Metadata | None) -> dict[str, Any] | None:
    if metadata is None:
        return None
    current = metadata.get("current-snapshot-id")
    snapshot = _snapshots(metadata).get(int(current)) if current not in (None, -1) else None
    return {
        "table_uuid": metadata.get("table-uuid"),
        "current_snapshot_id": None if snapshot is None else current,
        "current_schema_id": metadata.get("current-schema-id"),
        "total_records": None if snapshot is None else _count(snapshot, "total-records"),
        "snapshots": len(_snapshots(metadata)),
    }


def _snapshot(snapshot: dict[str, Any]) -> dict[str, Any]:
    summary = snapshot.get("summary") or {}
    return {
        "snapshot_id": snapshot.get("snapshot-id"),
        "parent_snapshot_id": snapshot.get("parent-snapshot-id"),
        "timestamp_ms": snapshot.get("timestamp-ms"),
        "operation": summary.get("operation"),
        "rows_added": _count(snapshot, "added-records"),
        "rows_deleted": _count(snapshot, "deleted-records"),
    }


def _count(snapshot: dict[str, Any], name: str) -> int:
    """A count from a snapshot's summary (strings in the spec); 0 when absent or malformed."""
    try:
        return int((snapshot.get("summary") or {}).get(name, 0))
    except (TypeError, ValueError):
        return 0


def _current_schema(metadata: Metadata | None) -> dict[str, Any] | None:
    if metadata is None:
        return None
    current = metadata.get("current-schema-id")
    for schema in metadata.get("schemas") or []:
        if schema.get("schema-id") == current:
            return dict(schema)
    return None


def _fields(schema: dict[str, Any]) -> dict[int, tuple[str, str, str]]:
    """Every field of schema, nested ones included: id -> (dotted name, type as text, own name)."""
    found: dict[int, tuple[str, str, str]] = {}

    def walk(fields: list[dict[str, Any]], prefix: str) -> None:
        for field in fields:
            name = prefix + str(field.get("name"))
            kind = field.get("type")
            found[int(field["id"])] = (name, _type_name(kind), str(field.get("name")))
            _nested(kind, name + ".")

    def _nested(kind: Any, prefix: str) -> None:
        if not isinstance(kind, dict):
            return
        if kind.get("type") == "struct":
            walk(kind.get("fields") or [], prefix)
        elif kind.get("type") == "list":
            found[int(kind["element-id"])] = (prefix + "element", _type_name(kind.get("element")), "element")
            _nested(kind.get("element"), prefix + "element.")
        elif kind.get("type") == "map":
            found[int(kind["key-id"])] = (prefix + "key", _type_name(kind.get("key")), "key")
            found[int(kind["value-id"])] = (prefix + "value", _type_name(kind.get("value")), "value")
            _nested(kind.get("value"), prefix + "value.")

    walk(schema.get("fields") or [], "")
    return found


def _type_name(kind: Any) -> str:
    """A field's type as text: a primitive's name, or the kind of a nested type (its fields
    are compared on their own)."""
    if isinstance(kind, dict):
        return str(kind.get("type"))
    return str(kind)
