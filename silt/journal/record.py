"""Journal rows: their keys, their values and what kind of key a change touched.

A journal row lives in the partition it describes, under
``journal/<logical timestamp:016x>/<writer id>/<sequence:016x>``: fixed-width hex sorts
byte-wise in time order, so a prefix scan of ``journal/`` lists a partition's unshipped
records oldest first. The row's value is a serialized ``silt.journal.v1.Record``, bare (no
envelope: journal rows are never read by graveler, only by the shipper and rebuild).
"""

from __future__ import annotations

from silt.errors import InvalidArgument
from silt.journal.v1.journal_pb2 import Record

JOURNAL_PREFIX = b"journal/"
# The smallest key after every journal row ('0' follows '/').
AFTER_JOURNAL = b"journal0"

# Staged values (`key/<object key>` in a staging-token partition): the keys written blindly.
STAGED_KIND = "staged"
# In a staging-token partition: the logical timestamp of the latest deletion of a staged key
# there (its envelope's), written with each one at that timestamp, so never decreasing. A
# deletion leaves no value to read, and a later blind write must still sort after it
# (JournaledStore.apply). Sorts before `guard/`, `journal/` and `key/`.
STAGED_DELETED_AT = b"deleted-at"
# In a staging-token partition, `deleted-at/<staged key>`: the logical timestamp of the latest
# deletion of that one key (its envelope's), written with it. A conditional writer's guard can
# outlive the deletion of its key (the guard is deleted first, the writer then admitted), so
# whether a guard's write is older than the key's deletion is judged from this key's mark:
# the partition's says only that some key went (engine/core/staging.py).
STAGED_KEY_DELETED_AT_PREFIX = STAGED_DELETED_AT + b"/"


def staged_key_deleted_at(key: bytes) -> bytes:
    """The key of the deletion mark of one staged key (`key/<object key>`)."""
    return STAGED_KEY_DELETED_AT_PREFIX + key


# Conditional staging writers' guards (`guard/<object key>` in a staging-token partition).
GUARD_KIND = "staging_guard"
# The guard of the empty object key: whether the token admits conditional writes (its
# ADMISSION row, engine/core/staging.py). Kept, closed, when the token is dropped, so that a
# stale conditional writer cannot land in it; deleted by the shipper once no writer can.
STAGED_ADMISSION = b"guard/"

# Keys of the `graveler` partition and of a repository partition, by prefix, most specific first.
_KINDS_BY_PREFIX: tuple[tuple[bytes, str], ...] = (
    (b"repos/", "repository"),
    (b"to_delete/", "repository_deletion"),
    (b"ns_claims/", "ns_claim"),
    (b"branches/", "branch"),
    (b"commits/", "commit"),
    (b"tags/", "tag"),
    (b"pull_comments/", "pull_comment"),
    (b"pulls/", "pull"),
    (b"actions/runs/", "action_run"),
    (b"gc/rules", "gc_rules"),
    (b"settings/", "settings"),
    (b"neutral/", "neutral"),
    (b"key/", STAGED_KIND),
    (STAGED_DELETED_AT, STAGED_KIND),  # and every key's own mark under it
    (b"guard/", GUARD_KIND),
)


def record_key(logical_timestamp: int, writer_id: str, sequence: int) -> bytes:
    """The row key of one record: unique per (writer, sequence), ordered by time first."""
    if "/" in writer_id or not writer_id:
        raise InvalidArgument("journal writer id must be non-empty and hold no '/'")
    return b"journal/%016x/%s/%016x" % (logical_timestamp, writer_id.encode(), sequence)


def parse_record_key(key: bytes) -> tuple[int, str, int]:
    """(logical timestamp, writer id, sequence) of a row key made by record_key."""
    parts = key.split(b"/")
    if len(parts) != 4 or parts[0] + b"/" != JOURNAL_PREFIX:
        raise InvalidArgument(f"not a journal row key: {key!r}")
    try:
        return int(parts[1], 16), parts[2].decode(), int(parts[3], 16)
    except (ValueError, UnicodeDecodeError):
        raise InvalidArgument(f"not a journal row key: {key!r}") from None


def encode_record(record: Record) -> bytes:
    return record.SerializeToString()


def decode_record(value: bytes) -> Record:
    record = Record()
    try:
        record.ParseFromString(value)
    except Exception as exc:  # protobuf raises DecodeError, a bare Exception subclass
        raise InvalidArgument(f"corrupt journal record: {exc}") from None
    return record


def is_journal_key(key: bytes) -> bool:
    return isinstance(key, bytes | bytearray) and key.startswith(JOURNAL_PREFIX)


def key_kind(key: bytes) -> str:
    """What a graveler key is ("branch", "staged", ...), for Change.kind; "other" if unknown."""
    for prefix, kind in _KINDS_BY_PREFIX:
        if key.startswith(prefix):
            return kind
    return "other"
