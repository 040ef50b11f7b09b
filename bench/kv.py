"""`make bench-kv`: KV throughput per driver, one JSON object per line.

Single-threaded get/set/set_if rates (the latency a request handler sees, inverted) and
the scan rate of one partition. Targets apply to the `local` driver on a 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from bench import report
from silt.config import DatabaseConfig
from silt.kv import Store, open_store

TARGETS = {("local", "set"): 20_000, ("local", "get"): 50_000, ("local", "scan"): 300_000}


def emit(driver: str, op: str, value: float, unit: str) -> None:
    report.emit(f"kv.{driver}.{op}", value, unit, TARGETS.get((driver, op)), digits=1)


def rate(count: int, body: Callable[[int], object]) -> float:
    started = time.perf_counter()
    for i in range(count):
        body(i)
    return count / (time.perf_counter() - started)


def run(driver: str, store: Store, count: int, scan_count: int) -> None:
    partition = f"bench-{uuid.uuid4().hex}".encode()
    keys = [f"tables/events/part-{i:08d}.parquet".encode() for i in range(count)]
    value = b"v" * 200  # about the size of a staged entry

    emit(driver, "set", rate(count, lambda i: store.set(partition, keys[i], value)), "ops/s")
    emit(driver, "get", rate(count, lambda i: store.get(partition, keys[i])), "ops/s")
    predicates = [store.get(partition, keys[i]).predicate for i in range(count)]
    emit(driver, "set_if", rate(count, lambda i: store.set_if(partition, keys[i], b"w" * 200, predicates[i])), "ops/s")

    scan_partition = partition + b"-scan"
    for i in range(scan_count):
        store.set(scan_partition, f"key/{i:09d}".encode(), value)
    started = time.perf_counter()
    scanned = sum(1 for _ in store.scan(scan_partition))
    assert scanned == scan_count
    emit(driver, "scan", scanned / (time.perf_counter() - started), "keys/s")


@contextmanager
def open_driver(driver: str, workdir: Path) -> Iterator[Store]:
    if driver == "cassandra":
        from tests.support.cassandra import CassandraServer

        server = CassandraServer.from_env() or CassandraServer.start()
        store = open_store(server.database_config(keyspace="silt_bench"))
        try:
            yield store
        finally:
            store.close()
            server.stop()
        return
    # Validated like a configuration file: an unknown driver name is refused.
    config = DatabaseConfig.model_validate({"type": driver, "local": {"path": str(workdir / "bench.db")}})
    store = open_store(config)
    try:
        yield store
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--drivers", default="mem,local,cassandra")
    parser.add_argument("--count", type=int, default=50_000, help="operations per measurement")
    parser.add_argument("--scan-count", type=int, default=200_000, help="keys in the scanned partition")
    parser.add_argument("--cassandra-count", type=int, default=5_000, help="operations per measurement on cassandra")
    args = parser.parse_args()
    for driver in args.drivers.split(","):
        with tempfile.TemporaryDirectory() as workdir, open_driver(driver, Path(workdir)) as store:
            count = args.cassandra_count if driver == "cassandra" else args.count
            scan_count = args.cassandra_count * 4 if driver == "cassandra" else args.scan_count
            try:
                run(driver, store, count, scan_count)
            except Exception as exc:
                print(json.dumps({"name": f"kv.{driver}", "error": str(exc)}), file=sys.stderr)
                raise


if __name__ == "__main__":
    main()
