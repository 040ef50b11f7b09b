"""`make bench-import`: zero-copy import (docs/import.md), one JSON object per figure.

* ``local``: ``--local-objects`` (100,000) small files in a directory tree, imported by a graveler
  wired as the service wires it (engine/open.py: the ingestion in its worker process,
  SQLite KV, the local blockstore), from the start call until the status says completed.
  Target: at least 20,000 objects/s.
* ``s3``: ``--s3-objects`` (100,000) objects under a prefix of moto_server (tests/support/moto.py),
  imported the same way on the S3 blockstore. No target: moto's listing is the ceiling.
* ``memory``: the ingestion and the commit step over a generated S3 listing (a client answering
  ListObjectsV2 pages of synthetic keys, so no store bounds the rate) of 100,000 and 1,000,000
  objects, each in a fresh process: its peak RSS, its rate, and the rate of the last tenth over
  the second (the first holds the start-up; a steady rate is about 1). Target: memory flat (the
  1M peak within 1.5x the 100k's).

Files and objects are created before the clock starts.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.processes import cpu_seconds
from bench.report import emit
from silt.block.adapter import ListedObject

REPO = "bench-import"
TARGET_LOCAL_RATE = 20_000


def _config(root: Path, blockstore: dict[str, Any], graveler: dict[str, Any] | None = None) -> Any:
    from silt.config import Config

    return Config.model_validate(
        {
            "database": {"type": "local", "local": {"path": str(root / "kv.db")}},
            "blockstore": blockstore,
            "graveler": graveler or {},
        }
    )


def _cpu_seconds() -> float:
    """CPU time of this process (graveler's engine) and its children alive now (the import worker
    and the commit workers): what an import costs whatever else the machine runs."""
    return sum(cpu_seconds(pid) for pid in [os.getpid(), *(child.pid for child in multiprocessing.active_children())])


@dataclass(frozen=True)
class Timed:
    seconds: float
    cpu_seconds: float
    ingested: int


def _import(graveler: Any, path: str) -> Timed:
    from engine.core.deadline import Deadline

    started, cpu = time.perf_counter(), _cpu_seconds()
    locations = [("common_prefix", path, "lake/")]
    import_id = graveler.imports.start(REPO, "main", locations, "bench", {}, "", Deadline())
    while True:
        status = graveler.imports.status(REPO, "main", import_id, Deadline()).record
        if status.completed or status.error:
            break
        time.sleep(0.02)
    if status.error:
        raise SystemExit(f"import failed: {status.error}")
    return Timed(time.perf_counter() - started, _cpu_seconds() - cpu, status.ingested_objects)


def _timed_import(config: Any, namespace: str, path: str, warm_path: str) -> Timed:
    """Seconds from the start call to the completed status (and CPU seconds), and the objects
    ingested, on a graveler that has made one import already (of nothing, at warm_path), as a
    running one has."""
    from engine.open import open_engine

    graveler = open_engine(config, "server")
    try:
        graveler.lifecycle.create_repository(REPO, namespace, "main", False)
        _import(graveler, warm_path)
        return _import(graveler, path)
    finally:
        graveler.close()


def _emit_import(section: str, timed: Timed, target: float | None) -> None:
    emit(f"import.{section}.seconds", timed.seconds, "s", None)
    emit(f"import.{section}.objects_per_s", timed.ingested / timed.seconds, "objects/s", target, 0)
    # Load-independent: the rate one free core gives (the worker is one process).
    emit(f"import.{section}.objects_per_cpu_s", timed.ingested / timed.cpu_seconds, "objects/CPU-s", None, 0)


def bench_local(workdir: Path, count: int) -> None:
    source = workdir / "landing"
    for start in range(0, count, 1000):
        directory = source / f"part={start // 1000:04d}"
        directory.mkdir(parents=True)
        for index in range(start, min(start + 1000, count)):
            (directory / f"event-{index:07d}.json").write_bytes(b'{"id": %d}\n' % index)
    blockstore = {
        "type": "local",
        "local": {"path": str(workdir / "data"), "import_enabled": True, "allowed_external_prefixes": [str(source)]},
    }
    (source / ".warm").mkdir()  # hidden: the timed import skips it
    # On disk before the clock starts, as a lake is: otherwise the import's first fsync pays for
    # writing back the 100,000 files just created.
    os.sync()
    config = _config(workdir, blockstore)
    timed = _timed_import(config, f"local://{REPO}", f"local://{source}", f"local://{source}/.warm")
    _emit_import("local", timed, TARGET_LOCAL_RATE)


def bench_s3(workdir: Path, count: int) -> None:
    from tests.support.moto import ACCESS_KEY_ID, SECRET_ACCESS_KEY, _stop, moto_client, start_moto_server

    workdir.mkdir(parents=True, exist_ok=True)
    process, endpoint = start_moto_server(workdir / "moto.log")
    try:
        s3 = moto_client(endpoint)
        for bucket in ("bench-import-ns", "bench-import-landing"):
            s3.create_bucket(Bucket=bucket)

        def put(index: int) -> None:
            s3.put_object(Bucket="bench-import-landing", Key=f"exports/part-{index:07d}.json", Body=b"{}\n")

        with ThreadPoolExecutor(16) as pool:
            list(pool.map(put, range(count)))
        blockstore = {
            "type": "s3",
            "s3": {
                "endpoint_url": endpoint,
                "force_path_style": True,
                "credentials": {"access_key_id": ACCESS_KEY_ID, "secret_access_key": SECRET_ACCESS_KEY},
            },
        }
        graveler = {
            "allowed_namespace_roots": ["s3://bench-import-ns/"],
            "allowed_import_prefixes": ["s3://bench-import-landing/exports/"],
        }
        config = _config(workdir, blockstore, graveler)
        landing = "s3://bench-import-landing/exports/"
        timed = _timed_import(config, f"s3://bench-import-ns/{REPO}", landing, landing + "warm/")
        _emit_import("s3_moto", timed, None)
    finally:
        _stop(process)


class _ListingAdapter:
    """The local adapter for ranges; its listing of the source: synthetic keys in key order,
    generated as it is read (a listing of the size of a large S3 prefix, without the store)."""

    scheme = "local"

    def __init__(self, root: Path, count: int) -> None:
        from silt.block.local import LocalAdapter

        self._inner = LocalAdapter(root)
        self._count = count
        self._modified = datetime(2026, 1, 1, tzinfo=UTC)

    def list_objects(self, namespace: str, prefix: str = "", after: str = "") -> Iterator[ListedObject]:
        for i in range(self._count):
            key = f"{prefix}date=2026-01-{1 + i * 28 // self._count:02d}/part-{i:08d}.parquet"
            if key > after:
                yield ListedObject(key, 1000 + i % 977, f"{i:032x}", self._modified)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _peak_rss_mib() -> float:
    """This process's own peak RSS: VmHWM belongs to its address space, which exec made new;
    ru_maxrss would carry the parent's peak over from the fork."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise SystemExit("no VmHWM in /proc/self/status")


def _memory_child(root: str, count: int, results: Any) -> None:
    from engine.core.committed.cache import CommittedCache
    from engine.core.committed.chunking import ChunkingPolicy
    from engine.core.committed.manager import CommittedManager
    from engine.core.committed.model import MetaRangeId
    from engine.core.committed.replace import Region
    from engine.features.imports import ingest as ingest_module
    from engine.features.imports.ingest import INGEST_CACHE_BYTES, IngestJob
    from engine.features.imports.locations import Source
    from engine.features.imports.records import ImportRecords
    from silt.config import DatabaseConfig
    from silt.graveler.v1 import model_pb2 as pb
    from silt.kv import open_store

    namespace = "local://bench-memory"
    adapter: Any = _ListingAdapter(Path(root), count)
    committed = CommittedManager(adapter, CommittedCache(INGEST_CACHE_BYTES))  # for the commit step
    store = open_store(DatabaseConfig(type="mem"))
    records = ImportRecords(store)
    records.create(b"bench", pb.ImportRecord(id="bench"))
    source = Source("common_prefix", "s3://generated/lake/", "lake/", "store", "s3://generated", "lake/", "lake/")
    job = IngestJob("bench", b"bench", namespace, (source,), (), ChunkingPolicy())
    marks: list[tuple[int, float]] = []
    report = records.progress

    def progress(partition: bytes, import_id: str, ingested: int) -> None:
        marks.append((ingested, time.perf_counter()))
        report(partition, import_id, ingested)

    records.progress = progress  # type: ignore[method-assign]
    ingest_module.PROGRESS_SECONDS = 0.0  # a mark every 1,024 objects, for the rate's steadiness
    started = time.perf_counter()
    result = ingest_module.ingest(job, adapter, records)
    ingested_at = time.perf_counter()
    empty = committed.write_metarange(namespace, iter(()))
    committed.replace(namespace, empty, MetaRangeId(result.metarange_id), Region((b"lake/",)))
    finished = time.perf_counter()
    tenth = count // 10

    def rate_between(low: int, high: int) -> float:
        first = next(m for m in marks if m[0] >= low)
        last = next(m for m in marks if m[0] >= high)
        return (last[0] - first[0]) / (last[1] - first[1])

    results.send(
        json.dumps(
            {
                "rss_mib": _peak_rss_mib(),
                "rate": result.ingested / (ingested_at - started),
                "commit_s": finished - ingested_at,
                # Tenths of at least ten progress marks each, or no figure.
                "steadiness": rate_between(count - tenth - 1024, count - 1024) / rate_between(tenth, 2 * tenth)
                if tenth >= 10 * 1024
                else None,
            }
        )
    )


def bench_memory(workdir: Path, sizes: list[int]) -> None:
    peaks: dict[int, float] = {}
    for count in sizes:
        receive, send = multiprocessing.get_context("spawn").Pipe(duplex=False)
        child = multiprocessing.get_context("spawn").Process(
            target=_memory_child, args=(str(workdir / f"memory-{count}"), count, send)
        )
        child.start()
        send.close()  # the child's end only: a child that dies ends the wait below
        try:
            figures = json.loads(receive.recv())
        except EOFError:
            child.join()
            raise SystemExit(f"the measuring process for {count} objects failed (exit code {child.exitcode})") from None
        child.join()
        label = f"{count // 1000}k" if count < 1_000_000 else f"{count // 1_000_000}m"
        peaks[count] = figures["rss_mib"]
        emit(f"import.generated.{label}.peak_rss_mib", figures["rss_mib"], "MiB", None, 1)
        emit(f"import.generated.{label}.objects_per_s", figures["rate"], "objects/s", None, 0)
        emit(f"import.generated.{label}.commit_seconds", figures["commit_s"], "s", None)
        if figures["steadiness"] is not None:
            emit(f"import.generated.{label}.last_tenth_rate_over_second", figures["steadiness"], "ratio", 0.8, 2)
    if len(peaks) > 1:
        low, high = min(peaks), max(peaks)
        emit("import.generated.peak_rss_growth", peaks[high] / peaks[low], "ratio", 1.5, 2)


def main(argv: Iterator[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--only", default="local,s3,memory", help="sections to run, comma-separated")
    parser.add_argument("--local-objects", type=int, default=100_000)
    parser.add_argument("--s3-objects", type=int, default=100_000)
    parser.add_argument("--memory-sizes", default="100000,1000000", help="generated listing sizes")
    args = parser.parse_args(list(argv) if argv is not None else None)
    only = set(args.only.split(","))
    with tempfile.TemporaryDirectory(prefix="bench-import-") as tmp:
        workdir = Path(tmp)
        if "local" in only:
            bench_local(workdir / "local", args.local_objects)
        if "s3" in only:
            bench_s3(workdir / "s3", args.s3_objects)
        if "memory" in only:
            bench_memory(workdir, [int(size) for size in args.memory_sizes.split(",")])


if __name__ == "__main__":
    main()
