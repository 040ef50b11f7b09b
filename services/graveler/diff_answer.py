"""The gRPC answer to Diff and DiffBranch, written from the differences as stored.

As for listings (list_answer.py): a diff page is up to 10,000 items, and parsing both sides'
stored entries into messages and copying them into a DiffItem cost more than walking the
metaranges. The stored values already are serialized Entry messages, so the answer is written
in protobuf's wire format around them and parsed once, in C.
"""

from __future__ import annotations

from engine.core.branching import SummaryPage
from engine.core.committed.diff import Difference
from engine.core.list_answer import length_varint
from engine.core.paging import CommonPrefix, Page
from engine.core.values import decode_entry
from silt.graveler.v1 import graveler_pb2 as api

# Wire-format tags: (field number << 3) | wire type (0 varint, 2 length-delimited).
_RESPONSE_ITEM = b"\x0a"  # DiffResponse.items = 1
_RESPONSE_HAS_MORE = b"\x10\x01"  # DiffResponse.has_more = 2, true
_ITEM_KEY = b"\x0a"  # DiffItem.key = 1
_ITEM_LEFT = b"\x1a"  # DiffItem.left = 3
_ITEM_RIGHT = b"\x22"  # DiffItem.right = 4
# DiffItem.type = 2 with its value: every DiffType is below 128, one byte.
_ITEM_TYPE = {
    "added": bytes((0x10, api.DIFF_TYPE_ADDED)),
    "removed": bytes((0x10, api.DIFF_TYPE_REMOVED)),
    "changed": bytes((0x10, api.DIFF_TYPE_CHANGED)),
}
_PREFIX_TYPE = bytes((0x10, api.DIFF_TYPE_PREFIX_CHANGED))
_FIXED = len(_ITEM_KEY) + len(_PREFIX_TYPE)  # an item's bytes besides its key and entries


def diff_response(page: Page[Difference]) -> api.DiffResponse:
    # Each item's pieces go into one list joined once (no intermediate bytes per item).
    parts: list[bytes] = []
    extend = parts.extend
    for item in page.items:
        key = item.key
        key_length = length_varint(len(key))
        if isinstance(item, CommonPrefix):
            extend((_RESPONSE_ITEM, length_varint(_FIXED + len(key_length) + len(key)), _ITEM_KEY, key_length, key))
            parts.append(_PREFIX_TYPE)
            continue
        size = _FIXED + len(key_length) + len(key)
        left, right = item.left, item.right
        # Item, key and type first; the entries (present or not) follow once the size is known.
        head = len(parts)
        extend((_RESPONSE_ITEM, b"", _ITEM_KEY, key_length, key, _ITEM_TYPE[item.kind]))
        if left is not None:
            value = left.value
            value_length = length_varint(len(value))
            size += 1 + len(value_length) + len(value)
            extend((_ITEM_LEFT, value_length, value))
        if right is not None:
            value = right.value
            value_length = length_varint(len(value))
            size += 1 + len(value_length) + len(value)
            extend((_ITEM_RIGHT, value_length, value))
        parts[head + 1] = length_varint(size)
    if page.has_more:
        parts.append(_RESPONSE_HAS_MORE)
    return api.DiffResponse.FromString(b"".join(parts))


_SUMMARY_TYPE = {"added": api.DIFF_TYPE_ADDED, "removed": api.DIFF_TYPE_REMOVED, "changed": api.DIFF_TYPE_CHANGED}


def summary_response(page: SummaryPage) -> api.DiffSummaryResponse:
    response = api.DiffSummaryResponse(has_more=page.has_more)
    # Whole columns, each copied in C.
    response.keys.extend([key.decode() for key in page.keys])
    response.types.extend([_SUMMARY_TYPE[kind] for kind in page.kinds])
    response.sizes.extend([decode_entry(value).size for value in page.values])
    return response
