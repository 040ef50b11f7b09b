"""The journal compaction job on Spark: fewer files, only the last change of each key, and a
rebuild from the compacted journal equal to one from the original."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

import jobs.journal.compact
from jobs.gc.location import adapter_root
from jobs.journal.compact import compact_journal
from silt.block.local import LocalAdapter
from silt.config import BlockstoreConfig, LocalBlockstoreConfig
from silt.errors import InvalidArgument
from silt.journal.batch import decode_batch
from silt.journal.bucket import JournalBucket
from silt.journal.mac import mac_key_of
from silt.journal.rebuild import Rebuild
from silt.journal.shipper import Shipper
from silt.kv.mem import MemStore
from tests.unit.journal.test_ship_rebuild import JOURNAL_KEY, NAMESPACE, PARTITIONS, state, workload


@pytest.mark.parametrize("through_adapter", [False, True], ids=["hadoop", "adapter"])
def test_compaction_keeps_the_last_change_per_key(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, through_adapter: bool
) -> None:
    if through_adapter:  # as on a store no Hadoop file system reaches (Azure, GCS)
        monkeypatch.setattr(jobs.journal.compact, "namespace_root", adapter_root)
    adapter = LocalAdapter(tmp_path / "data")
    kv = MemStore()
    journal = workload(kv)
    for round_ in range(3):  # the same keys rewritten: superseded changes to drop
        for i in range(10):
            journal.mutate(b"repo1-u1_main_t1", {b"key/a%02d" % i: b"\x0a\x01" + bytes([65 + round_])})
    before = state(kv, PARTITIONS)
    Shipper(kv, adapter, batch_records=8, hmac_key=JOURNAL_KEY).ship("repo1")
    bucket = JournalBucket(adapter, NAMESPACE)
    files_before = bucket.batches()
    original = tmp_path / "original"
    shutil.copytree(tmp_path / "data", original)

    blockstore = BlockstoreConfig(type="local", local=LocalBlockstoreConfig(path=str(tmp_path / "data")))
    summary = compact_journal(spark, NAMESPACE, blockstore, older_than_hours=0, hmac_key=JOURNAL_KEY)

    files_after = bucket.batches()
    assert summary.files_in == len(files_before) > len(files_after)
    if through_adapter:  # named by the adapter path's writer
        assert all(key.rsplit("/", 1)[1].startswith("part-00") for key in files_after if "/compacted-" in key)
    assert summary.records_in == 85
    # Keys a00..a09 had 4 puts each (the workload's, then 3 rounds), and the workload's later
    # delete of a07 and rewrite of a08: all but each key's last change go, 3 x 10 + 2.
    assert summary.changes_in - summary.changes_out == 32
    records = [record for key in files_after for record in decode_batch(bucket.read(key))]
    changed = [(c.partition, c.key) for record in records for c in record.changes]
    assert len(changed) == len(set(changed))

    # The inputs went with their MACs; the output is signed as the shipper signs.
    assert not [p for p in (tmp_path / "data").rglob("_*.hmac") if "compacted-" not in str(p)]
    compacted_rebuild = MemStore()
    Rebuild(compacted_rebuild, adapter, NAMESPACE, "repo1", hmac_key=JOURNAL_KEY).run()
    assert state(compacted_rebuild, PARTITIONS) == before

    original_rebuild = MemStore()
    Rebuild(original_rebuild, LocalAdapter(original), NAMESPACE, "repo1", hmac_key=JOURNAL_KEY).run()
    assert state(original_rebuild, PARTITIONS) == before


def test_compaction_refuses_a_batch_without_a_valid_mac(spark: Any, tmp_path: Path) -> None:
    adapter = LocalAdapter(tmp_path / "data")
    kv = MemStore()
    journal = workload(kv)
    for i in range(10):
        journal.mutate(b"repo1-u1_main_t1", {b"key/a%02d" % i: b"\x0a\x01B"})
    Shipper(kv, adapter, batch_records=8, hmac_key=JOURNAL_KEY).ship("repo1")
    bucket = JournalBucket(adapter, NAMESPACE)
    files_before = bucket.batches()
    forged = files_before[-1]
    (tmp_path / "data" / mac_path_in(NAMESPACE, forged)).write_bytes(b"0" * 64)
    blockstore = BlockstoreConfig(type="local", local=LocalBlockstoreConfig(path=str(tmp_path / "data")))
    with pytest.raises(InvalidArgument, match="no valid MAC"):
        compact_journal(spark, NAMESPACE, blockstore, older_than_hours=0, hmac_key=JOURNAL_KEY)
    assert bucket.batches() == files_before  # nothing changed
    summary = compact_journal(
        spark, NAMESPACE, blockstore, older_than_hours=0, hmac_key=JOURNAL_KEY, accept_unsigned=True
    )
    assert summary.unsigned_in == 1
    Rebuild(MemStore(), adapter, NAMESPACE, "repo1", hmac_key=JOURNAL_KEY).run()  # the output is signed


def mac_path_in(namespace: str, key: str) -> str:
    name = namespace.removeprefix("local://")
    return f"{name}/{mac_key_of(key)}"
