"""Entries are bounded, and listing pages are bounded in bytes as well as in count.

Once, five PUTs with 15 MiB of user metadata made every listing of their branch fail with
"Sent message larger than max" and poisoned every later commit. Runs the engine in-process on
the in-memory KV and a local-disk object store.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.core.deadline import NO_DEADLINE
from engine.core.paging import MAX_PAGE, MAX_PAGE_BYTES, CommonPrefix, paginate
from engine.core.validation import MAX_ENTRY_BYTES
from engine.graveler import Graveler
from engine.open import open_graveler
from silt.block.local import LocalAdapter
from silt.config import DatabaseConfig
from silt.errors import InvalidArgument
from silt.graveler.v1 import model_pb2 as pb
from silt.kv import open_store


@pytest.fixture
def graveler(tmp_path: Path) -> Iterator[Graveler]:
    store = open_store(DatabaseConfig(type="mem"))
    g = open_graveler(store, LocalAdapter(tmp_path / "data"))
    g.lifecycle.create_repository("repo", "local://repo", "main", False)
    yield g
    g.close()


def big_entry(metadata_bytes: int) -> pb.Entry:
    return pb.Entry(physical_address="data/x", size=1, etag="e", metadata={"m": "v" * metadata_bytes})


def test_an_entry_over_the_bound_is_refused(graveler: Graveler) -> None:
    with pytest.raises(InvalidArgument, match="entry is"):
        graveler.stage_entry("repo", "main", "huge", big_entry(15 * 1024 * 1024))
    with pytest.raises(InvalidArgument):
        graveler.stage_entry("repo", "main", "over", big_entry(MAX_ENTRY_BYTES))
    graveler.stage_entry("repo", "main", "fits", big_entry(MAX_ENTRY_BYTES - 100))
    page = graveler.entries.list(graveler.refs.repository("repo"), "main", "", "", "", 10, NO_DEADLINE)
    assert [key for key, _ in page.items] == [b"fits"]


def test_listing_pages_stop_at_a_byte_budget_and_resume_exactly(graveler: Graveler) -> None:
    # 300 entries near the bound: ~18 MiB, more than two pages' byte budget.
    count = 300
    for i in range(count):
        graveler.stage_entry("repo", "main", f"k{i:04d}", big_entry(MAX_ENTRY_BYTES - 200))
    seen: list[bytes] = []
    after = ""
    pages = 0
    while True:
        page = graveler.entries.list(graveler.refs.repository("repo"), "main", "", "", after, MAX_PAGE, NO_DEADLINE)
        pages += 1
        size = sum(entry.ByteSize() for _, entry in page.items if entry is not None)
        assert size <= MAX_PAGE_BYTES
        seen += [key for key, _ in page.items]
        if not page.has_more:
            break
        after = page.items[-1][0].decode()
    assert pages >= 3
    assert seen == [f"k{i:04d}".encode() for i in range(count)]


def test_a_page_never_exceeds_the_budget_in_one_answer(graveler: Graveler) -> None:
    for i in range(200):
        graveler.stage_entry("repo", "main", f"k{i:04d}", big_entry(MAX_ENTRY_BYTES - 200))
    page = graveler.entries.list(graveler.refs.repository("repo"), "main", "", "", "", MAX_PAGE, NO_DEADLINE)
    assert page.has_more and 0 < len(page.items) < 200
    assert sum(len(k) + e.ByteSize() for k, e in page.items if e is not None) <= MAX_PAGE_BYTES


def test_paginate_counts_common_prefixes_by_their_key() -> None:
    keys = [b"a/1", b"a/2", b"b/1", b"c"]

    def walk(start: bytes) -> Iterator[bytes]:
        return iter([k for k in keys if k >= start])

    page = paginate(walk, lambda k: k, b"", b"/", b"", 100, size_of=len, max_bytes=4)
    assert [i.key if isinstance(i, CommonPrefix) else i for i in page.items] == [b"a/", b"b/"]
    assert page.has_more
    # A single item larger than the budget still makes progress: a page never comes back empty.
    single = paginate(walk, lambda k: k, b"", b"", b"", 100, size_of=lambda k: 1000, max_bytes=10)
    assert single.items == [b"a/1"] and single.has_more
