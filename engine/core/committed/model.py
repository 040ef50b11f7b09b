"""Values the committed layer passes around: records, changes, range descriptions, results."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple, NewType

from silt.errors import InvalidArgument

RangeId = NewType("RangeId", str)
MetaRangeId = NewType("MetaRangeId", str)

# Committed objects live under this prefix of the repository's storage namespace, apart from
# the data objects users write, so garbage collection and Spark jobs can find them by listing.
RANGES_PREFIX = "_silt/ranges/"
METARANGES_PREFIX = "_silt/metaranges/"

# Ids are sha256 hex digests. Metarange ids arrive from commit records and API callers, and
# end up as object keys and cache file names, so nothing else may pass.
_ID_RE = re.compile(r"[0-9a-f]{64}")


class Record(NamedTuple):
    """One committed entry. ``value`` is opaque to this layer; ``identity`` is the caller's hash of it."""

    key: bytes
    identity: bytes
    value: bytes


class Change(NamedTuple):
    """An upsert of ``record`` at ``key``, or a delete of ``key`` when ``record`` is None."""

    key: bytes
    record: Record | None

    @classmethod
    def upsert(cls, record: Record) -> Change:
        return cls(record.key, record)

    @classmethod
    def delete(cls, key: bytes) -> Change:
        return cls(key, None)


class ChangeBatch(NamedTuple):
    """Consecutive changes column by column: at index i an upsert of the record (keys[i],
    identities[i], values[i]), or a delete of keys[i] when deletes[i] (its identity and value
    are then unused). What a caller with many changes hands over, without objects per change."""

    keys: list[bytes]
    identities: list[bytes]
    values: list[bytes]
    deletes: list[bool]

    @classmethod
    def of(cls, changes: Sequence[Change]) -> ChangeBatch:
        """The changes as a batch; InvalidArgument if one carries a record for another key."""
        for change in changes:
            if change.record is not None and change.record.key != change.key:
                raise InvalidArgument(f"change for {change.key!r} carries a record for {change.record.key!r}")
        return cls(
            [change.key for change in changes],
            [b"" if change.record is None else change.record.identity for change in changes],
            [b"" if change.record is None else change.record.value for change in changes],
            [change.record is None for change in changes],
        )

    def change(self, index: int) -> Change:
        key = self.keys[index]
        if self.deletes[index]:
            return Change(key, None)
        return Change(key, Record(key, self.identities[index], self.values[index]))


class RangeInfo(NamedTuple):
    """One row of a metarange: where a range sits in the key space and how big it is."""

    id: RangeId
    min_key: bytes
    max_key: bytes
    count: int  # type: ignore[assignment]  # shadows tuple.count, which nothing here calls
    # Sum of len(key) + len(identity) + len(value): what the chunking byte cap measures,
    # not the Parquet file size (which depends on the encoder).
    estimated_bytes: int


class ApplyResult(NamedTuple):
    metarange_id: MetaRangeId
    ranges_written: int  # ranges in the result that the base does not have
    ranges_reused: int  # ranges of the base kept in the result
    records_added: int
    records_removed: int
    records_changed: int

    @property
    def changed(self) -> bool:
        return bool(self.records_added or self.records_removed or self.records_changed)


def validate_id(value: str, kind: str) -> str:
    if not isinstance(value, str) or not _ID_RE.fullmatch(value):
        raise InvalidArgument(f"invalid {kind} id {value!r}: expected 64 lowercase hex digits")
    return value


def range_key(range_id: str) -> str:
    return RANGES_PREFIX + validate_id(range_id, "range")


def metarange_key(metarange_id: str) -> str:
    return METARANGES_PREFIX + validate_id(metarange_id, "metarange")
