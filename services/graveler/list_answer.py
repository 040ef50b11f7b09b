"""The gRPC answer to ListEntries, written from the entries as stored.

A listing page is up to 10,000 entries. Parsing each stored entry into a message and copying
it into a ListItem costs more than the rest of the page; the stored bytes already are the
serialized Entry, so the answer is written in protobuf's wire format around them and parsed
once, in C.
"""

from __future__ import annotations

from services.graveler.entries import StoredListPage
from silt.graveler.v1 import graveler_pb2 as api

# Wire-format tags: (field number << 3) | wire type (0 varint, 2 length-delimited).
_RESPONSE_ITEM = b"\x0a"  # ListEntriesResponse.items = 1
_RESPONSE_HAS_MORE = b"\x10\x01"  # ListEntriesResponse.has_more = 2, true
_ITEM_KEY = b"\x0a"  # ListItem.key = 1
_ITEM_COMMON_PREFIX = b"\x10\x01"  # ListItem.common_prefix = 2, true
_ITEM_ENTRY = b"\x1a"  # ListItem.entry = 3


def varint(value: int) -> bytes:
    """value (non-negative) as a protobuf base-128 varint."""
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


# The varints of every length below 16 KiB (one or two bytes each), looked up rather than
# computed: keys, entries and items are almost always shorter.
_SHORT = [varint(n) for n in range(1 << 14)]


def _length(n: int) -> bytes:
    return _SHORT[n] if n < 1 << 14 else varint(n)


def list_response(page: StoredListPage) -> api.ListEntriesResponse:
    parts: list[bytes] = []
    for key, data in page.items:
        if data is None:
            item = _ITEM_KEY + _length(len(key)) + key + _ITEM_COMMON_PREFIX
        else:
            item = _ITEM_KEY + _length(len(key)) + key + _ITEM_ENTRY + _length(len(data)) + data
        parts.append(_RESPONSE_ITEM + _length(len(item)) + item)
    if page.has_more:
        parts.append(_RESPONSE_HAS_MORE)
    return api.ListEntriesResponse.FromString(b"".join(parts))
