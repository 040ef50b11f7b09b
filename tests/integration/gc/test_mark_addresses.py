"""The mark phase reads each committed entry's physical address from its bytes in Spark SQL, and
through the protobuf decoder for an entry that does not start with it: both give what the
decoder gives, for every length and spelling of an address."""

from __future__ import annotations

from typing import Any

from jobs.gc.mark import with_addresses
from silt.graveler.v1 import model_pb2 as pb


def _entry(address: str) -> bytes:
    return pb.Entry(physical_address=address, size=len(address), etag="e" * 32).SerializeToString()


ADDRESSES = [
    "a",
    "data/" + "0" * 32,
    "x" * 127,  # the longest one-byte length
    "y" * 128,  # the shortest two-byte length
    "z" * 300,
    "data/dätä/ünïcode/日本",
    "s3://other-bucket/imported/key with spaces",
    "w" * 20_000,  # a three-byte length: read by the decoder
]


def test_addresses_read_from_the_bytes_match_the_decoder(spark: Any) -> None:
    rows = [(str(index), _entry(address)) for index, address in enumerate(ADDRESSES)]
    # Field 1 after another field, and field 1 absent: both are valid encodings the bytes do
    # not start with, read by the decoder.
    rows.append(("reordered", pb.Entry(etag="first").SerializeToString() + _entry("data/after-etag")))
    rows.append(("no-address", pb.Entry(size=7, etag="none").SerializeToString()))
    frame = spark.createDataFrame(rows, "id string, value binary")
    found = {row.id: row.address for row in with_addresses(frame, "value", "address").collect()}
    expected = {row_id: pb.Entry.FromString(value).physical_address for row_id, value in rows}
    assert found == expected
    assert found["reordered"] == "data/after-etag"
    assert found["no-address"] == ""
