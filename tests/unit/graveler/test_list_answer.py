"""ListEntries' answer written from stored entries is the message built field by field."""

from __future__ import annotations

import pytest

from engine.core.entries import StoredListPage
from engine.core.list_answer import list_response, varint
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
    page = StoredListPage([(k, None if e is None else e.SerializeToString()) for k, e in entries], has_more)
    expected = api.ListEntriesResponse(
        items=[
            api.ListItem(key=k.decode(), common_prefix=True) if e is None else api.ListItem(key=k.decode(), entry=e)
            for k, e in entries
        ],
        has_more=has_more,
    )
    assert list_response(page) == expected


def test_empty_page() -> None:
    assert list_response(StoredListPage([], False)) == api.ListEntriesResponse()


@pytest.mark.parametrize("n", [0, 1, 127, 128, 300, 16_383, 16_384, 2_097_151, 2_097_152, 1 << 40])
def test_varint_is_protobufs(n: int) -> None:
    # size is an int64 field: its wire form is the varint of the value after tag 0x10.
    assert pb.Entry(size=n).SerializeToString() == (b"\x10" + varint(n) if n else b"")
