"""Ship a repository's journal, lose the KV, rebuild it from the namespace alone: on every KV
driver, the repository is the same, row for row and as clients see it."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from engine.graveler import Graveler
from engine.open import open_graveler
from silt.block.local import LocalAdapter
from silt.errors import AlreadyExists
from silt.journal.rebuild import Rebuild, repository_of
from silt.journal.record import JOURNAL_PREFIX, decode_record
from silt.journal.shipper import Shipper
from silt.journal.store import JournaledStore
from silt.kv.store import Store, scan_prefix
from tests.integration.journal.workload import (
    JOURNAL_KEY,
    NEUTRAL_KEY,
    InCalls,
    api_dump,
    mixed_workload,
    raw_dump,
)


def raw(graveler: Graveler) -> Store:
    kv = graveler.refs.kv
    assert isinstance(kv, JournaledStore)
    return kv.raw


def test_a_lost_kv_is_rebuilt_from_the_namespace_alone(store: Store, empty_store: Store, tmp_path: Path) -> None:
    adapter = LocalAdapter(tmp_path / "data")
    repo = f"rebuild-{uuid.uuid4().hex[:10]}"
    graveler = open_graveler(store, adapter)
    try:
        calls = InCalls(graveler, repo)
        calls.lifecycle.create_repository(repo, f"local://{repo}", "main", False)
        mixed_workload(calls, adapter, repo)
        graveler.cleaner.flush(30)
        before_rows = raw_dump(raw(graveler), graveler, repo)
        before_api = api_dump(graveler, adapter, repo)

        shipped = Shipper(raw(graveler), adapter, hmac_key=JOURNAL_KEY).ship(repo)

        assert shipped.records > 0 and not shipped.skipped
        partitions = [p.encode() for p in before_rows]
        # Only this repository's rows: the shared `graveler` partition also holds the journal
        # rows of every other repository in the store (on Cassandra, the whole run's).
        left = [
            (p, record)
            for p in partitions
            for e in scan_prefix(raw(graveler), p, JOURNAL_PREFIX)
            if (record := decode_record(e.value)).repository == repo
        ]
        assert not left, [(p, r.event_type, r.logical_timestamp, r.writer_id[:8]) for p, r in left][:20]
    finally:
        graveler.close()

    namespace = f"local://{repo}"
    assert repository_of(adapter, namespace) == repo
    progress = Rebuild(empty_store, adapter, namespace, repo, hmac_key=JOURNAL_KEY).run()
    assert progress.records_applied == shipped.records

    rebuilt = open_graveler(empty_store, adapter)
    try:
        assert raw_dump(empty_store, rebuilt, repo) == before_rows
        assert api_dump(rebuilt, adapter, repo) == before_api
        # The ref-neutral record of a file whose branch was deleted is rebuilt with the rest.
        assert rebuilt.neutral.get(rebuilt.refs.repository(repo), NEUTRAL_KEY).size > 0
        with pytest.raises(AlreadyExists):
            Rebuild(empty_store, adapter, namespace, repo, hmac_key=JOURNAL_KEY).run()
    finally:
        rebuilt.close()
