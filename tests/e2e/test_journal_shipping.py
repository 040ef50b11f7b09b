"""The compactor's shipping loop, as `make run` starts it: journal rows leave graveler's KV for
the repository's namespace on their own, every few seconds."""

from __future__ import annotations

from pathlib import Path

import pytest

from silt.block.local import LocalAdapter
from silt.graveler.v1 import graveler_pb2 as api
from silt.journal.batch import decode_batch
from silt.journal.bucket import JournalBucket
from silt.launcher import Stack
from tests.e2e.conftest import graveler_stub, stage_tree
from tests.support.wait import wait_until


def test_the_compactor_ships_journals_in_the_background(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SILT_COMPACTOR_JOURNAL_SHIP_INTERVAL_SECONDS", "1")
    services = ["auth", "graveler", "compactor"]
    with Stack(tmp_path, ports=dict.fromkeys(services, 0), services=services, on_event=lambda _: None) as stack:
        graveler = graveler_stub(stack)
        graveler.CreateRepository(
            api.CreateRepositoryRequest(name="shipped", storage_namespace="local://shipped"), timeout=30
        )
        keys = [f"k/{i:03d}" for i in range(50)]
        stage_tree(stack, "shipped", "main", keys)
        assert stack.config is not None
        bucket = JournalBucket(LocalAdapter(stack.config.blockstore.local.path), "local://shipped")

        def staged_keys_shipped() -> set[str]:
            found = set()
            for key in bucket.batches():
                for record in decode_batch(bucket.read(key)):
                    found |= {c.key[len(b"key/") :].decode() for c in record.changes if c.kind == "staged"}
            return found if set(keys) <= found else set()

        wait_until(staged_keys_shipped, 60, "the compactor shipping the 50 staged writes", interval=0.5)
