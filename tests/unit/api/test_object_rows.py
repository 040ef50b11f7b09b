"""ObjectStats rows are written as JSON text without the lakefs-sdk model (for speed), by one
serializer (objects/listing.py object_row) that listings, uploads, stat and copy all answer with:
each row must be byte for byte what the model (objects/stats.py object_stats) writes, presigned or
not, with or without user metadata, and what the SDK reads back; listing pages likewise."""

from __future__ import annotations

import json

import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from lakefs_sdk.models import ObjectStats, ObjectStatsList, Pagination
from starlette.responses import JSONResponse

from edge.api.objects.listing import (
    EMPTY,
    OMITTED,
    USER,
    common_prefix_row,
    listing_page,
    namespace_base,
    object_row,
    user_metadata_json,
)
from edge.api.objects.stats import object_stats
from silt.block.adapter import PresignedURL
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb
from silt.objects import user_metadata

ENTRIES = [
    pb.Entry(physical_address="data/abc", size=5, etag="d41d8cd98f00b204e9800998ecf8427e"),
    pb.Entry(
        physical_address="s3://bucket/elsewhere/x",
        size=0,
        etag='"0123-2"',
        last_modified=Timestamp(seconds=1_700_000_000),
        content_type="text/csv",
        metadata={"x-amz-meta-owner": "me", "x-amz-meta-Some_Key": "v", "x-amz-checksum-crc32": "AAAAAA=="},
    ),
]


def _model_row(path: str, entry: pb.Entry, metadata: str, presigned: PresignedURL | None) -> bytes:
    """The row as the model writes it (as stat answered it), rendered as JSONResponse renders it."""
    stats = object_stats(path, entry, "local://ns", metadata == USER)
    if presigned is not None:
        stats.physical_address, stats.physical_address_expiry = presigned.url, presigned.expires
    if metadata == OMITTED:
        stats.metadata = None  # listings leave it out when not asked for
    return bytes(JSONResponse(stats.to_dict()).body)


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize("metadata", [USER, EMPTY, OMITTED])
@pytest.mark.parametrize("presigned", [None, PresignedURL("https://store.example/b/k?X-Sig=a%2Fb&é", 1_700_000_900)])
def test_object_rows_are_the_models_rows(entry: pb.Entry, metadata: str, presigned: PresignedURL | None) -> None:
    row = object_row('dir/ünï "name".csv', entry, namespace_base("local://ns"), metadata, presigned)
    assert row.encode() == _model_row('dir/ünï "name".csv', entry, metadata, presigned)
    assert ObjectStats.from_json(row).to_dict() == json.loads(row)


def test_common_prefix_rows_carry_what_the_sdk_requires() -> None:
    row = json.loads(common_prefix_row("dir/"))
    assert ObjectStats.parse_obj(row).to_dict() == row
    assert row["path_type"] == "common_prefix" and row["checksum"] == "" and row["mtime"] == 0


@pytest.mark.parametrize(
    "metadata",
    [
        {},
        {"x-amz-checksum-crc32": "AAAAAA=="},
        {"x-amz-meta-a": "", "x-amz-meta-Ünï": 'välue "q" \x7f\\', "x-amz-meta-数据": "\u2028 \U0001f642 \t"},
        {"X-Amz-Meta-upper": "not user metadata", "x-amz-meta-": "empty name"},
    ],
)
def test_user_metadata_is_written_as_json_writes_it(metadata: dict[str, str]) -> None:
    expected = json.dumps(user_metadata(metadata), ensure_ascii=False, separators=(",", ":"))
    assert user_metadata_json(metadata) == expected


def _item(key: str, entry: pb.Entry | None) -> api.ListItem:
    if entry is None:
        return api.ListItem(key=key, common_prefix=True)
    return api.ListItem(key=key, entry=entry)


# A page's items: common prefixes, user metadata beside Silt's own, unicode and characters
# JSON escapes in paths and values, empty metadata, no content type, no time, an absolute address.
PAGE = [
    ("a/", None),
    ("a/b.csv", ENTRIES[0]),
    ('a/ünï/数据 "quoted" \\ back\tslash\n.parquet', ENTRIES[1]),
    ("b/", None),
    (
        "b/only-silt",
        pb.Entry(
            physical_address="data/x\u2028y",
            size=2**40,
            etag="e",
            content_type="application/json; charset=utf-8",
            metadata={"x-amz-checksum-sha256": "AA=="},
        ),
    ),
    (
        "c/emoji-🙂",
        pb.Entry(
            physical_address="data/e",
            size=1,
            etag='"m"',
            last_modified=Timestamp(seconds=5, nanos=999),
            metadata={"x-amz-meta-Ünï": 'välue "q" \x7f', "x-amz-meta-a": ""},
        ),
    ),
]


def _model_page(
    items: list[api.ListItem],
    with_metadata: bool,
    has_more: bool,
    size: int,
    presigned: list[PresignedURL | None] | None = None,
) -> bytes:
    """The page as the lakefs-sdk model writes it, rendered as JSONResponse renders it."""
    results = []
    for i, item in enumerate(items):
        if item.common_prefix:
            prefix = {
                "path": item.key,
                "path_type": "common_prefix",
                "physical_address": "",
                "checksum": "",
                "mtime": 0,
            }
            stats = ObjectStats.parse_obj(prefix)
        else:
            # The item's own entry: a protobuf map's order may change when it is copied.
            stats = object_stats(item.key, item.entry, "local://ns/", with_metadata)
            if not with_metadata:
                stats.metadata = None  # listings leave it out when not asked for
            url = presigned[i] if presigned is not None else None
            if url is not None:
                stats.physical_address, stats.physical_address_expiry = url.url, url.expires
        results.append(stats)
    more = has_more and bool(items)
    page = Pagination(has_more=more, next_offset=items[-1].key if more else "", results=len(items), max_per_page=size)
    body = bytes(JSONResponse(ObjectStatsList(pagination=page, results=results).to_dict()).body)
    return body


@pytest.mark.parametrize("with_metadata", [True, False])
@pytest.mark.parametrize("has_more", [True, False])
@pytest.mark.parametrize("count", [0, 1, 2, len(PAGE)])
@pytest.mark.parametrize("presign", [False, True])
def test_listing_pages_are_the_models_json(with_metadata: bool, has_more: bool, count: int, presign: bool) -> None:
    items = [_item(key, entry) for key, entry in PAGE[:count]]
    urls: list[PresignedURL | None] | None = None
    if presign:
        urls = [
            None if item.common_prefix else PresignedURL(f"https://s/{i}?a=b&c=é", 1000 + i)
            for i, item in enumerate(items)
        ]
    written = listing_page(items, "local://ns/", with_metadata, has_more, 1000, urls)
    assert written == _model_page(items, with_metadata, has_more, 1000, urls)
    # And what the SDK reads back from it is the model.
    assert ObjectStatsList.from_json(written.decode()).to_dict() == json.loads(written)
