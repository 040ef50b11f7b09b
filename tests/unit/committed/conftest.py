"""Fixtures for the committed layer: managers over a local-disk and an in-memory store."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.core.committed import ChunkingPolicy, CommittedCache, CommittedManager
from silt.block.local import LocalAdapter
from tests.unit.committed.support import MemoryAdapter

NAMESPACE = "local://repo"
MEM_NAMESPACE = "mem://repo"

# Small ranges, so a few thousand records span many ranges and tests stay fast.
SMALL_POLICY = ChunkingPolicy(boundary_modulus=64, min_records=8, max_records=512, max_bytes=1 << 20)


@pytest.fixture
def local_adapter(tmp_path: Path) -> LocalAdapter:
    return LocalAdapter(tmp_path / "store")


@pytest.fixture
def manager(local_adapter: LocalAdapter) -> CommittedManager:
    return CommittedManager(local_adapter, CommittedCache(), SMALL_POLICY)


@pytest.fixture
def memory_adapter() -> MemoryAdapter:
    return MemoryAdapter()
