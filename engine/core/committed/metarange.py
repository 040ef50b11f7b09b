"""The metarange file: the sorted list of a metarange's ranges, and its decoded form.

Schema ``range_id: string, min_key: binary, max_key: binary, record_count: int64,
estimated_bytes: int64``, one row per range in key order. Ranges never overlap, so the
range that may hold a key is found by bisecting the max keys.
"""

from __future__ import annotations

import io
from bisect import bisect_left
from dataclasses import dataclass
from typing import BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq

from engine.core.committed.hashing import content_digest
from engine.core.committed.model import MetaRangeId, RangeInfo
from engine.core.committed.parquet import binary_array, int64_array, read_parquet

FORMAT_TAG = b"silt.metarange.v1"

METARANGE_SCHEMA = pa.schema(
    [
        pa.field("range_id", pa.string(), nullable=False),
        pa.field("min_key", pa.binary(), nullable=False),
        pa.field("max_key", pa.binary(), nullable=False),
        pa.field("record_count", pa.int64(), nullable=False),
        pa.field("estimated_bytes", pa.int64(), nullable=False),
    ],
    metadata={b"silt.format": FORMAT_TAG},
)

ROW_GROUP_ROWS = 1024

# Per-row Python overhead of a decoded RangeInfo (tuple, id str, two bytes, ints, list slots).
_PER_ROW_OVERHEAD = 300


@dataclass(frozen=True, slots=True)
class MetaRange:
    id: MetaRangeId
    ranges: list[RangeInfo]
    max_keys: list[bytes]  # parallel to ranges, for bisecting
    memory_size: int

    @classmethod
    def of(cls, metarange_id: MetaRangeId, ranges: list[RangeInfo]) -> MetaRange:
        payload = sum(len(info.min_key) + len(info.max_key) for info in ranges)
        return cls(metarange_id, ranges, [info.max_key for info in ranges], payload + _PER_ROW_OVERHEAD * len(ranges))

    def first_index_from(self, key: bytes) -> int:
        """Index of the first range holding keys >= ``key`` (len(ranges) if none)."""
        return bisect_left(self.max_keys, key)

    def range_for(self, key: bytes) -> RangeInfo | None:
        index = self.first_index_from(key)
        if index < len(self.ranges) and self.ranges[index].min_key <= key:
            return self.ranges[index]
        return None

    @property
    def record_count(self) -> int:
        return sum(info.count for info in self.ranges)


def _columns(ranges: list[RangeInfo]) -> tuple[list[str], list[bytes], list[bytes], list[int], list[int]]:
    return (
        [info.id for info in ranges],
        [info.min_key for info in ranges],
        [info.max_key for info in ranges],
        [info.count for info in ranges],
        [info.estimated_bytes for info in ranges],
    )


def metarange_id(ranges: list[RangeInfo]) -> MetaRangeId:
    ids, mins, maxs, counts, sizes = _columns(ranges)
    return metarange_id_of_columns([i.encode() for i in ids], mins, maxs, counts, sizes)


def metarange_id_of_columns(
    ascii_ids: list[bytes], mins: list[bytes], maxs: list[bytes], counts: list[int], sizes: list[int]
) -> MetaRangeId:
    """metarange_id of the rows given column by column, range ids as ASCII bytes: for a reader
    that has the columns already (the range-boundary index)."""
    return MetaRangeId(content_digest(FORMAT_TAG, (ascii_ids, mins, maxs), (counts, sizes)))


def encode_metarange(ranges: list[RangeInfo]) -> bytes:
    ids, mins, maxs, counts, sizes = _columns(ranges)
    table = pa.Table.from_arrays(
        [
            binary_array([i.encode() for i in ids], pa.string()),
            binary_array(mins),
            binary_array(maxs),
            int64_array(counts),
            int64_array(sizes),
        ],
        schema=METARANGE_SCHEMA,
    )
    sink = io.BytesIO()
    pq.write_table(table, sink, row_group_size=ROW_GROUP_ROWS, compression="snappy", use_dictionary=False)
    return sink.getvalue()


def decode_metarange(metarange_id: MetaRangeId, source: BinaryIO) -> MetaRange:
    table = read_parquet(source)
    # Column by column into RangeInfo (range ids as read: RangeId is only a type), without a
    # Python loop: a path-filtered log decodes one metarange per commit.
    ranges = list(map(RangeInfo, *(table.column(name).to_pylist() for name in METARANGE_SCHEMA.names)))
    return MetaRange.of(metarange_id, ranges)
