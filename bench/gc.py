"""`make bench-gc`: a GC run over a large repository on the local adapter, or on S3 (moto).

The repository: ``--commits`` commits (100) on main, each adding ``--objects / --commits``
objects under its own prefix; from the middle commit on, the first half's prefixes are gone,
and the first half's commits are older than the 7-day retention, so half the committed
objects are garbage. Plus ``--orphans`` (100,000) uploads no entry names.

Metadata is generated directly: ranges and metaranges through the committed layer, commit and
branch records into the KV store; object files are created empty. Generation runs in a child
process, and so does graveler (as it would in a deployment), so the driver's memory figures
are the GC run's own.

``--blockstore s3``: the same repository with its storage namespace in a bucket of a moto server
the bench starts in a child process of its own (moto's ``ThreadedMotoServer``, the server
``moto_server`` runs). The committed layer goes through the S3 adapter over HTTP; the empty
objects are put straight into the server's in-memory backend, in its own process: moto takes
about 80 PutObjects a second here, which would make generating 220,000 objects take most of an
hour. Everything the GC run does (Spark's S3A reads and writes, the listing, the deletes) goes
over HTTP. Figures are named ``gc.<figure>.s3_moto.<size>``.

Prints mark time, the pre-sweep re-check's time, sweep deletes per second and peak driver
memory (the Python driver's peak RSS, and the JVM's peak RSS, which in local mode includes
the executors).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import logging
import multiprocessing
import os
import tempfile
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

from bench.processes import cpu_seconds
from bench.report import emit

REPO = "bench-gc"
BUCKET = "silt-bench-gc"
OBJECT_KEYS = "object-keys.txt"  # on S3: the generated objects' keys, for moto's process to create
OLD_SECONDS = 30 * 86_400
RETENTION_DAYS = 7


@dataclass(frozen=True)
class Store:
    """Where the repository's namespace lives: a local directory, or a bucket on moto."""

    root: str  # the run's temporary directory (the KV store; the local blockstore's objects)
    endpoint: str | None = None  # moto's URL: the namespace is in BUCKET there

    @property
    def kind(self) -> str:
        return "local" if self.endpoint is None else "s3"

    @property
    def namespace(self) -> str:
        return f"local://{REPO}" if self.endpoint is None else f"s3://{BUCKET}/{REPO}"

    def blockstore(self) -> Any:
        from silt.config import BlockstoreConfig, LocalBlockstoreConfig

        if self.endpoint is None:
            return BlockstoreConfig(type="local", local=LocalBlockstoreConfig(path=f"{self.root}/data"))
        from tests.support.moto import s3_blockstore_config

        return BlockstoreConfig(type="s3", s3=s3_blockstore_config(self.endpoint))

    def graveler(self, adapter: Any, cache: Any = None) -> tuple[Any, Any]:
        """A graveler over the run's KV store and adapter, and the KV store."""
        from engine.graveler import GravelerOptions
        from engine.open import open_graveler
        from silt.config import DatabaseConfig, LocalDatabaseConfig
        from silt.kv import open_store

        store = open_store(DatabaseConfig(type="local", local=LocalDatabaseConfig(path=f"{self.root}/kv.db")))
        roots = ("local://",) if self.endpoint is None else (f"s3://{BUCKET}/",)
        options = GravelerOptions(allowed_namespace_roots=roots)
        return open_graveler(store, adapter, options, cache=cache), store


class _Objects:
    """The generated objects: empty files on the local adapter; on S3, keys gathered in a file
    for moto's process to create (see the module's docstring)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._dir = Path(store.root) / "data" / REPO
        self._keys = None if store.endpoint is None else open(Path(store.root) / OBJECT_KEYS, "w")  # noqa: SIM115
        (self._dir / "data").mkdir(parents=True, exist_ok=True)

    def create(self, address: str, old: float | None = None) -> None:
        if self._keys is not None:
            self._keys.write(f"{REPO}/{address}\n")
            return
        path = self._dir / address
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))
        if old is not None:
            os.utime(path, (old, old))

    def close(self) -> None:
        if self._keys is not None:
            self._keys.close()


def _generate(store_at: Store, commits: int, objects: int, orphans: int) -> None:
    """Child process: write the repository's metadata and its (empty) object files."""
    from google.protobuf.timestamp_pb2 import Timestamp

    from engine.core.committed.cache import CommittedCache
    from engine.core.committed.store import ObjectStore
    from silt.block.registry import open_adapter
    from silt.graveler.v1 import model_pb2 as pb

    adapter = open_adapter(store_at.blockstore())
    graveler, store = store_at.graveler(adapter, CommittedCache(memory_bytes=0))
    repo_record = graveler.lifecycle.create_repository(REPO, store_at.namespace, "", False)
    repo = graveler.refs.get_repository(REPO)
    graveler.retention.set_rules(repo, pb.GCRules(default_retention_days=RETENTION_DAYS))
    created_objects = _Objects(store_at)
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
            created_objects.create(address)
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
        created_objects.create(f"data/{hashlib.sha1(f'orphan/{j}'.encode()).hexdigest()}", old)
    created_objects.close()
    graveler.close()
    store.close()


def _serve_graveler(store_at: Store, ports: Connection, stop: Event) -> None:
    """Child process: graveler over the generated repository, on a free port sent back."""
    from services.graveler.server import start
    from silt.block.registry import open_adapter
    from silt.lifeline import die_with_parent

    die_with_parent(os.getppid())
    graveler, store = store_at.graveler(open_adapter(store_at.blockstore()))
    server, port = start(graveler, "127.0.0.1:0")
    ports.send(port)
    stop.wait()
    server.stop(None)
    graveler.close()
    store.close()


def _descendants(pid: int) -> list[int]:
    """The process and every process under it (the JVM's Python workers)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            children.setdefault(parent, []).append(int(stat.parent.name))
    found, pending = [], [pid]
    while pending:
        current = pending.pop()
        found.append(current)
        pending.extend(children.get(current, []))
    return found


def _sweep_cpu(jvm_pid: int, moto: _Moto | None) -> tuple[float, float]:
    """CPU seconds so far of the JVM with its Python workers, and of moto's process."""
    spark = sum(cpu_seconds(pid) for pid in _descendants(jvm_pid))
    return spark, 0.0 if moto is None else cpu_seconds(moto.pid)


def _peak_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def _serve_moto(requests: Connection) -> None:
    """Child process: moto's S3 server on a free port (sent back first), which then answers
    requests from the bench: a file of keys to create empty in BUCKET (the count created is sent
    back), ("count", prefix) for how many keys are left under prefix, None to stop."""
    from moto.core.models import DEFAULT_ACCOUNT_ID
    from moto.moto_server.threaded_moto_server import ThreadedMotoServer
    from moto.s3.models import s3_backends

    from silt.lifeline import die_with_parent

    die_with_parent(os.getppid())
    # A line per request would cost the server more than some requests do.
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer("127.0.0.1", 0, verbose=False)
    server.start()
    # In the account and partition moto gives the bench's credentials and region. Created here
    # rather than over HTTP: a boto3 client in the driver would count in its memory figure.
    backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
    backend.create_bucket(BUCKET, "us-east-1")
    requests.send(server.get_host_and_port()[1])
    try:
        while (request := requests.recv()) is not None:
            if isinstance(request, tuple):
                _, prefix = request
                requests.send(sum(1 for key in backend.get_bucket(BUCKET).keys if key.startswith(prefix)))
                continue
            created = 0
            with open(request) as keys:
                for line in keys:
                    backend.put_object(BUCKET, line.rstrip("\n"), b"", disable_notification=True)
                    created += 1
            requests.send(created)
    finally:
        server.stop()


class _Moto:
    """The moto server child process: started, asked, stopped."""

    def __init__(self) -> None:
        context = multiprocessing.get_context("spawn")
        self._requests, their_end = context.Pipe()
        self._process = context.Process(target=_serve_moto, args=(their_end,))
        self._process.start()
        if not self._requests.poll(60):
            self.stop()
            raise SystemExit("moto did not start within 60 s")
        self.endpoint = f"http://127.0.0.1:{self._requests.recv()}"
        self.pid = self._process.pid or 0

    def ask(self, request: object) -> int:
        self._requests.send(request)
        answer: int = self._requests.recv()
        return answer

    def stop(self) -> None:
        if self._process.is_alive():
            with contextlib.suppress(OSError):
                self._requests.send(None)
            self._process.join(30)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--objects", type=int, default=1_000_000)
    parser.add_argument("--commits", type=int, default=100)
    parser.add_argument("--orphans", type=int, default=100_000)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--blockstore", choices=("local", "s3"), default="local")
    args = parser.parse_args()
    size = f"{args.objects}obj-{args.commits}commits-{args.orphans}orphans"
    # Local figures keep their names, so they compare with earlier runs.
    label = size if args.blockstore == "local" else f"s3_moto.{size}"
    with tempfile.TemporaryDirectory(prefix="silt-bench-gc-") as root:
        moto = _Moto() if args.blockstore == "s3" else None
        try:
            store = Store(root, None if moto is None else moto.endpoint)
            summary, driver_kib, jvm_kib, spark_cpu, store_cpu, recheck_cpu = _run(store, moto, args, label)
            left = None if moto is None else moto.ask(("count", f"{REPO}/data/"))
        finally:
            if moto is not None:
                moto.stop()

    marked = sum(summary.objects.values())
    expected = args.objects // 2 + args.orphans
    emit(f"gc.marked_objects.{label}", marked, "objects", expected, 0)
    emit(f"gc.mark.{label}", summary.seconds["prepare"] + summary.seconds["mark"], "s", 20.0, 1)
    emit(f"gc.recheck.{label}", summary.seconds["recheck"], "s", None, 1)
    emit(f"gc.recheck_cpu.spark.{label}", recheck_cpu, "s", None, 1)
    emit(f"gc.sweep.{label}", summary.deleted / summary.seconds["sweep"], "deletes/s", 20000.0, 0)
    # Where a sweep's time goes on a machine of two cores the store shares: CPU per 1,000 deletes.
    emit(f"gc.sweep_cpu_per_1000.spark.{label}", spark_cpu / summary.deleted * 1000, "s", None, 3)
    if moto is not None:
        emit(f"gc.sweep_cpu_per_1000.moto.{label}", store_cpu / summary.deleted * 1000, "s", None, 3)
    emit(f"gc.driver_peak_rss.python.{label}", driver_kib / 1024, "MiB", 200.0, 0)
    emit(f"gc.driver_peak_rss.jvm_with_local_executors.{label}", jvm_kib / 1024, "MiB", None, 0)
    if marked != expected:
        raise SystemExit(f"marked {marked} objects, expected {expected}")
    if left is not None and left != args.objects - args.objects // 2:
        raise SystemExit(f"{left} objects left in the bucket, expected {args.objects - args.objects // 2}")


def _run(
    store: Store, moto: _Moto | None, args: argparse.Namespace, label: str
) -> tuple[Any, int, int, float, float, float]:
    """Generate the repository, then one GC run over it: its summary, the driver's peak RSS
    (Python's and the JVM's, in KiB), and the CPU seconds the sweep took of Spark (the JVM
    and its Python workers) and of the store (moto's process; 0 on local), and the CPU seconds
    the re-check took of Spark (graveler's fresh export is another process's)."""
    import grpc

    from jobs.gc.job import GCOptions, run_gc
    from silt.graveler.v1 import graveler_pb2_grpc as api_grpc
    from silt.spark import local_session

    started = time.perf_counter()
    child = multiprocessing.get_context("spawn").Process(
        target=_generate, args=(store, args.commits, args.objects, args.orphans)
    )
    child.start()
    child.join()
    if child.exitcode != 0:
        raise SystemExit(f"generation failed with exit code {child.exitcode}")
    if moto is not None:
        moto.ask(str(Path(store.root) / OBJECT_KEYS))
        # S3 modification times have whole seconds: every object must predate the run's start.
        time.sleep(1.1)
    emit(f"gc.generate.{label}", time.perf_counter() - started, "s", None, 1)

    # The JVM first: launching it is a fork, which gRPC's threads make unreliable.
    spark = local_session(None, master=args.master, app_name="silt-bench-gc")
    spark.sparkContext.setLogLevel("ERROR")
    context = multiprocessing.get_context("spawn")
    ports, their_end = context.Pipe(duplex=False)
    stop = context.Event()
    graveler = context.Process(target=_serve_graveler, args=(store, their_end, stop))
    graveler.start()
    if not ports.poll(120):
        graveler.kill()
        raise SystemExit("graveler did not start within 120 s")
    channel = grpc.insecure_channel(f"127.0.0.1:{ports.recv()}")
    try:
        # Grace 0: every generated object predates the run; the default 6 h would spare them all.
        options = GCOptions(grace_seconds=0, unsafe_short_grace=True)
        jvm_pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
        at_recheck: list[tuple[float, float]] = []
        at_sweep: list[tuple[float, float]] = []

        def progress(message: str) -> None:
            if message.startswith("re-checking"):
                at_recheck.append(_sweep_cpu(jvm_pid, moto))
            if message.startswith("sweeping"):
                at_sweep.append(_sweep_cpu(jvm_pid, moto))

        stub = api_grpc.GravelerServiceStub(channel)
        summary = run_gc(spark, stub, REPO, store.blockstore(), options, progress)
        if not summary.deleted or not at_sweep or not at_recheck:
            raise SystemExit(f"the run did not re-check and sweep anything: {summary}")
        (spark_after, store_after), (spark_before, store_before) = _sweep_cpu(jvm_pid, moto), at_sweep[0]
        spark_cpu, store_cpu = spark_after - spark_before, store_after - store_before
        recheck_cpu = spark_before - at_recheck[0][0]
        jvm_peak = _peak_rss_kib(jvm_pid)
        # Read before the teardown: stopping Spark and its gateway is not part of the run.
        driver_kib = _peak_rss_kib(os.getpid())
    finally:
        spark.stop()
        channel.close()
        stop.set()
        graveler.join(30)
        if graveler.is_alive():
            graveler.kill()
    return summary, driver_kib, jvm_peak, spark_cpu, store_cpu, recheck_cpu


if __name__ == "__main__":
    main()
