"""Block adapters: where object bytes live (docs/architecture.md, "Block adapters").

``open_adapter`` picks the adapter named by ``blockstore.type`` from the registry of stores by
scheme (silt/block/registry.py); the adapters themselves live in silt/block/local.py, s3.py,
azure.py and gcs.py, the interface in silt/block/adapter.py, what they share in common.py.
"""

from __future__ import annotations

from silt.block.adapter import CHUNK_SIZE, BlockAdapter, ObjectStat, PartInfo, PutResult
from silt.block.registry import open_adapter

__all__ = [
    "CHUNK_SIZE",
    "BlockAdapter",
    "ObjectStat",
    "PartInfo",
    "PutResult",
    "open_adapter",
]
