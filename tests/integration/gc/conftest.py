"""A real graveler gRPC server on the embedded KV and a local-disk object store, for GC runs.

Object bytes are written through the block adapter at the physical addresses the entries
name, as the gateway would, so a GC run deletes real files and tests read them back.
"""

from __future__ import annotations

import io
import os
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from engine.graveler import Graveler, GravelerOptions
from engine.open import open_graveler
from services.graveler.server import start
from silt.block.local import LocalAdapter
from silt.config import BlockstoreConfig, DatabaseConfig, LocalBlockstoreConfig, LocalDatabaseConfig
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import graveler_pb2_grpc as api_grpc
from silt.graveler.v1 import model_pb2 as pb
from silt.kv import Store, open_store

# Objects written by a test are backdated by this much, so a GC run with grace 0 sees them
# as older than its start (file times have whole-second granularity on some filesystems).
BACKDATE_SECONDS = 3600


@dataclass
class GCEnv:
    stub: api_grpc.GravelerServiceStub
    adapter: LocalAdapter
    blockstore: BlockstoreConfig
    graveler: Graveler  # for what has no gRPC call on graveler (compaction)
    store: Store  # graveler's KV, for history events written with old timestamps
    target: str  # graveler's address, for clients of its own (the CLI)

    def new_repo(self, default_days: int | None = 0) -> str:
        name = f"gc-{uuid.uuid4().hex[:10]}"
        self.stub.CreateRepository(api.CreateRepositoryRequest(name=name, storage_namespace=f"local://{name}"))
        if default_days is not None:
            self.stub.SetGCRules(
                api.SetGCRulesRequest(repository=name, rules=pb.GCRules(default_retention_days=default_days))
            )
        return name

    def upload(self, repo: str, content: bytes, backdate: bool = True) -> str:
        """Write bytes at a fresh physical address (an upload not staged yet); return the address."""
        address = f"data/{uuid.uuid4().hex}"
        self.adapter.put(f"local://{repo}", address, io.BytesIO(content), len(content))
        if backdate:
            path = self.path(repo, address)
            old = time.time() - BACKDATE_SECONDS
            os.utime(path, (old, old))
        return address

    def put(self, repo: str, branch: str, key: str, content: bytes) -> str:
        address = self.upload(repo, content)
        entry = pb.Entry(physical_address=address, size=len(content), etag=uuid.uuid4().hex)
        self.stub.StageEntry(api.StageEntryRequest(repository=repo, branch=branch, key=key, entry=entry))
        return address

    def path(self, repo: str, address: str) -> Path:
        return Path(self.adapter.root) / repo / address

    def exists(self, repo: str, address: str) -> bool:
        return self.path(repo, address).is_file()

    def read(self, repo: str, address: str) -> bytes:
        return self.path(repo, address).read_bytes()


@pytest.fixture
def gc_env(tmp_path: Path) -> Iterator[GCEnv]:
    blockstore = BlockstoreConfig(type="local", local=LocalBlockstoreConfig(path=str(tmp_path / "data")))
    with served_gc_env(tmp_path, blockstore, GravelerOptions()) as env:
        yield env


@contextmanager
def served_gc_env(tmp_path: Path, blockstore: BlockstoreConfig, options: GravelerOptions) -> Iterator[GCEnv]:
    """Graveler on a local KV under tmp_path and the local blockstore's directory, over gRPC."""
    store = open_store(DatabaseConfig(type="local", local=LocalDatabaseConfig(path=str(tmp_path / "kv.db"))))
    adapter = LocalAdapter(Path(blockstore.local.path))
    graveler = open_graveler(store, adapter, options)
    server, port = start(graveler, "127.0.0.1:0")
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield GCEnv(api_grpc.GravelerServiceStub(channel), adapter, blockstore, graveler, store, f"127.0.0.1:{port}")
    finally:
        channel.close()
        server.stop(None)
        graveler.close()
        store.close()
