"""The range-boundary index of a metarange: its rows in a compact binary file beside it.

A path-filtered log asks, for each commit, which range of the commit's metarange and of its
parent's may hold a key, and compares their ids: equal ids mean the key did not change, and
no range is read. That needs only the metarange's rows, but decoding the metarange's Parquet
file costs far more than the rows themselves (opening the footer, building Arrow columns).
This file holds the same rows in a layout read with a few slices:

    magic b"SILTRBX1" | n: u32 | n range ids (32 raw bytes each) | n min-key lengths: u32 |
    n max-key lengths: u32 | n record counts: i64 | n estimated bytes: i64 |
    min keys, concatenated | max keys, concatenated

all little-endian. It is named by its metarange's id under ``_silt/metarange-index/``, a
directory of its own so that Spark readers of ``_silt/metaranges/`` see only Parquet.

The index is never needed for a correct answer: decoding it recomputes the metarange id from
the decoded rows and refuses a file whose rows do not hash to it (IndexUnreadable), so a
truncated, corrupt or foreign file is never believed; a reader then decodes the metarange.
"""

from __future__ import annotations

import itertools
import sys
from array import array

from engine.core.committed.metarange import MetaRange, metarange_id_of_columns
from engine.core.committed.model import MetaRangeId, RangeId, RangeInfo, validate_id

METARANGE_INDEX_PREFIX = "_silt/metarange-index/"

MAGIC = b"SILTRBX1"
_ID_BYTES = 32
_HEADER = len(MAGIC) + 4


class IndexUnreadable(ValueError):
    """The file is not the index of the metarange it is named after."""


def metarange_index_key(metarange_id: str) -> str:
    return METARANGE_INDEX_PREFIX + validate_id(metarange_id, "metarange")


def _packed(typecode: str, values: list[int]) -> bytes:
    numbers = array(typecode, values)
    if sys.byteorder != "little":
        numbers.byteswap()
    return numbers.tobytes()


def _unpacked(typecode: str, data: bytes) -> list[int]:
    numbers = array(typecode)
    numbers.frombytes(data)
    if sys.byteorder != "little":
        numbers.byteswap()
    return numbers.tolist()


def encode_index(ranges: list[RangeInfo]) -> bytes:
    mins = [info.min_key for info in ranges]
    maxs = [info.max_key for info in ranges]
    return b"".join(
        [
            MAGIC,
            len(ranges).to_bytes(4, "little"),
            b"".join(bytes.fromhex(info.id) for info in ranges),
            _packed("I", [len(key) for key in mins]),
            _packed("I", [len(key) for key in maxs]),
            _packed("q", [info.count for info in ranges]),
            _packed("q", [info.estimated_bytes for info in ranges]),
            *mins,
            *maxs,
        ]
    )


def _split(blob: bytes, lengths: list[int]) -> list[bytes]:
    offsets = list(itertools.accumulate(lengths, initial=0))
    return [blob[start:stop] for start, stop in itertools.pairwise(offsets)]


def decode_index(expected: MetaRangeId, data: bytes) -> MetaRange:
    """The metarange ``expected`` from its index file; IndexUnreadable unless the file's rows
    are exactly that metarange's."""
    if len(data) < _HEADER or not data.startswith(MAGIC):
        raise IndexUnreadable(f"metarange index of {expected}: not an index file")
    count = int.from_bytes(data[len(MAGIC) : _HEADER], "little")
    ids_end = _HEADER + _ID_BYTES * count
    min_lengths_end = ids_end + 4 * count
    max_lengths_end = min_lengths_end + 4 * count
    counts_end = max_lengths_end + 8 * count
    sizes_end = counts_end + 8 * count
    if len(data) < sizes_end:
        raise IndexUnreadable(f"metarange index of {expected}: truncated")
    min_lengths = _unpacked("I", data[ids_end:min_lengths_end])
    max_lengths = _unpacked("I", data[min_lengths_end:max_lengths_end])
    mins_end = sizes_end + sum(min_lengths)
    if len(data) != mins_end + sum(max_lengths):
        raise IndexUnreadable(f"metarange index of {expected}: keys do not fill the file")
    # One hex conversion for all ids, then slices: of the text for the ids, of its ASCII bytes
    # for the hash (which is over the ids as text).
    hex_ids = data[_HEADER:ids_end].hex()
    ascii_ids = hex_ids.encode()
    id_starts = range(0, len(hex_ids), 2 * _ID_BYTES)
    ids = [RangeId(hex_ids[start : start + 2 * _ID_BYTES]) for start in id_starts]
    mins = _split(data[sizes_end:mins_end], min_lengths)
    maxs = _split(data[mins_end:], max_lengths)
    counts = _unpacked("q", data[max_lengths_end:counts_end])
    sizes = _unpacked("q", data[counts_end:sizes_end])
    # The content id over the decoded rows: a few microseconds for the rows of a metarange,
    # and what lets a reader trust this file as much as the Parquet one.
    hashed = metarange_id_of_columns(
        [ascii_ids[start : start + 2 * _ID_BYTES] for start in id_starts], mins, maxs, counts, sizes
    )
    if hashed != expected:
        raise IndexUnreadable(f"metarange index of {expected}: rows do not hash to the metarange's id")
    return MetaRange.of(expected, list(map(RangeInfo, ids, mins, maxs, counts, sizes)))
