"""Opening a service's KV store and block adapter, observed when the process is.

The KV layer and the block adapters know nothing of telemetry: they open bare drivers
(silt.kv.open_store, silt.block.open_adapter), and the places that build a service's stores
choose these openers instead, which wrap the driver in silt.telemetry.kv's InstrumentedStore or
silt.telemetry.block's TracedAdapter. Tools that never turn telemetry on (setup commands, the
CLI, the GC job) open theirs bare.
"""

from __future__ import annotations

from silt.block import BlockAdapter, open_adapter
from silt.config import BlockstoreConfig, DatabaseConfig
from silt.kv.store import Store, open_store
from silt.telemetry.setup import metrics_enabled, storage_spans_enabled

# The wrappers are imported inside the functions, as late as they are needed: the gateway must
# not load prometheus_client before it prepares multiprocess metrics.


def open_observed_store(config: DatabaseConfig) -> Store:
    """The store of config's driver, wrapped once if this process traces its storage calls or
    exports metrics."""
    store = open_store(config)
    if not (storage_spans_enabled() or metrics_enabled()):
        return store
    from silt.telemetry.kv import InstrumentedStore
    from silt.telemetry.tracing import tracer

    return InstrumentedStore(store, config.type, tracer() if storage_spans_enabled() else None, metrics_enabled())


def open_observed_adapter(config: BlockstoreConfig) -> BlockAdapter:
    """The adapter of config's blockstore, traced if this process traces its storage calls."""
    adapter = open_adapter(config)
    if not storage_spans_enabled():
        return adapter
    from silt.telemetry.tracing import tracer

    traced_by = tracer()
    if traced_by is None:
        return adapter
    from silt.telemetry.block import TracedAdapter

    return TracedAdapter(adapter, traced_by)
