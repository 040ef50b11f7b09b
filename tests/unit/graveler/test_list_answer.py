"""ListEntries' answer written from stored entries is the message built field by field, under
the tags the messages' descriptors give."""

from __future__ import annotations

from typing import Any

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from engine.core.entries import StoredListPage
from engine.core.list_answer import TAGS, list_response, serialized_list_response, varint, wire_tags
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb


def _entry(i: int, metadata_bytes: int = 0) -> pb.Entry:
    entry = pb.Entry(physical_address=f"data/{i}", size=i, etag=f"{i:032x}", content_type="text/plain")
    entry.last_modified.seconds = 1_700_000_000 + i
    entry.last_modified.nanos = 123_000_000
    if metadata_bytes:
        entry.metadata["big"] = "m" * metadata_bytes
    return entry


@pytest.mark.parametrize("has_more", [False, True])
def test_answer_equals_the_message_built_field_by_field(has_more: bool) -> None:
    # Lengths on both sides of the one- and two-byte varints and of the lookup table.
    entries = [
        (b"a", _entry(0)),
        (b"dir/", None),
        ("k\u00e9y/\U0001f600".encode(), _entry(1)),
        (b"x" * 127, _entry(2)),
        (b"y" * 128, _entry(3, 100)),
        (b"z" * 20_000, _entry(4, 70_000)),
    ]
    page = StoredListPage.of([(k, None if e is None else e.SerializeToString()) for k, e in entries], has_more)
    expected = api.ListEntriesResponse(
        items=[
            api.ListItem(key=k.decode(), common_prefix=True) if e is None else api.ListItem(key=k.decode(), entry=e)
            for k, e in entries
        ],
        has_more=has_more,
    )
    assert list_response(page) == expected


def test_empty_page() -> None:
    assert list_response(StoredListPage()) == api.ListEntriesResponse()


@pytest.mark.parametrize("n", [0, 1, 127, 128, 300, 16_383, 16_384, 2_097_151, 2_097_152, 1 << 40])
def test_varint_is_protobufs(n: int) -> None:
    # size is an int64 field: its wire form is the varint of the value after tag 0x10.
    assert pb.Entry(size=n).SerializeToString() == (b"\x10" + varint(n) if n else b"")


def test_tags_are_the_descriptors() -> None:
    # Each tag, read back, is its field's number and wire type.
    def field_of(tag: bytes) -> tuple[int, int]:
        value = sum((byte & 0x7F) << (7 * i) for i, byte in enumerate(tag))
        return value >> 3, value & 7

    response, item = api.ListEntriesResponse.DESCRIPTOR, api.ListItem.DESCRIPTOR
    assert field_of(TAGS.response_item) == (response.fields_by_name["items"].number, 2)
    assert field_of(TAGS.response_has_more[:-1]) == (response.fields_by_name["has_more"].number, 0)
    assert field_of(TAGS.item_key) == (item.fields_by_name["key"].number, 2)
    assert field_of(TAGS.item_common_prefix[:-1]) == (item.fields_by_name["common_prefix"].number, 0)
    assert field_of(TAGS.item_entry) == (item.fields_by_name["entry"].number, 2)


def _renumbered(
    numbers: dict[str, dict[str, int]],
    types: dict[str, dict[str, descriptor_pb2.FieldDescriptorProto.Type.ValueType]] | None = None,
) -> Any:
    """graveler.proto's messages in a pool of their own, with fields renumbered (or retyped)."""
    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()

    def add(file: Any) -> None:
        if file.name in added:
            return
        for dependency in file.dependencies:
            add(dependency)
        proto = descriptor_pb2.FileDescriptorProto()
        file.CopyToProto(proto)
        for message in proto.message_type:
            for field in message.field:
                field.number = numbers.get(message.name, {}).get(field.name, field.number)
                field.type = (types or {}).get(message.name, {}).get(field.name, field.type)
        pool.Add(proto)
        added.add(file.name)

    add(api.DESCRIPTOR)
    return pool


def test_a_renumbered_field_is_written_under_its_new_number() -> None:
    # Numbers of one and two bytes (16 and up need two).
    pool = _renumbered(
        {"ListEntriesResponse": {"items": 16, "has_more": 3}, "ListItem": {"key": 7, "common_prefix": 200, "entry": 21}}
    )
    response = pool.FindMessageTypeByName("silt.graveler.v1.ListEntriesResponse")
    item = pool.FindMessageTypeByName("silt.graveler.v1.ListItem")
    entry = pool.FindMessageTypeByName("silt.graveler.v1.Entry")
    tags = wire_tags(response, item, entry)
    assert tags != TAGS
    Response = message_factory.GetMessageClass(response)
    Item = message_factory.GetMessageClass(item)
    Entry = message_factory.GetMessageClass(entry)
    entries = [(b"a", _entry(0)), (b"dir/", None), (b"z" * 20_000, _entry(4, 70_000))]
    page = StoredListPage.of([(k, None if e is None else e.SerializeToString()) for k, e in entries], True)
    expected = Response(
        items=[
            Item(key=k.decode(), common_prefix=True)
            if e is None
            else Item(key=k.decode(), entry=Entry.FromString(e.SerializeToString()))
            for k, e in entries
        ],
        has_more=True,
    )
    assert Response.FromString(serialized_list_response(page, tags)) == expected


def test_a_field_of_another_type_is_refused() -> None:
    pool = _renumbered({}, {"ListItem": {"common_prefix": descriptor_pb2.FieldDescriptorProto.TYPE_STRING}})
    with pytest.raises(TypeError):
        wire_tags(
            pool.FindMessageTypeByName("silt.graveler.v1.ListEntriesResponse"),
            pool.FindMessageTypeByName("silt.graveler.v1.ListItem"),
            pool.FindMessageTypeByName("silt.graveler.v1.Entry"),
        )
