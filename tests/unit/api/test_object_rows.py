"""Listing rows are built without the lakefs-sdk model (for speed): each must be exactly what the
model reads back and writes out, and what object_stats (the model, for stat) gives; uploads
answer the row."""

from __future__ import annotations

import json

import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from lakefs_sdk.models import ObjectStats

from services.api.objects_stats import common_prefix_row, object_row, object_stats
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
