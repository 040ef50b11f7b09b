"""The registry of block stores by scheme: which store serves a URI, what it needs configured,
and the typed errors of a scheme or type no store has."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from silt.block.adapter import ListedObject
from silt.block.local import LocalAdapter
from silt.block.registry import (
    STORES,
    list_under,
    open_adapter,
    served_by,
    store_for_scheme,
    store_for_type,
    store_for_uri,
)
from silt.config import BlockstoreConfig, LocalBlockstoreConfig
from silt.errors import ConfigError, InvalidArgument

ADAPTER_CLASSES = {
    "local": ("silt.block.local", "LocalAdapter"),
    "s3": ("silt.block.s3", "S3Adapter"),
    "azure": ("silt.block.azure", "AzureAdapter"),
    "gs": ("silt.block.gcs", "GCSAdapter"),
}


@pytest.mark.parametrize(
    ("uri", "store", "root", "key"),
    [
        ("local://repo/x/y", "local", "local://repo", "x/y"),
        ("s3://bucket/data/2024", "s3", "s3://bucket", "data/2024"),
        ("S3://bucket/k", "s3", "S3://bucket", "k"),
        ("gs://bucket/a/b", "gs", "gs://bucket", "a/b"),
        (
            "https://acct.blob.core.windows.net/container/a/b",
            "azure",
            "https://acct.blob.core.windows.net/container",
            "a/b",
        ),
        (
            "http://127.0.0.1:10000/devstoreaccount1/container/a",
            "azure",
            "http://127.0.0.1:10000/devstoreaccount1/container",
            "a",
        ),
    ],
)
def test_each_scheme_resolves_to_its_store_and_splits_at_its_root(uri: str, store: str, root: str, key: str) -> None:
    found = store_for_uri(uri)
    assert found.type == store
    assert found is store_for_type(store)
    assert found.split(uri) == (root, key)


def test_every_store_names_the_adapter_that_serves_it() -> None:
    assert {store.type for store in STORES} == set(ADAPTER_CLASSES)
    for store in STORES:
        module, name = ADAPTER_CLASSES[store.type]
        adapter_class = getattr(importlib.import_module(module), name)
        # The adapter's own label (error messages, telemetry) is its store's type.
        assert adapter_class.scheme == store.type
        for scheme in store.schemes:
            assert store_for_scheme(scheme) is store


def test_the_stores_whose_listings_name_versions_are_gcs_and_azure() -> None:
    # An import records a version only from these: S3's ListObjectsV2 names none.
    assert {store.type for store in STORES if store.lists_versions} == {"gs", "azure"}


def test_open_adapter_opens_the_configured_store(tmp_path: Path) -> None:
    adapter = open_adapter(BlockstoreConfig(type="local", local=LocalBlockstoreConfig(path=str(tmp_path))))
    assert isinstance(adapter, LocalAdapter)


@pytest.mark.parametrize("uri", ["ftp://host/x", "file:///tmp/x", "bucket/x", "", "wasb://c@a/x"])
def test_an_unknown_scheme_is_invalid_argument(uri: str) -> None:
    with pytest.raises(InvalidArgument, match="expected local:///absolute/path, s3://bucket/prefix"):
        store_for_uri(uri, "import path")
    with pytest.raises(InvalidArgument, match="no block store serves"):
        store_for_scheme(uri.partition("://")[0])


def test_an_unknown_blockstore_type_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown blockstore type 'ftp'"):
        store_for_type("ftp")
    config = BlockstoreConfig.model_construct(type="ftp")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="unknown blockstore type"):
        open_adapter(config)


def test_a_uri_of_another_store_names_the_blockstore_it_needs() -> None:
    assert served_by("gs://bucket/x", "gs", "namespace").type == "gs"
    with pytest.raises(InvalidArgument, match="needs the s3 blockstore, configured: gs"):
        served_by("s3://bucket/x", "gs", "namespace")
    with pytest.raises(InvalidArgument, match="needs the azure blockstore, configured: local"):
        served_by("https://acct.blob.core.windows.net/c/x", "local", "namespace")
    with pytest.raises(InvalidArgument, match="expected"):
        served_by("ftp://host/x", "local", "namespace")


class _Listing:
    """A store's listing as given (list_under reads nothing else of an adapter)."""

    def __init__(self, keys: list[str]) -> None:
        self.keys = keys
        self.calls: list[tuple[str, str, str]] = []

    def list_objects(self, namespace: str, prefix: str = "", after: str = "") -> Iterator[ListedObject]:
        self.calls.append((namespace, prefix, after))
        for key in self.keys:
            yield ListedObject(key, 1, "e", datetime(2026, 1, 1, tzinfo=UTC))


def test_list_under_refuses_a_listing_out_of_utf8_order_unless_told_not_to() -> None:
    # U+FFFD sorts after U+10000 as UTF-16 (Azure's order) but before it as UTF-8.
    keys = ["a", "\U00010000", "\ufffd"]
    store = _Listing(keys)
    with pytest.raises(InvalidArgument, match="out of UTF-8 key order"):
        list(list_under(store, "https://a.blob.core.windows.net/c", "p"))  # type: ignore[arg-type]
    assert store.calls == [("https://a.blob.core.windows.net/c", "p", "")]
    assert [o.key for o in list_under(store, "ns", strict=False)] == keys  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="out of UTF-8 key order"):
        list(list_under(_Listing(["a"]), "ns", after="b"))  # type: ignore[arg-type]
