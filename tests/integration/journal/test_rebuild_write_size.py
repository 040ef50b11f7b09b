"""Rebuild writes a partition's staged values in writes of bounded bytes, not only of bounded
rows: a thousand large staged values in one write would pass the batch size Cassandra 2.2 to 3.5
refuse (50 KiB), and the rebuild would fail."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, cast

from engine.core.model import StagingToken
from engine.core.staging import KEY_PREFIX, StagingStore
from engine.core.values import Value
from engine.open import open_graveler
from silt.block.local import LocalAdapter
from silt.graveler.v1 import model_pb2 as pb
from silt.journal.context import journal_context
from silt.journal.rebuild import REBUILD_WRITE_BYTES, Rebuild
from silt.journal.shipper import Shipper
from silt.journal.store import JournaledStore
from silt.kv.store import Store
from tests.integration.journal.workload import JOURNAL_KEY, InCalls

VALUES = 40
VALUE_BYTES = 2048


class RecordingStore:
    """A store that notes the rows of every apply."""

    def __init__(self, inner: Store) -> None:
        self._inner = inner
        self.applies: list[int] = []  # bytes of keys and values per apply

    def apply(
        self, partition: bytes, puts: Any, deletes: Any = (), condition: Any = None, timestamp: Any = None
    ) -> None:
        self.applies.append(sum(len(key) + len(value) for key, value in puts) + sum(len(key) for key in deletes))
        self._inner.apply(partition, puts, deletes, condition, timestamp)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_staged_values_are_rebuilt_in_writes_of_bounded_bytes(store: Store, empty_store: Store, tmp_path: Path) -> None:
    adapter = LocalAdapter(tmp_path / "data")
    repo = f"size-{uuid.uuid4().hex[:10]}"
    graveler = open_graveler(store, adapter)
    try:
        calls = InCalls(graveler, repo)
        calls.lifecycle.create_repository(repo, f"local://{repo}", "main", False)
        token = StagingToken(graveler.refs.fresh_branch(graveler.refs.repository(repo), "main").branch.staging_token)
        writer = JournaledStore(store)
        with journal_context("object_write", "tester", repo):
            for i in range(VALUES):
                data = bytes([i]) * VALUE_BYTES
                stored = pb.StagedValue(identity=data[:16], data=data).SerializeToString()
                writer.apply(token.encode(), [(KEY_PREFIX + b"k%03d" % i, stored)])
        Shipper(store, adapter, hmac_key=JOURNAL_KEY).ship(repo)
    finally:
        graveler.close()

    recording = RecordingStore(empty_store)
    Rebuild(cast(Store, recording), adapter, f"local://{repo}", repo, hmac_key=JOURNAL_KEY).run()

    assert max(recording.applies) <= REBUILD_WRITE_BYTES
    rebuilt = StagingStore(empty_store)
    for i in range(VALUES):
        data = bytes([i]) * VALUE_BYTES
        assert rebuilt.get(token, b"k%03d" % i) == Value(data[:16], data, False)
