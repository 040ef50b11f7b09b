"""Block adapters: where object bytes live (docs/architecture.md, "Block adapters").

``open_adapter`` picks the adapter named by ``blockstore.type``; the adapters themselves
live in silt/block/local.py, s3.py, azure.py and gcs.py, the interface in silt/block/adapter.py.
"""

from __future__ import annotations

import os

from silt.block.adapter import CHUNK_SIZE, BlockAdapter, ObjectStat, PartInfo, PutResult
from silt.config import BlockstoreConfig
from silt.errors import ConfigError

__all__ = [
    "CHUNK_SIZE",
    "BlockAdapter",
    "ObjectStat",
    "PartInfo",
    "PutResult",
    "open_adapter",
]


def open_adapter(config: BlockstoreConfig) -> BlockAdapter:
    """The adapter for the blockstore section of the configuration, bare: a service opens its
    adapter through silt.telemetry.stores.open_observed_adapter, which traces it when the process traces."""
    # Imported here: a local-only process need not pay for importing a cloud SDK.
    if config.type == "local":
        from silt.block.local import LocalAdapter

        return LocalAdapter(os.path.expanduser(config.local.path))
    if config.type == "s3":
        from silt.block.s3 import S3Adapter

        return S3Adapter(config.s3)
    if config.type == "azure":
        from silt.block.azure import AzureAdapter

        return AzureAdapter(config.azure)
    if config.type == "gs":
        from silt.block.gcs import GCSAdapter

        return GCSAdapter(config.gs)
    raise ConfigError(f"blockstore.type: unknown blockstore type {config.type!r}")
