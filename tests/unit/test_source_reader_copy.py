"""A part copied from an imported source: checked as upload_part_copy checks any part, then read
only as the import recorded it; a part copied from anything else is the adapter's own copy."""

from __future__ import annotations

import hashlib
import io

import pytest

from silt.block.external import ExternalFiles, SourceReader, SourceVersion
from silt.errors import InvalidArgument, SourceChanged
from tests.unit.committed.support import MemoryAdapter

SOURCE = ("s3://landing", "in/data.csv")
DATA = b"0123456789"


def _reader(adapter: MemoryAdapter) -> SourceReader:
    adapter.put(*SOURCE, io.BytesIO(DATA))
    version = SourceVersion(len(DATA), hashlib.md5(DATA).hexdigest(), 0)
    return SourceReader(adapter, ExternalFiles(()), "s3://landing/in/data.csv", version)


def test_a_range_of_the_source_becomes_the_part() -> None:
    adapter = MemoryAdapter()
    reader = _reader(adapter)
    upload = adapter.create_multipart_upload("ns", "joined")
    part = reader.upload_part_copy("ns", "joined", upload, 3, *SOURCE, (2, 5))
    assert part.part_number == 3
    assert adapter.uploads[upload][3] == b"2345"
    whole = reader.upload_part_copy("ns", "joined", upload, 4, *SOURCE)
    assert adapter.uploads[upload][4] == DATA
    assert whole.etag == hashlib.md5(DATA).hexdigest()


def test_a_part_of_another_object_is_the_adapters_own_copy() -> None:
    adapter = MemoryAdapter()
    reader = _reader(adapter)
    adapter.put("ns", "other", io.BytesIO(b"abcdef"))
    upload = adapter.create_multipart_upload("ns", "joined")
    reader.upload_part_copy("ns", "joined", upload, 1, "ns", "other", (1, 2))
    assert adapter.uploads[upload][1] == b"bc"
    with pytest.raises(InvalidArgument, match="ns other: copy range 0-6 is outside the object's 6 bytes"):
        reader.upload_part_copy("ns", "joined", upload, 2, "ns", "other", (0, 6))


@pytest.mark.parametrize(
    ("number", "src_range", "message"),
    [
        (0, None, "part number"),
        (1, (5, 2), "range"),
        (1, (0, 10), "s3://landing/in/data.csv: copy range 0-10 is outside the object's 10 bytes"),
    ],
)
def test_a_part_outside_the_rules_or_the_source_is_refused(
    number: int, src_range: tuple[int, int] | None, message: str
) -> None:
    adapter = MemoryAdapter()
    reader = _reader(adapter)
    upload = adapter.create_multipart_upload("ns", "joined")
    with pytest.raises(InvalidArgument, match=message):
        reader.upload_part_copy("ns", "joined", upload, number, *SOURCE, src_range)
    assert adapter.uploads[upload] == {}


def test_a_source_changed_since_the_import_is_never_copied() -> None:
    adapter = MemoryAdapter()
    reader = _reader(adapter)
    adapter.put(*SOURCE, io.BytesIO(b"replaced!!"))
    upload = adapter.create_multipart_upload("ns", "joined")
    with pytest.raises(SourceChanged):
        reader.upload_part_copy("ns", "joined", upload, 1, *SOURCE)
    assert adapter.uploads[upload] == {}
