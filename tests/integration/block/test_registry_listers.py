"""The one lister import and garbage collection share (silt/block/registry.py list_under), against
an S3 store (moto) with more keys than one ListObjectsV2 page (the adapter's pages made 10 keys
long, so that the module puts 30 objects, not a thousand): every key once, in UTF-8 order,
relative to the namespace, and the adapter's own names never."""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from engine.features.imports.listing import list_store
from engine.features.imports.locations import COMMON_PREFIX, OBJECT, ImportRules, check_sources
from jobs.gc.listing import _adapter_lister, _key_ranges
from silt.block.external import ExternalFiles
from silt.block.registry import list_under
from silt.block.s3 import S3Adapter
from silt.config import BlockstoreConfig
from silt.errors import NotFound
from tests.integration.block.conftest import _empty_bucket, count_listing_calls
from tests.support.moto import s3_blockstore_config

pytestmark = pytest.mark.s3

# More than a page of keys, so that every lister must follow a continuation.
PAGE = 10


LISTED = sorted(f"repo/data/{i:05x}" for i in range(PAGE + 7))
IMPORTED = sorted(f"in/2024-{i:04d}" for i in range(5))
OTHERS = ["repo/.silt-uploads/x", "repo/_silt/meta", "repo/a-first", "repo/data/", "repo/zzz-last", "other/data/00"]
OTHERS += ["in-not/x", "in/.silt-x"]


@pytest.fixture(scope="module")
def filled(s3_adapter: S3Adapter) -> Iterator[str]:
    """One bucket for the module, listed by s3_adapter in pages of PAGE keys."""
    bucket = f"silt-test-{uuid.uuid4().hex[:20]}"
    s3_adapter.client.create_bucket(Bucket=bucket)

    def put(key: str) -> None:
        s3_adapter.client.put_object(Bucket=bucket, Key=key, Body=key.encode())

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(put, [*LISTED, *IMPORTED, *OTHERS]))
    s3_adapter.list_page_size = PAGE  # set only here: a failed fixture leaves the session's adapter as it was
    try:
        yield bucket
    finally:
        s3_adapter.list_page_size = None
        _empty_bucket(s3_adapter.client, bucket)


def test_list_under_pages_through_a_prefix(s3_adapter: S3Adapter, filled: str, monkeypatch: pytest.MonkeyPatch) -> None:
    s3_bucket, keys = filled, LISTED
    calls = count_listing_calls(monkeypatch)
    listed = [o.key for o in list_under(s3_adapter, f"s3://{s3_bucket}/repo", "data/")]
    # A folder placeholder is an object like any other here: what to do with it is the caller's.
    assert listed == ["data/", *(k.removeprefix("repo/") for k in keys)]
    assert len(calls) == 2, calls  # the placeholder and 17 keys: a page and a continuation
    after = [o.key for o in list_under(s3_adapter, f"s3://{s3_bucket}/repo", "data/", after="data/0000b")]
    assert after == [k.removeprefix("repo/") for k in keys if k > "repo/data/0000b"]
    # The adapter's own names are never listed.
    assert [o.key for o in list_under(s3_adapter, f"s3://{s3_bucket}/repo", ".silt")] == []


def test_an_import_lists_an_s3_source_through_the_adapter(s3_adapter: S3Adapter, filled: str) -> None:
    s3_bucket, keys = filled, IMPORTED
    rules = ImportRules("s3", (f"s3://{s3_bucket}/",), ExternalFiles(()))
    (prefix, one), _ = check_sources(
        [(COMMON_PREFIX, f"s3://{s3_bucket}/in/2024", "dest/"), (OBJECT, f"s3://{s3_bucket}/in/2024-0001", "one")],
        rules,
        f"s3://{s3_bucket}/repo",
    )
    assert (prefix.scheme, prefix.bucket, prefix.key) == ("store", f"s3://{s3_bucket}", "in/2024")
    found = list(list_store(s3_adapter, prefix))
    assert [f.name for f in found] == keys
    assert prefix.address_of(found[0].name) == f"s3://{s3_bucket}/in/2024-0000"
    assert prefix.destination_of(found[0].name) == "dest/2024-0000"
    assert found[1].size == len(keys[1]) and len(found[1].etag) == 32 and found[1].mtime_ns > 0
    (only,) = list_store(s3_adapter, one)
    assert (only.name, only.size, only.etag) == ("in/2024-0001", found[1].size, found[1].etag)
    (gone,), _ = check_sources([(OBJECT, f"s3://{s3_bucket}/in/none", "x")], rules, f"s3://{s3_bucket}/repo")
    with pytest.raises(NotFound, match="no such object"):
        list(list_store(s3_adapter, gone))


def test_gc_lists_every_key_of_an_s3_namespace_once_through_its_ranges(filled: str, moto_server: str) -> None:
    namespace = f"s3://{filled}/repo"
    lister = _adapter_lister(BlockstoreConfig(type="s3", s3=s3_blockstore_config(moto_server, max_retries=0)))
    tasks = _key_ranges(namespace)
    assert len(tasks) > 2
    rows = [row for task in tasks for row in lister(task)]
    listed = [key for key, _, _ in rows]
    # Not Silt's metadata, the adapter's names or a folder placeholder; nothing outside the namespace.
    expected = sorted(k.removeprefix("repo/") for k in [*LISTED, "repo/a-first", "repo/zzz-last"])
    assert sorted(listed) == expected and len(listed) == len(set(listed))
    assert all(size == len(f"repo/{key}") and mtime > 0 for key, size, mtime in rows)


def test_gc_listing_of_a_missing_bucket_is_not_found(s3_adapter: S3Adapter) -> None:
    with pytest.raises(NotFound):
        list(list_under(s3_adapter, "s3://no-such-bucket-here/repo"))


def test_a_put_object_key_is_listed_by_its_relative_name(s3_adapter: S3Adapter, s3_bucket: str) -> None:
    s3_adapter.put(f"s3://{s3_bucket}/ns", "k/one", io.BytesIO(b"1"), 1)
    (listed,) = list_under(s3_adapter, f"s3://{s3_bucket}/ns")
    assert (listed.key, listed.size) == ("k/one", 1)
    (stat,) = list_under(s3_adapter, f"s3://{s3_bucket}", "ns/k/")
    assert stat.key == "ns/k/one"


def test_an_s3_object_source_records_no_version_as_its_listing_would_not(s3_adapter: S3Adapter) -> None:
    bucket = f"silt-test-{uuid.uuid4().hex[:20]}"
    s3_adapter.client.create_bucket(Bucket=bucket)
    try:
        s3_adapter.client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        s3_adapter.put(f"s3://{bucket}", "in/one", io.BytesIO(b"1"), 1)
        assert s3_adapter.stat(f"s3://{bucket}", "in/one").version != ""
        rules = ImportRules("s3", (f"s3://{bucket}/",), ExternalFiles(()))
        (one, prefix), _ = check_sources(
            [(OBJECT, f"s3://{bucket}/in/one", "one"), (COMMON_PREFIX, f"s3://{bucket}/in/", "all/")],
            rules,
            f"s3://{bucket}/repo",
        )
        (by_stat,) = list_store(s3_adapter, one)
        (by_listing,) = list_store(s3_adapter, prefix)
        assert by_stat == by_listing and by_stat.version == ""
    finally:
        for version in s3_adapter.client.list_object_versions(Bucket=bucket).get("Versions", []):
            s3_adapter.client.delete_object(Bucket=bucket, Key=version["Key"], VersionId=version["VersionId"])
        s3_adapter.client.delete_bucket(Bucket=bucket)
