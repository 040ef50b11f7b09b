"""Committed-layer benchmarks, one JSON object per line: ``python -m bench.committed`` (`make bench-committed`).

Runs on the local-disk block adapter (fsync on every object, like production on local
disk) in a temporary directory. Targets are this layer's share of graveler's: a commit of
100,000 staged entries within 10 s in all, and a one-entry commit onto a 1,000,000-record
metarange within 0.5 s writing at most 2 files.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from bench import report
from engine.core.committed.cache import CommittedCache
from engine.core.committed.manager import CommittedManager
from engine.core.committed.model import Change, Record
from silt.block.local import LocalAdapter

NAMESPACE = "local://bench"

T = TypeVar("T")


def emit(name: str, value: float, unit: str, target: float | None = None) -> None:
    report.emit(name, value, unit, target, digits=4)


def key_of(index: int) -> bytes:
    # Lexicographic order follows index order, so generated streams are already sorted.
    return f"tables/events/date=2026-01-{1 + index // 200_000:02d}/part-{index:08d}.parquet".encode()


class Entries:
    """Records shaped like committed entries: ~150-byte serialized values, sha256 identities."""

    def __init__(self, seed: int = 7) -> None:
        self._random = random.Random(seed)

    def record(self, index: int) -> Record:
        token = self._random.randbytes(16).hex()
        value = (
            f"s3://silt-data/repo/data/{token}|size={1000 + index}|etag={token[::-1]}"
            f"|mtime=2026-01-01T00:00:00Z|type=application/octet-stream"
        ).encode()
        return Record(key_of(index), hashlib.sha256(value).digest(), value)

    def stream(self, indices: range) -> Iterator[Record]:
        return (self.record(index) for index in indices)


def timed(body: Callable[[], T]) -> tuple[float, T]:
    started = time.perf_counter()
    result = body()
    return time.perf_counter() - started, result


def cold(adapter: LocalAdapter) -> CommittedManager:
    """A manager with empty caches: every object it needs comes from the store."""
    return CommittedManager(adapter, CommittedCache())


def run(workdir: Path, big: int) -> None:
    adapter = LocalAdapter(workdir)
    entries = Entries()
    # Records are generated before the clock starts: only the committed layer is measured.
    first = [entries.record(index) for index in range(100_000)]
    seconds, _ = timed(lambda: cold(adapter).write_metarange(NAMESPACE, iter(first)))
    emit("committed.write_metarange.100k", seconds, "s", 3.0)

    staged = [Change.upsert(entries.record(index)) for index in range(100_000, 200_000)]
    seconds, _ = timed(lambda: cold(adapter).apply(NAMESPACE, None, iter(staged)))
    emit("committed.apply.100k_staged_onto_empty", seconds, "s", 3.0)

    # The large base holds even indices, so odd ones are inserts spread over the key space.
    base_records = [entries.record(index) for index in range(0, 2 * big, 2)]
    seconds, base = timed(lambda: cold(adapter).write_metarange(NAMESPACE, iter(base_records)))
    base_id = base
    ranges = cold(adapter).ranges(NAMESPACE, base_id)
    sizes = [(workdir / "bench" / "_silt" / "ranges" / info.id).stat().st_size for info in ranges]
    emit(f"committed.write_metarange.{big // 1000}k", seconds, "s")
    emit("committed.ranges.count", len(ranges), "ranges")
    emit("committed.ranges.mean_records", statistics.mean(info.count for info in ranges), "records")
    emit("committed.ranges.max_records", max(info.count for info in ranges), "records")
    emit("committed.ranges.mean_file_size", statistics.mean(sizes) / 1024, "KiB")

    single_times, files = [], []
    for trial in range(5):
        reader = cold(adapter)  # cold: the base metarange and the touched range come from disk
        change = Change.upsert(entries.record(random.Random(trial).randrange(big) * 2))
        seconds, _ = timed(functools.partial(reader.apply, NAMESPACE, base_id, [change]))
        stats = reader.stats()
        single_times.append(seconds)
        files.append(stats.ranges_uploaded + stats.metaranges_uploaded)
    name = f"committed.apply.1_change_onto_{big // 1000}k"
    emit(f"{name}.cold_median", statistics.median(single_times), "s", 0.5)
    emit(f"{name}.cold_max", max(single_times), "s", 0.5)
    emit(f"{name}.files_written", max(files), "files", 2)

    spread = [Change.upsert(entries.record(index)) for index in range(1, 2 * big, max(1, 2 * big // 100_000) | 1)]
    seconds, _ = timed(lambda: cold(adapter).apply(NAMESPACE, base_id, iter(spread)))
    emit(f"committed.apply.{len(spread) // 1000}k_spread_onto_{big // 1000}k", seconds, "s")

    # Sized to hold every range decoded, so the second pass measures a warm cache.
    reader = CommittedManager(adapter, CommittedCache(memory_bytes=4 << 30))
    probes = [key_of(random.Random(probe).randrange(big) * 2) for probe in range(200)]
    seconds, _ = timed(lambda: [reader.get(NAMESPACE, base_id, key) for key in probes])
    emit("committed.get.mostly_cold", seconds / len(probes) * 1000, "ms")
    seconds, _ = timed(lambda: [reader.get(NAMESPACE, base_id, key) for key in probes])
    emit("committed.get.warm", seconds / len(probes) * 1e6, "us")

    seconds, count = timed(lambda: sum(1 for _ in cold(adapter).iterate(NAMESPACE, base_id)))
    emit(f"committed.iterate.{big // 1000}k", count / seconds, "records/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--records", type=int, default=1_000_000, help="size of the large metarange")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="silt-bench-committed-") as workdir:
        run(Path(workdir), arguments.records)


if __name__ == "__main__":
    main()
