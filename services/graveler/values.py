"""The value graveler keeps per key: an entry with its identity, or a tombstone."""

from __future__ import annotations

import hashlib
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
