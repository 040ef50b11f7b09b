"""`make bench-events`: what history events cost a request, one JSON object per line.

- `events.emit_us`: one `emit` as the gateway and the REST API call it on the request path
  (build the event, queue it), in microseconds; and `events.emit_share_of_put`, that cost as a
  share of a 4 KiB PUT's latency at 32 clients. Target: under 2 %.
- `events.overhead.{put,get}_4kib`: throughput lost with events on against off
  (`graveler.history.enabled`), 4 KiB PUT and GET at 32 clients. The two stacks run side by side
  and take turns, round after round, so that other load on the machine falls on both alike;
  the median round counts. Target: under 2 % (on a busy 2-core machine the rounds' own spread
  is of that order: read it with the spread, printed as a note).
- `events.stored_per_s`: events graveler's writer stores per second (batches of 1,000, as
  RecordEvents receives them) on the local KV: what bounds the event rate a stack keeps up with.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.gateway import _small_rates
from bench.report import emit
from silt.config import DatabaseConfig, LocalDatabaseConfig
from silt.graveler.v1 import events_pb2 as ev
from silt.history_events.emitter import EventEmitter
from silt.history_events.queue import EventQueue
from silt.kv import open_store
from tests.support.gateway_stack import GatewayStack, gateway_stack

MODES = ("off", "on")


def bench_emit(count: int) -> float:
    """Microseconds per emit, the queue large enough never to drop."""
    emitter = EventEmitter(ev.S3, graveler=None, queue=EventQueue(capacity=count + 1))
    started = time.perf_counter()
    for i in range(count):
        emitter.emit(ev.WRITE, "bench", "main", f"small/{i:06d}", "admin", 4096)
    per_emit_us = (time.perf_counter() - started) / count * 1e6
    emit("events.emit_us", per_emit_us, "us", None)
    return per_emit_us


def bench_storing(workdir: Path, batches: int) -> None:
    """Events stored per second by graveler's writer on the local KV (SQLite), as RecordEvents does."""
    from engine.features.history_events.writer import EventWriter

    with open_store(DatabaseConfig(type="local", local=LocalDatabaseConfig(path=str(workdir / "events.db")))) as kv:
        writer = EventWriter(kv)
        now = time.time_ns() // 1000
        started = time.perf_counter()
        for b in range(batches):
            writer.write(
                b"bench-x",
                [
                    ev.HistoryEvent(timestamp_us=now + i, branch="main", type=ev.READ, path=f"r/{b}/{i}", user="u")
                    for i in range(1000)
                ],
            )
        emit("events.stored_per_s", batches * 1000 / (time.perf_counter() - started), "events/s", None)


def bench_overhead(workdir: Path, count: int, threads: int, rounds: int) -> float:
    """Median PUT latency (s) with events on; emits the throughput lost against off."""
    rates: dict[str, list[tuple[float, float]]] = {mode: [] for mode in MODES}
    with contextlib.ExitStack() as stacks:
        running: dict[str, GatewayStack] = {}
        for mode in MODES:
            overrides: dict[str, Any] = {"graveler": {"history": {"enabled": mode == "on"}}}
            running[mode] = stacks.enter_context(gateway_stack(workdir / f"events-{mode}", overrides=overrides))
            running[mode].client().create_bucket(Bucket="bench")
        for mode in MODES:  # warm-up: connections, caches, first files
            _small_rates(running[mode], min(count, 500), threads, -1)
        for round_no in range(rounds):
            for mode in MODES if round_no % 2 == 0 else reversed(MODES):
                rates[mode].append(_small_rates(running[mode], count, threads, round_no))
    median = {mode: [statistics.median(r[i] for r in rates[mode]) for i in (0, 1)] for mode in MODES}
    for i, op in enumerate(("put", "get")):
        emit(f"events.rate_off.{op}_4kib", median["off"][i], "req/s", None)
        emit(f"events.rate_on.{op}_4kib", median["on"][i], "req/s", None)
        loss = 100.0 * (1.0 - median["on"][i] / median["off"][i])
        emit(f"events.overhead.{op}_4kib", loss, "% throughput lost", 2.0, digits=1)
        spread = [100.0 * (1.0 - on[i] / off[i]) for on, off in zip(rates["on"], rates["off"], strict=True)]
        print(json.dumps({"note": f"{op} loss per round (%)", "rounds": [round(s, 1) for s in spread]}), flush=True)
    return threads / median["on"][0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=2000, help="requests of each kind per round")
    parser.add_argument("--threads", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--emits", type=int, default=200_000)
    args = parser.parse_args()
    per_emit_us = bench_emit(args.emits)
    with tempfile.TemporaryDirectory(prefix="bench-events-") as workdir:
        bench_storing(Path(workdir), 20)
        put_latency = bench_overhead(Path(workdir), args.count, args.threads, args.rounds)
    emit("events.emit_share_of_put", 100.0 * per_emit_us / 1e6 / put_latency, "% of a 4 KiB PUT", 2.0, digits=3)


if __name__ == "__main__":
    main()
