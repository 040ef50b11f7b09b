"""The lock-free flows' guarantees under real concurrency: many writers and committers on one branch.

The flows and their guarantees: docs/design/lockfree-staging.md.

* no lost writes: every acknowledged write ends up committed or still staged, and no key
  comes back after an acknowledged delete;
* causality: a commit holds every write acknowledged before the commit started.

Each key is written by exactly one writer, sequentially, so its acknowledged history is a
well-defined sequence: op i of key k puts the value "k#i", or deletes k. Half the writers put
all their keys in one StageEntries call, the other half one StageEntry per key.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest

from engine.core.builder import MetaRangeBuilder
from engine.core.compaction import CompactionLost
from engine.core.model import StagingToken
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb
from tests.integration.graveler.conftest import GravelerEnv
from tests.support.wait import wait_until

# Races, run again and again: seconds each.
pytestmark = pytest.mark.slow

WRITERS = 8
COMMITTERS = 2
ROUNDS = 20
KEYS_PER_WRITER = 4


def is_delete(op: int) -> bool:
    return op % 4 == 3


@dataclass
class KeyHistory:
    # (op index, acknowledged at) in order; ops are sequential per key.
    acked: list[tuple[int, float]] = field(default_factory=list)

    def last_acked_before(self, moment: float) -> int | None:
        found = None
        for op, at in self.acked:
            if at < moment:
                found = op
        return found


def snapshot(env: GravelerEnv, repo: str, ref: str) -> dict[str, int]:
    """key -> op index of its value, from a full listing of ref."""
    out: dict[str, int] = {}
    after = ""
    while True:
        page = env.stub.ListEntries(api.ListEntriesRequest(repository=repo, ref=ref, after=after, amount=1000))
        for item in page.items:
            out[item.key] = int(item.entry.etag.rsplit("#", 1)[1])
        if not page.has_more:
            return out
        after = page.items[-1].key


def check_holds(state: dict[str, int], histories: dict[str, KeyHistory], moment: float, what: str) -> None:
    for key, history in histories.items():
        required = history.last_acked_before(moment)
        if required is None:
            continue
        if key in state:
            got = state[key]
            assert got >= required and not is_delete(got), f"{what}: {key} holds op {got}, needs op >= {required}"
        else:
            # Absent is right only if the required op, or a later one, was a delete.
            latest = history.acked[-1][0]
            assert any(is_delete(op) for op in range(required, latest + 1)), (
                f"{what}: {key} missing, but op {required} (a put) was acknowledged before"
            )


def run_workload(
    env: GravelerEnv, repo: str, compact_every: float | None = None
) -> tuple[dict[str, KeyHistory], list[tuple[float, str]]]:
    histories = {f"w{w}/k{k}": KeyHistory() for w in range(WRITERS) for k in range(KEYS_PER_WRITER)}
    commits: list[tuple[float, str]] = []
    stop = threading.Event()
    errors: list[BaseException] = []
    lock = threading.Lock()
    # Set by each writer once all its keys were written once: commits then have something to do.
    going = [threading.Event() for _ in range(WRITERS)]

    def entry(key: str, op: int) -> pb.Entry:
        return pb.Entry(physical_address=f"{key}/{op}", etag=f"{key}#{op}", size=op)

    def writer(w: int) -> None:
        op = 0
        keys = [f"w{w}/k{k}" for k in range(KEYS_PER_WRITER)]
        try:
            while not stop.is_set():
                if is_delete(op):
                    for key in keys:
                        env.stub.DeleteEntry(api.DeleteEntryRequest(repository=repo, branch="main", key=key))
                        histories[key].acked.append((op, time.monotonic()))
                elif w % 2:
                    # Half the writers stage all their keys in one call, as an edge does with its
                    # clients' concurrent writes: acknowledged together, when the call returns.
                    staged = [api.StagedEntry(key=key, entry=entry(key, op)) for key in keys]
                    together = api.StageEntriesRequest(repository=repo, branch="main", entries=staged)
                    outcomes = env.stub.StageEntries(together).outcomes
                    assert [o.result for o in outcomes] == [api.StageEntryOutcome.RESULT_STAGED] * len(keys)
                    acked = time.monotonic()
                    for key in keys:
                        histories[key].acked.append((op, acked))
                else:
                    for key in keys:
                        request = api.StageEntryRequest(repository=repo, branch="main", key=key, entry=entry(key, op))
                        env.stub.StageEntry(request)
                        histories[key].acked.append((op, time.monotonic()))
                going[w].set()
                op += 1
        except BaseException as exc:
            errors.append(exc)
            stop.set()

    def committer(c: int) -> None:
        try:
            for r in range(ROUNDS):
                started = time.monotonic()
                result = env.stub.Commit(
                    api.CommitRequest(repository=repo, branch="main", message=f"c{c}-r{r}", allow_empty=True)
                )
                with lock:
                    commits.append((started, result.id))
                if compact_every is not None:
                    # The scenario: gaps between commits, so that compactions also publish while commits run.
                    time.sleep(compact_every / 2)
        except BaseException as exc:
            errors.append(exc)
            stop.set()

    compactions: dict[str, int] = {"published": 0, "lost": 0}

    def compactor(every: float) -> None:
        # A compaction that loses to a commit fails without change (CompactionLost): expected.
        try:
            while not stop.wait(every):
                try:
                    env.graveler.compact(repo, "main")
                    compactions["published"] += 1
                except CompactionLost:
                    compactions["lost"] += 1
        except BaseException as exc:
            errors.append(exc)
            stop.set()

    writers = [threading.Thread(target=writer, args=(w,)) for w in range(WRITERS)]
    committers = [threading.Thread(target=committer, args=(c,)) for c in range(COMMITTERS)]
    if compact_every is not None:
        writers.append(threading.Thread(target=compactor, args=(compact_every,)))
    for t in writers:
        t.start()
    for started in going:
        assert started.wait(60) or errors, "a writer never got going"
    for t in committers:
        t.start()
    for t in committers:
        t.join(600)
    try:
        if compact_every is not None:
            # Compactions often lose to the committers; keep the writers and the compactor going
            # until one was published, so the checks below also see a compacted branch.
            wait_until(lambda: compactions["published"] or errors, 60, "a compaction published")
    finally:
        stop.set()
        for t in writers:
            t.join(600)
    assert not errors, errors
    if compact_every is not None:
        assert compactions["published"] > 0, compactions
    return histories, commits


def test_writers_and_committers_keep_the_lockfree_guarantees(env: GravelerEnv) -> None:
    check_lockfree_guarantees(env)


# Races are probabilistic: on the embedded driver the whole scenario runs five times per CI run.
@pytest.mark.parametrize("store", ["local"], indirect=True)
@pytest.mark.parametrize("again", range(4))
def test_guarantees_hold_run_after_run_on_local(env: GravelerEnv, again: int) -> None:
    check_lockfree_guarantees(env)


def test_guarantees_hold_with_a_compactor_running(env: GravelerEnv) -> None:
    """A compactor every ~100 ms alongside the writers and committers (docs/design/compaction.md)."""
    check_lockfree_guarantees(env, compact_every=0.1)


def check_lockfree_guarantees(env: GravelerEnv, compact_every: float | None = None) -> None:
    repo = env.new_repo("race")
    # Seed the branch so deletes of never-written keys are not NotFound.
    for w in range(WRITERS):
        for k in range(KEYS_PER_WRITER):
            key = f"w{w}/k{k}"
            env.stub.StageEntry(
                api.StageEntryRequest(repository=repo, branch="main", key=key, entry=pb.Entry(etag=f"{key}#-1"))
            )
    env.commit(repo, "main", "seed")

    histories, commits = run_workload(env, repo, compact_every)
    assert len(commits) == COMMITTERS * ROUNDS
    assert sum(len(h.acked) for h in histories.values()) > WRITERS * KEYS_PER_WRITER * 5

    # Every commit holds every write acknowledged before it started.
    for started, commit_id in commits:
        check_holds(snapshot(env, repo, commit_id), histories, started, f"commit {commit_id[:10]}")

    # No lost writes, nothing resurrected: the branch (staged + committed) shows each key's last op.
    final = snapshot(env, repo, "main")
    for key, history in histories.items():
        last = history.acked[-1][0]
        if is_delete(last):
            assert key not in final, f"{key} was deleted (op {last}) but is back as op {final.get(key)}"
        else:
            assert final.get(key) == last, f"{key}: last acknowledged op {last}, branch shows {final.get(key)}"

    # After a final commit everything is committed and nothing is left staged.
    env.stub.Commit(api.CommitRequest(repository=repo, branch="main", message="final", allow_empty=True))
    assert snapshot(env, repo, "main@") == final

    # Every acknowledged commit stays in the branch history.
    history_ids: set[str] = set()
    after = ""
    while True:
        page = env.stub.Log(api.LogRequest(repository=repo, ref="main", after=after, amount=1000))
        history_ids.update(c.id for c in page.commits)
        if not page.has_more:
            break
        after = page.next_after
    missing = [cid for _, cid in commits if cid not in history_ids]
    assert not missing, f"{len(missing)} acknowledged commits are not in main's history"


class _HeldBuilder:
    """Delegates to a real builder, but holds every build until `release` is set (or 30 s
    passed): a commit that is still building, for as long as the test needs one."""

    def __init__(self, inner: MetaRangeBuilder) -> None:
        self.inner = inner
        self.release = threading.Event()
        self.building = threading.Event()
        self.released_in_time = False

    def apply_tokens(self, *args: Any, **kwargs: Any) -> Any:
        self.building.set()
        self.released_in_time = self.release.wait(30)
        return self.inner.apply_tokens(*args, **kwargs)

    def drop_token(self, token: StagingToken) -> None:
        self.inner.drop_token(token)

    def close(self) -> None:
        self.inner.close()


def test_commit_does_not_block_writers(env: GravelerEnv) -> None:
    """Writes issued while a commit is building complete before the commit does."""
    repo = env.new_repo("noblock")
    for i in range(300):
        env.stub.StageEntry(
            api.StageEntryRequest(repository=repo, branch="main", key=f"bulk/{i:06d}", entry=pb.Entry(etag=str(i)))
        )
    held = _HeldBuilder(env.graveler.builder)
    env.graveler.builder = held
    finished: dict[str, float] = {}
    errors: list[BaseException] = []

    def commit() -> None:
        try:
            env.stub.Commit(api.CommitRequest(repository=repo, branch="main", message="big"))
        except grpc.RpcError as exc:
            errors.append(exc)
        finished["commit"] = time.monotonic()

    thread = threading.Thread(target=commit)
    thread.start()
    try:
        assert held.building.wait(30), "the commit never started building"
        write_ends: list[float] = []
        for _ in range(3):
            # With a branch lock, these writes would wait for the commit, which waits for them.
            env.stub.StageEntry(
                api.StageEntryRequest(repository=repo, branch="main", key="during", entry=pb.Entry(etag="x")),
                timeout=20,
            )
            write_ends.append(time.monotonic())
    finally:
        held.release.set()
        thread.join()
        env.graveler.builder = held.inner
    assert not errors, errors
    assert held.released_in_time
    assert all(end < finished["commit"] for end in write_ends)
    assert env.etag(repo, "main", "during") == "x"


def _conditional(env: GravelerEnv, repo: str, key: str, etag: str, **condition: Any) -> str:
    """Stage key conditionally: "ok", or the status code name of the refusal. Every write has
    its own physical address, as at the gateway: two writes are never the same entry."""
    entry = pb.Entry(etag=etag, physical_address=f"data/{uuid.uuid4().hex}")
    request = api.StageEntryRequest(repository=repo, branch="main", key=key, entry=entry, **condition)
    try:
        env.stub.StageEntry(request, timeout=30)
        return "ok"
    except grpc.RpcError as exc:
        return exc.code().name


def test_conditional_writes_are_exact_while_commits_seal_tokens(env: GravelerEnv) -> None:
    """If-absent creates each key once and If-Match increments a counter without losing an
    update, with commits sealing the staging token under the writers all along."""
    repo = env.new_repo("cas")
    env.put(repo, "main", "counter", "0")
    stop = threading.Event()
    commit_errors: list[BaseException] = []

    def committer() -> None:
        while not stop.is_set():
            try:
                env.commit(repo, "main", allow_empty=True)
            except grpc.RpcError as exc:
                if exc.code() != grpc.StatusCode.ABORTED:
                    commit_errors.append(exc)

    aborted: list[set[int]] = [set() for _ in range(10)]  # writers told ABORTED, per key

    def create_once(writer: int, k: int) -> str:
        # As an S3 client does with 409 ConditionalRequestConflict: retry. ABORTED leaves the
        # write undecided (a commit may have read the sealed token before it landed), so only
        # a retry settles whether this writer's value stands.
        for _attempt in range(100):
            outcome = _conditional(env, repo, f"once/{k}", f"w{writer}", if_absent=True)
            if outcome != "ABORTED":
                return outcome
            aborted[k].add(writer)
        return outcome

    def creator(writer: int) -> list[str]:
        return [create_once(writer, k) for k in range(10)]

    increments: list[int] = []
    conflicts: list[int] = []  # ABORTED: a write raced across a commit, applied or not

    def incrementer() -> None:
        for _ in range(15):
            for _attempt in range(200):
                current = env.etag(repo, "main", "counter")
                outcome = _conditional(env, repo, "counter", str(int(current) + 1), if_match_etag=current)
                if outcome == "ok":
                    increments.append(1)
                    break
                assert outcome in ("FAILED_PRECONDITION", "ABORTED"), outcome
                if outcome == "ABORTED":
                    conflicts.append(1)

    threads = [threading.Thread(target=committer) for _ in range(COMMITTERS)]
    for thread in threads:
        thread.start()
    results: list[list[str]] = [[] for _ in range(6)]
    try:
        workers = [threading.Thread(target=lambda i=i: results[i].extend(creator(i))) for i in range(6)]
        workers += [threading.Thread(target=incrementer) for _ in range(4)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(120)
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)
    assert not commit_errors, commit_errors
    for k in range(10):
        outcomes = [results[w][k] for w in range(6)]
        winners = [w for w, o in enumerate(outcomes) if o == "ok"]
        # Never two successes. A writer whose token a commit sealed under it, with another
        # writer's value current by then, gets ABORTED: its write may or may not stand; its
        # retry then either wins or finds a value (perhaps its own) in place.
        assert len(winners) <= 1, outcomes
        assert set(outcomes) - {"ok"} <= {"FAILED_PRECONDITION"}, outcomes
        undecided = [f"w{w}" for w in aborted[k]]
        final = env.etag(repo, "main", f"once/{k}")
        assert final == f"w{winners[0]}" if winners else final in undecided, (outcomes, aborted[k], final)
    # Every acknowledged increment counted, none lost to a concurrent writer or a commit; a
    # conflict may or may not have counted.
    assert len(increments) == 60
    assert 60 <= int(env.etag(repo, "main", "counter")) <= 60 + len(conflicts)
    # Once committed, a key is still present for If-absent; If-Match of a missing key is NOT_FOUND.
    env.commit(repo, "main", allow_empty=True)
    assert _conditional(env, repo, "once/0", "late", if_absent=True) == "FAILED_PRECONDITION"
    assert _conditional(env, repo, "missing", "x", if_match_etag="y") == "NOT_FOUND"
