"""The range file: one sorted run of records as a Parquet file, and its decoded form.

Schema ``key: binary, identity: binary, value: binary``, all non-null, sorted by key, in
row groups of ``ROW_GROUP_ROWS`` rows with min/max statistics on ``key`` only, so Spark (or
any Parquet reader) can scan committed metadata natively and skip row groups by key.
"""

from __future__ import annotations

import io
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq

from services.graveler.committed.hashing import content_digest
from services.graveler.committed.model import RangeId, Record
from services.graveler.committed.parquet import binary_array, read_parquet

FORMAT_TAG = b"silt.range.v1"

RANGE_SCHEMA = pa.schema(
    [
        pa.field("key", pa.binary(), nullable=False),
        pa.field("identity", pa.binary(), nullable=False),
        pa.field("value", pa.binary(), nullable=False),
    ],
    metadata={b"silt.format": FORMAT_TAG},
)

# Small enough that a reader seeking one key decodes little beyond it, large enough that
# per-row-group overhead stays negligible (a range of ~9k records has ~5 row groups).
ROW_GROUP_ROWS = 2048

# Python object overhead per bytes object plus a list slot, for the memory cache's accounting.
_PER_ITEM_OVERHEAD = 33 + 8


@dataclass(frozen=True, slots=True)
class RangeData:
    """A decoded range, as parallel Python lists so lookups bisect and iteration just zips."""

    keys: list[bytes]
    identities: list[bytes]
    values: list[bytes]
    memory_size: int  # approximate bytes held, for the memory cache's bound

    @classmethod
    def of(cls, keys: list[bytes], identities: list[bytes], values: list[bytes]) -> RangeData:
        payload = sum(map(len, keys)) + sum(map(len, identities)) + sum(map(len, values))
        return cls(keys, identities, values, payload + 3 * _PER_ITEM_OVERHEAD * len(keys))

    def find(self, key: bytes) -> Record | None:
        index = bisect_left(self.keys, key)
        if index < len(self.keys) and self.keys[index] == key:
            return Record(key, self.identities[index], self.values[index])
        return None

    def records(self, start: bytes = b"") -> Iterator[Record]:
        index = bisect_left(self.keys, start) if start else 0
        keys, identities, values = self.keys, self.identities, self.values
        for position in range(index, len(keys)):
            yield Record(keys[position], identities[position], values[position])


def range_id(keys: list[bytes], identities: list[bytes], values: list[bytes]) -> RangeId:
    return RangeId(content_digest(FORMAT_TAG, (keys, identities, values)))


def encode_range(keys: list[bytes], identities: list[bytes], values: list[bytes]) -> bytes:
    table = pa.Table.from_arrays(
        [binary_array(keys), binary_array(identities), binary_array(values)],
        schema=RANGE_SCHEMA,
    )
    sink = io.BytesIO()
    pq.write_table(
        table,
        sink,
        row_group_size=ROW_GROUP_ROWS,
        compression="snappy",
        # Keys are unique and identities are hashes: dictionaries would only be built and dropped.
        use_dictionary=False,
        write_statistics=["key"],
    )
    return sink.getvalue()


def decode_range(source: BinaryIO) -> RangeData:
    table = read_parquet(source, ["key", "identity", "value"])
    return RangeData.of(
        table.column("key").to_pylist(), table.column("identity").to_pylist(), table.column("value").to_pylist()
    )
