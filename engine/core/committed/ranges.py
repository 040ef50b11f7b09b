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

from engine.core.committed.hashing import content_digest
from engine.core.committed.model import RangeId, Record
from engine.core.committed.parquet import binary_array, column_indices, open_parquet, read_parquet

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
    return _range_data(table)


def _range_data(table: pa.Table) -> RangeData:
    return RangeData.of(
        table.column("key").to_pylist(), table.column("identity").to_pylist(), table.column("value").to_pylist()
    )


def identity_in_file(source: BinaryIO, key: bytes) -> bytes | None:
    """The identity of key's record in a range file (None: no such record), decoding only the
    key and identity columns of the one row group that may hold it.

    For a reader that wants one key of a range it has no use for otherwise (a log filtered by
    path, whose commits mostly rewrite other keys of the range): a tenth of decoding it whole.
    Row groups are chosen by the key column's min/max statistics, which every writer of range
    files writes; a file without them, or whose chosen group disagrees with them, is decoded
    whole instead, so the answer never rests on them alone.
    """
    reader = open_parquet(source)
    key_column, identity_column = column_indices(reader, ["key", "identity"])
    metadata = reader.metadata
    for group in range(metadata.num_row_groups):
        statistics = metadata.row_group(group).column(key_column).statistics
        if statistics is None or not statistics.has_min_max:
            break
        low, high = statistics.min, statistics.max
        if key < low:
            return None  # groups are in key order: key falls between two of them
        if key > high:
            continue
        table = reader.read_row_group(group, column_indices=[key_column, identity_column], use_threads=False)
        keys = table.column(0)
        if len(keys) == 0 or keys[0].as_py() != low or keys[-1].as_py() != high:
            break
        # Bisected through Arrow scalars: a dozen of them, not a list of the whole group (nor
        # pyarrow.compute, whose first call in a process costs a good part of a second).
        low_index, high_index = 0, len(keys)
        while low_index < high_index:
            middle = (low_index + high_index) // 2
            if keys[middle].as_py() < key:
                low_index = middle + 1
            else:
                high_index = middle
        if low_index < len(keys) and keys[low_index].as_py() == key:
            return table.column(1)[low_index].as_py()
        return None
    else:
        return None  # beyond the last group's max
    # Statistics missing or not exact: the whole file, as any reader of it.
    record = _range_data(reader.read_all(use_threads=False)).find(key)
    return None if record is None else record.identity
