"""Staged writes: one KV partition per staging token, keys ``key/<object key>`` (docs/design/kv.md)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

from services.graveler.model import StagingToken
from services.graveler.values import KeyValue, Value
from silt.errors import NotFound
from silt.graveler.v1 import model_pb2 as pb
from silt.journal.store import raw_store
from silt.kv import Store
from silt.kv.store import SCAN_CHUNK, Predicate, scan_prefix

KEY_PREFIX = b"key/"


def new_token(repo_partition: bytes, branch: str) -> StagingToken:
    # Names the repository and branch so an operator can tell whose partition it is.
    return StagingToken(f"{repo_partition.decode()}_{branch}_{uuid.uuid4().hex}")


class StagingStore:
    def __init__(self, kv: Store) -> None:
        self.kv = kv

    def set(self, token: StagingToken, key: bytes, value: Value) -> None:
        self.kv.set(token.encode(), KEY_PREFIX + key, _encode(value))

    def set_if(self, token: StagingToken, key: bytes, value: Value, predicate: Predicate | None) -> None:
        """Stage value only if the staged value is still the one read with predicate (None:
        nothing staged). PredicateFailed otherwise."""
        self.kv.set_if(token.encode(), KEY_PREFIX + key, _encode(value), predicate)

    def get_with_predicate(self, token: StagingToken, key: bytes) -> tuple[Value | None, Predicate | None]:
        try:
            found = self.kv.get(token.encode(), KEY_PREFIX + key)
        except NotFound:
            return None, None
        return _decode(found.value), found.predicate

    def get(self, token: StagingToken, key: bytes) -> Value | None:
        try:
            data = self.kv.get(token.encode(), KEY_PREFIX + key).value
        except NotFound:
            return None
        return _decode(data)

    def scan(self, token: StagingToken, start: bytes = b"") -> Iterator[KeyValue]:
        """Staged values of token from key start on, in key order (tombstones included)."""
        # One message parsed into again and again, no calls: commits and compactions walk
        # every staged value through this loop.
        record = pb.StagedValue()
        skip = len(KEY_PREFIX)
        for entry in self.kv.scan(token.encode(), KEY_PREFIX + start):
            key = entry.key
            if not key.startswith(KEY_PREFIX):
                return
            record.ParseFromString(entry.value)
            yield KeyValue(key[skip:], Value(record.identity, record.data, record.tombstone))

    def scan_chunks(self, token: StagingToken, start: bytes = b"", size: int = SCAN_CHUNK) -> Iterator[list[KeyValue]]:
        """scan's values as lists of consecutive ones, none empty, of at most size."""
        # The hot loop of every listing: one message parsed into again and again, and the named
        # tuples made by tuple's own constructor, a C call, rather than their Python __new__.
        record = pb.StagedValue()
        skip = len(KEY_PREFIX)
        make = tuple.__new__
        for chunk in self.kv.scan_chunks(token.encode(), KEY_PREFIX + start, size):
            values: list[KeyValue] = []
            append = values.append
            for key, stored in chunk:
                if not key.startswith(KEY_PREFIX):
                    if values:
                        yield values
                    return
                record.ParseFromString(stored)
                append(make(KeyValue, (key[skip:], make(Value, (record.identity, record.data, record.tombstone)))))
            yield values

    def drop_key(self, token: StagingToken, key: bytes) -> None:
        self.kv.delete(token.encode(), KEY_PREFIX + key)

    def drop(self, token: StagingToken, pace: float = 0.0) -> None:
        """Delete the staged values of an unreachable token, unjournaled (the KV interface has
        no drop-partition), and leave its journal rows to the shipper.

        Only called once the branch update that made the token unreachable (commit, reset,
        branch deletion) is itself journaled, so replaying that update makes the deletions
        irrelevant; the token's journal rows still record every acknowledged write, and the
        shipper (which finds dropped tokens through the branch records it ships) moves them
        to the bucket and then deletes them, emptying the partition (docs/design/journal.md).
        pace > 0 rests as long as each burst of deletes took, a burst lasting about pace
        seconds: on the embedded driver every delete takes the database's write lock, and a
        tight loop of them makes staging writes queue behind it for tens of milliseconds.
        """
        raw = raw_store(self.kv)
        burst_started = time.perf_counter()
        for entry in scan_prefix(raw, token.encode(), KEY_PREFIX):
            raw.delete(token.encode(), entry.key)
            if pace > 0:
                spent = time.perf_counter() - burst_started
                if spent >= pace:
                    time.sleep(spent)
                    burst_started = time.perf_counter()

    def keys_under(self, token: StagingToken, prefix: bytes) -> Iterator[bytes]:
        """Staged keys of token under prefix (tombstones included), in key order."""
        for kv in self.scan(token, prefix):
            if not kv.key.startswith(prefix):
                return
            yield kv.key

    def is_empty(self, token: StagingToken) -> bool:
        return next(iter(self.kv.scan(token.encode(), KEY_PREFIX)), None) is None


def _encode(value: Value) -> bytes:
    record = pb.StagedValue(identity=value.identity, data=value.data, tombstone=value.tombstone)
    return record.SerializeToString()


def _decode(data: bytes) -> Value:
    record = pb.StagedValue()
    record.ParseFromString(data)
    return Value(record.identity, record.data, record.tombstone)
