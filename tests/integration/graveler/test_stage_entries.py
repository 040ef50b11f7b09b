"""StageEntries over graveler's real gRPC API: many unconditional writes to one branch in one
call, each as StageEntry would stage it (the edge's group commit, edge/core/stage_batching.py)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

import grpc
import pytest

from engine.core.deadline import Deadline
from engine.core.entries import MAX_STAGE_ENTRIES, STAGE_WRITE_BYTES
from engine.core.model import StagingToken
from engine.graveler import GravelerOptions
from engine.open import open_graveler
from services.graveler.servicer import GravelerServicer
from silt.block.local import LocalAdapter
from silt.errors import Aborted
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb
from silt.kv import Store
from silt.kv.forwarding import ForwardingStore
from silt.kv.store import AllOf, Condition, Timestamp
from tests.integration.graveler.conftest import GravelerEnv
from tests.integration.graveler.test_api import code_of

STAGED = api.StageEntryOutcome.RESULT_STAGED
INVALID = api.StageEntryOutcome.RESULT_INVALID


def _entries(*pairs: tuple[str, str]) -> list[api.StagedEntry]:
    return [api.StagedEntry(key=key, entry=pb.Entry(physical_address=f"data/{etag}", etag=etag)) for key, etag in pairs]


def _stage(env: GravelerEnv, repo: str, staged: list[api.StagedEntry], branch: str = "main") -> list[int]:
    request = api.StageEntriesRequest(repository=repo, branch=branch, entries=staged)
    return [outcome.result for outcome in env.stub.StageEntries(request).outcomes]


def test_each_entry_is_staged_as_stage_entry_would_and_invalid_ones_alone_are_refused(env: GravelerEnv) -> None:
    repo = env.new_repo()
    env.put(repo, "main", "b", "old")
    results = _stage(env, repo, _entries(("a", "a1"), ("", "empty-key"), ("b", "b1"), ("a", "a2")))
    assert results == [STAGED, INVALID, STAGED, STAGED]
    # A key given twice takes its last entry; the earlier value of b is replaced.
    assert env.etag(repo, "main", "a") == "a2"
    assert env.etag(repo, "main", "b") == "b1"
    assert env.list_all(repo, "main") == ["a", "b"]
    commit = env.commit(repo, "main")
    assert env.etag(repo, commit.id, "a") == "a2"


def test_an_oversized_entry_is_its_own_outcome(env: GravelerEnv) -> None:
    repo = env.new_repo()
    huge = pb.Entry(physical_address="data/huge", etag="h")
    huge.metadata["x"] = "y" * (64 * 1024)
    staged = [api.StagedEntry(key="huge", entry=huge), *_entries(("ok", "ok"))]
    reply = env.stub.StageEntries(api.StageEntriesRequest(repository=repo, branch="main", entries=staged))
    assert [o.result for o in reply.outcomes] == [INVALID, STAGED]
    assert "bytes" in reply.outcomes[0].message
    assert env.list_all(repo, "main") == ["ok"]


def test_entries_larger_than_one_kv_write_are_all_staged(env: GravelerEnv) -> None:
    """The call's entries span several KV writes (each kept small for Cassandra's batch limit)."""
    repo = env.new_repo()
    staged = []
    for i in range(MAX_STAGE_ENTRIES):
        entry = pb.Entry(physical_address=f"data/{i}", etag=f"e{i}")
        entry.metadata["pad"] = "p" * 200
        staged.append(api.StagedEntry(key=f"k{i:03d}", entry=entry))
    assert sum(s.entry.ByteSize() for s in staged) > 2 * STAGE_WRITE_BYTES
    assert _stage(env, repo, staged) == [STAGED] * MAX_STAGE_ENTRIES
    assert len(env.list_all(repo, "main")) == MAX_STAGE_ENTRIES
    assert env.etag(repo, "main", f"k{MAX_STAGE_ENTRIES - 1:03d}") == f"e{MAX_STAGE_ENTRIES - 1}"


def test_the_whole_call_fails_as_one_stage_entry_would(env: GravelerEnv) -> None:
    repo = env.new_repo()
    one = _entries(("a", "a"))

    def code(request: api.StageEntriesRequest) -> grpc.StatusCode:
        return code_of(lambda: env.stub.StageEntries(request))

    assert code(api.StageEntriesRequest(repository=repo, branch="nope", entries=one)) == grpc.StatusCode.NOT_FOUND
    assert code(api.StageEntriesRequest(repository="nope", branch="main", entries=one)) == grpc.StatusCode.NOT_FOUND
    # A commit id is not a branch: nothing is written to history.
    env.put(repo, "main", "seed")
    head = env.commit(repo, "main").id
    assert code(api.StageEntriesRequest(repository=repo, branch=head, entries=one)) == grpc.StatusCode.NOT_FOUND
    many = _entries(*((f"k{i}", "e") for i in range(MAX_STAGE_ENTRIES + 1)))
    too_many = api.StageEntriesRequest(repository=repo, branch="main", entries=many)
    assert code(too_many) == grpc.StatusCode.INVALID_ARGUMENT
    assert env.list_all(repo, "main") == ["seed"]


@pytest.mark.parametrize("store", ["mem"], indirect=True)
def test_a_protected_branch_refuses_the_whole_call(env: GravelerEnv) -> None:
    repo = env.new_repo()
    rule = pb.BranchProtectionRule(pattern="main", block_direct_writes=True)
    env.stub.SetBranchProtection(api.SetBranchProtectionRequest(repository=repo, rules=[rule]))
    request = api.StageEntriesRequest(repository=repo, branch="main", entries=_entries(("a", "a")))
    single = api.StageEntryRequest(repository=repo, branch="main", key="a", entry=pb.Entry(physical_address="data/a"))
    assert code_of(lambda: env.stub.StageEntries(request)) == grpc.StatusCode.PERMISSION_DENIED
    assert code_of(lambda: env.stub.StageEntry(single)) == grpc.StatusCode.PERMISSION_DENIED
    assert env.list_all(repo, "main") == []


class SealsOnFirstStagedWrite(ForwardingStore):
    """inner, except that right after the first write of staged values, `then` runs once (in
    the same thread: the writer flow is lock-free, nothing waits on it)."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.then: Callable[[], None] | None = None

    def apply(
        self,
        partition: bytes,
        puts: Sequence[tuple[bytes, bytes]],
        deletes: Sequence[bytes] = (),
        condition: Condition | AllOf | None = None,
        timestamp: Timestamp | None = None,
    ) -> None:
        self.inner.apply(partition, puts, deletes, condition, timestamp)
        then, self.then = self.then, None
        if then is not None and any(key.startswith(b"key/") for key, _ in puts):
            then()


def test_an_entry_written_once_is_never_written_again_after_its_deadline(store: Store, tmp_path: Path) -> None:
    """The entry lands in the staging token, then the token is replaced under the call (a reset
    here, as a commit's seal would) and the entry's deadline passes: the writer flow does not
    write it again into the new token (its caller may have been told DEADLINE_EXCEEDED and
    written the key since); the call fails at once with Aborted (graveler's own answer, which
    the edge tells from its call running out of time), the entry's outcome unknown."""
    wrapped = SealsOnFirstStagedWrite(store)
    graveler = open_graveler(wrapped, LocalAdapter(tmp_path / "data"), GravelerOptions(branch_cache_seconds=0))
    now = [0.0]
    try:
        repo = f"late-{uuid.uuid4().hex[:12]}"
        graveler.lifecycle.create_repository(repo, f"local://{repo}", "", False)

        def replace_the_token() -> None:
            graveler.reset_branch(repo, "main")
            now[0] = 20.0  # the entry's deadline passes meanwhile

        wrapped.then = replace_the_token
        entry = pb.Entry(physical_address="data/late", etag="late")
        with pytest.raises(Aborted):
            graveler.stage_entries(
                repo, "main", [("late", entry)], entry_deadlines=[Deadline(10.0, clock=lambda: now[0])]
            )
        handle = graveler.refs.repository(repo)
        token = graveler.refs.get_branch(handle, "main").branch.staging_token
        assert graveler.staging.get(StagingToken(token), b"late") is None
    finally:
        graveler.close()


class QueuedCall:
    """A call's context as graveler's handler sees it after the call waited in the worker pool
    and the interceptors: `left` seconds of its gRPC deadline remain."""

    def __init__(self, left: float) -> None:
        self.left = left

    def time_remaining(self) -> float:
        return self.left

    def is_active(self) -> bool:
        return True


def test_an_entrys_time_counts_from_the_calls_arrival_not_from_when_its_handler_started(env: GravelerEnv) -> None:
    """The edge gave the call 30 s and one entry 1 s of it (slack 29 s); the call waited 29.5 s
    before its handler ran. The entry's time is over: it is not written (RESULT_EXPIRED), and
    the entry with the call's whole time is."""
    repo = env.new_repo()
    servicer = GravelerServicer(env.graveler)
    request = api.StageEntriesRequest(repository=repo, branch="main")
    request.entries.add(key="short", entry=pb.Entry(physical_address="data/short", etag="s"), slack_ms=29_000)
    request.entries.add(key="long", entry=pb.Entry(physical_address="data/long", etag="l"), slack_ms=0)
    response = servicer.StageEntries(request, QueuedCall(0.5))  # type: ignore[arg-type]
    assert [outcome.result for outcome in response.outcomes] == [api.StageEntryOutcome.RESULT_EXPIRED, STAGED]
    assert response.per_entry_deadlines
    assert env.list_all(repo, "main") == ["long"]
