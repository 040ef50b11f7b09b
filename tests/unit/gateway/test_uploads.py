"""The multipart upload records: a listing page reads the page, not every upload; expiry reads
only expired uploads; the listing index keeps S3's order for any key."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from silt import multipart_uploads as uploads
from silt.block.adapter import BlockAdapter
from silt.errors import NotFound
from silt.kv.mem import MemStore
from silt.kv.store import Entry

REPO = "repo"
DAY = 24 * 3600


class CountingStore(MemStore):
    def __init__(self) -> None:
        super().__init__(page_size=8)
        self.scanned = 0

    def scan(self, partition: bytes, start: bytes = b"") -> Iterator[Entry]:
        for entry in super().scan(partition, start):
            self.scanned += 1
            yield entry


class Aborts:
    def __init__(self) -> None:
        self.aborted: list[str] = []

    def abort_multipart_upload(self, namespace: str, key: str, upload_id: str) -> None:
        if upload_id == "gone":
            raise NotFound("no such upload")
        self.aborted.append(upload_id)


def record(path: str, initiated_ns: int, block_id: str = "b") -> dict[str, Any]:
    return {
        "path": path,
        "initiated": "2024-01-01T00:00:00+00:00",
        "initiated_ns": initiated_ns,
        "initiator": "alice",
        "namespace": "local://repo",
        "address": "data/x",
        "block_id": block_id,
    }


def upload_id(n: int) -> str:
    return f"{n:032x}"


def fill(kv: MemStore, paths: list[str], start_ns: int | None = None) -> list[tuple[str, str]]:
    now = start_ns if start_ns is not None else time.time_ns()
    saved = []
    for n, path in enumerate(paths):
        uploads.save(kv, REPO, upload_id(n), record(path, now + n))
        saved.append((path, upload_id(n)))
    return saved


def listed(page: uploads.UploadPage) -> list[Any]:
    return [(i.path, i.upload_id) if isinstance(i, uploads.Upload) else i.prefix for i in page.items]


def test_a_page_reads_the_page_not_every_upload() -> None:
    kv = CountingStore()
    saved = fill(kv, [f"main/k{n % 500:04d}" for n in range(3000)])
    kv.scanned = 0
    page = uploads.list_page(kv, REPO, "", "", "", "", 10, 7 * DAY)
    assert page.truncated and len(page.items) == 10
    assert kv.scanned <= 2 * 8  # the page and one past it, in pages of the store's scan
    expected = sorted(saved, key=lambda u: (u[0], int(u[1], 16)))
    assert listed(page) == expected[:10]

    # From the middle, by markers: as cheap.
    kv.scanned = 0
    path, last = expected[1499]
    page = uploads.list_page(kv, REPO, "", "", path, last, 10, 7 * DAY)
    assert listed(page) == expected[1500:1510] and kv.scanned <= 2 * 8

    # A delimiter skips a whole "directory" in one step.
    kv.scanned = 0
    page = uploads.list_page(kv, REPO, "main/", "k", "", "", 5, 7 * DAY)
    assert listed(page) == ["main/k"] and not page.truncated and kv.scanned <= 8


def test_the_index_keeps_s3_order_for_any_key() -> None:
    kv = MemStore()
    paths = ["a", "a\x00", "a\x00b", "a\x01", "a/", "ab", "\u00e9", "a b", "a\x00\x00"]
    saved = fill(kv, paths)
    everything = uploads.list_page(kv, REPO, "", "", "", "", 1000, 7 * DAY)
    assert listed(everything) == sorted(saved, key=lambda u: u[0].encode())
    under = uploads.list_page(kv, REPO, "a\x00", "", "", "", 1000, 7 * DAY)
    assert [p for p, _ in listed(under)] == ["a\x00", "a\x00\x00", "a\x00b"]
    rolled = uploads.list_page(kv, REPO, "", "\x00", "", "", 1000, 7 * DAY)
    assert listed(rolled)[:2] == [("a", upload_id(0)), "a\x00"]


def test_expired_uploads_are_not_listed_and_the_sweep_reads_only_them() -> None:
    kv = CountingStore()
    now = time.time_ns()
    old = fill(kv, ["main/old-1", "main/old-2"], start_ns=now - 8 * DAY * 10**9)
    for n in range(100):
        uploads.save(kv, REPO, upload_id(1000 + n), record(f"main/young-{n}", now + n))
    page = uploads.list_page(kv, REPO, "", "", "", "", 1000, 7 * DAY)
    assert not {u for u in listed(page)} & set(old) and len(page.items) == 100

    adapter = Aborts()
    kv.scanned = 0
    assert uploads.expire(kv, adapter, 7 * DAY) == 2  # type: ignore[arg-type]
    assert kv.scanned <= 2 + 1 + 2  # the two expired, the first young one, and their parts' scans
    assert adapter.aborted == ["b", "b"]
    assert not [key for key in keys(kv) if any(u.encode() in key for _, u in old)]
    assert uploads.expire(kv, adapter, 7 * DAY) == 0  # type: ignore[arg-type]
    assert len(keys(kv)) == 100 * 3  # record, listing and age index of each young upload


def test_the_sweep_survives_uploads_already_gone_from_the_block_store() -> None:
    kv = MemStore()
    uploads.save(kv, REPO, upload_id(1), record("main/x", time.time_ns() - 8 * DAY * 10**9, block_id="gone"))
    adapter: BlockAdapter = Aborts()  # type: ignore[assignment]
    assert uploads.expire(kv, adapter, 7 * DAY) == 1
    assert keys(kv) == []


def keys(kv: MemStore) -> list[bytes]:
    return [entry.key for entry in kv.scan(uploads.PARTITION)]


def all_pages(
    kv: MemStore, prefix: str = "", delimiter: str = "", limit: int = 1000
) -> tuple[list[Any], list[uploads.UploadPage]]:
    """Every page of a listing, following each page's markers as an S3 client does."""
    items: list[Any] = []
    pages: list[uploads.UploadPage] = []
    key_marker = id_marker = ""
    for _ in range(100):
        page = uploads.list_page(kv, REPO, prefix, delimiter, key_marker, id_marker, limit, 7 * DAY)
        pages.append(page)
        items += listed(page)
        if not page.truncated:
            return items, pages
        key_marker, id_marker = page.next_key_marker, page.next_upload_id_marker
    raise AssertionError("the listing never ended")


def test_a_prefix_full_of_expired_uploads_costs_a_page_a_bounded_scan() -> None:
    kv = CountingStore()
    now = time.time_ns()
    expired_ns = now - 8 * DAY * 10**9
    skip = uploads.MAX_SKIPPED_PER_PAGE
    # 2.5 caps of expired-but-unswept uploads, with live ones before, between and after them.
    for n in range(skip * 5 // 2):
        uploads.save(kv, REPO, upload_id(10_000 + n), record(f"main/b/{n:05d}", expired_ns + n))
    live = [("main/a", upload_id(1)), ("main/b/01000x", upload_id(2)), ("main/c", upload_id(3))]
    for n, (path, uid) in enumerate(live):
        uploads.save(kv, REPO, uid, record(path, now + n))

    kv.scanned = 0
    first = uploads.list_page(kv, REPO, "main/", "", "", "", 1000, 7 * DAY)
    # Before: one call read all 2,500 expired uploads to answer three live ones.
    assert kv.scanned <= skip + 2 * 8
    assert first.truncated and listed(first) == [live[0]]
    assert first.next_key_marker == f"main/b/{skip:05d}"  # the upload the page stopped at

    items, pages = all_pages(kv, "main/")
    assert items == live  # each live upload once, in order, across pages with markers
    assert len(pages) == 3 and [p.truncated for p in pages] == [True, True, False]

    # A page may stop with nothing listed yet: truncated, markers still move on.
    kv.scanned = 0
    only_expired = uploads.list_page(kv, REPO, "main/b/", "", "", "", 1000, 7 * DAY)
    assert only_expired.truncated and only_expired.items == [] and only_expired.next_key_marker
    assert kv.scanned <= skip + 2 * 8
    assert all_pages(kv, "main/b/")[0] == [live[1]]

    # With a delimiter: a common prefix is listed once, and only because a live upload is under it.
    items, _ = all_pages(kv, "main/", "/")
    assert items == [live[0], "main/b/", live[2]]
    uploads.forget(kv, REPO, live[1][1], record(live[1][0], now + 1), [])
    assert all_pages(kv, "main/", "/")[0] == [live[0], live[2]]  # under main/b/ only expired ones
