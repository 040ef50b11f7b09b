"""`make bench-graveler`: graveler through its gRPC API on the `local` driver, one JSON object per line.

Auth and graveler run as their own processes (as in production) and every call is signed
and authorized; this process is the client, calling as the admin user.
Bulk setup (hundreds of thousands of staged or committed entries) goes through the same
Graveler code in-process, on the same SQLite file and data directory, because staging
them one RPC at a time would dominate the run without measuring anything asked for.
"""

from __future__ import annotations

import argparse
import itertools
import multiprocessing
import os
import re
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import grpc

from bench.processes import cpu_seconds
from bench.report import emit, p99
from bench.turns import turn_order
from engine.core.committed.manager import CommittedManager
from engine.core.committed.model import Record
from engine.core.model import CommitId, StagingToken
from engine.core.paging import MAX_PAGE
from engine.core.refs import new_commit
from engine.core.values import entry_value
from engine.graveler import Graveler
from engine.open import open_graveler
from silt.block.local import LocalAdapter
from silt.config import DatabaseConfig, LocalDatabaseConfig
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import graveler_pb2_grpc as api_grpc
from silt.graveler.v1 import model_pb2 as pb
from silt.kv import open_store
from silt.launcher import Stack
from silt.rpc.signing import signed_channel

_HEX64 = re.compile(r"^[0-9a-f]{64}$")


def entry_for(i: int) -> pb.Entry:
    return pb.Entry(
        physical_address=f"data/{i:012d}", size=1024 + i % 4096, etag=f"{i:032x}", content_type="application/parquet"
    )


def key_for(i: int) -> str:
    return f"tables/events/date=2026-01-{i % 28 + 1:02d}/part-{i:08d}.parquet"


@contextmanager
def stack(workdir: Path) -> Iterator[api_grpc.GravelerServiceStub]:
    """Auth and graveler as processes (as `make run` starts them), and a stub signed as the admin."""
    with started_stack(workdir) as (stub, _):
        yield stub


@contextmanager
def started_stack(workdir: Path) -> Iterator[tuple[api_grpc.GravelerServiceStub, Stack]]:
    """stack(), with the Stack (its processes' ids)."""
    with Stack(workdir, ports={"auth": 0, "graveler": 0}, services=["auth", "graveler"], log_level="WARN") as s:
        assert s.admin is not None
        channel = signed_channel(s.endpoints["graveler"], s.admin)
        try:
            grpc.channel_ready_future(channel).result(timeout=60)
            yield api_grpc.GravelerServiceStub(channel), s
        finally:
            channel.close()


def stage_in_process(graveler: Graveler, repo: str, branch: str, count: int, offset: int = 0) -> None:
    def stage(i: int) -> None:
        graveler.stage_entry(repo, branch, key_for(i), entry_for(i))

    with ThreadPoolExecutor(8) as pool:
        for _ in pool.map(stage, range(offset, offset + count), chunksize=1000):
            pass


def range_files(root: Path) -> set[str]:
    return {p.name for p in root.rglob("*") if p.is_file() and _HEX64.match(p.name) and "ranges" in p.parent.name}


class Listed(NamedTuple):
    wall: float
    graveler_cpu: float
    client_cpu: float


def list_all(stub: api_grpc.GravelerServiceStub, repo: str, amount: int, graveler_pid: int | None) -> Listed:
    """Every entry of repo's main, page after page of `amount`: the times it took."""
    graveler_before, client_before = cpu_seconds(graveler_pid), time.thread_time()
    started = time.perf_counter()
    listed, after = 0, ""
    while True:
        page = stub.ListEntries(api.ListEntriesRequest(repository=repo, ref="main", after=after, amount=amount))
        listed += len(page.items)
        if not page.has_more:
            break
        after = page.items[-1].key
    elapsed = time.perf_counter() - started
    assert listed > 0
    return Listed(elapsed, cpu_seconds(graveler_pid) - graveler_before, time.thread_time() - client_before)


def bench_list(
    stub: api_grpc.GravelerServiceStub, graveler: Graveler, count: int, graveler_pid: int | None, rounds: int = 3
) -> None:
    """A whole listing over gRPC in pages of MAX_PAGE entries (the most a call gives), of 2,500
    and of 1,000 (S3's page), in turn: medians of the wall time, of graveler's CPU and of this
    client's. Fewer calls pay the call's toll fewer times; larger answers cost more to move."""
    repo = "bench-list"
    stub.CreateRepository(api.CreateRepositoryRequest(name=repo, storage_namespace=f"local://{repo}"))
    stage_in_process(graveler, repo, "main", count)
    runs: dict[int, list[Listed]] = {MAX_PAGE: [], 2500: [], 1000: []}
    for _ in range(rounds):
        for amount, listed in runs.items():
            listed.append(list_all(stub, repo, amount, graveler_pid))
    for amount, listed in runs.items():
        name = f"graveler.list_staged_{count // 1000}k" + ("" if amount == MAX_PAGE else f".pages_of_{amount}")
        emit(name, statistics.median(r.wall for r in listed), "s", 0.4 if amount > 1000 else None)
        emit(f"{name}.graveler_cpu", statistics.median(r.graveler_cpu for r in listed), "s", None)
        emit(f"{name}.client_cpu", statistics.median(r.client_cpu for r in listed), "s", None)


def _bare_server(ports: Any) -> None:
    """A gRPC server of the same grpcio with one method answering ten bytes and nothing else
    (no interceptor, no signature, no store): the floor every graveler call stands on."""
    server = grpc.server(ThreadPoolExecutor(max_workers=8))
    echo: grpc.RpcMethodHandler = grpc.unary_unary_rpc_method_handler(lambda request, context: request[:10])
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("bench.Bare", {"Echo": echo}),))
    ports.put(server.add_insecure_port("127.0.0.1:0"))
    server.start()
    server.wait_for_termination(timeout=600)  # a bound, should the benchmark die without stopping it


class Called(NamedTuple):
    wall_ms: float
    server_cpu_ms: float
    client_cpu_ms: float


def _calls(call: Callable[[int], object], server_pid: int, count: int) -> Called:
    """count calls one after another: each one's wall time and the server's and this client's
    CPU, in milliseconds."""
    server_before, client_before = cpu_seconds(server_pid), time.process_time()
    started = time.perf_counter()
    for i in range(count):
        call(i)
    wall = time.perf_counter() - started
    server, client = cpu_seconds(server_pid) - server_before, time.process_time() - client_before
    return Called(wall * 1000 / count, server * 1000 / count, client * 1000 / count)


def bench_calls(stub: api_grpc.GravelerServiceStub, graveler_pid: int, count: int, rounds: int = 4) -> None:
    """What one call costs graveler, one call at a time (a lone client's write): a bare gRPC
    server of the same grpcio, GetRepository (signed, authorized, one record read), StageEntry
    and StageEntries of one entry (what the gateway sends for a lone PUT and for a batch), in
    turn, round after round, in a balanced order (bench/turns.py), each write of a key not
    staged before, with a pause between turns for what a turn leaves (history events are
    flushed every 0.2 s); medians of the rounds."""
    repo = "bench-calls"
    stub.CreateRepository(api.CreateRepositoryRequest(name=repo, storage_namespace=f"local://{repo}"))
    spawn = multiprocessing.get_context("spawn")
    ports = spawn.Queue()
    bare_process = spawn.Process(target=_bare_server, args=(ports,), daemon=True)
    bare_process.start()
    try:
        assert bare_process.pid is not None
        channel = grpc.insecure_channel(f"127.0.0.1:{ports.get(timeout=60)}")
        echo: grpc.UnaryUnaryMultiCallable = channel.unary_unary("/bench.Bare/Echo")
        request = api.GetRepositoryRequest(name=repo).SerializeToString() * 8
        keys = itertools.count()  # every write stages a key for the first time
        probes: dict[str, tuple[Callable[[int], object], int]] = {
            "bare_grpc": (lambda i: echo(request, timeout=10), bare_process.pid),
            "get_repository": (
                lambda i: stub.GetRepository(api.GetRepositoryRequest(name=repo), timeout=10),
                graveler_pid,
            ),
            "stage_entry": (
                lambda i: stub.StageEntry(
                    api.StageEntryRequest(repository=repo, branch="main", key=key_for(next(keys)), entry=entry_for(i)),
                    timeout=10,
                ),
                graveler_pid,
            ),
            "stage_entries_of_1": (
                lambda i: stub.StageEntries(
                    api.StageEntriesRequest(
                        repository=repo,
                        branch="main",
                        entries=[api.StagedEntry(key=key_for(next(keys)), entry=entry_for(i))],
                    ),
                    timeout=10,
                ),
                graveler_pid,
            ),
        }

        def turn(name: str, calls: int) -> Called:
            call, pid = probes[name]
            called = _calls(call, pid, calls)
            time.sleep(0.5)
            return called

        runs: dict[str, list[Called]] = {name: [] for name in probes}
        for name in probes:  # warm-up: connections, caches, the first rows
            turn(name, min(count, 300))
        for round_no in range(rounds):
            for name in turn_order(list(probes), round_no):
                runs[name].append(turn(name, count))
        channel.close()
    finally:
        bare_process.kill()
        bare_process.join(10)
    for name, called in runs.items():
        for field in Called._fields:
            emit(f"graveler.call.{name}.{field}", statistics.median(getattr(c, field) for c in called), "ms", None)


def bench_commit(stub: api_grpc.GravelerServiceStub, graveler: Graveler, count: int) -> None:
    repo = "bench-commit"
    stub.CreateRepository(api.CreateRepositoryRequest(name=repo, storage_namespace=f"local://{repo}"))
    stage_in_process(graveler, repo, "main", count)
    started = time.perf_counter()
    stub.Commit(api.CommitRequest(repository=repo, branch="main", message=f"{count} entries"))
    emit(f"graveler.commit_staged_{count // 1000}k", time.perf_counter() - started, "s", 10.0)


def imported_repository(
    stub: api_grpc.GravelerServiceStub, graveler: Graveler, committed: CommittedManager, repo: str, count: int
) -> None:
    """A new repository whose main holds `count` committed entries, imported rather than staged."""
    stub.CreateRepository(api.CreateRepositoryRequest(name=repo, storage_namespace=f"local://{repo}"))
    import_entries(graveler, committed, repo, count)


def import_entries(graveler: Graveler, committed: CommittedManager, repo: str, count: int) -> None:
    """Import-style setup: write the metarange of `count` entries and point main at a commit of it."""
    metarange = committed.write_metarange(
        f"local://{repo}",
        (Record(key_for(i).encode(), *entry_value(entry_for(i))[:2]) for i in sorted(range(count), key=key_for)),
    )
    handle = graveler.refs.get_repository(repo)
    branch = graveler.refs.get_branch(handle, "main")
    base = graveler.refs.get_commit(handle, branch.branch.commit_id)
    commit = new_commit("import", {}, "bench", metarange, [CommitId(base.id)], base.generation + 1)
    graveler.refs.put_commit(handle, commit)
    updated = pb.Branch()
    updated.CopyFrom(branch.branch)
    updated.commit_id = commit.id
    graveler.refs.set_branch_if(handle, updated, branch.predicate)


def changed_entry(i: int) -> pb.Entry:
    return pb.Entry(physical_address=f"data/changed-{i:012d}", size=7, etag=f"changed-{i}")


def bench_diff(
    stub: api_grpc.GravelerServiceStub, graveler: Graveler, committed: CommittedManager, count: int, data_root: Path
) -> None:
    """Diff of two commits of `count` entries that differ in 10 keys, and the ranges it reads."""
    repo = "bench-diff"
    imported_repository(stub, graveler, committed, repo, count)
    stub.CreateBranch(api.CreateBranchRequest(repository=repo, name="changed", source_ref="main"))
    for i in range(10):
        key = key_for(i * (count // 10) + 7)
        stub.StageEntry(api.StageEntryRequest(repository=repo, branch="changed", key=key, entry=changed_entry(i)))
    stub.Commit(api.CommitRequest(repository=repo, branch="changed", message="10 changes"))
    started = time.perf_counter()
    page = stub.Diff(api.DiffRequest(repository=repo, left_ref="main", right_ref="changed", amount=1000))
    elapsed = time.perf_counter() - started
    assert len(page.items) == 10 and not page.has_more, (len(page.items), page.has_more)
    # The same diff in this process, through a cold cache, counts the range files it reads.
    cold = open_graveler(graveler.refs.kv, LocalAdapter(data_root))
    before = cold.committed.stats()
    cold.branching.diff(cold.refs.repository(repo), "main", "changed", False, "", "", "", 1000)
    read = cold.committed.stats().range_reads - before.range_reads
    cold.close()
    emit(f"graveler.diff_10_changes_of_{count // 1000}k", elapsed, "s", 0.3)
    emit(f"graveler.diff_10_changes_of_{count // 1000}k.ranges_read", read, "ranges", None)


def bench_merge(
    stub: api_grpc.GravelerServiceStub, graveler: Graveler, committed: CommittedManager, count: int
) -> None:
    """Three-way merge of 10,000 changed keys into a branch of `count` entries that added 11 keys."""
    repo = "bench-merge"
    changes = 10_000
    imported_repository(stub, graveler, committed, repo, count)
    stub.CreateBranch(api.CreateBranchRequest(repository=repo, name="feature", source_ref="main"))
    step = count // changes

    def change(i: int) -> None:
        graveler.stage_entry(repo, "feature", key_for(i * step + 3), changed_entry(i))

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(change, range(changes), chunksize=500))
    stub.Commit(api.CommitRequest(repository=repo, branch="feature", message=f"{changes} changes"))
    # The destination moves as well, in ranges all over the key space, so that the merge is a
    # real three-way merge and merges records in those ranges rather than taking whole ranges.
    stub.StageEntry(api.StageEntryRequest(repository=repo, branch="main", key="zz/main-only", entry=changed_entry(0)))
    for i in range(10):
        key = key_for(2 * count + i)  # new keys, spread over the dates, none of them the feature's
        stub.StageEntry(api.StageEntryRequest(repository=repo, branch="main", key=key, entry=changed_entry(i)))
    stub.Commit(api.CommitRequest(repository=repo, branch="main", message="meanwhile on main"))
    started = time.perf_counter()
    merged = stub.Merge(api.MergeRequest(repository=repo, source_ref="feature", destination_branch="main"))
    elapsed = time.perf_counter() - started
    assert merged.commit.id and not merged.conflicts
    for key, etag in ((key_for(3), "changed-0"), (key_for((changes - 1) * step + 3), f"changed-{changes - 1}")):
        assert stub.StatEntry(api.StatEntryRequest(repository=repo, ref="main", key=key)).entry.etag == etag
    stub.StatEntry(api.StatEntryRequest(repository=repo, ref="main", key="zz/main-only"))
    emit(f"graveler.merge_{changes // 1000}k_changes_into_{count // 1000}k", elapsed, "s", 3.0)


def bench_log_one_object(
    stub: api_grpc.GravelerServiceStub, graveler: Graveler, committed: CommittedManager, server_pid: int
) -> None:
    """Log of one object over 1,000 commits (each changing another key; the object in 10 of them),
    by a graveler that has read none of them yet: its wall time, and the CPU time it cost the
    graveler process."""
    repo = "bench-log"
    commits, entries = 1000, 100_000
    imported_repository(stub, graveler, committed, repo, entries)
    target = key_for(entries // 2)
    for i in range(commits):
        key = target if i % 100 == 0 else key_for((i * 7919) % entries)
        graveler.stage_entry(repo, "main", key, changed_entry(i))
        graveler.commit(repo, "main", f"change {i}")
    # The setup's 1,000 commits leave their files to be written back: flushed first, so the
    # timed loop measures the log, not the disk catching up (it doubled the wall time).
    os.sync()
    server_cpu = cpu_seconds(server_pid)
    started = time.perf_counter()
    found, after = 0, ""
    while True:
        page = stub.Log(api.LogRequest(repository=repo, ref="main", objects=[target], after=after, amount=1000))
        found += len(page.commits)
        if not page.has_more:
            break
        after = page.next_after
    elapsed = time.perf_counter() - started
    server_cpu = cpu_seconds(server_pid) - server_cpu
    assert found == 11, found  # 10 changes and the import that created it
    emit(f"graveler.log_one_object_over_{commits}_commits", elapsed, "s", 0.15)
    emit(f"graveler.log_one_object_over_{commits}_commits.server_cpu", server_cpu, "s", None, digits=2)


def bench_commit_one_on_large(
    stub: api_grpc.GravelerServiceStub, graveler: Graveler, committed: CommittedManager, count: int, data_root: Path
) -> None:
    repo = "bench-large"
    imported_repository(stub, graveler, committed, repo, count)

    before = range_files(data_root / repo)
    changed = pb.Entry(physical_address="data/changed", size=1, etag="changed")
    stub.StageEntry(api.StageEntryRequest(repository=repo, branch="main", key=key_for(count // 2), entry=changed))
    started = time.perf_counter()
    stub.Commit(api.CommitRequest(repository=repo, branch="main", message="one change"))
    elapsed = time.perf_counter() - started
    written = len(range_files(data_root / repo) - before)
    emit(f"graveler.commit_one_change_on_{count // 1000}k", elapsed, "s", 0.5)
    emit(f"graveler.commit_one_change_on_{count // 1000}k.ranges_written", written, "ranges", 2)


def bench_staging_during_commit(
    stub: api_grpc.GravelerServiceStub, graveler: Graveler, count: int, rounds: int
) -> None:
    """A long commit with staging: p99 of staging writes while a commit runs vs idle.

    Each round stages `count` entries, then measures an idle window (nothing else running),
    a busy window (the commit of those entries) and an after window (the commit has returned
    and its sealed token is being dropped in the background), and waits for that drop to
    finish. Rounds repeat so that idle and busy samples see the same machine.
    """
    repo = "bench-longcommit"
    stub.CreateRepository(api.CreateRepositoryRequest(name=repo, storage_namespace=f"local://{repo}"))
    written = 0

    def timed_write() -> float:
        nonlocal written
        written += 1
        key = f"live/{written:08d}"
        started = time.perf_counter()
        stub.StageEntry(api.StageEntryRequest(repository=repo, branch="main", key=key, entry=entry_for(written)))
        return time.perf_counter() - started

    for _ in range(200):  # warm-up: connections, caches, the branch record
        timed_write()
    idle: list[float] = []
    busy: list[float] = []
    after: list[float] = []
    commit_times: list[float] = []
    drop_times: list[float] = []
    for round_number in range(rounds):
        stage_in_process(graveler, repo, "main", count, offset=round_number * count)
        idle += [timed_write() for _ in range(1000)]
        token = StagingToken(graveler.refs.get_branch(graveler.refs.repository(repo), "main").branch.staging_token)
        done = threading.Event()

        def commit(done: threading.Event) -> None:
            started = time.perf_counter()
            stub.Commit(api.CommitRequest(repository=repo, branch="main", message="long"))
            commit_times.append(time.perf_counter() - started)
            done.set()

        thread = threading.Thread(target=commit, args=(done,))
        thread.start()
        while not done.is_set():
            busy.append(timed_write())
        thread.join()
        committed = time.perf_counter()
        after += [timed_write() for _ in range(1000)]
        while not graveler.staging.is_empty(token):
            time.sleep(0.05)
        drop_times.append(time.perf_counter() - committed)
    emit("graveler.stage_median_idle", statistics.median(idle) * 1000, "ms", None)
    emit(f"graveler.stage_median_during_{count // 1000}k_commit", statistics.median(busy) * 1000, "ms", None)
    emit("graveler.stage_p99_idle", p99(idle) * 1000, "ms", None)
    emit(f"graveler.stage_p99_during_{count // 1000}k_commit", p99(busy) * 1000, "ms", None)
    emit("graveler.stage_p99_ratio_during_commit", p99(busy) / p99(idle), "ratio", 2.0)
    emit("graveler.stage_writes_during_commit", len(busy), "writes", None)
    emit(f"graveler.long_commit_{count // 1000}k_median", statistics.median(commit_times), "s", None)
    # After the commit returns, its sealed token is dropped in the background.
    emit("graveler.stage_p99_ratio_while_dropping_token", p99(after) / p99(idle), "ratio", None)
    emit(f"graveler.token_drop_{count // 1000}k_median", statistics.median(drop_times), "s", None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--list-count", type=int, default=240_000)
    parser.add_argument("--commit-count", type=int, default=100_000)
    parser.add_argument("--large-count", type=int, default=1_000_000)
    parser.add_argument("--only", default="list,commit,large,longcommit,diff,merge,log,calls")
    parser.add_argument("--call-count", type=int, default=2000, help="calls per probe and round (--only calls)")
    parser.add_argument("--rounds", type=int, default=3, help="commits in the long-commit scenario")
    args = parser.parse_args()
    only = set(args.only.split(","))
    with tempfile.TemporaryDirectory(prefix="silt-bench-") as tmp:
        workdir = Path(tmp)
        kv = open_store(DatabaseConfig(type="local", local=LocalDatabaseConfig(path=str(workdir / "metadata.db"))))
        graveler = open_graveler(kv, LocalAdapter(workdir / "data"))
        committed = graveler.committed
        try:
            with started_stack(workdir) as (stub, services):
                graveler_pid = services.pid("graveler")
                assert graveler_pid is not None
                if "list" in only:
                    bench_list(stub, graveler, args.list_count, graveler_pid)
                if "commit" in only:
                    bench_commit(stub, graveler, args.commit_count)
                if "large" in only:
                    bench_commit_one_on_large(stub, graveler, committed, args.large_count, workdir / "data")
                if "longcommit" in only:
                    bench_staging_during_commit(stub, graveler, args.commit_count, args.rounds)
                if "diff" in only:
                    bench_diff(stub, graveler, committed, args.large_count, workdir / "data")
                if "merge" in only:
                    bench_merge(stub, graveler, committed, args.large_count)
                if "log" in only:
                    bench_log_one_object(stub, graveler, committed, graveler_pid)
                if "calls" in only:
                    bench_calls(stub, graveler_pid, args.call_count)
        finally:
            graveler.close()
            kv.close()


if __name__ == "__main__":
    main()
