"""Combining two branches' changes to one Iceberg table, when both only appended since their
merge base: the destination's metadata plus, for each snapshot the source appended, a new
snapshot on top of the destination's head whose manifest list is the head's manifests plus the
manifests that snapshot added. Pure functions over metadata dicts and manifest-list bytes; the
merge at the edge (edge/api/refs/table_merges.py) reads and writes the objects.

Only what provably reads right is combined: appends on both sides (operation `append`, no
manifest rewritten, no delete files), and no change on either side to the table's schema,
partition spec, sort order, format version, location, UUID or snapshot refs other than main.
Properties merge key by key unless both sides set one differently. Anything else is
Incompatible, with the reason the merge's conflict answer shows.
"""

from __future__ import annotations

import copy
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyiceberg.manifest import ManifestFile

Metadata = dict[str, Any]

# What a table's structure is made of, by the name a conflict reason gives it.
STRUCTURE: dict[str, tuple[str, ...]] = {
    "table uuid": ("table-uuid",),
    "format version": ("format-version",),
    "location": ("location",),
    "schema": ("current-schema-id", "schemas", "last-column-id"),
    "partition spec": ("default-spec-id", "partition-specs", "last-partition-id"),
    "sort order": ("default-sort-order-id", "sort-orders"),
}
# A snapshot summary's running totals, each with the count a snapshot adds to it.
TOTALS = {
    "total-data-files": "added-data-files",
    "total-delete-files": "added-delete-files",
    "total-records": "added-records",
    "total-files-size": "added-files-size",
    "total-position-deletes": "added-position-deletes",
    "total-equality-deletes": "added-equality-deletes",
}
# What a combined snapshot's summary carries over from the source snapshot it stands for.
ADDED = ("added-data-files", "added-records", "added-files-size", "changed-partition-count")
MERGED_FROM = "silt.merged-from-snapshot-id"


class Incompatible(Exception):
    """The two sides' changes to the table cannot be combined; str() says why."""


@dataclass(frozen=True)
class Sides:
    """One table's metadata at the merge base, on the source and on the destination."""

    base: Metadata
    source: Metadata
    dest: Metadata


def head_of(metadata: Metadata) -> int | None:
    current = metadata.get("current-snapshot-id")
    return None if current in (None, -1) else int(current)


def appended(metadata: Metadata, since: int | None, side: str) -> list[dict[str, Any]]:
    """The snapshots main gained after the snapshot `since`, oldest first; Incompatible unless
    each is an append and main's history still passes through `since`."""
    by_id = {int(s["snapshot-id"]): s for s in metadata.get("snapshots", [])}
    chain: list[dict[str, Any]] = []
    current = head_of(metadata)
    while current != since:
        snapshot = by_id.get(current) if current is not None else None
        if snapshot is None:
            raise Incompatible(f"the {side}'s history no longer holds the merge base's snapshot")
        operation = (snapshot.get("summary") or {}).get("operation")
        if operation != "append":
            raise Incompatible(f"the {side} made a snapshot of operation {operation!r}; only appends merge")
        chain.append(snapshot)
        parent = snapshot.get("parent-snapshot-id")
        current = None if parent in (None, -1) else int(parent)
    return chain[::-1]


def check(sides: Sides) -> None:
    """Incompatible unless both sides only appended since the base (and properties merge)."""
    for name, fields in STRUCTURE.items():
        on_source = any(sides.source.get(f) != sides.base.get(f) for f in fields)
        on_dest = any(sides.dest.get(f) != sides.base.get(f) for f in fields)
        if on_source and on_dest:
            raise Incompatible(f"{name} changed on both sides")
        if on_source or on_dest:
            changed, other = ("source", "destination") if on_source else ("destination", "source")
            raise Incompatible(f"{name} changed on the {changed} while the {other} changed the table too")
    if int(sides.dest.get("format-version", 1)) > 2:
        raise Incompatible("format version 3 tables (row lineage) are not combined yet")
    base_ids = {int(s["snapshot-id"]) for s in sides.base.get("snapshots", [])}
    for side, metadata in (("source", sides.source), ("destination", sides.dest)):
        if not base_ids <= {int(s["snapshot-id"]) for s in metadata.get("snapshots", [])}:
            raise Incompatible(f"snapshots were expired on the {side}")
        if _other_refs(metadata) != _other_refs(sides.base):
            raise Incompatible(f"snapshot refs other than main changed on the {side}")
        appended(metadata, head_of(sides.base), side)
    merged_properties(sides)


def _other_refs(metadata: Metadata) -> dict[str, Any]:
    return {name: ref for name, ref in (metadata.get("refs") or {}).items() if name != "main"}


def merged_properties(sides: Sides) -> dict[str, str]:
    """The destination's properties with the source's changes since the base; Incompatible when
    both sides set a property differently."""
    base = sides.base.get("properties") or {}
    source = sides.source.get("properties") or {}
    merged = dict(sides.dest.get("properties") or {})
    for key in sorted(set(base) | set(source)):
        if source.get(key) == base.get(key):
            continue
        if merged.get(key) not in (base.get(key), source.get(key)):
            raise Incompatible(f"property {key} changed on both sides")
        if key in source:
            merged[key] = source[key]
        else:
            merged.pop(key, None)
    return merged


def lists_needed(sides: Sides) -> tuple[list[str], list[str]]:
    """The manifest lists combine() reads: (those read through the source: the base head's and
    every appended snapshot's, those read through the destination: its head's)."""
    base_head = head_of(sides.base)
    by_id = {int(s["snapshot-id"]): s for s in sides.base.get("snapshots", [])}
    from_source = [] if base_head is None else [str(by_id[base_head]["manifest-list"])]
    from_source += [str(s["manifest-list"]) for s in appended(sides.source, base_head, "source")]
    dest_head = head_of(sides.dest)
    dest_by_id = {int(s["snapshot-id"]): s for s in sides.dest.get("snapshots", [])}
    from_dest = [] if dest_head is None else [str(dest_by_id[dest_head]["manifest-list"])]
    return from_source, from_dest


@dataclass(frozen=True)
class Combined:
    """The combined metadata and the manifest lists it names (address -> Avro bytes)."""

    metadata: Metadata
    manifest_lists: dict[str, bytes]


def combine(
    sides: Sides,
    lists: dict[str, bytes],
    list_address: Callable[[int], str],
    previous_metadata: str,
    now_ms: int | None = None,
) -> Combined:
    """The destination's metadata with a new snapshot per snapshot the source appended.

    lists: the bytes of every manifest list lists_needed() names; list_address: where the
    manifest list of a new snapshot (by id) is written; previous_metadata: the destination's
    current metadata file, for the metadata log."""
    # pyiceberg's Avro, only once a merge combines a table (manifest_lists.py).
    from edge.api.iceberg import manifest_lists

    check(sides)
    version = int(sides.dest.get("format-version", 1))
    metadata = copy.deepcopy(sides.dest)
    base_head = head_of(sides.base)
    used = {int(s["snapshot-id"]) for s in metadata.get("snapshots", [])}
    used |= {int(s["snapshot-id"]) for s in sides.source.get("snapshots", [])}
    by_id = {int(s["snapshot-id"]): s for s in metadata.get("snapshots", [])}
    head = head_of(metadata)
    manifests = [] if head is None else manifest_lists.read(lists[str(by_id[head]["manifest-list"])])
    totals = dict((by_id[head].get("summary") or {}) if head is not None else {})
    parent_paths = _paths(manifest_lists.read(lists[_base_list(sides)])) if base_head is not None else set()
    stamp = max(now_ms if now_ms is not None else int(time.time() * 1000), int(metadata.get("last-updated-ms", 0)))
    written: dict[str, bytes] = {}
    for snapshot in appended(sides.source, base_head, "source"):
        own = manifest_lists.read(lists[str(snapshot["manifest-list"])])
        if not parent_paths <= _paths(own):
            raise Incompatible(f"the source's snapshot {snapshot['snapshot-id']} rewrote manifests")
        added = [m for m in own if m.manifest_path not in parent_paths]
        for manifest in added:
            if not manifest_lists.only_adds_data(manifest):
                raise Incompatible(f"the source's snapshot {snapshot['snapshot-id']} did more than add data files")
        parent_paths = _paths(own)
        snapshot_id = _new_id(used)
        used.add(snapshot_id)
        sequence = int(metadata.get("last-sequence-number", 0)) + 1
        stamp += 1
        readded = []
        for manifest in added:
            again = copy.copy(manifest)
            if version >= 2:
                # Appended files inherit their data sequence number from the manifest list:
                # the new snapshot's, after every file the destination holds.
                again.sequence_number = sequence
                again.min_sequence_number = sequence
            readded.append(again)
        manifests = [*manifests, *readded]
        address = list_address(snapshot_id)
        written[address] = manifest_lists.write(version, manifests, snapshot_id, head, sequence)
        summary = {"operation": "append", MERGED_FROM: str(snapshot["snapshot-id"])}
        source_summary = snapshot.get("summary") or {}
        summary.update({k: str(source_summary[k]) for k in ADDED if k in source_summary})
        for total, add in TOTALS.items():
            summary[total] = str(int(totals.get(total, 0) or 0) + int(source_summary.get(add, 0) or 0))
        totals = summary
        new: dict[str, Any] = {
            "snapshot-id": snapshot_id,
            "timestamp-ms": stamp,
            "manifest-list": address,
            "summary": summary,
            "schema-id": metadata.get("current-schema-id"),
        }
        if head is not None:
            new["parent-snapshot-id"] = head
        if version >= 2:
            new["sequence-number"] = sequence
            metadata["last-sequence-number"] = sequence
        metadata.setdefault("snapshots", []).append(new)
        metadata.setdefault("snapshot-log", []).append({"snapshot-id": snapshot_id, "timestamp-ms": stamp})
        metadata.setdefault("refs", {})["main"] = {"snapshot-id": snapshot_id, "type": "branch"}
        metadata["current-snapshot-id"] = snapshot_id
        head = snapshot_id
    metadata["properties"] = merged_properties(sides)
    log = [*metadata.get("metadata-log", [])]
    log.append({"metadata-file": previous_metadata, "timestamp-ms": int(sides.dest.get("last-updated-ms", 0))})
    metadata["metadata-log"] = log
    metadata["last-updated-ms"] = stamp
    return Combined(metadata, written)


def _base_list(sides: Sides) -> str:
    base_head = head_of(sides.base)
    return next(str(s["manifest-list"]) for s in sides.base["snapshots"] if int(s["snapshot-id"]) == base_head)


def _new_id(used: set[int]) -> int:
    while True:
        candidate = secrets.randbits(63)
        if candidate and candidate not in used:
            return candidate


def _paths(manifests: list[ManifestFile]) -> set[str]:
    return {m.manifest_path for m in manifests}
