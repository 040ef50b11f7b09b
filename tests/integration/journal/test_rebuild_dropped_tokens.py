"""Rebuild and dropped staging tokens, on every KV driver: the staged values of a token that no
branch names at the end of the journal (committed, reset or deleted with its branch; graveler's
cleaner deleted them unjournaled) are neither written nor kept by a rebuild."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from engine.open import open_graveler
from silt.block.local import LocalAdapter
from silt.journal.batch import decode_batch
from silt.journal.bucket import JournalBucket
from silt.journal.envelope import wrap
from silt.journal.rebuild import Rebuild, RebuildProgress
from silt.journal.shipper import Shipper
from silt.kv.store import Store
from tests.integration.journal.workload import (
    JOURNAL_KEY,
    InCalls,
    api_dump,
    live_tokens,
    mixed_workload,
    raw,
    raw_dump,
    tokens_ever_named,
)


class Interrupted(Exception):
    pass


def shipped_workload(store: Store, adapter: LocalAdapter) -> tuple[str, set[str], dict[str, object], dict[str, object]]:
    """The mixed workload, shipped: (repository, its dropped tokens, its rows, what clients see)."""
    repo = f"dropped-{uuid.uuid4().hex[:10]}"
    graveler = open_graveler(store, adapter)
    try:
        calls = InCalls(graveler, repo)
        calls.lifecycle.create_repository(repo, f"local://{repo}", "main", False)
        mixed_workload(calls, adapter, repo)
        graveler.cleaner.flush(30)
        kv = raw(graveler)
        dropped = tokens_ever_named(kv, graveler, repo) - live_tokens(kv, graveler, repo)
        rows = raw_dump(kv, graveler, repo)
        seen = api_dump(graveler, adapter, repo)
        assert Shipper(kv, adapter, hmac_key=JOURNAL_KEY).ship(repo).records > 0
    finally:
        graveler.close()
    return repo, dropped, rows, seen


def staged_changes_in(adapter: LocalAdapter, repo: str, tokens: set[str]) -> int:
    bucket = JournalBucket(adapter, f"local://{repo}")
    partitions = {token.encode() for token in tokens}
    return sum(
        1
        for key in bucket.batches()
        for record in decode_batch(bucket.read(key))
        for change in record.changes
        if change.partition in partitions
    )


def rows_in(kv: Store, tokens: set[str]) -> dict[str, int]:
    return {token: count for token in tokens if (count := sum(1 for _ in kv.scan(token.encode())))}


def test_rebuild_writes_no_staged_value_of_a_dropped_token(store: Store, empty_store: Store, tmp_path: Path) -> None:
    adapter = LocalAdapter(tmp_path / "data")
    repo, dropped, rows, seen = shipped_workload(store, adapter)
    # Commits, a merge, a revert, a reset, a branch deletion and a compaction each dropped one.
    assert len(dropped) >= 5
    skipped = staged_changes_in(adapter, repo, dropped)
    assert skipped > 0  # their staged writes are in the journal

    progress = Rebuild(empty_store, adapter, f"local://{repo}", repo, hmac_key=JOURNAL_KEY).run()

    assert progress.dropped_tokens == len(dropped)
    assert progress.dropped_changes == skipped
    assert rows_in(empty_store, dropped) == {}
    rebuilt = open_graveler(empty_store, adapter)
    try:
        assert raw_dump(empty_store, rebuilt, repo) == rows
        assert api_dump(rebuilt, adapter, repo) == seen
    finally:
        rebuilt.close()


def test_a_resumed_rebuild_removes_what_an_interrupted_one_left_of_dropped_tokens(
    store: Store, empty_store: Store, tmp_path: Path
) -> None:
    adapter = LocalAdapter(tmp_path / "data")
    repo, dropped, rows, seen = shipped_workload(store, adapter)
    namespace = f"local://{repo}"

    def interrupt(progress: RebuildProgress) -> None:
        raise Interrupted

    with pytest.raises(Interrupted):
        Rebuild(empty_store, adapter, namespace, repo, report=interrupt, hmac_key=JOURNAL_KEY).run()
    # What an interrupted rebuild that still wrote dropped tokens' staged values left behind.
    for token in dropped:
        empty_store.set(token.encode(), b"key/left-behind", wrap(1, b"\x0a\x01v"))

    progress = Rebuild(empty_store, adapter, namespace, repo, hmac_key=JOURNAL_KEY).run()

    assert progress.resumed
    assert rows_in(empty_store, dropped) == {}
    rebuilt = open_graveler(empty_store, adapter)
    try:
        assert raw_dump(empty_store, rebuilt, repo) == rows
        assert api_dump(rebuilt, adapter, repo) == seen
    finally:
        rebuilt.close()
