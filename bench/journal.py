"""`make bench-journal`: what the metadata journal costs and how fast rebuild replays it.

One JSON object per line:

* ``journal.put_4k.ratio``: 4 KiB object writes (bytes to the local-disk object store, entry
  staged by graveler in-process on the ``local`` KV) per second with journaling, divided by the
  same without it (``graveler.journal.enabled: false``); target >= 0.9. The two rates too.
* ``journal.commit.ratio``: the time to commit a branch of staged entries without journaling
  divided by the time with it (higher is better, the same target).
* ``journal.replay.<driver>``: records per second rebuild replays from shipped batches into an
  empty store (one staged entry per record, as most of a repository's journal is), and
  ``.one_core``: the same per CPU second of this single-threaded process; target 50,000 on
  ``local``. (Cassandra's own work is in its server process, so there the wall rate counts.)
"""

from __future__ import annotations

import argparse
import io
import os
import tempfile
import time
import uuid
from pathlib import Path

from bench.kv import open_driver
from bench.report import emit
from engine.open import open_graveler
from silt.block.local import LocalAdapter
from silt.config import DatabaseConfig, LocalDatabaseConfig
from silt.graveler.v1 import model_pb2 as pb
from silt.journal.batch import ShippedRecord, batch_key, encode_batch
from silt.journal.bucket import JournalBucket
from silt.journal.envelope import wrap
from silt.journal.mac import sign
from silt.journal.rebuild import Rebuild
from silt.journal.record import record_key
from silt.journal.v1.journal_pb2 import Change, Record
from silt.kv import open_store

PUT_TARGET = 0.9
REPLAY_TARGETS = {"local": 50_000.0}
OBJECT = os.urandom(4096)


def put_rate(workdir: Path, journal: bool, count: int) -> tuple[float, float]:
    workdir.mkdir(exist_ok=True)
    store = open_store(DatabaseConfig(type="local", local=LocalDatabaseConfig(path=str(workdir / f"{journal}.db"))))
    adapter = LocalAdapter(workdir / f"data-{journal}")
    graveler = open_graveler(store, adapter, journal=journal)
    try:
        repo = f"bench-{uuid.uuid4().hex[:8]}"
        graveler.lifecycle.create_repository(repo, f"local://{repo}", "main", False)
        started = time.perf_counter()
        for i in range(count):
            address = f"data/{uuid.uuid4().hex}"
            put = adapter.put(f"local://{repo}", address, io.BytesIO(OBJECT), len(OBJECT))
            entry = pb.Entry(physical_address=address, size=put.size, etag=put.etag)
            graveler.stage_entry(repo, "main", f"tables/t/part-{i:08d}", entry)
        rate = count / (time.perf_counter() - started)
        started = time.perf_counter()
        graveler.commit(repo, "main", "bench")
        commit_seconds = time.perf_counter() - started
    finally:
        graveler.close()
        store.close()
    return rate, commit_seconds


# Batches are signed as the compactor signs them, and checked on replay as rebuild checks them.
BENCH_KEY = b"bench-journal-key"


def write_journal(adapter: LocalAdapter, namespace: str, count: int, per_batch: int) -> None:
    """count records of one staged write each, shipped in batches of per_batch."""
    bucket = JournalBucket(adapter, namespace)
    token = b"bench-u1_main_" + uuid.uuid4().hex.encode()
    first = time.time_ns() // 1000 - 3_600_000_000
    writer = uuid.uuid4().hex
    entry = pb.Entry(physical_address="data/x" * 4, size=4096, etag="e" * 32).SerializeToString()
    # The repository's own record first: rebuild replays only the partitions it names.
    repository = pb.Repository(name="bench", unique_id="u1", storage_namespace=namespace).SerializeToString()
    created = Change(partition=b"graveler", key=b"repos/bench", value=wrap(first - 1, repository), kind="repository")
    record = Record(logical_timestamp=first - 1, writer_id=writer, sequence=count, repository="bench")
    record.changes.append(created)
    for start in range(0, count, per_batch):
        shipped = [ShippedRecord(b"graveler", record_key(first - 1, writer, count), record)] if start == 0 else []
        for i in range(start, min(count, start + per_batch)):
            ts = first + i
            change = Change(partition=token, key=b"key/tables/t/part-%08d" % i, value=wrap(ts, entry), kind="staged")
            record = Record(
                logical_timestamp=ts, writer_id=writer, sequence=i, repository="bench", event_type="object_write"
            )
            record.changes.append(change)
            shipped.append(ShippedRecord(token, record_key(ts, writer, i), record))
        key = batch_key(shipped)
        data = encode_batch(shipped)
        bucket.put_once(key, data, sign(BENCH_KEY, key, data))


def replay_rate(driver: str, workdir: Path, adapter: LocalAdapter, namespace: str) -> tuple[float, float, int]:
    """(records per second of wall time, records per CPU second of this process, records)."""
    with open_driver(driver, workdir / driver) as store:
        started, cpu = time.perf_counter(), time.process_time()
        progress = Rebuild(store, adapter, namespace, "bench", hmac_key=BENCH_KEY).run()
        wall, used = time.perf_counter() - started, time.process_time() - cpu
        return progress.records_applied / wall, progress.records_applied / used, progress.records_applied


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--puts", type=int, default=1_000, help="4 KiB writes per measurement (0: skip)")
    parser.add_argument("--rounds", type=int, default=3, help="alternated measurements with and without the journal")
    parser.add_argument("--records", type=int, default=500_000, help="records replayed into local and mem")
    parser.add_argument("--cassandra-records", type=int, default=50_000, help="records replayed into cassandra")
    parser.add_argument("--drivers", default="local,cassandra", help="replay targets")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        if args.puts:
            # Alternated, best of each: on a shared machine the load drifts between runs, and a
            # single off-then-on pair measures the drift as much as the journal.
            runs: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
            for round_ in range(args.rounds):
                for journal in (False, True):
                    runs[journal].append(put_rate(workdir / f"{round_}", journal, args.puts))
            off_rate, off_commit = max(r for r, _ in runs[False]), min(c for _, c in runs[False])
            on_rate, on_commit = max(r for r, _ in runs[True]), min(c for _, c in runs[True])
            emit("journal.put_4k.off", off_rate, "puts/s", None, digits=1)
            emit("journal.put_4k.on", on_rate, "puts/s", None, digits=1)
            emit("journal.put_4k.ratio", on_rate / off_rate, "ratio", PUT_TARGET)
            emit("journal.commit.off", off_commit, "s", None)
            emit("journal.commit.on", on_commit, "s", None)
            emit("journal.commit.ratio", off_commit / on_commit, "ratio", PUT_TARGET)

        adapter = LocalAdapter(workdir / "journal-data")
        for driver in args.drivers.split(","):
            (workdir / driver).mkdir()
            count = args.cassandra_records if driver == "cassandra" else args.records
            namespace = f"local://replay-{driver}"
            write_journal(adapter, namespace, count, 20_000)
            rate, cpu_rate, applied = replay_rate(driver, workdir, adapter, namespace)
            assert applied == count + 1  # and the repository record
            emit(f"journal.replay.{driver}", rate, "records/s", None, digits=1)
            # Replay is one thread: records per CPU second of this process (the driver's own
            # in-process work included) is the rate on one core, whatever else shares the machine.
            emit(f"journal.replay.{driver}.one_core", cpu_rate, "records/cpu-s", REPLAY_TARGETS.get(driver), digits=1)


if __name__ == "__main__":
    main()
