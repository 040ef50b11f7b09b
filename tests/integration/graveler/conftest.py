"""A real graveler gRPC server per test, on each KV driver, with a local-disk object store."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest

from engine.core.committed.manager import CommittedManager
from engine.graveler import Graveler, GravelerOptions
from engine.open import open_graveler
from engine.reads import ReadEngine
from services.graveler.server import start
from silt.block.local import LocalAdapter
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import graveler_pb2_grpc as api_grpc
from silt.graveler.v1 import model_pb2 as pb
from silt.journal.store import JournaledStore
from silt.kv import Store
from silt.kv.read_only import ReadOnlyStore


@dataclass
class GravelerEnv:
    stub: api_grpc.GravelerServiceStub
    graveler: Graveler
    data_root: Path
    # Graveler's reader as the edge runs it beside graveler: its own caches, a read-only store
    # (graveler_env's; None where a test builds its own environment without one).
    reads: ReadEngine | None = None
    port: int = 0  # where the gRPC server listens (0: not said)

    def new_repo(self, prefix: str = "repo", default_branch: str = "main") -> str:
        # Unique names: the Cassandra leg shares one keyspace across tests.
        name = f"{prefix}-{uuid.uuid4().hex[:12]}"
        self.stub.CreateRepository(
            api.CreateRepositoryRequest(name=name, storage_namespace=f"local://{name}", default_branch=default_branch)
        )
        return name

    def put(self, repo: str, branch: str, key: str, content: str = "") -> pb.Entry:
        entry = pb.Entry(physical_address=f"data/{uuid.uuid4().hex}", size=len(content), etag=content or key)
        self.stub.StageEntry(api.StageEntryRequest(repository=repo, branch=branch, key=key, entry=entry))
        return entry

    def etag(self, repo: str, ref: str, key: str) -> str:
        return self.stub.StatEntry(api.StatEntryRequest(repository=repo, ref=ref, key=key)).entry.etag

    def commit(self, repo: str, branch: str, message: str = "commit", **kwargs: Any) -> api.CommitInfo:
        return self.stub.Commit(api.CommitRequest(repository=repo, branch=branch, message=message, **kwargs))

    def list_all(self, repo: str, ref: str, prefix: str = "", delimiter: str = "", amount: int = 0) -> list[str]:
        out: list[str] = []
        after = ""
        while True:
            page = self.stub.ListEntries(
                api.ListEntriesRequest(
                    repository=repo, ref=ref, prefix=prefix, delimiter=delimiter, after=after, amount=amount
                )
            )
            out.extend(item.key for item in page.items)
            if not page.has_more:
                return out
            after = page.items[-1].key


@pytest.fixture
def env(store: Store, tmp_path: Path) -> Iterator[GravelerEnv]:
    yield from graveler_env(store, tmp_path)


def graveler_env(
    store: Store,
    tmp_path: Path,
    options: GravelerOptions | None = None,
    interceptors: Sequence[grpc.ServerInterceptor] = (),
) -> Iterator[GravelerEnv]:
    """A graveler gRPC server on store (with options, or the defaults, and the server
    interceptors given), for as long as the generator runs."""
    adapter = LocalAdapter(tmp_path / "data")
    graveler = open_graveler(store, adapter, options)
    server, port = start(graveler, "127.0.0.1:0", interceptors)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    reads = ReadEngine(
        JournaledStore(ReadOnlyStore(store), enabled=False), CommittedManager(LocalAdapter(tmp_path / "data"))
    )
    try:
        yield GravelerEnv(api_grpc.GravelerServiceStub(channel), graveler, tmp_path / "data", reads, port)
    finally:
        channel.close()
        server.stop(None)
        graveler.close()
