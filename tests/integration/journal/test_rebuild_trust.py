"""Rebuild trusts only what a shipper wrote, and only for the repository it rebuilds: a batch
without a valid MAC is refused, and so is a signed journal whose records of the repository
change the auth partition or another repository; in both cases nothing is written."""

from __future__ import annotations

import io
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from engine.open import open_graveler
from silt.block.local import LocalAdapter
from silt.errors import NotFound
from silt.journal.batch import ShippedRecord, batch_key, decode_batch, encode_batch
from silt.journal.bucket import JournalBucket
from silt.journal.mac import mac_key_of, sign
from silt.journal.rebuild import Rebuild, RebuildProgress, Refused
from silt.journal.shipper import Shipper
from silt.journal.v1.journal_pb2 import Change, Record
from silt.kv.store import Store
from tests.integration.journal.workload import JOURNAL_KEY, InCalls, put, raw, raw_dump


@dataclass
class Shipped:
    adapter: LocalAdapter
    repo: str
    victim: str
    victim_partition: bytes
    namespace: str
    rows: dict[str, object]
    records: int


@pytest.fixture
def shipped(store: Store, tmp_path: Path) -> Shipped:
    """A small repository shipped to its namespace, next to another repository in the same KV."""
    adapter = LocalAdapter(tmp_path / "data")
    repo = f"trust-{uuid.uuid4().hex[:10]}"
    victim = f"victim-{uuid.uuid4().hex[:10]}"
    graveler = open_graveler(store, adapter)
    try:
        calls = InCalls(graveler, repo)
        calls.lifecycle.create_repository(repo, f"local://{repo}", "main", False)
        for i in range(5):
            put(calls, adapter, repo, "main", f"data/{i}")
        calls.commit(repo, "main", "first")
        put(calls, adapter, repo, "main", "staged/x")
        other = InCalls(graveler, victim)
        record = other.lifecycle.create_repository(victim, f"local://{victim}", "main", False)
        graveler.cleaner.flush(30)
        rows = raw_dump(raw(graveler), graveler, repo)
        result = Shipper(raw(graveler), adapter, hmac_key=JOURNAL_KEY).ship(repo)
    finally:
        graveler.close()
    return Shipped(
        adapter, repo, victim, f"{victim}-{record.unique_id}".encode(), f"local://{repo}", rows, result.records
    )


def _forge(shipped: Shipped, changes: list[Change]) -> str:
    """Add a batch to the namespace, signed with the services' key, holding one record of the
    repository that makes changes: the worst case of a storage-level writer (one that replays a
    signed batch, or got hold of the key, is no worse)."""
    bucket = JournalBucket(shipped.adapter, shipped.namespace)
    last = max(record.logical_timestamp for key in bucket.batches() for record in decode_batch(bucket.read(key)))
    record = Record(
        logical_timestamp=last + 1,
        writer_id="forger",
        sequence=1,
        client_id="forger",
        repository=shipped.repo,
        event_type="commit",
        changes=changes,
    )
    forged = [ShippedRecord(b"graveler", b"journal/forged", record)]
    key = batch_key(forged)
    data = encode_batch(forged)
    assert bucket.put_once(key, data, sign(JOURNAL_KEY, key, data))
    return key


def _nothing_written(kv: Store, shipped: Shipped) -> None:
    for partition in (b"graveler", b"auth", shipped.victim_partition, *(p.encode() for p in shipped.rows)):
        assert list(kv.scan(partition)) == [], partition


def _put(partition: bytes, key: bytes, value: bytes = b"\x0a\x01x") -> Change:
    return Change(partition=partition, key=key, op=Change.PUT, value=value, kind="forged")


@pytest.mark.parametrize("target", ["auth", "other repository's partition", "other repository's record"])
def test_a_signed_batch_changing_what_is_not_the_repositorys_is_refused(
    shipped: Shipped, empty_store: Store, target: str
) -> None:
    change = {
        "auth": _put(b"auth", b"attachments/users/forger/policies/FullAccess"),
        "other repository's partition": _put(shipped.victim_partition, b"branches/main"),
        "other repository's record": Change(
            partition=b"graveler", key=b"repos/" + shipped.victim.encode(), op=Change.DELETE, kind="repository"
        ),
    }[target]
    _forge(shipped, [change])
    reports: list[RebuildProgress] = []

    with pytest.raises(Refused, match="1 changes outside the repository"):
        Rebuild(
            empty_store, shipped.adapter, shipped.namespace, shipped.repo, reports.append, hmac_key=JOURNAL_KEY
        ).run()

    _nothing_written(empty_store, shipped)
    assert reports[-1].refused_changes == 1
    assert repr(change.partition if target != "other repository's record" else change.key) in reports[-1].refused_first


def test_a_batch_with_a_wrong_or_no_mac_is_refused(shipped: Shipped, empty_store: Store) -> None:
    bucket = JournalBucket(shipped.adapter, shipped.namespace)
    first = bucket.batches()[0]

    shipped.adapter.put(shipped.namespace, mac_key_of(first), io.BytesIO(b"0" * 64), 64)
    with pytest.raises(Refused, match="invalid MAC"):
        Rebuild(empty_store, shipped.adapter, shipped.namespace, shipped.repo, hmac_key=JOURNAL_KEY).run()
    # Signed with another key: as bad as none.
    with pytest.raises(Refused, match="invalid MAC"):
        Rebuild(empty_store, shipped.adapter, shipped.namespace, shipped.repo, hmac_key=b"another key 0123456789").run()
    _nothing_written(empty_store, shipped)

    shipped.adapter.delete(shipped.namespace, mac_key_of(first))
    with pytest.raises(NotFound):
        shipped.adapter.stat(shipped.namespace, mac_key_of(first))
    with pytest.raises(Refused, match="no MAC"):
        Rebuild(empty_store, shipped.adapter, shipped.namespace, shipped.repo, hmac_key=JOURNAL_KEY).run()
    _nothing_written(empty_store, shipped)

    # The one-time migration of a journal shipped before batches were signed.
    progress = Rebuild(
        empty_store, shipped.adapter, shipped.namespace, shipped.repo, hmac_key=JOURNAL_KEY, accept_unsigned=True
    ).run()
    assert progress.unsigned_batches == 1
    assert progress.records_applied == shipped.records


def test_a_batch_changed_after_signing_is_refused(shipped: Shipped, empty_store: Store) -> None:
    bucket = JournalBucket(shipped.adapter, shipped.namespace)
    key = bucket.batches()[0]
    mac = bucket.read_mac(key)
    assert mac is not None
    data = bucket.read(key)
    shipped.adapter.put(shipped.namespace, key, io.BytesIO(data + b"\x00"), len(data) + 1)

    with pytest.raises(Refused, match="invalid MAC"):
        Rebuild(empty_store, shipped.adapter, shipped.namespace, shipped.repo, hmac_key=JOURNAL_KEY).run()
    _nothing_written(empty_store, shipped)
