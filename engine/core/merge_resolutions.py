"""A merge's resolutions: what the merged commit holds at given keys, decided by a caller who
looked at both sides (the Iceberg catalog combining two branches' snapshots of a table).

Each resolution names what the caller saw: the entry on the source and the entry on the
destination (by identity: physical address and ETag; None when the key was absent). The merge
applies a resolution only while both sides still hold exactly that, inside its plan, so a
destination that moved since the caller looked fails the merge as a conflict at that key and
nothing changes. A resolution may name a key absent from base, source and destination: a file
the caller wrote for the merge.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from engine.core.committed.merge import Conflict, Resolution, Resolver
from engine.core.committed.model import Change, Record
from engine.core.physical_addresses import validate_physical_address
from engine.core.validation import validate_entry_size, validate_key
from engine.core.values import decode_entry, entry_value
from silt.errors import InvalidArgument
from silt.graveler.v1 import model_pb2 as pb


@dataclass(frozen=True)
class MergeResolution:
    """At key: the source must hold expected_source and the destination expected_destination
    (None: absent), and the merged commit gets result (None: no entry)."""

    key: str
    expected_source: pb.Entry | None
    expected_destination: pb.Entry | None
    result: pb.Entry | None


def same_entry(record: Record | None, expected: pb.Entry | None) -> bool:
    """Whether a committed record is the entry expected, by physical address and ETag."""
    if record is None or expected is None:
        return record is None and expected is None
    found = decode_entry(record.value)
    return found.physical_address == expected.physical_address and found.etag == expected.etag


class Resolutions:
    """A merge's resolutions, checked once for what they write."""

    def __init__(
        self, resolutions: Sequence[MergeResolution], namespace: str, allowed_import_prefixes: Sequence[str] = ()
    ) -> None:
        self._by_key: dict[bytes, MergeResolution] = {}
        for resolution in resolutions:
            key = validate_key(resolution.key)
            if key in self._by_key:
                raise InvalidArgument(f"two resolutions for key {resolution.key!r}")
            if resolution.result is not None:
                validate_entry_size(resolution.result.ByteSize())
                validate_physical_address(resolution.result.physical_address, namespace, allowed_import_prefixes)
            self._by_key[key] = resolution

    def __bool__(self) -> bool:
        return bool(self._by_key)

    def resolver(self, fallback: Resolver | None) -> Resolver | None:
        """fallback, with the conflicts at resolved keys settled (for any side: the resolution
        replaces what the merge takes there)."""
        if not self._by_key:
            return fallback
        keys = self._by_key

        def resolve(conflict: Conflict) -> Resolution:
            if conflict.key in keys:
                return "dest"
            return "fail" if fallback is None else fallback(conflict)

        return resolve

    def stale(self, lookup: Callable[[bytes], tuple[Record | None, Record | None, Record | None]]) -> list[Conflict]:
        """The keys whose source or destination is not what their resolution expects, as
        conflicts; lookup gives a key's (base, source, destination) records."""
        stale = []
        for key, resolution in sorted(self._by_key.items()):
            base, source, dest = lookup(key)
            if not same_entry(source, resolution.expected_source) or not same_entry(
                dest, resolution.expected_destination
            ):
                stale.append(Conflict(key, base, source, dest))
        return stale

    def changes(self) -> list[Change]:
        """What the resolutions write onto the merged metarange, in key order."""
        changes = []
        for key, resolution in sorted(self._by_key.items()):
            if resolution.result is None:
                changes.append(Change.delete(key))
            else:
                value = entry_value(resolution.result)
                changes.append(Change.upsert(Record(key, value.identity, value.data)))
        return changes
