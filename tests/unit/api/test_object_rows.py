"""Listing rows are built without the lakefs-sdk model (for speed): each must be exactly what the
model reads back and writes out, and what object_stats (the model, for stat) gives; uploads
answer the row, and listing pages are written as text, byte for byte the model's JSON."""

from __future__ import annotations

import json

import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from lakefs_sdk.models import ObjectStats, ObjectStatsList, Pagination
from starlette.responses import JSONResponse

from edge.api.objects_listing import listing_page
from edge.api.objects_stats import common_prefix_row, object_row, object_stats
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb

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


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize("with_metadata", [True, False])
def test_object_rows_are_the_models_rows(entry: pb.Entry, with_metadata: bool) -> None:
    row = object_row("dir/name.csv", entry, "local://ns", with_metadata)
    assert ObjectStats.parse_obj(row).to_dict() == row
    model = object_stats("dir/name.csv", entry, "local://ns", with_metadata).to_dict()
    if not with_metadata:
        model.pop("metadata")  # listings leave it out when not asked for
    assert row == model
    # Uploads answer the row itself: the same JSON text, fields in the model's order.
    assert json.dumps(row) == json.dumps(model)


def test_common_prefix_rows_carry_what_the_sdk_requires() -> None:
    row = common_prefix_row("dir/")
    assert ObjectStats.parse_obj(row).to_dict() == row
    assert row["path_type"] == "common_prefix" and row["checksum"] == "" and row["mtime"] == 0


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


def _model_page(items: list[api.ListItem], with_metadata: bool, has_more: bool, size: int) -> bytes:
    """The page as the lakefs-sdk model writes it, rendered as JSONResponse renders it."""
    results = []
    for item in items:
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
        results.append(stats)
    more = has_more and bool(items)
    page = Pagination(has_more=more, next_offset=items[-1].key if more else "", results=len(items), max_per_page=size)
    body = bytes(JSONResponse(ObjectStatsList(pagination=page, results=results).to_dict()).body)
    return body


@pytest.mark.parametrize("with_metadata", [True, False])
@pytest.mark.parametrize("has_more", [True, False])
@pytest.mark.parametrize("count", [0, 1, 2, len(PAGE)])
def test_listing_pages_are_the_models_json(with_metadata: bool, has_more: bool, count: int) -> None:
    items = [_item(key, entry) for key, entry in PAGE[:count]]
    written = listing_page(items, "local://ns/", with_metadata, has_more, 1000)
    assert written == _model_page(items, with_metadata, has_more, 1000)
    # And what the SDK reads back from it is the model.
    assert ObjectStatsList.from_json(written.decode()).to_dict() == json.loads(written)
