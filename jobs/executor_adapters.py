"""Block adapters on Spark's executors: one per blockstore in each Python worker process.

A task that opened its own adapter spent 80-190 ms of CPU on it (an S3, Azure or GCS client:
endpoint resolution, credentials, a connection pool), more than many tasks' own work. A worker
runs task after task (``spark.python.worker.reuse``, on by default), and an adapter is safe to
share between them and between a task's threads, as the services share theirs. A configuration
finds its adapter by equality of the whole configuration, secrets included, so a task never gets
an adapter built for other credentials. Not by its pickle: that depends on which of the model's
strings are one object and on the order of pydantic's set of fields set, so two equal copies (one
unpickled from the driver's, one built here) can pickle to different bytes.
"""

from __future__ import annotations

import threading

from silt.block import BlockAdapter, open_adapter
from silt.config import BlockstoreConfig

# A worker serves one job's tasks at a time; a few configurations at most.
MAX_ADAPTERS = 4

_lock = threading.Lock()
# Oldest first; a copy of each configuration, so a caller that later changes its own changes no entry.
_adapters: list[tuple[BlockstoreConfig, BlockAdapter]] = []


def executor_adapter(blockstore: BlockstoreConfig) -> BlockAdapter:
    """This process's adapter for blockstore, opened on first use."""
    with _lock:
        for configuration, adapter in _adapters:
            if configuration == blockstore:
                return adapter
        if len(_adapters) >= MAX_ADAPTERS:
            del _adapters[0]
        adapter = open_adapter(blockstore)
        _adapters.append((blockstore.model_copy(deep=True), adapter))
        return adapter
