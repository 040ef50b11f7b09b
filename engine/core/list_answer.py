"""The gRPC answer to ListEntries, written from the entries as stored.

A listing page is up to 10,000 entries. Parsing each stored entry into a message and copying
it into a ListItem costs more than the rest of the page; the stored bytes already are the
serialized Entry, so the answer is written in protobuf's wire format around them and parsed
once, in C.

The field tags written are derived from the messages' descriptors when this module is imported
(wire_tags), so a field renumbered in graveler.proto is written under its new number; a field
whose type changed so that these bytes would no longer be the message fails the import.
"""

from __future__ import annotations

from dataclasses import dataclass

from google.protobuf.descriptor import Descriptor, FieldDescriptor

from engine.core.entries import StoredListPage
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb
from silt.protobuf_wire import SHORT_VARINTS, length_varint, varint

# Wire types: a varint, and a length-delimited field (strings, bytes, messages).
_VARINT, _LENGTH_DELIMITED = 0, 2
_TRUE = b"\x01"


@dataclass(frozen=True)
class WireTags:
    """What goes before each field written: its tag ((field number << 3) | wire type, as a
    varint), and for the booleans, which are only ever written true, the value too."""

    response_item: bytes  # ListEntriesResponse.items
    response_has_more: bytes  # ListEntriesResponse.has_more, true
    item_key: bytes  # ListItem.key
    item_common_prefix: bytes  # ListItem.common_prefix, true
    item_entry: bytes  # ListItem.entry

    @property
    def prefix_bytes(self) -> int:
        """A common prefix item's bytes besides its key and the key's length."""
        return len(self.item_key) + len(self.item_common_prefix)

    @property
    def entry_bytes(self) -> int:
        """An entry item's bytes besides its key, its entry and their lengths."""
        return len(self.item_key) + len(self.item_entry)


def _tag(message: Descriptor, name: str, kinds: tuple[int, ...], wire_type: int, repeated: bool = False) -> bytes:
    field = message.fields_by_name[name]
    if field.type not in kinds or field.is_repeated != repeated:
        raise TypeError(f"{message.full_name}.{name} is no longer what list_answer.py writes")
    return varint(field.number << 3 | wire_type)


def _message_tag(message: Descriptor, name: str, of: Descriptor, repeated: bool = False) -> bytes:
    field = message.fields_by_name[name]
    if field.message_type is None or field.message_type.full_name != of.full_name:
        raise TypeError(f"{message.full_name}.{name} is no longer a {of.full_name}")
    return _tag(message, name, (FieldDescriptor.TYPE_MESSAGE,), _LENGTH_DELIMITED, repeated)


def wire_tags(response: Descriptor, item: Descriptor, entry: Descriptor) -> WireTags:
    """The tags of ListEntriesResponse (response), its ListItem (item) and the stored Entry
    (entry), read from their descriptors."""
    text = (FieldDescriptor.TYPE_STRING, FieldDescriptor.TYPE_BYTES)
    boolean = (FieldDescriptor.TYPE_BOOL,)
    return WireTags(
        response_item=_message_tag(response, "items", item, repeated=True),
        response_has_more=_tag(response, "has_more", boolean, _VARINT) + _TRUE,
        item_key=_tag(item, "key", text, _LENGTH_DELIMITED),
        item_common_prefix=_tag(item, "common_prefix", boolean, _VARINT) + _TRUE,
        item_entry=_message_tag(item, "entry", entry),
    )


TAGS = wire_tags(api.ListEntriesResponse.DESCRIPTOR, api.ListItem.DESCRIPTOR, pb.Entry.DESCRIPTOR)


def list_response(page: StoredListPage) -> api.ListEntriesResponse:
    return api.ListEntriesResponse.FromString(serialized_list_response(page))


def serialized_list_response(page: StoredListPage, tags: WireTags = TAGS) -> bytes:
    """The ListEntriesResponse of page, serialized: what gRPC sends, with no message between.
    tags: TAGS (those of other descriptors only in tests)."""
    try:
        parts = _short_items(page.keys, page.data, tags)
    except IndexError:  # a length of 16 KiB or more: not in the table
        parts = _items(page.keys, page.data, tags)
    if page.has_more:
        parts.append(tags.response_has_more)
    return b"".join(parts)


def _short_items(keys: list[bytes], entries: list[bytes | None], tags: WireTags) -> list[bytes]:
    """_items for items whose lengths are all in _SHORT (IndexError otherwise).

    The loop every listed entry runs through, kept to the fewest bytecodes: the table indexed
    in line rather than through length_varint, and each item's pieces added to one list joined
    once (concatenating them per item made several intermediate bytes objects per entry).
    """
    short = SHORT_VARINTS
    response_item, item_key, item_common_prefix, item_entry = (
        tags.response_item,
        tags.item_key,
        tags.item_common_prefix,
        tags.item_entry,
    )
    prefix_bytes, entry_bytes = tags.prefix_bytes, tags.entry_bytes
    parts: list[bytes] = []
    extend = parts.extend
    for key, data in zip(keys, entries, strict=True):
        key_length = short[len(key)]
        if data is None:
            size = short[prefix_bytes + len(key_length) + len(key)]
            extend((response_item, size, item_key, key_length, key, item_common_prefix))
        else:
            data_length = short[len(data)]
            size = short[entry_bytes + len(key_length) + len(key) + len(data_length) + len(data)]
            extend((response_item, size, item_key, key_length, key, item_entry, data_length, data))
    return parts


def _items(keys: list[bytes], entries: list[bytes | None], tags: WireTags) -> list[bytes]:
    parts: list[bytes] = []
    extend = parts.extend
    for key, data in zip(keys, entries, strict=True):
        key_length = length_varint(len(key))
        if data is None:
            size = tags.prefix_bytes + len(key_length) + len(key)
            extend((tags.response_item, length_varint(size), tags.item_key, key_length, key, tags.item_common_prefix))
        else:
            data_length = length_varint(len(data))
            size = tags.entry_bytes + len(key_length) + len(key) + len(data_length) + len(data)
            extend(
                (
                    tags.response_item,
                    length_varint(size),
                    tags.item_key,
                    key_length,
                    key,
                    tags.item_entry,
                    data_length,
                    data,
                )
            )
    return parts
