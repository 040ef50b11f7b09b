"""The stores every process that runs engine code works on, opened in one place: graveler's KV
store (through the journal, docs/design/journal.md) and the object store its committed ranges
live in, both instrumented. Graveler, the compactor, the edge's reader and the worker processes
that build commits or ingest imports all open theirs here (engine/open.py composes the engine
over them)."""

from __future__ import annotations

from dataclasses import dataclass

from engine.core.committed.cache import CommittedCache
from engine.core.committed.chunking import ChunkingPolicy
from engine.core.committed.manager import CommittedManager
from silt.block.adapter import BlockAdapter
from silt.config import Config, DatabaseConfig
from silt.journal.store import JournaledStore, open_graveler_store
from silt.kv.read_only import ReadOnlyStore
from silt.kv.store import Store
from silt.telemetry.stores import open_observed_adapter, open_observed_store


@dataclass(frozen=True)
class EngineStores:
    kv: Store
    adapter: BlockAdapter

    def committed(self, cache: CommittedCache | None = None, policy: ChunkingPolicy | None = None) -> CommittedManager:
        """The committed layer over the object store, with cache (a fresh memory one by default)."""
        return CommittedManager(self.adapter, cache, policy)


def open_stores(config: Config) -> EngineStores:
    """Graveler's KV store, read and written through the journal, and the object store."""
    return EngineStores(open_graveler_store(config), open_observed_adapter(config.blockstore))


def open_read_only_stores(config: Config, database: DatabaseConfig) -> EngineStores:
    """database (graveler's KV as another process reaches it) for reading only, values read
    through the journal's envelope as graveler writes them; and the object store."""
    kv = JournaledStore(ReadOnlyStore(open_observed_store(database)), enabled=False)
    return EngineStores(kv, open_observed_adapter(config.blockstore))
