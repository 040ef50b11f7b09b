"""Which two sides' changes to one table combine (edge/api/iceberg/table_merge.py), and the
reason the conflict answer gives when they do not: pure functions over metadata dicts."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from edge.api.iceberg.table_merge import Incompatible, Sides, check, merged_properties

SCHEMA: dict[str, Any] = {
    "schema-id": 0,
    "type": "struct",
    "fields": [{"id": 1, "name": "id", "type": "long", "required": False}],
}


def table(*snapshots: tuple[int, str]) -> dict[str, Any]:
    """A table whose main is the chain of snapshots (id, operation), oldest first."""
    listed = []
    parent = None
    for snapshot_id, operation in snapshots:
        entry: dict[str, Any] = {"snapshot-id": snapshot_id, "summary": {"operation": operation}}
        if parent is not None:
            entry["parent-snapshot-id"] = parent
        listed.append(entry)
        parent = snapshot_id
    return {
        "format-version": 2,
        "table-uuid": "u",
        "location": "s3://r/main/db/t",
        "current-schema-id": 0,
        "schemas": [SCHEMA],
        "last-column-id": 1,
        "default-spec-id": 0,
        "partition-specs": [{"spec-id": 0, "fields": []}],
        "last-partition-id": 999,
        "default-sort-order-id": 0,
        "sort-orders": [{"order-id": 0, "fields": []}],
        "properties": {"owner": "ana"},
        "snapshots": listed,
        "current-snapshot-id": -1 if parent is None else parent,
        "refs": {} if parent is None else {"main": {"snapshot-id": parent, "type": "branch"}},
    }


BASE = table((1, "append"))


def rewound() -> dict[str, Any]:
    """A table whose main was set to a snapshot that does not descend from the base's."""
    metadata = table((1, "append"))
    metadata["snapshots"].append({"snapshot-id": 2, "summary": {"operation": "append"}})
    metadata["current-snapshot-id"] = 2
    return metadata


def test_appends_on_both_sides_combine() -> None:
    check(Sides(BASE, table((1, "append"), (2, "append")), table((1, "append"), (3, "append"), (4, "append"))))
    # From a table with no snapshot yet too.
    check(Sides(table(), table((2, "append")), table((3, "append"))))


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        (table((1, "append"), (2, "overwrite")), "the source made a snapshot of operation 'overwrite'"),
        (table((2, "append")), "snapshots were expired on the source"),
        (rewound(), "the source's history no longer holds the merge base's snapshot"),
    ],
)
def test_anything_but_appends_is_refused(source: dict[str, Any], reason: str) -> None:
    with pytest.raises(Incompatible, match=reason):
        check(Sides(BASE, source, table((1, "append"), (3, "append"))))


def evolved(metadata: dict[str, Any], name: str) -> dict[str, Any]:
    changed = copy.deepcopy(metadata)
    field = {"id": 2, "name": name, "type": "long", "required": False}
    changed["schemas"].append({**SCHEMA, "schema-id": 1, "fields": [*SCHEMA["fields"], field]})
    changed["current-schema-id"] = 1
    changed["last-column-id"] = 2
    return changed


def test_structure_changes_are_refused_with_the_side_named() -> None:
    source, dest = table((1, "append"), (2, "append")), table((1, "append"), (3, "append"))
    with pytest.raises(Incompatible, match=r"^schema changed on both sides$"):
        check(Sides(BASE, evolved(source, "a"), evolved(dest, "b")))
    with pytest.raises(Incompatible, match="schema changed on the source while the destination changed"):
        check(Sides(BASE, evolved(source, "a"), dest))
    moved = {**dest, "location": "s3://r/main/elsewhere"}
    with pytest.raises(Incompatible, match="location changed on the destination"):
        check(Sides(BASE, source, moved))


def test_properties_merge_key_by_key() -> None:
    source = {**BASE, "properties": {"owner": "ana", "tier": "1"}}
    dest = {**BASE, "properties": {"owner": "bo"}}
    assert merged_properties(Sides(BASE, source, dest)) == {"owner": "bo", "tier": "1"}
    with pytest.raises(Incompatible, match="property owner changed on both sides"):
        merged_properties(Sides(BASE, {**BASE, "properties": {"owner": "cy"}}, dest))


def _zigzag(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | 0x80 if n else low)
        if not n:
            return bytes(out)


def test_a_manifest_list_that_decodes_past_the_bound_is_refused_before_it_is_read() -> None:
    """A writer chooses a table's manifest lists; a deflate block of a few hundred KiB that
    expands to 200 MiB is refused before pyiceberg's reader inflates it whole."""
    import zlib

    from edge.api.iceberg import manifest_lists

    real = manifest_lists.write(2, [], 1, None, 1)
    assert manifest_lists.read(real) == []
    sync = real[-16:]
    header = real[: real.index(sync) + 16]
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = deflate.compress(bytes(200 * 1024 * 1024)) + deflate.flush()
    bomb = header + _zigzag(1) + _zigzag(len(block)) + block + sync
    assert len(bomb) < 1024 * 1024
    with pytest.raises(ValueError, match="decodes past"):
        manifest_lists.read(bomb)
    with pytest.raises(ValueError, match="Avro"):
        manifest_lists.read(b"not avro at all")
