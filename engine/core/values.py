"""The value graveler keeps per key: an entry with its identity, or a tombstone."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from itertools import compress
from typing import NamedTuple

from silt.graveler.v1 import model_pb2 as pb
from silt.objects import CHECKSUM_METADATA_PREFIX, SOURCE_MTIME_KEY


class Value(NamedTuple):
    identity: bytes
    data: bytes  # a serialized pb.Entry; empty for tombstones
    tombstone: bool = False


class KeyValue(NamedTuple):
    key: bytes
    value: Value


class Columns(NamedTuple):
    """Consecutive values of a walk in key order (tombstones included), column by column.

    What walks over every value of a staging area (listings, commits) pass from layer to
    layer: a list per column rather than a KeyValue and a Value per key. Named tuples are
    never untracked by the cyclic garbage collector, so a walk of hundreds of thousands of
    them spent about a quarter of its time in collections; columns are taken whole (sliced,
    summed, joined, filtered) by C-level calls.
    """

    keys: list[bytes]
    identities: list[bytes]
    data: list[bytes]
    tombstones: list[bool]

    @classmethod
    def of(cls, values: Sequence[KeyValue]) -> Columns:
        return cls(
            [kv.key for kv in values],
            [kv.value.identity for kv in values],
            [kv.value.data for kv in values],
            [kv.value.tombstone for kv in values],
        )

    def values(self) -> list[KeyValue]:
        return [
            KeyValue(key, Value(identity, data, tombstone))
            for key, identity, data, tombstone in zip(*self, strict=True)
        ]

    def live(self) -> Columns:
        """These values without their tombstones (self when there are none)."""
        if not any(self.tombstones):
            return self
        return self.select([not tombstone for tombstone in self.tombstones])

    def select(self, kept: list[bool]) -> Columns:
        """The values at the indexes where kept is true."""
        return Columns(
            list(compress(self.keys, kept)),
            list(compress(self.identities, kept)),
            list(compress(self.data, kept)),
            list(compress(self.tombstones, kept)),
        )

    def head(self, count: int) -> Columns:
        """The first count values."""
        return Columns(self.keys[:count], self.identities[:count], self.data[:count], self.tombstones[:count])

    def tail(self, start: int) -> Columns:
        """The values from index start on (self when start is 0)."""
        if start == 0:
            return self
        return Columns(self.keys[start:], self.identities[start:], self.data[start:], self.tombstones[start:])


def entry_value(entry: pb.Entry) -> Value:
    """An entry and its identity: what the object is, not where or when its bytes were written.

    The identity hashes the entry without its physical address and modification time, as
    lakeFS's does (size, ETag, content type, metadata): writing the same bytes and metadata
    again is then no change to diff, commit or merge (a commit keeps the entry it had; the new
    copy of the bytes is left to GC's sweep of uncommitted objects), and two branches that wrote
    the same object independently do not conflict.
    """
    data = entry.SerializeToString(deterministic=True)
    what = pb.Entry()
    what.CopyFrom(entry)
    what.ClearField("physical_address")
    what.ClearField("last_modified")
    # Nor how its bytes were checked on the way in (silt/objects.py): an entry without such keys
    # keeps the identity it always had.
    for key in [k for k in what.metadata if k.startswith(CHECKSUM_METADATA_PREFIX)]:
        del what.metadata[key]
    # Nor when an imported source was last modified: a time, like last_modified.
    what.metadata.pop(SOURCE_MTIME_KEY, None)
    return Value(hashlib.sha256(what.SerializeToString(deterministic=True)).digest(), data)


TOMBSTONE = Value(b"", b"", True)


def decode_entry(data: bytes) -> pb.Entry:
    """The entry serialized in a staged or committed value."""
    entry = pb.Entry()
    entry.ParseFromString(data)
    return entry
