"""Block adapters on Spark's executors: one per blockstore in each Python worker process.

A task that opened its own adapter spent 80-190 ms of CPU on it (an S3, Azure or GCS client:
endpoint resolution, credentials, a connection pool), more than many tasks' own work. A worker
runs task after task (``spark.python.worker.reuse``, on by default), and an adapter is safe to
share between them and between a task's threads, as the services share theirs. The key is the
whole configuration, secrets included, so a task never gets an adapter built for other
credentials.
"""

from __future__ import annotations

import pickle
import threading

from silt.block import BlockAdapter, open_adapter
from silt.config import BlockstoreConfig

# A worker serves one job's tasks at a time; a few configurations at most.
MAX_ADAPTERS = 4

_lock = threading.Lock()
_adapters: dict[bytes, BlockAdapter] = {}


def executor_adapter(blockstore: BlockstoreConfig) -> BlockAdapter:
    """This process's adapter for blockstore, opened on first use."""
    key = pickle.dumps(blockstore)
    with _lock:
        adapter = _adapters.get(key)
        if adapter is None:
            if len(_adapters) >= MAX_ADAPTERS:
                del _adapters[next(iter(_adapters))]  # the oldest
            adapter = _adapters[key] = open_adapter(blockstore)
        return adapter
