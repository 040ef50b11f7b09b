"""Retention by last access end to end: real graveler over gRPC, real Spark, real files.

Objects are written "long ago" by staging entries whose modification time is weeks old, and
their history is written through the history writer with old timestamps: nothing sleeps.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from engine.features.history_events.writer import EventWriter
from engine.features.last_access import SYSTEM_COMMITTER
from jobs.gc.job import GCOptions, run_gc
from jobs.retention.last_access import LastAccessOptions, run_last_access
from silt.graveler.v1 import events_pb2 as ev
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb
from tests.integration.gc.conftest import GCEnv

DAY = 86_400
RULE = pb.LastAccessRule(branch="main", prefixes=["logs/"], days=30)


def _stamp(seconds: float) -> Timestamp:
    stamp = Timestamp()
    stamp.FromMicroseconds(int(seconds * 1_000_000))
    return stamp


def put_aged(env: GCEnv, repo: str, key: str, content: bytes, age_days: float) -> str:
    """Stage an object as if it had been written age_days ago; return its address."""
    address = env.upload(repo, content)
    entry = pb.Entry(
        physical_address=address,
        size=len(content),
        etag=uuid.uuid4().hex,
        last_modified=_stamp(time.time() - age_days * DAY),
    )
    env.stub.StageEntry(api.StageEntryRequest(repository=repo, branch="main", key=key, entry=entry))
    return address


def record(env: GCEnv, repo: str, key: str, kind: int, age_days: float) -> None:
    """A history event of the branch main, age_days old, written as graveler stores them."""
    partition = env.graveler.refs.get_repository(repo).partition
    event = ev.HistoryEvent(
        timestamp_us=int((time.time() - age_days * DAY) * 1_000_000),
        repository=repo,
        branch="main",
        type=kind,  # type: ignore[arg-type]
        path=key,
        user="reader",
        source=ev.S3,
    )
    EventWriter(env.store).write(partition, [event])


def with_rule(env: GCEnv, *rules: pb.LastAccessRule) -> str:
    repo = env.new_repo(default_days=None)
    gc_rules = pb.GCRules(default_retention_days=0, last_access_rules=list(rules))
    env.stub.SetGCRules(api.SetGCRulesRequest(repository=repo, rules=gc_rules))
    return repo


def _run(spark: Any, env: GCEnv, repo: str, **options: Any) -> Any:
    return run_last_access(spark, env.stub, repo, "main", env.blockstore, LastAccessOptions(**options))


def _present(env: GCEnv, repo: str, key: str) -> bool:
    try:
        env.stub.StatEntry(api.StatEntryRequest(repository=repo, ref="main", key=key))
    except grpc.RpcError as err:
        assert err.code() == grpc.StatusCode.NOT_FOUND
        return False
    return True


def test_rule_expires_exactly_the_untouched_objects(spark: Any, gc_env: GCEnv) -> None:
    env = gc_env
    repo = with_rule(env, RULE)
    untouched = put_aged(env, repo, "logs/untouched", b"u", age_days=60)
    read_long_ago = put_aged(env, repo, "logs/read-long-ago", b"r0", age_days=60)
    record(env, repo, "logs/read-long-ago", ev.READ, age_days=45)
    read_lately = put_aged(env, repo, "logs/read-lately", b"r1", age_days=60)
    record(env, repo, "logs/read-lately", ev.READ, age_days=2)
    written_lately = put_aged(env, repo, "logs/written-lately", b"w", age_days=60)
    record(env, repo, "logs/written-lately", ev.WRITE, age_days=5)
    young = put_aged(env, repo, "logs/young", b"y", age_days=10)
    outside = put_aged(env, repo, "data/outside", b"o", age_days=400)
    env.stub.Commit(api.CommitRequest(repository=repo, branch="main", message="seed"))
    staged_old = put_aged(env, repo, "logs/staged-old", b"s", age_days=90)  # never committed
    head = env.stub.GetBranch(api.GetBranchRequest(repository=repo, name="main")).commit_id

    dry = _run(spark, env, repo, dry_run=True, history_retention_days=7)
    assert dry.warnings == [
        "rule 1 (30 days under 'logs/') is longer than the history's retention (7 days): "
        "a read older than that no longer keeps an object"
    ]
    expired_keys = ["logs/read-long-ago", "logs/staged-old", "logs/untouched"]
    assert dry.paths == expired_keys and not dry.paths_truncated
    assert dry.rules[0].objects == 3 and dry.rules[0].bytes == len(b"r0") + 2
    assert dry.commits == [] and dry.entries == 6  # data/outside is not listed at all
    assert env.stub.GetBranch(api.GetBranchRequest(repository=repo, name="main")).commit_id == head
    assert all(_present(env, repo, key) for key in expired_keys)

    real = _run(spark, env, repo, batch_size=2)
    assert real.rules[0].expired == 3 and real.rules[0].spared == 0
    assert len(real.commits) == 2  # 3 objects in batches of 2
    for commit_id in real.commits:
        commit = env.stub.GetCommit(api.GetCommitRequest(repository=repo, commit_id=commit_id))
        assert commit.committer == SYSTEM_COMMITTER
        assert "not read or written for 30 days under 'logs/'" in commit.message
        assert "last-access rule 1" in commit.message
        assert commit.metadata["silt.last_access.run"] == real.run_id
    kept = ["logs/read-lately", "logs/written-lately", "logs/young", "data/outside"]
    assert [key for key in expired_keys + kept if _present(env, repo, key)] == kept
    # Nothing else went into the system's commits: the branch has nothing left staged but
    # what was staged before, and a second run finds nothing.
    assert _run(spark, env, repo).rules[0].objects == 0

    # The bytes are ordinary garbage now: GC (0-day retention) frees exactly them.
    run_gc(spark, env.stub, repo, env.blockstore, GCOptions(grace_seconds=0, unsafe_short_grace=True))
    for address in (untouched, read_long_ago, staged_old):
        assert not env.exists(repo, address)
    for address in (read_lately, written_lately, young, outside):
        assert env.exists(repo, address)


def test_first_rule_that_expires_names_the_commit(spark: Any, gc_env: GCEnv) -> None:
    env = gc_env
    wide = pb.LastAccessRule(branch="main", prefixes=["", "tmp/"], days=90)
    narrow = pb.LastAccessRule(branch="main", prefixes=["tmp/"], days=7)
    other_branch = pb.LastAccessRule(branch="other", prefixes=[""], days=1)
    repo = with_rule(env, other_branch, wide, narrow)
    put_aged(env, repo, "tmp/a", b"a", age_days=8)  # only the narrow rule expires it
    put_aged(env, repo, "tmp/b", b"b", age_days=100)  # both do: the first, wide, names it
    put_aged(env, repo, "keep", b"k", age_days=30)
    env.stub.Commit(api.CommitRequest(repository=repo, branch="main", message="seed"))
    summary = _run(spark, env, repo)
    assert [(r.objects, r.expired) for r in summary.rules] == [(1, 1), (1, 1)]
    assert summary.warnings == []
    assert summary.entries == 3  # "" covers "tmp/": each key is listed once
    messages = [env.stub.GetCommit(api.GetCommitRequest(repository=repo, commit_id=c)).message for c in summary.commits]
    assert sorted(m.split("(")[-1] for m in messages) == ["last-access rule 2)", "last-access rule 3)"]
    assert _present(env, repo, "keep")


def test_branch_without_rules_is_refused(gc_env: GCEnv) -> None:
    repo = with_rule(gc_env, pb.LastAccessRule(branch="other", prefixes=["x/"], days=3))
    with pytest.raises(grpc.RpcError) as refused:
        gc_env.stub.PrepareLastAccess(api.PrepareLastAccessRequest(repository=repo, branch="main"))
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "--last-access main=DAYS:PREFIX" in (refused.value.details() or "")


def test_expiring_only_staged_objects_makes_no_commit(spark: Any, gc_env: GCEnv) -> None:
    """Deleting what was staged and never committed changes nothing against the head."""
    env = gc_env
    repo = with_rule(env, RULE)
    put_aged(env, repo, "logs/staged", b"s", age_days=40)
    head = env.stub.GetBranch(api.GetBranchRequest(repository=repo, name="main")).commit_id
    summary = _run(spark, env, repo)
    assert summary.rules[0].expired == 1 and summary.commits == []
    assert not _present(env, repo, "logs/staged")
    assert env.stub.GetBranch(api.GetBranchRequest(repository=repo, name="main")).commit_id == head
