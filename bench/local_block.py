"""The local blockstore's 4 KiB PUT under each value of blockstore.local.sync (each put syncing on
its own, or concurrent puts sharing their syncs: silt/block/groupsync.py): ``python -m bench.local_block``.

THREADS threads put COUNT objects of 4 KiB through one LocalAdapter, into 4 directories of one
namespace, in a temporary directory on the file system that holds the working directory (the
one a blockstore.local.path would usually be on). The modes take turns, ROUNDS times each, and
the median round of each counts. Figures per thread count: puts/s of each mode, its ratio to
`fsync` (each put alone), the median put's milliseconds, and the sync calls (fsync or
syncfs) per put. With --bulk, another
thread keeps rewriting a 256 MiB file on the same file system without syncing it, as another
program writing there would.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

from bench import report
from silt.block.groupsync import GroupSync, libc_syncfs
from silt.block.local import LocalAdapter

SIZE = 4 * 1024
DIRECTORIES = 4
NAMESPACE = "local://bench"


# The values of blockstore.local.sync: each put syncing on its own; batches synced with one
# fsync per file and per directory; batches synced with one syncfs per file system.
MODES = ("fsync", "group_fsync", "group_syncfs")


class _Counting:
    """A sync call that counts its calls."""

    def __init__(self, call: Callable[[int], None]) -> None:
        self.call = call
        self.count = 0
        self._lock = threading.Lock()

    def __call__(self, fd: int) -> None:
        self.call(fd)
        with self._lock:
            self.count += 1


def _syncer(mode: str) -> tuple[GroupSync, list[_Counting]]:
    fsync = _Counting(os.fsync)
    if mode == "fsync":
        return GroupSync(batching=False, fsync=fsync), [fsync]
    if mode == "group_fsync":
        return GroupSync(fsync=fsync), [fsync]
    found = libc_syncfs()
    if found is None:
        raise SystemExit("syncfs is not available here: run with --modes fsync,group_fsync")
    syncfs = _Counting(found)
    return GroupSync(fsync=fsync, syncfs=syncfs), [fsync, syncfs]


def _round(root: str, mode: str, threads: int, count: int) -> tuple[float, float, float]:
    """(puts per second, sync calls per put, median put in seconds) of one round in a fresh root."""
    syncer, counters = _syncer(mode)
    adapter = LocalAdapter(root, syncer=syncer)
    body = os.urandom(SIZE)
    # The directories exist and are known durable before the clock starts.
    for d in range(DIRECTORIES):
        adapter.put(NAMESPACE, f"d{d}/warm", io.BytesIO(body), SIZE)
    for counter in counters:
        counter.count = 0

    latencies: list[float] = []

    def put(i: int) -> None:
        started = time.perf_counter()
        adapter.put(NAMESPACE, f"d{i % DIRECTORIES}/k{i:06d}", io.BytesIO(body), SIZE)
        latencies.append(time.perf_counter() - started)

    start = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(put, range(count)))
    elapsed = time.perf_counter() - start
    adapter.close()
    return count / elapsed, sum(counter.count for counter in counters) / count, statistics.median(latencies)


@contextlib.contextmanager
def _bulk(workdir: str, on: bool) -> Iterator[None]:
    """Another writer on the same file system, leaving its pages for the kernel to write back."""
    if not on:
        yield
        return
    stop = threading.Event()

    def write() -> None:
        chunk = os.urandom(1024 * 1024)
        with open(os.path.join(workdir, "bulk"), "wb") as f:
            while not stop.is_set():
                for _ in range(256):
                    f.write(chunk)
                f.seek(0)

    thread = threading.Thread(target=write)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--count", type=int, default=2000, help="puts per round")
    parser.add_argument("--threads", default="1,8,32", help="thread counts, comma-separated")
    parser.add_argument("--rounds", type=int, default=3, help="alternated rounds per mode")
    parser.add_argument(
        "--bulk", action="store_true", help="meanwhile, another thread rewrites a 256 MiB file there without syncing"
    )
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)}")
    args = parser.parse_args()
    report.emit_calibration()
    prefix = "local_block.put_4k" + (".bulk" if args.bulk else "")
    with (
        tempfile.TemporaryDirectory(prefix="bench-local-block-", dir=os.getcwd()) as workdir,
        _bulk(workdir, args.bulk),
    ):
        modes = args.modes.split(",")
        for threads in (int(t) for t in args.threads.split(",")):
            rates: dict[str, list[float]] = {mode: [] for mode in modes}
            syncs: dict[str, list[float]] = {mode: [] for mode in modes}
            medians: dict[str, list[float]] = {mode: [] for mode in modes}
            for n in range(args.rounds):
                for mode in modes:
                    rate, per_put, median = _round(
                        os.path.join(workdir, f"{threads}-{n}-{mode}"), mode, threads, args.count
                    )
                    rates[mode].append(rate)
                    syncs[mode].append(per_put)
                    medians[mode].append(median)
            for mode in modes:
                rate = statistics.median(rates[mode])
                report.emit(f"{prefix}.t{threads}.{mode}", rate, "puts/s", None, digits=0)
                report.emit(f"{prefix}.t{threads}.{mode}.p50", statistics.median(medians[mode]) * 1000, "ms", None)
                report.emit(
                    f"{prefix}.t{threads}.{mode}.syncs_per_put",
                    statistics.median(syncs[mode]),
                    "calls",
                    None,
                    digits=2,
                )
                if mode != "fsync" and "fsync" in rates:
                    ratio = rate / statistics.median(rates["fsync"])
                    report.emit(f"{prefix}.t{threads}.{mode}.vs_fsync", ratio, "x", None)


if __name__ == "__main__":
    main()
