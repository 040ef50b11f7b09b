"""The in-memory test double behaves like the real adapters where the tests may touch it."""

from __future__ import annotations

import hashlib
import io

import pytest

from silt.errors import InvalidArgument, NotFound
from tests.unit.committed.support import MemoryAdapter


def test_ranges_copies_and_multipart_behave_like_a_store() -> None:
    adapter = MemoryAdapter()
    adapter.put("ns", "src", io.BytesIO(b"0123456789"))
    assert adapter.get_range("ns", "src", 2, 4).read() == b"234"
    assert adapter.copy("ns", "src", "other", "dst").size == 10
    assert adapter.get("other", "dst").read() == b"0123456789"

    upload = adapter.create_multipart_upload("ns", "joined")
    first = adapter.upload_part("ns", "joined", upload, 1, io.BytesIO(b"abc"))
    second = adapter.upload_part_copy("ns", "joined", upload, 2, "ns", "src", (8, 9))
    result = adapter.complete_multipart_upload("ns", "joined", upload, [first, second])
    assert adapter.get("ns", "joined").read() == b"abc89"
    digests = hashlib.md5(b"abc").digest() + hashlib.md5(b"89").digest()
    assert result.etag == f"{hashlib.md5(digests).hexdigest()}-2"

    aborted = adapter.create_multipart_upload("ns", "gone")
    adapter.abort_multipart_upload("ns", "gone", aborted)
    with pytest.raises(NotFound):
        adapter.upload_part("ns", "gone", aborted, 1, io.BytesIO(b"x"))


def test_the_interfaces_part_copy_streams_a_checked_range_of_the_source() -> None:
    """MemoryAdapter has no copy of its own: this is BlockAdapter's default, as any adapter gets it."""
    adapter = MemoryAdapter()
    adapter.put("ns", "src", io.BytesIO(b"0123456789"))
    upload = adapter.create_multipart_upload("ns", "t")
    whole = adapter.upload_part_copy("ns", "t", upload, 1, "ns", "src")
    assert whole.etag == hashlib.md5(b"0123456789").hexdigest()
    for bad_range in [(5, 10), (4, 3)]:  # past the source's end; reversed
        with pytest.raises(InvalidArgument):
            adapter.upload_part_copy("ns", "t", upload, 2, "ns", "src", bad_range)
    with pytest.raises(InvalidArgument):
        adapter.upload_part_copy("ns", "t", upload, 0, "ns", "src")  # part numbers start at 1
    with pytest.raises(NotFound):
        adapter.upload_part_copy("ns", "t", upload, 2, "ns", "missing")
