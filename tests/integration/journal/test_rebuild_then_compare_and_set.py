"""After a rebuild from a journal whose stamps are ahead of every clock (its gravelers' clocks ran
fast), graveler's next compare-and-sets on the rebuilt keys take effect: a commit, a new branch
head, is visible, and the branch it updated shows it."""

from __future__ import annotations

import uuid
from pathlib import Path

from engine.core.deadline import NO_DEADLINE
from engine.open import open_graveler
from silt.block.local import LocalAdapter
from silt.journal.clock import HybridLogicalClock, wall_micros
from silt.journal.rebuild import Rebuild
from silt.journal.shipper import Shipper
from silt.journal.store import JournaledStore
from silt.kv.store import Store
from tests.integration.journal.workload import JOURNAL_KEY, InCalls, put

AHEAD_US = 60_000_000


def test_a_commit_after_a_rebuild_from_a_journal_ahead_is_visible(
    store: Store, empty_store: Store, tmp_path: Path
) -> None:
    adapter = LocalAdapter(tmp_path / "data")
    repo = f"ahead-{uuid.uuid4().hex[:10]}"
    fast = JournaledStore(store, HybridLogicalClock(lambda: wall_micros() + AHEAD_US))
    graveler = open_graveler(fast, adapter)
    try:
        calls = InCalls(graveler, repo)
        calls.lifecycle.create_repository(repo, f"local://{repo}", "main", False)
        put(calls, adapter, repo, "main", "before")
        calls.commit(repo, "main", "before the loss")
        calls.create_tag(repo, "v1", "main")
        graveler.cleaner.flush(30)
        Shipper(store, adapter, hmac_key=JOURNAL_KEY).ship(repo)
    finally:
        graveler.close()

    Rebuild(empty_store, adapter, f"local://{repo}", repo, hmac_key=JOURNAL_KEY).run()

    rebuilt = open_graveler(empty_store, adapter)  # this process's clock: a minute behind the journal
    try:
        calls = InCalls(rebuilt, repo)
        put(calls, adapter, repo, "main", "after")
        commit = calls.commit(repo, "main", "after the rebuild")
        handle = rebuilt.refs.repository(repo)
        assert rebuilt.refs.fresh_branch(handle, "main").commit_id == commit.id
        assert rebuilt.entries.stat(handle, "main", "after", NO_DEADLINE).physical_address
        calls.delete_tag(repo, "v1")
        assert list(rebuilt.refs.list_tags(handle)) == []
    finally:
        rebuilt.close()
