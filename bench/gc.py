"""`make bench-gc`: a GC run over a large repository on the local adapter.

The repository: ``--commits`` commits (100) on main, each adding ``--objects / --commits``
objects under its own prefix; from the middle commit on, the first half's prefixes are gone,
and the first half's commits are older than the 7-day retention, so half the committed
objects are garbage. Plus ``--orphans`` (100,000) uploads no entry names.

Metadata is generated directly: ranges and metaranges through the committed layer, commit and
branch records into the KV store; object files are created empty. Generation runs in a child
process, and so does graveler (as it would in a deployment), so the driver's memory figures
are the GC run's own.

Prints mark time, the pre-sweep re-check's time, sweep deletes per second and peak driver
memory (the Python driver's peak RSS, and the JVM's peak RSS, which in local mode includes
the executors).
"""

from __future__ import annotations

import argparse
import hashlib
import multiprocessing
import os
import tempfile
import time
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event
from pathlib import Path

from bench.report import emit

REPO = "bench-gc"
OLD_SECONDS = 30 * 86_400
RETENTION_DAYS = 7


def _generate(root: str, commits: int, objects: int, orphans: int) -> None:
    """Child process: write the repository's metadata and its (empty) object files."""
    from google.protobuf.timestamp_pb2 import Timestamp

    from engine.core.committed.cache import CommittedCache
    from engine.core.committed.store import ObjectStore
    from engine.open import open_graveler
    from silt.block.local import LocalAdapter
    from silt.config import DatabaseConfig, LocalDatabaseConfig
    from silt.graveler.v1 import model_pb2 as pb
    from silt.kv import open_store

    store = open_store(DatabaseConfig(type="local", local=LocalDatabaseConfig(path=f"{root}/kv.db")))
    adapter = LocalAdapter(f"{root}/data")
    graveler = open_graveler(store, adapter, cache=CommittedCache(memory_bytes=0))
    repo_record = graveler.lifecycle.create_repository(REPO, f"local://{REPO}", "", False)
    repo = graveler.refs.get_repository(REPO)
    graveler.retention.set_rules(repo, pb.GCRules(default_retention_days=RETENTION_DAYS))
    objects_dir = Path(root) / "data" / REPO / "data"
    objects_dir.mkdir(parents=True, exist_ok=True)
    writer = ObjectStore(adapter, CommittedCache(memory_bytes=0))
    per_commit = objects // commits
    ranges = []
    now = time.time()
    parent = graveler.refs.get_branch(repo, repo_record.default_branch).branch.commit_id
    half = commits // 2
    for index in range(commits):
        keys, identities, values = [], [], []
        for j in range(per_commit):
            address = f"data/{hashlib.sha1(f'{index}/{j}'.encode()).hexdigest()}"
            os.close(os.open(objects_dir / address[5:], os.O_CREAT | os.O_WRONLY, 0o644))
            entry = pb.Entry(physical_address=address, size=0, etag="d41d8cd98f00b204e9800998ecf8427e")
            data = entry.SerializeToString(deterministic=True)
            keys.append(f"c{index:04d}/{j:08d}".encode())
            identities.append(hashlib.sha256(data).digest())
            values.append(data)
        ranges.append(writer.write_range(repo.namespace, keys, identities, values, sum(map(len, values))))
        live = ranges[half:] if index >= half else ranges
        metarange = writer.write_metarange(repo.namespace, live)
        created = Timestamp(seconds=int(now - OLD_SECONDS + index) if index < half else int(now - 3600 + index))
        commit = pb.Commit(
            id=hashlib.sha256(f"bench-{index}".encode()).hexdigest(),
            committer="bench",
            message=f"commit {index}",
            metarange_id=metarange,
            creation_date=created,
            parents=[parent],
            generation=index + 2,
        )
        graveler.refs.put_commit(repo, commit)
        parent = commit.id
    branch = graveler.refs.get_branch(repo, repo_record.default_branch)
    branch.branch.commit_id = parent
    graveler.refs.set_branch_if(repo, branch.branch, branch.predicate)
    old = now - 86_400
    for j in range(orphans):
        path = objects_dir / hashlib.sha1(f"orphan/{j}".encode()).hexdigest()
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))
        os.utime(path, (old, old))
    graveler.close()
    store.close()


def _serve_graveler(root: str, ports: Connection, stop: Event) -> None:
    """Child process: graveler over the generated repository, on a free port sent back."""
    from engine.open import open_graveler
    from services.graveler.server import start
    from silt.block.local import LocalAdapter
    from silt.config import DatabaseConfig, LocalDatabaseConfig
    from silt.kv import open_store
    from silt.lifeline import die_with_parent

    die_with_parent(os.getppid())
    store = open_store(DatabaseConfig(type="local", local=LocalDatabaseConfig(path=f"{root}/kv.db")))
    graveler = open_graveler(store, LocalAdapter(f"{root}/data"))
    server, port = start(graveler, "127.0.0.1:0")
    ports.send(port)
    stop.wait()
    server.stop(None)
    graveler.close()
    store.close()


def _peak_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--objects", type=int, default=1_000_000)
    parser.add_argument("--commits", type=int, default=100)
    parser.add_argument("--orphans", type=int, default=100_000)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    label = f"{args.objects}obj-{args.commits}commits-{args.orphans}orphans"

    import grpc

    from jobs.gc.job import GCOptions, run_gc
    from silt.config import BlockstoreConfig, LocalBlockstoreConfig
    from silt.graveler.v1 import graveler_pb2_grpc as api_grpc
    from silt.spark import local_session

    with tempfile.TemporaryDirectory(prefix="silt-bench-gc-") as root:
        started = time.perf_counter()
        child = multiprocessing.get_context("spawn").Process(
            target=_generate, args=(root, args.commits, args.objects, args.orphans)
        )
        child.start()
        child.join()
        if child.exitcode != 0:
            raise SystemExit(f"generation failed with exit code {child.exitcode}")
        emit(f"gc.generate.{label}", time.perf_counter() - started, "s", None, 1)

        # The JVM first: launching it is a fork, which gRPC's threads make unreliable.
        spark = local_session(None, master=args.master, app_name="silt-bench-gc")
        spark.sparkContext.setLogLevel("ERROR")
        context = multiprocessing.get_context("spawn")
        ports, their_end = context.Pipe(duplex=False)
        stop = context.Event()
        graveler = context.Process(target=_serve_graveler, args=(root, their_end, stop))
        graveler.start()
        if not ports.poll(120):
            graveler.kill()
            raise SystemExit("graveler did not start within 120 s")
        channel = grpc.insecure_channel(f"127.0.0.1:{ports.recv()}")
        try:
            blockstore = BlockstoreConfig(type="local", local=LocalBlockstoreConfig(path=f"{root}/data"))
            # Grace 0: every generated object predates the run; the default 6 h would spare them all.
            options = GCOptions(grace_seconds=0, unsafe_short_grace=True)
            summary = run_gc(spark, api_grpc.GravelerServiceStub(channel), REPO, blockstore, options)
            jvm_pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
            jvm_peak = _peak_rss_kib(int(jvm_pid))
            # Read before the teardown: stopping Spark and its gateway is not part of the run.
            driver_kib = _peak_rss_kib(os.getpid())
        finally:
            spark.stop()
            channel.close()
            stop.set()
            graveler.join(30)
            if graveler.is_alive():
                graveler.kill()

    marked = sum(summary.objects.values())
    expected = args.objects // 2 + args.orphans
    emit(f"gc.marked_objects.{label}", marked, "objects", expected, 0)
    emit(f"gc.mark.{label}", summary.seconds["prepare"] + summary.seconds["mark"], "s", 20.0, 1)
    emit(f"gc.recheck.{label}", summary.seconds["recheck"], "s", None, 1)
    emit(f"gc.sweep.{label}", summary.deleted / summary.seconds["sweep"], "deletes/s", 20000.0, 0)
    emit(f"gc.driver_peak_rss.python.{label}", driver_kib / 1024, "MiB", 200.0, 0)
    emit(f"gc.driver_peak_rss.jvm_with_local_executors.{label}", jvm_peak / 1024, "MiB", None, 0)
    if marked != expected:
        raise SystemExit(f"marked {marked} objects, expected {expected}")


if __name__ == "__main__":
    main()
