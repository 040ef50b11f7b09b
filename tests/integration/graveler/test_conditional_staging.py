"""Conditional staging writes over their guards (docs/design/lockfree-staging.md, conditional
writer flow): exact under real threads next to plain writers and committers, and a write whose
writer died between its guard and its value finished by the next conditional writer.

Every leg runs on each KV driver, Cassandra's included (marked ``cassandra``).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import grpc
import pytest

from engine.core.deadline import Deadline
from engine.core.model import StagingToken
from engine.core.staging import ADMISSION, GUARD_PREFIX, KEY_PREFIX, _decode_guard
from silt.errors import Unavailable
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb
from silt.kv.store import AllOf, Condition
from tests.integration.graveler.conftest import GravelerEnv

CREATORS = 6
ONCE_KEYS = 8  # created only conditionally
BOTH_KEYS = 4  # created conditionally and written once plainly, racing
PLAIN_WRITERS = 2
PLAIN_WRITES = 25
COMMITTERS = 2


def _stage(env: GravelerEnv, repo: str, key: str, etag: str, **condition: Any) -> str:
    """StageEntry's outcome: "ok" or the gRPC code's name. Every write has its own physical
    address, as at the gateway: two writes are never the same entry."""
    entry = pb.Entry(etag=etag, physical_address=f"data/{uuid.uuid4().hex}")
    request = api.StageEntryRequest(repository=repo, branch="main", key=key, entry=entry, **condition)
    try:
        env.stub.StageEntry(request, timeout=60)
        return "ok"
    except grpc.RpcError as exc:
        return exc.code().name


class Attempts:
    """One conditional creator's tries of one key: (started, outcome, acknowledged at)."""

    def __init__(self) -> None:
        self.tries: list[tuple[float, str, float]] = []

    def create(self, env: GravelerEnv, repo: str, key: str, etag: str) -> None:
        # As an S3 client does with 409 ConditionalRequestConflict: retry. ABORTED leaves the
        # write undecided; a retry either wins or finds a value (perhaps its own) in place.
        for _ in range(100):
            started = time.monotonic()
            outcome = _stage(env, repo, key, etag, if_absent=True)
            self.tries.append((started, outcome, time.monotonic()))
            if outcome != "ABORTED":
                return

    @property
    def won(self) -> tuple[float, float] | None:
        return next(((started, done) for started, outcome, done in self.tries if outcome == "ok"), None)

    @property
    def undecided(self) -> bool:
        return any(outcome == "ABORTED" for _, outcome, _ in self.tries)


def test_one_conditional_creator_wins_per_key_beside_plain_writers_and_committers(env: GravelerEnv) -> None:
    repo = env.new_repo("guards")
    once = [f"once/{k}" for k in range(ONCE_KEYS)]
    both = [f"both/{k}" for k in range(BOTH_KEYS)]
    attempts = {(w, key): Attempts() for w in range(CREATORS) for key in once + both}
    plain_acked: dict[str, str] = {}
    both_plain: dict[str, tuple[float, float]] = {}  # key -> (started, acknowledged) of its plain write
    errors: list[str] = []
    stop = threading.Event()
    go = threading.Barrier(CREATORS + PLAIN_WRITERS + 1)

    together = threading.Barrier(CREATORS)

    def creator(w: int) -> None:
        go.wait()
        # Every creator starts on each key at the same moment: all of them race for it.
        for key in once + both:
            together.wait(120)
            attempts[(w, key)].create(env, repo, key, f"c{w}")

    def plain_writer(p: int) -> None:
        go.wait()
        for i in range(PLAIN_WRITES):
            key, value = f"plain/{p}/{i}", f"p{p}.{i}"
            outcome = _stage(env, repo, key, value)
            if outcome != "ok":
                errors.append(f"plain write {key}: {outcome}")
                continue
            plain_acked[key] = value
            if p == 0 and i % 6 == 0 and i // 6 < BOTH_KEYS:
                target = both[i // 6]
                started = time.monotonic()
                outcome = _stage(env, repo, target, "plain")
                if outcome != "ok":
                    errors.append(f"plain write {target}: {outcome}")
                else:
                    both_plain[target] = (started, time.monotonic())

    def committer() -> None:
        while not stop.is_set():
            try:
                env.commit(repo, "main", allow_empty=True)
            except grpc.RpcError as exc:
                if exc.code() != grpc.StatusCode.ABORTED:
                    errors.append(f"commit: {exc.code().name}")

    committers = [threading.Thread(target=committer) for _ in range(COMMITTERS)]
    workers = [threading.Thread(target=creator, args=(w,)) for w in range(CREATORS)]
    workers += [threading.Thread(target=plain_writer, args=(p,)) for p in range(PLAIN_WRITERS)]
    for thread in committers + workers:
        thread.start()
    try:
        go.wait()
        for thread in workers:
            thread.join(300)
    finally:
        stop.set()
        for thread in committers:
            thread.join(120)
    assert not any(thread.is_alive() for thread in committers + workers)
    assert not errors, errors
    env.commit(repo, "main", allow_empty=True)

    for key in once + both:
        tries = [attempts[(w, key)] for w in range(CREATORS)]
        outcomes = {outcome for t in tries for _, outcome, _ in t.tries}
        assert outcomes <= {"ok", "FAILED_PRECONDITION", "ABORTED"}, (key, outcomes)
        winners = [w for w, t in enumerate(tries) if t.won]
        assert len(winners) <= 1, (key, winners)  # never two successes
        final = env.etag(repo, "main", key)
        plain = both_plain.get(key)
        if plain is not None:
            started_plain, acked_plain = plain
            # A conditional create never succeeds against a value acknowledged before it began.
            late = [outcome for t in tries for started, outcome, _ in t.tries if started > acked_plain]
            assert "ok" not in late, (key, late)
            if final == "plain":
                # Kept, unless a conditional write acknowledged after it began was lost.
                continue
            # A conditional value over the plain one: its writer tried before the plain write was
            # acknowledged, and no success of it was acknowledged before the plain write began.
            writer = int(final[1:])
            assert any(started < acked_plain for started, _, _ in tries[writer].tries), (key, final, plain)
            won = tries[writer].won
            assert won is None or won[1] > started_plain, (key, final, won, plain)
        if winners:
            assert final == f"c{winners[0]}", (key, winners, final)
        else:
            # No success: the value standing is an undecided (ABORTED) writer's, as its retry found.
            assert final in {f"c{w}" for w, t in enumerate(tries) if t.undecided}, (key, final)
    assert len(both_plain) == BOTH_KEYS

    # No acknowledged plain write lost, through every commit that sealed its token.
    assert len(plain_acked) == PLAIN_WRITERS * PLAIN_WRITES
    for key, value in plain_acked.items():
        assert env.etag(repo, "main", key) == value, key


class DiesBeforeItsValue:
    """Makes the next conditional writer fail between its guard's compare-and-set and the
    plain write of its value, as a writer that dies there."""

    def __init__(self, env: GravelerEnv, monkeypatch: pytest.MonkeyPatch) -> None:
        kv = env.graveler.staging.kv
        self.inner = kv.apply
        self.died = False

        def apply(
            partition: bytes,
            puts: Sequence[tuple[bytes, bytes]],
            deletes: Sequence[bytes] = (),
            condition: Condition | None = None,
            timestamp: int | None = None,
            before_write: Callable[[], None] | None = None,
            **rest: Any,
        ) -> None:
            if not self.died and timestamp is not None and puts and puts[0][0].startswith(KEY_PREFIX):
                self.died = True
                raise Unavailable("the writer died before writing its value")
            self.inner(partition, puts, deletes, condition, timestamp, before_write=before_write, **rest)

        monkeypatch.setattr(kv, "apply", apply)


def _token(env: GravelerEnv, repo: str) -> StagingToken:
    refs = env.graveler.refs
    return StagingToken(refs.get_branch(refs.repository(repo), "main").branch.staging_token)


def test_the_next_conditional_writer_finishes_a_write_whose_writer_died(
    env: GravelerEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = env.new_repo("helped")
    dies = DiesBeforeItsValue(env, monkeypatch)
    assert _stage(env, repo, "k", "first", if_absent=True) == "UNAVAILABLE"  # outcome unknown
    assert dies.died
    token = _token(env, repo)
    kv = env.graveler.staging.kv
    # The guard admitted the write; its value is not staged yet, so readers do not see it.
    kv.get(token.encode(), GUARD_PREFIX + b"k")
    assert list(env.stub.ListEntries(api.ListEntriesRequest(repository=repo, ref="main")).items) == []

    # The next conditional writer finishes it first, then judges its condition against it.
    assert _stage(env, repo, "k", "second", if_absent=True) == "FAILED_PRECONDITION"
    assert env.etag(repo, "main", "k") == "first"
    # Written as its writer would have: at the timestamp the guard admitted it with.
    _, written_at = kv.get_stamped(token.encode(), KEY_PREFIX + b"k")
    guard = kv.get(token.encode(), GUARD_PREFIX + b"k").value
    assert written_at == int.from_bytes(guard[:8], "big")
    # And the chain goes on: If-Match on the finished value succeeds once.
    assert _stage(env, repo, "k", "third", if_match_etag="first") == "ok"
    assert _stage(env, repo, "k", "fourth", if_match_etag="first") == "FAILED_PRECONDITION"
    assert env.etag(repo, "main", "k") == "third"


def test_an_unfinished_write_never_overrides_a_later_plain_write(
    env: GravelerEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = env.new_repo("later")
    DiesBeforeItsValue(env, monkeypatch)
    assert _stage(env, repo, "k", "died", if_absent=True) == "UNAVAILABLE"
    assert _stage(env, repo, "k", "plain") == "ok"  # stamped after the guard's admission
    # The finished write sorts before the plain one, which stays current.
    assert _stage(env, repo, "k", "late", if_absent=True) == "FAILED_PRECONDITION"
    assert env.etag(repo, "main", "k") == "plain"
    assert _stage(env, repo, "k", "next", if_match_etag="plain") == "ok"
    assert env.etag(repo, "main", "k") == "next"


def test_a_reset_key_stays_reset_after_an_unfinished_write(env: GravelerEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    """Resetting a key fences its guard: the write that died is not finished afterwards, and the
    guard is never absent again (a late copy of a create on its absence cannot land)."""
    repo = env.new_repo("reset")
    DiesBeforeItsValue(env, monkeypatch)
    assert _stage(env, repo, "k", "died", if_absent=True) == "UNAVAILABLE"
    env.stub.ResetBranch(api.ResetBranchRequest(repository=repo, branch="main", key="k"))
    token = _token(env, repo)
    # The key's guard is a fence (the token's ADMISSION row, under the same prefix, is not a key's).
    guards = [row for row in env.graveler.staging.kv.scan(token.encode(), GUARD_PREFIX) if row.key != ADMISSION]
    assert [row.key for row in guards] == [GUARD_PREFIX + b"k"]
    assert _decode_guard(guards[0].value)[3]
    assert _stage(env, repo, "k", "fresh", if_absent=True) == "ok"
    assert env.etag(repo, "main", "k") == "fresh"


class Between:
    """Runs `between` once, inside the next conditional writer's flow: right before its guard's
    compare-and-set (at="guard"), or right after it, before the plain write of its value
    (at="value")."""

    def __init__(self, env: GravelerEnv, monkeypatch: pytest.MonkeyPatch, at: str, between: Callable[[], None]) -> None:
        kv = env.graveler.staging.kv
        self.inner = kv.apply
        self.fired = False

        def apply(
            partition: bytes,
            puts: Sequence[tuple[bytes, bytes]],
            deletes: Sequence[bytes] = (),
            condition: Condition | AllOf | None = None,
            timestamp: int | tuple[int, ...] | None = None,
            before_write: Callable[[], None] | None = None,
            **rest: Any,
        ) -> None:
            guard = isinstance(condition, AllOf) and ADMISSION in [key for key, _ in condition]
            if not self.fired and at == "guard" and guard:
                self.fired = True
                between()
            self.inner(partition, puts, deletes, condition, timestamp, before_write=before_write, **rest)
            if not self.fired and at == "value" and guard:
                self.fired = True
                between()

        monkeypatch.setattr(kv, "apply", apply)


class RefusedAfterSeal(Exception):
    pass


def _refuse(_: object) -> None:
    raise RefusedAfterSeal


def test_a_late_conditional_writer_of_a_sealed_token_is_fenced_out(
    env: GravelerEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A judged the key in token T; before its compare-and-set a commit seals T (and stops, as a
    refusing pre-commit hook leaves it: T sealed, not yet read), and B judges the same value
    through T and writes into the new token. A's compare-and-set then fails on the fence B left
    in T, and A, judged again on B's value, is refused: never two successes on one version."""
    repo = env.new_repo("fenced")
    assert _stage(env, repo, "k", "v0", if_absent=True) == "ok"
    handle = env.graveler.refs.repository(repo)
    outcomes: dict[str, str] = {}

    def between() -> None:
        with pytest.raises(RefusedAfterSeal):
            env.graveler.committer.commit(handle, "main", "m", {}, "t", True, [], Deadline(), after_seal=_refuse)
        outcomes["b"] = _stage(env, repo, "k", "b", if_match_etag="v0")

    Between(env, monkeypatch, "guard", between)
    outcomes["a"] = _stage(env, repo, "k", "a", if_match_etag="v0")
    assert outcomes == {"a": "FAILED_PRECONDITION", "b": "ok"}
    assert env.etag(repo, "main", "k") == "b"


def test_a_conditional_write_whose_token_a_commit_closed_under_it_is_committed_and_succeeds(
    env: GravelerEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A's compare-and-set landed in token T; before A writes its value, a commit seals T,
    closes it (finishing A's admitted write) and commits it, and B writes over A's value
    (If-Match A) in the new token. A's outcome is then known: its value is in the commit and
    B came after it, so A succeeds (it was answered ABORTED, "may have been applied", before
    commits closed the tokens they read)."""
    repo = env.new_repo("closed")
    assert _stage(env, repo, "k", "v0", if_absent=True) == "ok"
    seen: dict[str, str] = {}

    def between() -> None:
        seen["commit"] = env.commit(repo, "main", allow_empty=True).id
        seen["b"] = _stage(env, repo, "k", "b", if_match_etag="a")

    Between(env, monkeypatch, "value", between)
    assert _stage(env, repo, "k", "a", if_match_etag="v0") == "ok"
    assert seen["b"] == "ok"
    assert env.etag(repo, seen["commit"], "k") == "a"
    assert env.etag(repo, "main", "k") == "b"


def test_a_late_conditional_writer_of_a_dropped_token_is_refused(
    env: GravelerEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A judged the key in token T (which had admitted no conditional write yet); before its
    compare-and-set, a reset of the uncommitted changes drops T, and B writes over the same
    value in the new token. A dropped token stays closed to conditional writers, so A's
    compare-and-set is refused and A, judged again on B's value, is refused: A's write never
    lands where nothing reads it, to be taken for one that stood."""
    repo = env.new_repo("dropped")
    assert _stage(env, repo, "k", "v0", if_absent=True) == "ok"
    env.commit(repo, "main")
    env.put(repo, "main", "other", "x")  # the reset has something to drop
    token = _token(env, repo)
    outcomes: dict[str, str] = {}

    def between() -> None:
        env.stub.ResetBranch(api.ResetBranchRequest(repository=repo, branch="main", all=True))
        assert _token(env, repo) != token
        env.graveler.staging.drop(token)  # the cleaner's work, done now
        outcomes["b"] = _stage(env, repo, "k", "b", if_match_etag="v0")

    Between(env, monkeypatch, "guard", between)
    outcomes["a"] = _stage(env, repo, "k", "a", if_match_etag="v0")
    assert outcomes == {"a": "FAILED_PRECONDITION", "b": "ok"}
    assert env.etag(repo, "main", "k") == "b"
