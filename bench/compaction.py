"""`make bench-compaction`: staging compaction on the `local` driver, one JSON object per line
(docs/design/compaction.md).

A branch of 1,000,000 committed entries whose first 500,000 (in key order) are deleted in
staging — the shape that hurts lakeFS's listings too, where every listing walks the tombstones before it reaches
a live entry. Prints the first 1,000-entry page and a whole listing before and after a
compaction, the compaction itself (through the compactor service), the p99 of staging
writes while it runs against idle, and a stat of a missing key with 20 sealed tokens before
and after they are compacted.

Auth, graveler and the compactor run as their own processes (as `make run` starts them);
this process is the client, signed as the admin. Bulk setup (the committed entries and the
tombstones) goes through the same engine code in-process, on the same SQLite file and data
directory: staging half a million deletes one RPC at a time would measure nothing asked for.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import grpc

from bench.graveler import entry_for, import_entries, key_for
from bench.report import emit, p99
from engine.core.deadline import NO_DEADLINE
from engine.core.model import StagingToken
from engine.core.values import TOMBSTONE
from engine.graveler import Graveler
from engine.open import open_graveler
from silt.block.local import LocalAdapter
from silt.compactor.v1 import compactor_pb2 as capi
from silt.compactor.v1 import compactor_pb2_grpc as capi_grpc
from silt.config import DatabaseConfig, LocalDatabaseConfig
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import graveler_pb2_grpc as api_grpc
from silt.kv import open_store
from silt.launcher import Stack
from silt.rpc.signing import signed_channel
from tests.support.wait import wait_until

REPO = "bench-compaction"
SEALED_TOKENS = 20


@contextmanager
def stack(workdir: Path) -> Iterator[tuple[api_grpc.GravelerServiceStub, capi_grpc.CompactorServiceStub]]:
    services = ["auth", "graveler", "compactor"]
    with Stack(workdir, ports=dict.fromkeys(services, 0), services=services, log_level="WARN") as s:
        assert s.admin is not None
        graveler = signed_channel(s.endpoints["graveler"], s.admin)
        compactor = signed_channel(s.endpoints["compactor"], s.admin)
        try:
            grpc.channel_ready_future(graveler).result(timeout=60)
            grpc.channel_ready_future(compactor).result(timeout=60)
            yield api_grpc.GravelerServiceStub(graveler), capi_grpc.CompactorServiceStub(compactor)
        finally:
            graveler.close()
            compactor.close()


def sorted_keys(count: int) -> list[str]:
    return sorted((key_for(i) for i in range(count)), key=str.encode)


def stage_tombstones(engine: Graveler, keys: list[str]) -> StagingToken:
    """Staged deletes of keys, written straight into the branch's staging token; the token."""
    token = StagingToken(engine.refs.get_branch(engine.refs.repository(REPO), "main").branch.staging_token)
    for key in keys:
        engine.staging.set(token, key.encode(), TOMBSTONE)
    return token


def tokens_dropped(engine: Graveler, tokens: list[StagingToken]) -> bool:
    """Whether the compactor's background drop of compacted tokens is done."""
    return all(next(engine.staging.scan(token), None) is None for token in tokens)


def first_page(stub: api_grpc.GravelerServiceStub) -> tuple[float, str]:
    started = time.perf_counter()
    page = stub.ListEntries(api.ListEntriesRequest(repository=REPO, ref="main", amount=1000), timeout=600)
    elapsed = time.perf_counter() - started
    assert len(page.items) == 1000
    return elapsed, page.items[0].key


def best_first_page(stub: api_grpc.GravelerServiceStub, tries: int) -> tuple[float, str]:
    # The best of a few: the machine is shared, the first call also warms the range cache.
    results = [first_page(stub) for _ in range(tries)]
    return min(results)


def whole_listing(stub: api_grpc.GravelerServiceStub) -> tuple[float, int]:
    started = time.perf_counter()
    listed, after = 0, ""
    while True:
        page = stub.ListEntries(api.ListEntriesRequest(repository=REPO, ref="main", after=after, amount=1000))
        listed += len(page.items)
        if not page.has_more:
            return time.perf_counter() - started, listed
        after = page.items[-1].key


def missing_stat(stub: api_grpc.GravelerServiceStub, samples: int) -> float:
    """Median time of a stat of a key that is in no token and not committed (NOT_FOUND)."""
    times = []
    for i in range(samples):
        started = time.perf_counter()
        try:
            stub.StatEntry(api.StatEntryRequest(repository=REPO, ref="main", key=f"missing/{i:06d}"))
            raise AssertionError("a missing key was found")
        except grpc.RpcError as exc:
            assert exc.code() == grpc.StatusCode.NOT_FOUND, exc
        times.append(time.perf_counter() - started)
    return statistics.median(times)


class Writer(threading.Thread):
    """Staging writes through graveler's API, timed one by one, until stopped."""

    def __init__(self, stub: api_grpc.GravelerServiceStub, prefix: str) -> None:
        super().__init__(daemon=True)
        self.stub = stub
        self.prefix = prefix
        self.samples: list[float] = []
        self.stop_event = threading.Event()

    def write(self) -> None:
        i = len(self.samples)
        started = time.perf_counter()
        request = api.StageEntryRequest(
            repository=REPO, branch="main", key=f"{self.prefix}/{i:08d}", entry=entry_for(i)
        )
        self.stub.StageEntry(request, timeout=30)
        self.samples.append(time.perf_counter() - started)

    def run(self) -> None:
        while not self.stop_event.is_set():
            self.write()


def timed_writes(stub: api_grpc.GravelerServiceStub, prefix: str, count: int) -> list[float]:
    writer = Writer(stub, prefix)
    for _ in range(count):
        writer.write()
    return writer.samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--committed", type=int, default=1_000_000)
    parser.add_argument("--deleted", type=int, default=500_000)
    parser.add_argument("--rounds", type=int, default=3, help="compactions timed, each against its own idle writes")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="silt-bench-") as tmp:
        workdir = Path(tmp)
        kv = open_store(DatabaseConfig(type="local", local=LocalDatabaseConfig(path=str(workdir / "metadata.db"))))
        engine = open_graveler(kv, LocalAdapter(workdir / "data"))
        try:
            with stack(workdir) as (stub, compactor):
                run(args, engine, stub, compactor)
        finally:
            engine.close()
            kv.close()


def run(
    args: argparse.Namespace,
    engine: Graveler,
    stub: api_grpc.GravelerServiceStub,
    compactor: capi_grpc.CompactorServiceStub,
) -> None:
    committed, deleted = args.committed, args.deleted
    stub.CreateRepository(api.CreateRepositoryRequest(name=REPO, storage_namespace=f"local://{REPO}"))
    started = time.perf_counter()
    import_entries(engine, engine.committed, REPO, committed)
    keys = sorted_keys(committed)
    stage_tombstones(engine, keys[:deleted])
    emit("compaction.setup", time.perf_counter() - started, "s", None)

    before_page, first_key = best_first_page(stub, 3)
    assert first_key == keys[deleted], first_key
    before_list, listed = whole_listing(stub)
    assert listed == committed - deleted, listed
    emit(f"compaction.first_page_before_{deleted // 1000}k_tombstones", before_page * 1000, "ms", None)
    emit(f"compaction.list_{(committed - deleted) // 1000}k_before", before_list, "s", None)

    # The compaction, through the compactor service, while a client keeps staging writes;
    # then again on fresh tombstones over the same keys, each round against its own idle writes.
    ratios, busy_writes = [], 0
    for round_no in range(args.rounds):
        if round_no:
            stage_tombstones(engine, keys[:deleted])
        idle = timed_writes(stub, f"zz-idle-{round_no}", 1000)
        writer = Writer(stub, f"zz-busy-{round_no}")
        writer.start()
        sealing = engine.refs.get_branch(engine.refs.repository(REPO), "main").branch
        compacted = [StagingToken(t) for t in [sealing.staging_token, *sealing.sealed_tokens]]
        started = time.perf_counter()
        result = compactor.Compact(capi.CompactRequest(repository=REPO, branch="main"), timeout=600)
        compaction = time.perf_counter() - started
        writer.stop_event.set()
        writer.join(60)
        # The first round deletes the keys; later ones delete them again, which changes nothing.
        assert result.records_changed >= (deleted if round_no == 0 else 1000), result
        busy_writes += len(writer.samples)
        ratios.append(p99(writer.samples) / p99(idle))
        emit(f"compaction.round_{round_no}.compact_{deleted // 1000}k_tombstones", compaction, "s", 15.0)
        emit(f"compaction.round_{round_no}.stage_p99_idle", p99(idle) * 1000, "ms", None)
        emit(f"compaction.round_{round_no}.stage_p99_during_compaction", p99(writer.samples) * 1000, "ms", None)
        emit(f"compaction.round_{round_no}.stage_p99_ratio", ratios[-1], "ratio", 2.0)
        emit(f"compaction.round_{round_no}.stage_writes_during_compaction", len(writer.samples), "writes", None)
        # The next round's idle writes must not meet this round's token being dropped.
        wait_until(partial(tokens_dropped, engine, compacted), 900, "compacted tokens dropped", 0.5)
    emit("compaction.stage_p99_ratio_during_compaction.min", min(ratios), "ratio", 2.0)
    emit("compaction.stage_p99_ratio_during_compaction.median", statistics.median(ratios), "ratio", 2.0)
    emit("compaction.stage_p99_ratio_during_compaction.max", max(ratios), "ratio", 2.0)

    after_page, first_key = best_first_page(stub, 3)
    assert first_key == keys[deleted], first_key
    after_list, listed = whole_listing(stub)
    staged_since = 1000 * args.rounds + busy_writes
    assert listed == committed - deleted + staged_since, (listed, staged_since)
    emit(f"compaction.first_page_after_{deleted // 1000}k_tombstones", after_page * 1000, "ms", 20.0)
    emit("compaction.first_page_speedup", before_page / after_page, "x", 20.0)
    emit(f"compaction.list_{(committed - deleted) // 1000}k_after", after_list, "s", None)

    # Sealed tokens: what commits that fail after sealing leave behind; a missing key is
    # looked for in each of them before the metarange answers.
    repo = engine.refs.repository(REPO)
    for _ in range(SEALED_TOKENS):
        engine.committer._seal(repo, "main", NO_DEADLINE)
    assert len(engine.refs.get_branch(repo, "main").branch.sealed_tokens) == SEALED_TOKENS
    missing_stat(stub, 50)  # warm-up
    before_stat = missing_stat(stub, 500)
    compactor.Compact(capi.CompactRequest(repository=REPO, branch="main"), timeout=600)
    assert not engine.refs.get_branch(repo, "main").branch.sealed_tokens
    after_stat = missing_stat(stub, 500)
    emit(f"compaction.stat_missing_with_{SEALED_TOKENS}_sealed_tokens", before_stat * 1000, "ms", None)
    emit(f"compaction.stat_missing_after_compacting_{SEALED_TOKENS}_tokens", after_stat * 1000, "ms", None)


if __name__ == "__main__":
    main()
