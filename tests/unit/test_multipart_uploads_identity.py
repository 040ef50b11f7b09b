"""Multipart upload records and repository identities: a deleted repository's deletion aborts its
own uploads and no other's, and a listing shows only the current repository's uploads."""

from __future__ import annotations

import time
from typing import Any, cast

from silt import multipart_uploads as uploads
from silt.block.adapter import BlockAdapter
from silt.errors import Unavailable
from silt.kv.mem import MemStore
from silt.kv.store import scan_prefix

REPO = "repo"
DAY = 24 * 3600


class Aborts:
    def __init__(self, failing: bool = False) -> None:
        self.aborted: list[str] = []
        self.failing = failing

    def abort_multipart_upload(self, namespace: str, key: str, upload_id: str) -> None:
        if self.failing:
            raise Unavailable("the store is down")
        self.aborted.append(upload_id)


def record(path: str, identity: str | None, block_id: str) -> dict[str, Any]:
    saved: dict[str, Any] = {
        "path": path,
        "initiated": "2024-01-01T00:00:00+00:00",
        "initiated_ns": time.time_ns(),
        "initiator": "alice",
        "namespace": f"local://{identity}",
        "address": "data/x",
        "block_id": block_id,
    }
    if identity is not None:
        saved["repository_id"] = identity
    return saved


def open_uploads(kv: MemStore) -> list[str]:
    """The keys of every record of every upload (upload, indexes, parts)."""
    return [entry.key.decode() for entry in scan_prefix(kv, uploads.PARTITION, b"")]


def save(kv: MemStore, n: int, identity: str | None) -> str:
    upload_id = f"{n:032x}"
    uploads.save(kv, REPO, upload_id, record(f"main/k{n}", identity, f"block-{n}"))
    kv.set(uploads.PARTITION, uploads.part_prefix(upload_id) + b"00001", b'{"etag": "e", "size": 1}')
    return upload_id


def test_a_deleted_repository_s_uploads_are_aborted_and_its_successor_s_kept() -> None:
    kv = MemStore()
    old = save(kv, 1, "old")
    new = save(kv, 2, "new")
    legacy = save(kv, 3, None)
    adapter = Aborts()

    assert uploads.abort_repository(kv, cast(BlockAdapter, adapter), REPO, "old") == 1
    assert adapter.aborted == ["block-1"]
    left = open_uploads(kv)
    assert not any(old in key for key in left)
    assert any(new in key for key in left) and any(legacy in key for key in left)
    # Again (the clean-up's retry): nothing left to do.
    assert uploads.abort_repository(kv, cast(BlockAdapter, adapter), REPO, "old") == 0


def test_records_go_even_when_the_store_cannot_abort_the_bytes() -> None:
    kv = MemStore()
    old = save(kv, 1, "old")
    assert uploads.abort_repository(kv, cast(BlockAdapter, Aborts(failing=True)), REPO, "old") == 1
    assert not any(old in key for key in open_uploads(kv))


def test_a_listing_shows_the_current_repository_s_uploads_and_those_older_than_identities() -> None:
    kv = MemStore()
    save(kv, 1, "old")
    new = save(kv, 2, "new")
    legacy = save(kv, 3, None)
    page = uploads.list_page(kv, REPO, "", "", "", "", 10, 7 * DAY, repository_id="new")
    assert [item.upload_id for item in page.items if isinstance(item, uploads.Upload)] == [new, legacy]
    assert not page.truncated
    assert uploads.belongs({"repository_id": "old"}, "new") is False
    assert uploads.belongs({}, "new") is True
