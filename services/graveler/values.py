"""The value graveler keeps per key: an entry with its identity, or a tombstone."""

from __future__ import annotations

import hashlib
from typing import NamedTuple

from silt.graveler.v1 import model_pb2 as pb


class Value(NamedTuple):
    identity: bytes
    data: bytes  # a serialized pb.Entry; empty for tombstones
    tombstone: bool = False


class KeyValue(NamedTuple):
    key: bytes
    value: Value


def entry_value(entry: pb.Entry) -> Value:
    """Identity is the hash of the entry's canonical bytes, so rewriting the same entry is a no-op."""
    data = entry.SerializeToString(deterministic=True)
    return Value(hashlib.sha256(data).digest(), data)


TOMBSTONE = Value(b"", b"", True)


def decode_entry(data: bytes) -> pb.Entry:
    """The entry serialized in a staged or committed value."""
    entry = pb.Entry()
    entry.ParseFromString(data)
    return entry
