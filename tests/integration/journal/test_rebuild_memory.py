"""Rebuild streams its records: the memory it holds does not grow with the records of an hour."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

from silt.block.local import LocalAdapter
from silt.journal.rebuild import Rebuild
from silt.journal.shipper import Shipper
from silt.kv.mem import MemStore
from tests.unit.journal.test_ship_rebuild import JOURNAL_KEY, NAMESPACE, TOKEN, workload

VALUE = b"\x0a" + bytes(1000)  # about what a staged entry's stored value weighs
KEYS = 50  # rewritten over and over: the rebuilt state stays the same size whatever the records


def _peak_of_rebuild(tmp_path: Path, records: int) -> int:
    adapter = LocalAdapter(tmp_path / f"data-{records}")
    kv = MemStore()
    journal = workload(kv)
    for i in range(records):  # all within one hour: 1 µs apart
        journal.mutate(TOKEN.encode(), {b"key/m%03d" % (i % KEYS): VALUE + i.to_bytes(4, "big")})
    Shipper(kv, adapter, batch_records=2_000, hmac_key=JOURNAL_KEY).ship("repo1")
    target = MemStore()
    tracemalloc.start()
    try:
        progress = Rebuild(target, adapter, NAMESPACE, "repo1", hmac_key=JOURNAL_KEY).run()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert progress.records_applied == records + 55
    return peak


def test_rebuild_memory_does_not_grow_with_the_records_of_an_hour(tmp_path: Path) -> None:
    small = _peak_of_rebuild(tmp_path, 2_000)
    large = _peak_of_rebuild(tmp_path, 16_000)
    # Eight times the records in the same hour: holding them would take ~8x the memory.
    assert large < 8 * 1024 * 1024, (small, large)
    assert large < 2 * small, (small, large)
