"""One seeded run: a fresh repository, the workers and the committer against the topology while
the nemesis works through its schedule; then everything healed, final reads, the checks, and
the report (build/jepsen/<leg>-<seed>.txt)."""

from __future__ import annotations

import dataclasses
import json
import os
import random
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import requests

from tests.jepsen.checker import FINAL, Verdict, Violation, check_key, commit_misses, resurrections, unreadable
from tests.jepsen.history import COMMIT, History, Op, Outcome
from tests.jepsen.nemesis import Nemesis, Window, schedule
from tests.jepsen.topology import Topology
from tests.jepsen.workload import Committer, Run, Worker, commit_contents, final_reads
from tests.support.cassandra_cluster import CassandraCluster

SEED_ENV = "SILT_JEPSEN_SEED"
REPORT_DIR = Path(__file__).resolve().parents[2] / "build" / "jepsen"
HEAL_TIMEOUT_S = 120.0
LISTING_THREADS = 4


@dataclass
class Result:
    leg: str
    seed: int
    history: History
    windows: list[Window]
    violations: list[Violation] = field(default_factory=list)
    undecided: list[str] = field(default_factory=list)  # keys too large for the search
    seconds: dict[str, float] = field(default_factory=dict)  # phase -> its wall time
    report_path: Path | None = None


def seed_from_env(default: int) -> int:
    value = os.environ.get(SEED_ENV, "").strip()
    return int(value) if value else default


def run_once(
    leg: str,
    topology: Topology,
    cluster: CassandraCluster | None,
    seed: int,
    kinds: list[str],
    workers: int = 4,
    mixed: bool = True,
    keys_per_branch: int = 6,
    fault_s: tuple[float, float] = (2.0, 4.0),
    windows: list[Window] | None = None,
) -> Result:
    """windows: a fixed schedule instead of one drawn from the seed (kinds, mixed and fault_s then
    unused)."""
    rng = random.Random(seed)
    drawn = schedule(rng, kinds, mixed, fault_s)
    windows = drawn if windows is None else windows
    repo = f"jepsen-{leg}-{seed}".lower()
    history = History()
    # Two written branches, keys named apart (a commit's listing of a branch's keys is by prefix).
    keys = {"dev": [f"a{i}" for i in range(keys_per_branch)], "feat": [f"b{i}" for i in range(keys_per_branch // 2)]}
    run = Run(topology, repo, history, keys)
    admin = run.s3(0)
    admin.create_bucket(Bucket=repo)
    for branch in keys:
        created = run.rest().post(f"{run.api(0)}/branches", json={"name": branch, "source": "main"}, timeout=30)
        created.raise_for_status()
    committer = Committer(run, seed)
    threads = [threading.Thread(target=Worker(run, i, seed).loop, name=f"jepsen-s3-{i}") for i in range(workers)]
    threads.append(threading.Thread(target=committer.loop, name="jepsen-committer"))
    nemesis = Nemesis(topology, cluster, random.Random(rng.random()), windows)
    began = time.monotonic()
    for thread in threads:
        thread.start()
    try:
        nemesis.run()
    finally:
        run.stop.set()
        for thread in threads:
            thread.join(60)
    assert not nemesis.errors, f"the nemesis failed: {nemesis.errors[:3]!r}"
    ran = time.monotonic()
    heal(topology, cluster)
    final_reads(run)
    healed = time.monotonic()
    result = Result(leg, seed, history, windows)
    check(run, committer, result)
    result.seconds = {"run": ran - began, "heal and final reads": healed - ran, "check": time.monotonic() - healed}
    result.report_path = write_report(result)
    return result


def heal(topology: Topology, cluster: CassandraCluster | None) -> None:
    """Every process running and unpaused, every proxy passing, every node up; then both edges
    answering a listing (graveler reachable through each)."""
    if cluster is not None and cluster.controllable:
        cluster.heal(HEAL_TIMEOUT_S)
    for proxy in topology.proxies:
        proxy.heal()
    deadline = time.monotonic() + HEAL_TIMEOUT_S
    for i in range(len(topology.edges)):
        while True:
            try:
                if requests.get(f"{topology.edge_url(i)}/_silt/health/ready", timeout=5).status_code == 200:
                    break
            except requests.RequestException:
                pass
            assert time.monotonic() < deadline, f"edge{i} did not answer after healing"
            time.sleep(0.2)


def check(run: Run, committer: Committer, result: Result) -> None:
    history = run.history
    for key in history.register_keys():
        ops = history.of_key(key)
        verdict, found = check_key(key, ops)
        if verdict is Verdict.TOO_LARGE:
            result.undecided.append(key)
        result.violations += found + resurrections(key, ops) + unreadable(key, ops)
    by_branch = {
        branch: {f"{branch}/{key}": history.of_key(f"{branch}/{key}") for key in keys}
        for branch, keys in run.keys.items()
    }
    # (commit or merge, the branch whose keys it must hold, the moment before which acknowledged
    # writes count): a merge's commit on main holds what the merged commit held, at least.
    checks = [(op, op.key, op.invoke_ns) for op in history.ops if op.kind == COMMIT and op.outcome is Outcome.OK]
    checks += [
        (merge, commit.key, commit.invoke_ns) for commit, merge in committer.merges if merge.outcome is Outcome.OK
    ]
    with ThreadPoolExecutor(LISTING_THREADS) as pool:
        contents = list(pool.map(lambda c: held(run, c[0], c[1]), checks))
    for (op, branch, moment), values in zip(checks, contents, strict=True):
        result.violations += commit_misses(op, values, by_branch[branch], moment)


def held(run: Run, commit: Op, branch: str) -> dict[str, str | None]:
    """The values of branch's keys in a commit (as history keys, "<branch>/<key>")."""
    contents = commit_contents(run, commit.result["id"], run.keys[branch][0][0])
    return {f"{branch}/{path}": value for path, value in contents.items()}


# --- the report ---------------------------------------------------------------------------------


def _p99_ms(latencies: list[int]) -> str:
    if not latencies:
        return "-"
    ordered = sorted(latencies)
    return f"{ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] / 1e6:.0f}"


def _kinds_during(op: Op, windows: list[Window]) -> set[str]:
    """The fault kinds whose window overlaps op's interval ('none': no window does)."""
    end = op.complete_ns if op.complete_ns is not None else op.invoke_ns
    kinds = {
        kind
        for w in windows
        for kind in w.kinds
        if w.injected_ns and op.invoke_ns < (w.healed_ns or end) and end > w.injected_ns
    }
    return kinds or {"none"}


def latency_by_fault(ops: list[Op], windows: list[Window]) -> dict[str, tuple[int, str]]:
    """Fault kind ('none': outside every window) -> (ok operations, their p99 latency in ms)."""
    buckets: dict[str, list[int]] = {}
    for op in ops:
        if op.outcome is not Outcome.OK or op.complete_ns is None:
            continue
        for kind in _kinds_during(op, windows):
            buckets.setdefault(kind, []).append(op.complete_ns - op.invoke_ns)
    return {kind: (len(values), _p99_ms(values)) for kind, values in sorted(buckets.items())}


def failed_request(op: Op) -> bool:
    """Whether op failed for the service's sake: an answer of 5xx or none at all (a timeout, a
    connection refused or lost). A 4xx is the service refusing what the request asked (a
    conditional write whose condition no longer holds), not a failure."""
    if op.outcome in (Outcome.OK, None):
        return False
    return op.outcome is Outcome.UNKNOWN or op.error[:1] != "4"


def failed_by_fault(ops: list[Op], windows: list[Window]) -> dict[str, int]:
    """Fault kind ('none': outside every window) -> requests that failed or whose outcome the
    client could not tell (an error status, a timeout): what a user of the service would see as
    a failed request. A Cassandra node lost while a quorum lives should cause none."""
    failed: Counter[str] = Counter()
    for op in ops:
        if op.process == FINAL or not failed_request(op):
            continue
        for kind in _kinds_during(op, windows):
            failed[kind] += 1
    return dict(sorted(failed.items()))


def faults_during(ops: list[Op], windows: list[Window]) -> str:
    """The faults (kind and target) in effect at some time within the operations' intervals."""
    if not ops:
        return "none"
    start = min(op.invoke_ns for op in ops)
    end = max(op.complete_ns or op.invoke_ns for op in ops)
    found = [
        f"{kind}[{target}]"
        for w in windows
        if w.injected_ns and w.injected_ns < end and (w.healed_ns or end) > start
        for kind, target in zip(w.kinds, w.targets, strict=True)
    ]
    return ", ".join(found) or "none"


def render(result: Result) -> str:
    ops = result.history.ops
    lines = [f"Jepsen run: leg {result.leg}, seed {result.seed} ({len(ops)} operations)", ""]
    lines.append("operations by kind and outcome:")
    counts = Counter((op.kind, op.outcome.value if op.outcome else "pending") for op in ops)
    for kind in sorted({k for k, _ in counts}):
        row = ", ".join(f"{o} {counts[(kind, o)]}" for o in ("ok", "fail", "unknown") if counts[(kind, o)])
        refused = sum(1 for op in ops if op.kind == kind and op.precondition_failed)
        lines.append(f"  {kind:<10} {row}" + (f" (412: {refused})" if refused else ""))
    lines.append("phases (s): " + ", ".join(f"{phase} {took:.1f}" for phase, took in result.seconds.items()))
    lines += ["", "faults injected (kind: times):"]
    faults = Counter(kind for w in result.windows for kind in w.kinds if w.injected_ns)
    lines += [f"  {kind:<16} {n}" for kind, n in sorted(faults.items())]
    lines += ["", "p99 latency of ok operations during each fault (ms):"]
    for kind, (n, p99) in latency_by_fault(ops, result.windows).items():
        lines.append(f"  {kind:<16} {p99:>7} ms over {n} ops")
    lines += ["", "failed requests (fail or unknown) during each fault:"]
    failed = failed_by_fault(ops, result.windows)
    lines += [f"  {kind:<16} {n}" for kind, n in failed.items()] or ["  none"]
    if result.undecided:
        lines += ["", f"keys too large to decide: {', '.join(result.undecided)}"]
    lines += ["", f"violations: {len(result.violations)}"]
    by_kind = Counter(v.kind for v in result.violations)
    lines += [f"  {kind}: {n}" for kind, n in sorted(by_kind.items())]
    for violation in result.violations:
        lines += [
            "",
            violation.render(),
            f"    faults during the slice: {faults_during(violation.slice, result.windows)}",
        ]
    return "\n".join(lines) + "\n"


def write_report(result: Result) -> Path:
    """The report, and beside it the whole history (one JSON operation a line)."""
    REPORT_DIR.mkdir(parents=True, exist_ok=True)
    path = REPORT_DIR / f"{result.leg}-{result.seed}.txt"
    path.write_text(render(result))
    with path.with_suffix(".history.jsonl").open("w") as out:
        for op in result.history.ops:
            out.write(json.dumps({**dataclasses.asdict(op), "outcome": op.outcome and op.outcome.value}) + "\n")
    return path


def summary(result: Result) -> str:
    ops = result.history.ops
    outcomes = Counter(op.outcome.value for op in ops if op.outcome)
    faults = sum(len(w.kinds) for w in result.windows if w.injected_ns)
    failed = failed_by_fault(ops, result.windows)
    node_faults = sum(n for kind, n in failed.items() if kind.startswith("cassandra-"))
    return (
        f"jepsen {result.leg} seed {result.seed}: {len(ops)} ops ({outcomes['ok']} ok, {outcomes['fail']} fail,"
        f" {outcomes['unknown']} unknown), {faults} faults, {len(result.violations)} violations,"
        f" {node_faults} failed requests during Cassandra node faults; report: {result.report_path}"
    )
