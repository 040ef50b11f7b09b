"""edge/api/iceberg/metadata.py: a table's metadata from a create request, the spec's
requirements, and its updates applied in order."""

from __future__ import annotations

from typing import Any

import pytest

from edge.api.iceberg.errors import IcebergError
from edge.api.iceberg.metadata import apply_updates, check_requirements, new_metadata

SCHEMA: dict[str, Any] = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "id", "type": "long", "required": False},
        {
            "id": 2,
            "name": "tags",
            "type": {"type": "list", "element-id": 3, "element": "string", "element-required": False},
            "required": False,
        },
    ],
}


def table(**properties: str) -> dict[str, Any]:
    return new_metadata({"name": "t", "schema": SCHEMA, "properties": properties}, "s3://repo/main/db/t")


def snapshot(snapshot_id: int, sequence: int, parent: int | None = None) -> dict[str, Any]:
    return {
        "snapshot-id": snapshot_id,
        "parent-snapshot-id": parent,
        "sequence-number": sequence,
        "timestamp-ms": 1_700_000_000_000 + sequence,
        "manifest-list": f"s3://repo/main/db/t/metadata/snap-{snapshot_id}.avro",
        "summary": {"operation": "append"},
        "schema-id": 0,
    }


def test_a_new_table_counts_nested_field_ids_and_keeps_its_properties() -> None:
    metadata = table(owner="ana", **{"format-version": "2"})
    assert metadata["last-column-id"] == 3
    assert metadata["current-schema-id"] == 0 and metadata["default-spec-id"] == 0
    assert metadata["default-sort-order-id"] == 0 and metadata["last-partition-id"] == 999
    assert metadata["properties"] == {"owner": "ana"}
    assert metadata["format-version"] == 2


def test_each_requirement_holds_or_fails_as_a_commit_failure() -> None:
    metadata = apply_updates(
        table(),
        [
            {"action": "add-snapshot", "snapshot": snapshot(10, 1)},
            {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": 10},
        ],
    )
    holding = [
        {"type": "assert-table-uuid", "uuid": metadata["table-uuid"]},
        {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": 10},
        {"type": "assert-ref-snapshot-id", "ref": "audit", "snapshot-id": None},
        {"type": "assert-current-schema-id", "current-schema-id": 0},
        {"type": "assert-last-assigned-field-id", "last-assigned-field-id": 3},
        {"type": "assert-last-assigned-partition-id", "last-assigned-partition-id": 999},
        {"type": "assert-default-spec-id", "default-spec-id": 0},
        {"type": "assert-default-sort-order-id", "default-sort-order-id": 0},
    ]
    check_requirements(metadata, holding)
    check_requirements(None, [{"type": "assert-create"}])
    failing: list[dict[str, Any]] = [
        {"type": "assert-create"},
        {"type": "assert-table-uuid", "uuid": "other"},
        {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": 9},
        {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": None},
        {"type": "assert-current-schema-id", "current-schema-id": 1},
        {"type": "assert-last-assigned-field-id", "last-assigned-field-id": 2},
        {"type": "assert-last-assigned-partition-id", "last-assigned-partition-id": 1000},
        {"type": "assert-default-spec-id", "default-spec-id": 1},
        {"type": "assert-default-sort-order-id", "default-sort-order-id": 1},
    ]
    for requirement in failing:
        with pytest.raises(IcebergError) as failed:
            check_requirements(metadata, [requirement])
        assert (failed.value.status, failed.value.kind) == (409, "CommitFailedException"), requirement
    with pytest.raises(IcebergError) as missing:
        check_requirements(None, [{"type": "assert-table-uuid", "uuid": "x"}])
    assert missing.value.status == 409


def test_updates_apply_in_order_and_minus_one_names_the_last_added() -> None:
    base = table()
    wider = {**SCHEMA, "fields": [*SCHEMA["fields"], {"id": 4, "name": "n", "type": "int", "required": False}]}
    spec = {"fields": [{"source-id": 1, "field-id": 1000, "name": "id_bucket", "transform": "bucket[4]"}]}
    order = {"fields": [{"source-id": 1, "transform": "identity", "direction": "asc", "null-order": "nulls-first"}]}
    updated = apply_updates(
        base,
        [
            {"action": "add-schema", "schema": wider},
            {"action": "set-current-schema", "schema-id": -1},
            {"action": "add-spec", "spec": spec},
            {"action": "set-default-spec", "spec-id": -1},
            {"action": "add-sort-order", "sort-order": order},
            {"action": "set-default-sort-order", "sort-order-id": -1},
            {"action": "add-snapshot", "snapshot": snapshot(1, 1)},
            {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": 1},
            {"action": "add-snapshot", "snapshot": snapshot(2, 2, parent=1)},
            {"action": "set-snapshot-ref", "ref-name": "audit", "type": "tag", "snapshot-id": 2},
            {"action": "set-properties", "updates": {"a": "1", "b": "2"}},
            {"action": "remove-properties", "removals": ["a"]},
            {"action": "set-location", "location": "s3://repo/main/elsewhere"},
            {"action": "upgrade-format-version", "format-version": 3},
            {"action": "remove-snapshot-ref", "ref-name": "audit"},
            {"action": "remove-snapshots", "snapshot-ids": [2]},
        ],
    )
    assert base["current-schema-id"] == 0  # the base is not changed
    assert updated["current-schema-id"] == 1 and updated["last-column-id"] == 4
    assert updated["default-spec-id"] == 1 and updated["last-partition-id"] == 1000
    assert updated["default-sort-order-id"] == 1
    assert updated["current-snapshot-id"] == 1 and updated["last-sequence-number"] == 2
    assert [s["snapshot-id"] for s in updated["snapshots"]] == [1]
    assert set(updated["refs"]) == {"main"}
    assert updated["properties"] == {"b": "2"}
    assert updated["location"] == "s3://repo/main/elsewhere"
    assert updated["format-version"] == 3


@pytest.mark.parametrize(
    "update",
    [
        {"action": "upgrade-format-version", "format-version": 1},
        {"action": "set-current-schema", "schema-id": 7},
        {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": 99},
        {"action": "no-such-update"},
        {"action": "set-properties"},
    ],
)
def test_an_update_that_cannot_apply_is_a_bad_request(update: dict[str, Any]) -> None:
    with pytest.raises(IcebergError) as refused:
        apply_updates(table(), [update])
    assert refused.value.status == 400


def test_a_snapshot_older_than_the_last_sequence_number_fails_the_commit() -> None:
    metadata = apply_updates(table(), [{"action": "add-snapshot", "snapshot": snapshot(1, 5)}])
    with pytest.raises(IcebergError) as failed:
        apply_updates(metadata, [{"action": "add-snapshot", "snapshot": snapshot(2, 5, parent=1)}])
    assert failed.value.status == 409
