"""A StageEntries call's KV writes stay under the batch size Cassandra refuses.

Cassandra 2.2 to 3.5 refuse a batch over batch_size_fail_threshold_in_kb (50 KiB by default),
and every PUT of the call would fail. The test server is Cassandra 2.1, which has only the
warning threshold and logs each batch over it with its size, counted exactly as the later
versions count it for the refusal: a node started with a 50 KiB warning threshold tells which
batches 2.2 to 3.5 would refuse."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.core.deadline import NO_DEADLINE
from engine.core.entries import STAGE_WRITE_BYTES
from engine.core.values import entry_value
from engine.graveler import Graveler
from engine.open import open_graveler
from silt.block.local import LocalAdapter
from silt.graveler.v1 import model_pb2 as pb
from silt.journal.context import journal_context
from silt.kv import open_store
from tests.support.cassandra import CassandraServer, CassandraStartError

pytestmark = pytest.mark.cassandra

THRESHOLD_KIB = 50
OVER_THRESHOLD = re.compile(r"Batch of prepared statements for \[[^\]]*\] is of size (\d+), exceeding")


@pytest.fixture(scope="module")
def strict_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CassandraServer]:
    script = tmp_path_factory.mktemp("cassandra-config") / "configure.sh"
    script.write_text(
        f'sed -i "s/^batch_size_warn_threshold_in_kb:.*/batch_size_warn_threshold_in_kb: {THRESHOLD_KIB}/" "$1"\n'
    )
    try:
        server = CassandraServer.start(configure=script, heap="512M")
    except CassandraStartError as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def graveler(strict_server: CassandraServer, tmp_path: Path) -> Iterator[Graveler]:
    store = open_store(strict_server.database_config(keyspace=f"batch_{uuid.uuid4().hex[:8]}"))
    engine = open_graveler(store, LocalAdapter(tmp_path / "data"))
    engine.lifecycle.create_repository("repo", "local://repo", "main", False)
    yield engine
    engine.close()
    store.close()


def oversized_batches(server: CassandraServer) -> list[int]:
    assert server._data_dir is not None
    log = (server._data_dir / "logs" / "system.log").read_text(errors="replace")
    return [int(size) for size in OVER_THRESHOLD.findall(log)]


def test_64_small_entries_on_a_long_branch_name_stay_under_the_batch_limit(
    graveler: Graveler, strict_server: CassandraServer
) -> None:
    branch = "b" * 250  # near the 256-byte bound: every journal change repeats the token's name
    graveler.create_branch("repo", branch, "main")
    entries = [
        (f"k{i:03d}", pb.Entry(physical_address=f"data/{i:03d}", size=1, etag="e", metadata={"m": "v" * 150}))
        for i in range(64)
    ]
    # Small entries: counted by their keys and values alone, all 64 fit one write of the budget.
    assert sum(len(k) + len(v.data) + len(v.identity) for k, v in ((k, entry_value(e)) for k, e in entries)) <= (
        STAGE_WRITE_BYTES
    )
    before = oversized_batches(strict_server)
    with journal_context("object_write", "alice", "repo"):
        outcomes = graveler.stage_entries("repo", branch, entries)
    assert [outcome.result for outcome in outcomes] == ["staged"] * 64
    assert oversized_batches(strict_server)[len(before) :] == []
    page = graveler.entries.list(graveler.refs.repository("repo"), branch, "", "", "", 100, NO_DEADLINE)
    assert len(page.items) == 64
