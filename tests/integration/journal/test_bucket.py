"""Journal batches in a namespace on both block adapters: written once, listed without the
stores' own bookkeeping, read back; shipped and rebuilt through S3 as through local disk."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from silt.block.adapter import BlockAdapter
from silt.block.local import LocalAdapter
from silt.block.s3 import S3Adapter
from silt.journal.bucket import JournalBucket
from silt.journal.rebuild import Rebuild
from silt.journal.shipper import Shipper
from silt.kv.mem import MemStore
from tests.integration.journal.workload import JOURNAL_KEY
from tests.support.moto import s3_blockstore_config
from tests.unit.journal.test_ship_rebuild import PARTITIONS, state, workload


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[BlockAdapter, str]]:
    if request.param == "local":
        yield LocalAdapter(tmp_path / "blocks"), "local://bucket/repo1"
        return
    adapter = S3Adapter(s3_blockstore_config(request.getfixturevalue("moto_server"), max_retries=0))
    bucket = f"journal-{uuid.uuid4().hex[:16]}"
    adapter.client.create_bucket(Bucket=bucket)
    yield adapter, f"s3://{bucket}/repo1"


def test_batches_are_written_once_and_listed(place: tuple[BlockAdapter, str]) -> None:
    adapter, namespace = place
    bucket = JournalBucket(adapter, namespace)
    key = "_silt/journal/v1/hour=2026-01-01T00/abc.parquet"
    assert bucket.put_once(key, b"first", b"mac")
    assert not bucket.put_once(key, b"second", b"mac")  # same name: the same batch, never rewritten
    bucket.put_once("_silt/journal/v1/hour=2026-01-01T00/compacted-1/_SUCCESS", b"", b"mac")
    bucket.put_once("_silt/journal/v1/hour=2026-01-01T01/compacted-1/part-0.parquet", b"p", b"mac")
    bucket.put_once("data/not-a-batch.parquet", b"x", b"mac")

    assert bucket.batches() == [key, "_silt/journal/v1/hour=2026-01-01T01/compacted-1/part-0.parquet"]
    assert bucket.read(key) == b"first"
    assert bucket.read_mac(key) == b"mac"  # next to the batch, out of the listing


def test_ship_and_rebuild_through_each_adapter(place: tuple[BlockAdapter, str]) -> None:
    adapter, namespace = place
    kv = MemStore()
    workload(kv)
    # The workload's repository record names a local namespace; ship into this one instead.
    before = state(kv, PARTITIONS)
    shipper = Shipper(kv, adapter, batch_records=10, hmac_key=JOURNAL_KEY)
    record = next(shipper.repositories())
    record.storage_namespace = namespace
    assert shipper.ship_repository(record).records == 55

    fresh = MemStore()
    Rebuild(fresh, adapter, namespace, "repo1", hmac_key=JOURNAL_KEY).run()
    assert state(fresh, PARTITIONS) == before
