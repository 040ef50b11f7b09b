"""History events as people and browsers read them: lower-case type and source names, and the
JSON object the CLI (`--json`) and the REST API's event stream print."""

from __future__ import annotations

from typing import Any

from silt.graveler.v1 import events_pb2 as ev

# What each type and source is called outside protobuf.
TYPE_NAMES: dict[int, str] = {
    ev.READ: "read",
    ev.WRITE: "write",
    ev.DELETE: "delete",
    ev.COMMIT: "commit",
    ev.MERGE: "merge",
    ev.REVERT: "revert",
    ev.CHERRY_PICK: "cherry_pick",
    ev.RESET: "reset",
    ev.BRANCH_CREATED: "branch_created",
    ev.BRANCH_DELETED: "branch_deleted",
    ev.TAG_CREATED: "tag_created",
    ev.TAG_DELETED: "tag_deleted",
}
SOURCE_NAMES: dict[int, str] = {ev.S3: "s3", ev.API: "api", ev.GRAVELER: "graveler"}


def type_name(event_type: int) -> str:
    return TYPE_NAMES.get(event_type, "unknown")


def source_name(source: int) -> str:
    return SOURCE_NAMES.get(source, "unknown")


def to_json(event: ev.HistoryEvent) -> dict[str, Any]:
    """The event as the REST API's stream and `silt events --json` give it."""
    return {
        "id": event.id,
        "timestamp_us": event.timestamp_us,
        "type": type_name(event.type),
        "path": event.path,
        "user": event.user,
        "source": source_name(event.source),
        "commit_id": event.commit_id,
        "message": event.message,
        "size": event.size,
    }
