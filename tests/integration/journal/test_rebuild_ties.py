"""Two gravelers may stamp writes of one staged key alike (each past the same value it read).
The store keeps one of them by its own rule (Cassandra's: a tombstone over a value, the larger
value over the smaller; every driver alike), not by the journal's order of writer ids: a rebuild
from the journal brings back the one the store kept."""

from __future__ import annotations

import uuid
from pathlib import Path

from engine.core.model import StagingToken
from engine.core.staging import KEY_PREFIX, StagingStore
from engine.core.values import Value
from engine.open import open_graveler
from silt.block.local import LocalAdapter
from silt.graveler.v1 import model_pb2 as pb
from silt.journal.clock import HybridLogicalClock, wall_micros
from silt.journal.context import journal_context
from silt.journal.rebuild import Rebuild
from silt.journal.shipper import Shipper
from silt.journal.store import JournaledStore
from silt.kv.store import Store
from tests.integration.journal.workload import JOURNAL_KEY, InCalls

SECOND_US = 1_000_000


def staged(text: str) -> bytes:
    return pb.StagedValue(identity=text.encode(), data=text.encode()).SerializeToString()


def test_a_rebuild_keeps_what_the_store_kept_of_writes_stamped_alike(
    store: Store, empty_store: Store, tmp_path: Path
) -> None:
    adapter = LocalAdapter(tmp_path / "data")
    repo = f"ties-{uuid.uuid4().hex[:10]}"
    graveler = open_graveler(store, adapter)
    try:
        calls = InCalls(graveler, repo)
        calls.lifecycle.create_repository(repo, f"local://{repo}", "main", False)
        handle = graveler.refs.repository(repo)
        token = StagingToken(graveler.refs.fresh_branch(handle, "main").branch.staging_token)
        # Writer "a" sorts first in the journal's order; each pair is stamped alike.
        first = JournaledStore(store, HybridLogicalClock(wall_micros, writer_id="a"))
        second = JournaledStore(store, HybridLogicalClock(wall_micros, writer_id="b"))
        at = wall_micros() + SECOND_US
        partition = token.encode()
        with journal_context("object_write", "tester", repo):
            first.apply(partition, [(KEY_PREFIX + b"larger-first", staged("zz"))], timestamp=at)
            second.apply(partition, [(KEY_PREFIX + b"larger-first", staged("aa"))], timestamp=at)
            first.apply(partition, [], [KEY_PREFIX + b"deleted-first"], timestamp=at + 1)
            second.apply(partition, [(KEY_PREFIX + b"deleted-first", staged("bb"))], timestamp=at + 1)
        served = StagingStore(store)
        assert served.get(token, b"larger-first") == Value(b"zz", b"zz", False)
        assert served.get(token, b"deleted-first") is None
        Shipper(store, adapter, hmac_key=JOURNAL_KEY).ship(repo)
    finally:
        graveler.close()

    Rebuild(empty_store, adapter, f"local://{repo}", repo, hmac_key=JOURNAL_KEY).run()

    rebuilt = StagingStore(empty_store)
    assert rebuilt.get(token, b"larger-first") == Value(b"zz", b"zz", False)
    assert rebuilt.get(token, b"deleted-first") is None
