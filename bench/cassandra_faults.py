"""One Cassandra node lost under load: failed requests, lost or stale writes, p99 before and during.

Starts the 3-node loopback test cluster (tests/support/cassandra_cluster.py; Cassandra's stock
server timeouts unless --timeouts tuned) and the Jepsen harness's Silt stack on it (two edges,
two gravelers, auth, compactor: tests/jepsen/topology.py), with Silt's default driver settings
(database.cassandra.*, RF 3, QUORUM / SERIAL). Each run: S3 writers, CAS writers and readers
(tests/jepsen/workload.py) and a committer for --before seconds, then one node killed with
SIGKILL (restarted after --down seconds) or stopped with SIGSTOP (--pause seconds), then the
checker over the whole history. One JSON object a line per run:

    {"fault": "kill", "node": 1, "run": 0, "requests": ..., "failed": ..., "failed_during": ...,
     "lost": ..., "stale": ..., "violations": {...}, "p99_before_ms": ..., "p99_during_ms": ...,
     "errors": {...}, "report": "build/jepsen/...txt", "load_avg": [1, 5, 15 min]}

`failed` counts requests answered 5xx or not at all (a client timeout; 4xx refusals are not failures);
`lost` and `stale` are the checker's violations (an acknowledged write a read or commit missed,
a read that returned an overwritten value). Usage:

    .venv/bin/python -m bench.cassandra_faults --faults kill,pause --nodes 0,1,2 --runs 1

--compare KEY=VALUE runs every fault again, on the same cluster right after, with that driver
setting added (a fresh Silt stack): a before/after of one setting in one session, e.g.
``--faults pause --nodes 1 --runs 3 --compare lwt_timeout_s=1.0``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from bench.report import emit_calibration
from silt.config import CassandraConfig
from tests.jepsen.checker import FINAL
from tests.jepsen.history import Outcome
from tests.jepsen.nemesis import Window
from tests.jepsen.runner import Result, failed_request, run_once
from tests.jepsen.topology import start_topology
from tests.support.cassandra_cluster import CassandraCluster

TIMEOUTS_ENV = "SILT_CASSANDRA_CLUSTER_TIMEOUTS"
# "none": a control run, the same load and windows without a fault (what the load alone fails).
KINDS = {"kill": ("cassandra-kill",), "pause": ("cassandra-pause",), "none": ()}
# The checker's kinds of violation that mean an acknowledged write was lost, and those that
# mean a read saw an overwritten value (not linearizable) or no longer saw a write.
LOST = ("lost", "commit misses a write", "merge misses a write", "unreadable")


def _p99_ms(latencies: list[int]) -> float | None:
    if not latencies:
        return None
    ordered = sorted(latencies)
    return round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] / 1e6, 1)


def measure(fault: str, node: int, run: int, result: Result) -> dict[str, object]:
    window = result.windows[0]
    ops = [op for op in result.history.ops if op.process != FINAL and op.complete_ns is not None]
    before = [op for op in ops if op.complete_ns is not None and op.complete_ns < window.injected_ns]
    during = [
        op
        for op in ops
        if op.complete_ns is not None and op.complete_ns > window.injected_ns and op.invoke_ns < window.healed_ns
    ]
    failed = [op for op in ops if failed_request(op)]
    violations = Counter(v.kind for v in result.violations)
    lost = sum(n for kind, n in violations.items() if kind in LOST or "misses" in kind)
    return {
        "fault": fault,
        "node": node,
        "run": run,
        "requests": len(ops),
        "requests_during": len(during),
        "failed": len(failed),
        "failed_during": sum(1 for op in during if failed_request(op)),
        "lost": lost,
        "stale": sum(violations.values()) - lost,
        "violations": dict(violations),
        "p99_before_ms": _p99_ms([op.latency_ns or 0 for op in before if op.outcome is Outcome.OK]),
        "p99_during_ms": _p99_ms([op.latency_ns or 0 for op in during if op.outcome is Outcome.OK]),
        "fault_s": round((window.healed_ns - window.injected_ns) / 1e9, 1),
        "errors": dict(Counter(f"{op.kind} {op.error} {op.result.get('message', '')}".strip() for op in failed)),
        "report": str(result.report_path),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--faults", default="kill,pause", help="comma-separated: kill, pause, none")
    parser.add_argument("--nodes", default="0,1,2", help="comma-separated node indexes (0 is the seed)")
    parser.add_argument("--runs", type=int, default=1, help="runs per fault and node")
    parser.add_argument("--timeouts", choices=("stock", "tuned"), default="stock", help="the server's timeouts")
    parser.add_argument("--before", type=float, default=15.0, help="seconds of load before the fault")
    parser.add_argument("--down", type=float, default=20.0, help="seconds a killed node stays down")
    parser.add_argument("--pause", type=float, default=10.0, help="seconds a node stays stopped")
    parser.add_argument("--workers", type=int, default=4, help="S3 client threads")
    parser.add_argument("--seed", type=int, default=60)
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a database.cassandra setting instead of Silt's default (e.g. heartbeat_timeout_s=1.0)",
    )
    parser.add_argument(
        "--compare",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="then run every fault again with this database.cassandra setting added (repeatable: all at once)",
    )
    args = parser.parse_args(argv)
    os.environ[TIMEOUTS_ENV] = args.timeouts
    cluster = CassandraCluster.start()
    root = Path(tempfile.mkdtemp(prefix="silt-bench-cassandra-faults-"))
    try:
        base = dict(item.split("=", 1) for item in args.set)
        variants = [base] + ([{**base, **dict(item.split("=", 1) for item in args.compare)}] if args.compare else [])
        seed = args.seed
        for number, overrides in enumerate(variants):
            seed = run_variant(args, cluster, root / f"variant-{number}", overrides, seed)
    finally:
        cluster.stop()
    return 0


def run_variant(
    args: argparse.Namespace, cluster: CassandraCluster, root: Path, overrides: dict[str, str], seed: int
) -> int:
    """Every fault, node and run of args on a fresh Silt stack with these driver settings, seeds
    (and so repositories) from seed on; the last seed used."""
    root.mkdir(parents=True)
    # Silt's own defaults for everything but where the cluster is and what it keeps. A keyspace
    # per stack: a stack's auth setup is its own (its keys live in its data directory).
    config = cluster.database_config(
        keyspace=f"bench_faults_{root.name.replace('-', '_')}",
        request_timeout_s=CassandraConfig.model_fields["request_timeout_s"].default,
        read_timeout_s=CassandraConfig.model_fields["read_timeout_s"].default,
        **overrides,
    )
    database = config.model_dump(mode="json", exclude_none=True)
    topology = start_topology(root, database, random.Random(args.seed), log_level="INFO")
    try:
        for fault in args.faults.split(","):
            for node in (int(n) for n in args.nodes.split(",")):
                for run in range(args.runs):
                    seed += 1
                    duration = args.pause if fault == "pause" else args.down
                    kinds = KINDS[fault]
                    window = Window(kinds, args.before, duration, (node,) if kinds else ())
                    result = run_once(
                        f"faults-{fault}-{node}", topology, cluster, seed, [], args.workers, windows=[window]
                    )
                    emit_calibration()
                    # The machine may be shared: its load says how far latencies are the fault's.
                    load = [round(x, 1) for x in os.getloadavg()]
                    line = {**measure(fault, node, run, result), "load_avg": load, **overrides}
                    print(json.dumps(line), flush=True)
                    time.sleep(2.0)  # hints delivered, the restarted node warm again
    finally:
        topology.stop()
    return seed


if __name__ == "__main__":
    sys.exit(main())
