"""Multipart upload records and repository identities: a deleted repository's deletion aborts its
own uploads and no other's, and a listing shows only the current repository's uploads. Records
older than identities are judged by the storage namespace they carry."""

from __future__ import annotations

import time
from typing import Any, cast

from silt import multipart_uploads as uploads
from silt.block.adapter import BlockAdapter
from silt.errors import Unavailable
from silt.kv.mem import MemStore
from silt.kv.store import scan_prefix
from silt.repository_place import RepositoryPlace

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


def place(identity: str) -> RepositoryPlace:
    return RepositoryPlace(f"local://{identity}", identity)


def record(path: str, identity: str | None, block_id: str, namespace: str = "") -> dict[str, Any]:
    saved: dict[str, Any] = {
        "path": path,
        "initiated": "2024-01-01T00:00:00+00:00",
        "initiated_ns": time.time_ns(),
        "initiator": "alice",
        "namespace": namespace or f"local://{identity}",
        "address": "data/x",
        "block_id": block_id,
    }
    if identity is not None:
        saved["repository_id"] = identity
    return saved


def open_uploads(kv: MemStore) -> list[str]:
    """The keys of every record of every upload (upload, indexes, parts)."""
    return [entry.key.decode() for entry in scan_prefix(kv, uploads.PARTITION, b"")]


def save(kv: MemStore, n: int, identity: str | None, namespace: str = "") -> str:
    upload_id = f"{n:032x}"
    uploads.save(kv, REPO, upload_id, record(f"main/k{n}", identity, f"block-{n}", namespace))
    kv.set(uploads.PARTITION, uploads.part_prefix(upload_id) + b"00001", b'{"etag": "e", "size": 1}')
    return upload_id


def test_a_deleted_repository_s_uploads_are_aborted_and_its_successor_s_kept() -> None:
    kv = MemStore()
    old = save(kv, 1, "old")
    new = save(kv, 2, "new")
    legacy = save(kv, 3, None, "local://new")
    adapter = Aborts()

    assert uploads.abort_repository(kv, cast(BlockAdapter, adapter), REPO, place("old")) == 1
    assert adapter.aborted == ["block-1"]
    left = open_uploads(kv)
    assert not any(old in key for key in left)
    assert any(new in key for key in left) and any(legacy in key for key in left)
    # Again (the clean-up's retry): nothing left to do.
    assert uploads.abort_repository(kv, cast(BlockAdapter, adapter), REPO, place("old")) == 0


def test_uploads_older_than_identities_are_aborted_with_the_repository_of_their_namespace() -> None:
    kv = MemStore()
    legacy_old = save(kv, 1, None, "local://old")
    legacy_other = save(kv, 2, None, "local://elsewhere")
    adapter = Aborts()

    assert uploads.abort_repository(kv, cast(BlockAdapter, adapter), REPO, place("old")) == 1
    assert adapter.aborted == ["block-1"]
    left = open_uploads(kv)
    assert not any(legacy_old in key for key in left)
    assert any(legacy_other in key for key in left)


def test_a_bounded_abort_leaves_the_rest_for_the_next_call() -> None:
    kv = MemStore()
    ids = [save(kv, n, "old") for n in range(1, 6)]
    kept = save(kv, 9, "new")
    adapter = Aborts()

    assert uploads.abort_repository(kv, cast(BlockAdapter, adapter), REPO, place("old"), limit=2) == 2
    assert sum(any(i in key for key in open_uploads(kv)) for i in ids) == 3
    # Fewer than the limit: none is left.
    assert uploads.abort_repository(kv, cast(BlockAdapter, adapter), REPO, place("old"), limit=4) == 3
    left = open_uploads(kv)
    assert not any(i in key for i in ids for key in left)
    assert any(kept in key for key in left)


def test_records_go_even_when_the_store_cannot_abort_the_bytes() -> None:
    kv = MemStore()
    old = save(kv, 1, "old")
    assert uploads.abort_repository(kv, cast(BlockAdapter, Aborts(failing=True)), REPO, place("old")) == 1
    assert not any(old in key for key in open_uploads(kv))


def test_a_listing_shows_the_current_repository_s_uploads_and_those_older_than_identities() -> None:
    kv = MemStore()
    save(kv, 1, "old")
    new = save(kv, 2, "new")
    legacy = save(kv, 3, None, "local://new")
    save(kv, 4, None, "local://old")
    page = uploads.list_page(kv, REPO, "", "", "", "", 10, 7 * DAY, place=place("new"))
    assert [item.upload_id for item in page.items if isinstance(item, uploads.Upload)] == [new, legacy]
    assert not page.truncated
    assert page.others == 2  # the caller looks the repository up again: it may remember an old one


def test_an_upload_belongs_by_identity_or_else_by_the_namespace_of_its_bytes() -> None:
    assert uploads.belongs({"repository_id": "old", "namespace": "local://new"}, place("new")) is False
    assert uploads.belongs({"repository_id": "new", "namespace": "local://new"}, place("new")) is True
    # Older than identities: the repository whose namespace holds the upload's bytes.
    assert uploads.belongs({"namespace": "local://new"}, place("new")) is True
    assert uploads.belongs({"namespace": "local://old"}, place("new")) is False
