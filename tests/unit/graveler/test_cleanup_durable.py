"""A drop of unreachable staging tokens survives the graveler that was asked for it: it is
recorded in KV until done, and the next graveler to start on that KV finishes it."""

from __future__ import annotations

from pathlib import Path

from services.graveler.builder import MetaRangeBuilder
from services.graveler.cleanup import PENDING_PARTITION, PENDING_PREFIX, RetryPacing
from services.graveler.graveler import Graveler
from services.graveler.model import StagingToken
from services.graveler.wiring import open_graveler
from silt.block.local import LocalAdapter
from silt.config import DatabaseConfig, LocalDatabaseConfig
from silt.graveler.v1 import model_pb2 as pb
from silt.kv import open_store
from silt.kv.store import Store, scan_prefix


class NeverDrops:
    """The builder of a graveler killed before its cleaner got to the drops: they never run."""

    def __init__(self, inner: MetaRangeBuilder) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def drop_token(self, token: StagingToken) -> None:
        raise ConnectionError("killed")


def pending(store: Store) -> list[bytes]:
    return [e.key for e in scan_prefix(store, PENDING_PARTITION, PENDING_PREFIX)]


def test_a_drop_left_by_a_killed_graveler_is_done_by_the_next_one(tmp_path: Path) -> None:
    config = DatabaseConfig(type="local", local=LocalDatabaseConfig(path=str(tmp_path / "kv.db")))
    adapter = LocalAdapter(tmp_path / "data")
    store = open_store(config)
    first: Graveler = open_graveler(store, adapter)
    first.cleaner.pacing = RetryPacing(first=60.0, longest=60.0)  # no second try before the "kill"
    first.builder = NeverDrops(first.builder)  # type: ignore[assignment]
    first.lifecycle.create_repository("repo", "local://repo", "main", False)
    token = first.refs.fresh_branch(first.refs.repository("repo"), "main").branch.staging_token
    first.stage_entry("repo", "main", "k", pb.Entry(physical_address="data/k", size=1, etag="e"))
    first.commit("repo", "main", "seal and drop the token")
    first.cleaner.flush(30)
    assert not first.staging.is_empty(StagingToken(token))
    assert pending(store) == [PENDING_PREFIX + token.encode()]
    first.cleaner.close()  # killed: nothing of it runs again
    store.close()

    store = open_store(config)
    second = open_graveler(store, adapter)
    try:
        second.cleaner.flush(30)
        assert second.staging.is_empty(StagingToken(token))
        assert pending(store) == []
    finally:
        second.close()
        store.close()
