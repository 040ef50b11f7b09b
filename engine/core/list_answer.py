"""The gRPC answer to ListEntries, written from the entries as stored.

A listing page is up to 10,000 entries. Parsing each stored entry into a message and copying
it into a ListItem costs more than the rest of the page; the stored bytes already are the
serialized Entry, so the answer is written in protobuf's wire format around them and parsed
once, in C.
"""

from __future__ import annotations

from engine.core.entries import StoredListPage
from silt.graveler.v1 import graveler_pb2 as api

# Wire-format tags: (field number << 3) | wire type (0 varint, 2 length-delimited).
_RESPONSE_ITEM = b"\x0a"  # ListEntriesResponse.items = 1
_RESPONSE_HAS_MORE = b"\x10\x01"  # ListEntriesResponse.has_more = 2, true
_ITEM_KEY = b"\x0a"  # ListItem.key = 1
_ITEM_COMMON_PREFIX = b"\x10\x01"  # ListItem.common_prefix = 2, true
_ITEM_ENTRY = b"\x1a"  # ListItem.entry = 3
_PREFIX_TAGS = len(_ITEM_KEY) + len(_ITEM_COMMON_PREFIX)  # an item's bytes besides its key
_ENTRY_TAGS = len(_ITEM_KEY) + len(_ITEM_ENTRY)  # and besides its key, entry and their lengths


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


def length_varint(n: int) -> bytes:
    """varint(n), looked up for the usual short lengths."""
    return _SHORT[n] if n < 1 << 14 else varint(n)


def list_response(page: StoredListPage) -> api.ListEntriesResponse:
    return api.ListEntriesResponse.FromString(serialized_list_response(page))


def serialized_list_response(page: StoredListPage) -> bytes:
    """The ListEntriesResponse of page, serialized: what gRPC sends, with no message between."""
    try:
        parts = _short_items(page.items)
    except IndexError:  # a length of 16 KiB or more: not in the table
        parts = _items(page.items)
    if page.has_more:
        parts.append(_RESPONSE_HAS_MORE)
    return b"".join(parts)


def _short_items(items: list[tuple[bytes, bytes | None]]) -> list[bytes]:
    """_items for items whose lengths are all in _SHORT (IndexError otherwise).

    The loop every listed entry runs through, kept to the fewest bytecodes: the table indexed
    in line rather than through length_varint, and each item's pieces added to one list joined
    once (concatenating them per item made several intermediate bytes objects per entry).
    """
    short = _SHORT
    parts: list[bytes] = []
    extend = parts.extend
    for key, data in items:
        key_length = short[len(key)]
        if data is None:
            size = short[_PREFIX_TAGS + len(key_length) + len(key)]
            extend((_RESPONSE_ITEM, size, _ITEM_KEY, key_length, key, _ITEM_COMMON_PREFIX))
        else:
            data_length = short[len(data)]
            size = short[_ENTRY_TAGS + len(key_length) + len(key) + len(data_length) + len(data)]
            extend((_RESPONSE_ITEM, size, _ITEM_KEY, key_length, key, _ITEM_ENTRY, data_length, data))
    return parts


def _items(items: list[tuple[bytes, bytes | None]]) -> list[bytes]:
    parts: list[bytes] = []
    extend = parts.extend
    for key, data in items:
        key_length = length_varint(len(key))
        if data is None:
            size = _PREFIX_TAGS + len(key_length) + len(key)
            extend((_RESPONSE_ITEM, length_varint(size), _ITEM_KEY, key_length, key, _ITEM_COMMON_PREFIX))
        else:
            data_length = length_varint(len(data))
            size = _ENTRY_TAGS + len(key_length) + len(key) + len(data_length) + len(data)
            extend((_RESPONSE_ITEM, length_varint(size), _ITEM_KEY, key_length, key, _ITEM_ENTRY, data_length, data))
    return parts
