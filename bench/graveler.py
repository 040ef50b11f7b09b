"""`make bench-graveler`: graveler through its gRPC API on the `local` driver, one JSON object per line.

Auth and graveler run as their own processes (as in production) and every call is signed
and authorized; this process is the client, calling as the admin user.
Bulk setup (hundreds of thousands of staged or committed entries) goes through the same
Graveler code in-process, on the same SQLite file and data directory, because staging
them one RPC at a time would dominate the run without measuring anything asked for.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import grpc

from services.graveler.committed.cache import CommittedCache
from services.graveler.committed.manager import CommittedManager
from services.graveler.committed.model import Record
from services.graveler.graveler import Graveler
from services.graveler.values import entry_value
from silt.block.local import LocalAdapter
from silt.config import DatabaseConfig, LocalDatabaseConfig
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import graveler_pb2_grpc as api_grpc
from silt.graveler.v1 import model_pb2 as pb
from silt.kv import open_store
from silt.launcher import Stack
from silt.rpc.auth import signed_channel

_HEX64 = re.compile(r"^[0-9a-f]{64}$")


def emit(name: str, value: float, unit: str, target: float | None) -> None:
    print(json.dumps({"name": name, "value": round(value, 3), "unit": unit, "target": target}), flush=True)


def entry_for(i: int) -> pb.Entry:
    return pb.Entry(
        physical_address=f"data/{i:012d}", size=1024 + i % 4096, etag=f"{i:032x}", content_type="application/parquet"
    )


def key_for(i: int) -> str:
    return f"tables/events/date=2026-01-{i % 28 + 1:02d}/part-{i:08d}.parquet"


@contextmanager
def stack(workdir: Path) -> Iterator[api_grpc.GravelerServiceStub]:
    """Auth and graveler as processes (as `make run` starts them), and a stub signed as the admin."""
    with Stack(workdir, ports={"auth": 0, "graveler": 0}, services=["auth", "graveler"], log_level="WARN") as s:
        assert s.admin is not None
        channel = signed_channel(s.endpoints["graveler"], s.admin)
        try:
            grpc.channel_ready_future(channel).result(timeout=60)
            yield api_grpc.GravelerServiceStub(channel)
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


def bench_list(stub: api_grpc.GravelerServiceStub, graveler: Graveler, count: int) -> None:
    repo = "bench-list"
    stub.CreateRepository(api.CreateRepositoryRequest(name=repo, storage_namespace=f"local://{repo}"))
    stage_in_process(graveler, repo, "main", count)
    started = time.perf_counter()
    listed, after = 0, ""
    while True:
        page = stub.ListEntries(api.ListEntriesRequest(repository=repo, ref="main", after=after, amount=1000))
        listed += len(page.items)
        if not page.has_more:
            break
        after = page.items[-1].key
    elapsed = time.perf_counter() - started
    assert listed == count, (listed, count)
    emit(f"graveler.list_staged_{count // 1000}k", elapsed, "s", 4.0)


def bench_commit(stub: api_grpc.GravelerServiceStub, graveler: Graveler, count: int) -> None:
    repo = "bench-commit"
    stub.CreateRepository(api.CreateRepositoryRequest(name=repo, storage_namespace=f"local://{repo}"))
    stage_in_process(graveler, repo, "main", count)
    started = time.perf_counter()
    stub.Commit(api.CommitRequest(repository=repo, branch="main", message=f"{count} entries"))
    emit(f"graveler.commit_staged_{count // 1000}k", time.perf_counter() - started, "s", 10.0)


def bench_commit_one_on_large(
    stub: api_grpc.GravelerServiceStub, graveler: Graveler, committed: CommittedManager, count: int, data_root: Path
) -> None:
    repo = "bench-large"
    stub.CreateRepository(api.CreateRepositoryRequest(name=repo, storage_namespace=f"local://{repo}"))
    # Import-style setup: write the metarange of `count` entries and point main at a commit of it.
    metarange = committed.write_metarange(
        f"local://{repo}",
        (Record(key_for(i).encode(), *entry_value(entry_for(i))[:2]) for i in sorted(range(count), key=key_for)),
    )
    handle = graveler.refs.get_repository(repo)
    branch = graveler.refs.get_branch(handle, "main")
    base = graveler.refs.get_commit(handle, branch.branch.commit_id)
    commit = graveler._make_commit(handle, "import", {}, "bench", metarange, [base.id], base.generation + 1)
    graveler.refs.put_commit(handle, commit)
    updated = pb.Branch()
    updated.CopyFrom(branch.branch)
    updated.commit_id = commit.id
    graveler.refs.set_branch_if(handle, updated, branch.predicate)

    before = range_files(data_root / repo)
    changed = pb.Entry(physical_address="data/changed", size=1, etag="changed")
    stub.StageEntry(api.StageEntryRequest(repository=repo, branch="main", key=key_for(count // 2), entry=changed))
    started = time.perf_counter()
    stub.Commit(api.CommitRequest(repository=repo, branch="main", message="one change"))
    elapsed = time.perf_counter() - started
    written = len(range_files(data_root / repo) - before)
    emit(f"graveler.commit_one_change_on_{count // 1000}k", elapsed, "s", 0.5)
    emit(f"graveler.commit_one_change_on_{count // 1000}k.ranges_written", written, "ranges", 2)


def p99(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=100)[98]


def bench_staging_during_commit(
    stub: api_grpc.GravelerServiceStub, graveler: Graveler, count: int, rounds: int
) -> None:
    """Seed 001's long commit with staging: p99 of staging writes while a commit runs vs idle.

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
        token = graveler.get_branch(repo, "main").staging_token
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
    parser.add_argument("--only", default="list,commit,large,longcommit")
    parser.add_argument("--rounds", type=int, default=3, help="commits in the long-commit scenario")
    args = parser.parse_args()
    only = set(args.only.split(","))
    with tempfile.TemporaryDirectory(prefix="silt-bench-") as tmp:
        workdir = Path(tmp)
        kv = open_store(DatabaseConfig(type="local", local=LocalDatabaseConfig(path=str(workdir / "metadata.db"))))
        committed = CommittedManager(LocalAdapter(workdir / "data"), CommittedCache())
        graveler = Graveler(kv, committed)
        try:
            with stack(workdir) as stub:
                if "list" in only:
                    bench_list(stub, graveler, args.list_count)
                if "commit" in only:
                    bench_commit(stub, graveler, args.commit_count)
                if "large" in only:
                    bench_commit_one_on_large(stub, graveler, committed, args.large_count, workdir / "data")
                if "longcommit" in only:
                    bench_staging_during_commit(stub, graveler, args.commit_count, args.rounds)
        finally:
            graveler.close()
            kv.close()


if __name__ == "__main__":
    main()
