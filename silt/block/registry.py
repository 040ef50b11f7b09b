"""The block stores Silt knows, by the URI scheme of their namespaces: one table that says which
adapter serves a scheme, how a URI of it splits into the namespace of its bucket (or container)
and the key below, and how its objects are listed.

Everything that decides by scheme reads this table: opening the configured adapter
(``open_adapter``), an import's sources (engine/features/imports/locations.py) and garbage
collection's namespaces (jobs/gc/location.py). Listing is the adapter's own ``list_objects``
(silt/block/adapter.py), paged and in UTF-8 key order; import and GC list through ``list_under``
rather than talking to a store's SDK themselves.

A scheme no store serves is InvalidArgument; a blockstore type no store has is ConfigError.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from silt.block.adapter import BlockAdapter, ListedObject
from silt.config import BlockstoreConfig
from silt.errors import ConfigError, InvalidArgument
from silt.namespaces import split_store_uri


def _open_local(config: BlockstoreConfig) -> BlockAdapter:
    from silt.block.local import LocalAdapter

    return LocalAdapter(os.path.expanduser(config.local.path), sync=config.local.sync)


def _open_s3(config: BlockstoreConfig) -> BlockAdapter:
    from silt.block.s3 import S3Adapter

    return S3Adapter(config.s3)


def _open_azure(config: BlockstoreConfig) -> BlockAdapter:
    from silt.block.azure import AzureAdapter

    return AzureAdapter(config.azure)


def _open_gcs(config: BlockstoreConfig) -> BlockAdapter:
    from silt.block.gcs import GCSAdapter

    return GCSAdapter(config.gs)


@dataclass(frozen=True)
class BlockStore:
    """One kind of store: the ``blockstore.type`` that serves it, the schemes of its namespaces,
    and how its adapter is opened (imported only then: a local-only process need not pay for
    importing a cloud SDK)."""

    type: str
    schemes: tuple[str, ...]
    opener: Callable[[BlockstoreConfig], BlockAdapter]
    # How a spelled-out source (an import path) is shown to operators, in error messages.
    shape: str
    # Whether its listings name each object's version (GCS's generation, Azure's ETag), which an
    # import then records for reads to ask for. S3's do not (ListObjectsV2 has no versions), so
    # an S3 import records none, one object or many (a read of a version needs another permission).
    lists_versions: bool = False

    def split(self, uri: str) -> tuple[str, str]:
        """(the namespace of the URI's bucket or container, the key below it): ``s3://b/x/y`` is
        ("s3://b", "x/y"); ``https://a.blob.core.windows.net/c/x`` is ("https://a.blob.core.windows.net/c", "x").
        Not validated: silt/namespaces.py parses a namespace, the adapter checks a key."""
        return split_store_uri(uri)

    def open(self, config: BlockstoreConfig) -> BlockAdapter:
        return self.opener(config)


STORES: tuple[BlockStore, ...] = (
    BlockStore("local", ("local",), _open_local, "local:///absolute/path"),
    BlockStore("s3", ("s3",), _open_s3, "s3://bucket/prefix"),
    BlockStore(
        "azure", ("https", "http"), _open_azure, "https://<account>.blob.core.windows.net/<container>/prefix", True
    ),
    BlockStore("gs", ("gs",), _open_gcs, "gs://bucket/prefix", True),
)
_BY_SCHEME = {scheme: store for store in STORES for scheme in store.schemes}
_BY_TYPE = {store.type: store for store in STORES}


def scheme_of(uri: str) -> str:
    """The URI's scheme, lowercase ("" when it has none)."""
    scheme, sep, _ = uri.partition("://")
    return scheme.lower() if sep else ""


def expected_shapes() -> str:
    """Every store's spelling, for a message that refuses an unknown one."""
    return ", ".join(store.shape for store in STORES)


def store_for_scheme(scheme: str, what: str = "storage namespace") -> BlockStore:
    """The store whose namespaces have this scheme, or InvalidArgument."""
    store = _BY_SCHEME.get(scheme.lower())
    if store is None:
        raise InvalidArgument(f"{what}: no block store serves {scheme!r} URIs (expected {expected_shapes()})")
    return store


def store_for_uri(uri: str, what: str = "storage namespace") -> BlockStore:
    """The store a namespace or object URI belongs to, or InvalidArgument."""
    if scheme_of(uri) not in _BY_SCHEME:
        raise InvalidArgument(f"{what} {uri!r}: expected {expected_shapes()}")
    return _BY_SCHEME[scheme_of(uri)]


def store_for_type(blockstore_type: str) -> BlockStore:
    """The store of a ``blockstore.type``, or ConfigError."""
    store = _BY_TYPE.get(blockstore_type)
    if store is None:
        raise ConfigError(f"blockstore.type: unknown blockstore type {blockstore_type!r}")
    return store


def served_by(uri: str, blockstore_type: str, what: str) -> BlockStore:
    """The store of the URI when the configured blockstore serves it; InvalidArgument naming the
    blockstore it needs otherwise (or the spellings expected, for a scheme no store serves)."""
    store = store_for_uri(uri, what)
    if store.type != blockstore_type:
        raise InvalidArgument(
            f"{what} {uri!r}: {scheme_of(uri)}:// needs the {store.type} blockstore, configured: {blockstore_type}"
        )
    return store


def open_adapter(config: BlockstoreConfig) -> BlockAdapter:
    """The adapter for the blockstore section of the configuration, bare: a service opens its
    adapter through silt.telemetry.stores.open_observed_adapter, which traces it when the process traces."""
    return store_for_type(config.type).open(config)


def list_under(
    adapter: BlockAdapter, namespace: str, prefix: str = "", after: str = "", *, strict: bool = True
) -> Iterator[ListedObject]:
    """The objects under `namespace` whose keys start with `prefix` and sort after `after`, page by
    page in UTF-8 key order, as the adapter lists them (its own names, ``.silt-*``, never). Keys
    are relative to the namespace.

    strict: a listing that breaks the order fails (InvalidArgument), as an import must (its
    metarange is written in key order; Azure orders characters beyond the Basic Multilingual
    Plane otherwise). Not strict: the store's order is taken as it comes (GC, which at worst
    stops a range early and so keeps an object it could have removed)."""
    if not strict:
        yield from adapter.list_objects(namespace, prefix, after)
        return
    last = after.encode()
    for item in adapter.list_objects(namespace, prefix, after):
        key = item.key.encode()
        if last and key <= last:
            raise InvalidArgument(
                f"listing {namespace} {prefix!r}: the store listed {item.key!r} after {last.decode()!r}, "
                "out of UTF-8 key order (Azure orders characters beyond the Basic Multilingual Plane otherwise)"
            )
        last = key
        yield item
