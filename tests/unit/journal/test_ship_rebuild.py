"""Shipping and rebuild over journal rows written by hand, on the mem KV and the local block store."""

from __future__ import annotations

import pytest

from silt.block.local import LocalAdapter
from silt.errors import AlreadyExists
from silt.graveler.v1 import model_pb2 as pb
from silt.journal.batch import decode_batch
from silt.journal.bucket import JournalBucket
from silt.journal.envelope import wrap
from silt.journal.rebuild import Rebuild, RebuildProgress
from silt.journal.record import JOURNAL_PREFIX, record_key
from silt.journal.shipper import Shipper
from silt.journal.v1.journal_pb2 import Change, Record
from silt.kv.mem import MemStore
from silt.kv.store import Store, scan_prefix

NAMESPACE = "local://bucket/repo1"
# Stands for the services' journal MAC key (graveler.journal.hmac_key).
JOURNAL_KEY = b"journal test key 0123456789abcdef"
PARTITION = b"repo1-u1"
TOKEN = "repo1-u1_main_t1"
T0 = 1_763_900_000_000_000  # microseconds, an hour boundary is crossed below


class Journal:
    """Writes mutations with their journal record in the same apply, as graveler does."""

    def __init__(self, kv: Store) -> None:
        self.kv = kv
        self.sequence = 0
        self.ts = T0

    def mutate(
        self, partition: bytes, puts: dict[bytes, bytes], deletes: tuple[bytes, ...] = (), step: int = 1
    ) -> None:
        self.ts += step
        self.sequence += 1
        record = Record(
            logical_timestamp=self.ts,
            writer_id="w" * 32,
            sequence=self.sequence,
            repository="repo1",
            repository_partition=PARTITION.decode(),
            event_type="test",
        )
        stored = {key: wrap(self.ts, value) for key, value in puts.items()}
        for key, value in stored.items():
            record.changes.append(Change(partition=partition, key=key, op=Change.PUT, value=value, kind="x"))
        for key in deletes:
            record.changes.append(Change(partition=partition, key=key, op=Change.DELETE, kind="x"))
        row = record_key(self.ts, record.writer_id, record.sequence)
        self.kv.apply(partition, [*stored.items(), (row, record.SerializeToString())], list(deletes))


def workload(kv: Store) -> Journal:
    journal = Journal(kv)
    repo = pb.Repository(name="repo1", storage_namespace=NAMESPACE, default_branch="main", unique_id="u1")
    branch = pb.Branch(name="main", commit_id="c0", staging_token=TOKEN)
    journal.mutate(PARTITION, {b"branches/main": branch.SerializeToString(), b"commits/c0": b"\x0a\x02c0"})
    journal.mutate(b"graveler", {b"repos/repo1": repo.SerializeToString()})
    for i in range(50):
        journal.mutate(TOKEN.encode(), {b"key/a%02d" % i: b"\x0a\x01v"})
    journal.mutate(TOKEN.encode(), {}, deletes=(b"key/a07",), step=3_600_000_000)  # an hour later
    journal.mutate(TOKEN.encode(), {b"key/a08": b"\x0a\x02v2"})
    journal.mutate(PARTITION, {b"tags/v1": b"\x0a\x02c0"})
    return journal


def state(kv: Store, partitions: list[bytes]) -> dict[bytes, dict[bytes, bytes]]:
    """Every non-journal, non-shipper row of partitions."""
    return {
        partition: {
            entry.key: entry.value
            for entry in kv.scan(partition)
            if not entry.key.startswith(JOURNAL_PREFIX) and not entry.key.startswith(b"journal_ship/")
        }
        for partition in partitions
    }


PARTITIONS = [b"graveler", PARTITION, TOKEN.encode()]


def test_ship_moves_every_row_then_rebuild_restores_the_state(tmp_path: object) -> None:
    adapter = LocalAdapter(str(tmp_path))
    kv = MemStore()
    workload(kv)
    before = state(kv, PARTITIONS)

    result = Shipper(kv, adapter, batch_records=5, hmac_key=JOURNAL_KEY).ship("repo1")

    assert result.records == 55
    assert not any(list(scan_prefix(kv, p, JOURNAL_PREFIX)) for p in PARTITIONS)
    keys = JournalBucket(adapter, NAMESPACE).batches()
    assert sorted(keys) == sorted(set(result.keys))
    assert {key.split("/")[3] for key in keys} == {"hour=2025-11-23T12", "hour=2025-11-23T13"}
    shipped = [record for key in keys for record in decode_batch(JournalBucket(adapter, NAMESPACE).read(key))]
    assert len(shipped) == 55 and len({(r.writer_id, r.sequence) for r in shipped}) == 55

    fresh = MemStore()
    progress = Rebuild(fresh, adapter, NAMESPACE, "repo1", hmac_key=JOURNAL_KEY).run()

    assert progress.records_applied == 55
    assert state(fresh, PARTITIONS) == before
    with pytest.raises(AlreadyExists):
        Rebuild(fresh, adapter, NAMESPACE, "repo1", hmac_key=JOURNAL_KEY).run()


def test_reshipping_the_same_rows_names_the_same_batch(tmp_path: object) -> None:
    adapter = LocalAdapter(str(tmp_path))
    kv = MemStore()
    workload(kv)
    copy = MemStore()
    for partition in PARTITIONS:
        for entry in kv.scan(partition):
            copy.set(partition, entry.key, entry.value)

    first = Shipper(kv, adapter, hmac_key=JOURNAL_KEY).ship("repo1")
    again = Shipper(copy, adapter, hmac_key=JOURNAL_KEY).ship(
        "repo1"
    )  # a shipper that crashed before deleting the rows

    assert again.keys == first.keys
    assert again.batches_written == 0 and again.batches_existing == len(first.keys)


def test_an_interrupted_rebuild_resumes_where_it_stopped(tmp_path: object) -> None:
    adapter = LocalAdapter(str(tmp_path))
    kv = MemStore()
    workload(kv)
    before = state(kv, PARTITIONS)
    Shipper(kv, adapter, batch_records=7, hmac_key=JOURNAL_KEY).ship("repo1")

    class Interrupted(Exception):
        pass

    def stop_after_first_hour(progress: RebuildProgress) -> None:
        if progress.records_applied >= 20:
            raise Interrupted

    fresh = MemStore()
    with pytest.raises(Interrupted):
        Rebuild(
            fresh,
            adapter,
            NAMESPACE,
            "repo1",
            report=stop_after_first_hour,
            checkpoint_records=10,
            hmac_key=JOURNAL_KEY,
        ).run()
    assert list(scan_prefix(fresh, b"graveler", b"repos/")) == []  # not visible half-built

    progress = Rebuild(fresh, adapter, NAMESPACE, "repo1", hmac_key=JOURNAL_KEY).run()

    assert progress.resumed and 0 < progress.records_applied < 55
    assert state(fresh, PARTITIONS) == before


def test_a_second_shipper_is_refused_while_the_lease_is_held(tmp_path: object) -> None:
    adapter = LocalAdapter(str(tmp_path))
    kv = MemStore()
    workload(kv)
    now = [1000.0]
    holder = Shipper(kv, adapter, lease_seconds=60, clock=lambda: now[0], hmac_key=JOURNAL_KEY)
    assert holder._take_lease(PARTITION)

    refused = Shipper(kv, adapter, lease_seconds=60, clock=lambda: now[0], hmac_key=JOURNAL_KEY).ship("repo1")
    assert refused.skipped and refused.records == 0

    now[0] += 61  # the holder crashed: its lease runs out
    taken = Shipper(kv, adapter, lease_seconds=60, clock=lambda: now[0], hmac_key=JOURNAL_KEY).ship("repo1")
    assert taken.records == 55
