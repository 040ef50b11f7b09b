"""ExpireEntries against a real graveler over gRPC: what it refuses, and what changed since the
export that it spares (a rewrite, a read, a delete)."""

from __future__ import annotations

import time
from typing import Any

import grpc
import pytest

from silt.graveler.v1 import events_pb2 as ev
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb
from tests.integration.gc.conftest import GCEnv
from tests.integration.gc.test_last_access import DAY, RULE, _present, put_aged, record, with_rule
from tests.support.wait import wait_until


def _prepare(env: GCEnv, repo: str) -> api.PrepareLastAccessResponse:
    return env.stub.PrepareLastAccess(api.PrepareLastAccessRequest(repository=repo, branch="main"))


def _expire(
    env: GCEnv,
    repo: str,
    prepared: api.PrepareLastAccessResponse,
    entries: list[tuple[str, str]],
    rule: pb.LastAccessRule = RULE,
    branch: str = "main",
    run_id: str = "",
) -> api.ExpireEntriesResponse:
    request = api.ExpireEntriesRequest(
        repository=repo,
        branch=branch,
        rule=rule,
        entries=[api.ExpiredEntry(key=k, physical_address=a) for k, a in entries],
        since=prepared.started,
        run_id=run_id or prepared.run_id,
    )
    return env.stub.ExpireEntries(request)


def test_changes_since_the_export_spare_an_object(gc_env: GCEnv) -> None:
    env = gc_env
    repo = with_rule(env, RULE)
    keys = ["logs/expired", "logs/rewritten", "logs/read", "logs/deleted", "logs/recopied"]
    addresses = {key: put_aged(env, repo, key, key.encode(), age_days=60) for key in keys}
    env.stub.Commit(api.CommitRequest(repository=repo, branch="main", message="seed"))
    prepared = _prepare(env, repo)
    assert prepared.entries == len(keys) and list(prepared.rules) == [RULE]

    put_aged(env, repo, "logs/rewritten", b"new", age_days=60)  # another address
    record(env, repo, "logs/read", ev.READ, age_days=0)
    env.stub.DeleteEntry(api.DeleteEntryRequest(repository=repo, branch="main", key="logs/deleted"))
    # The same address staged again with a fresh modification time: young, whatever the address.
    entry = env.stub.StatEntry(api.StatEntryRequest(repository=repo, ref="main", key="logs/recopied")).entry
    entry.last_modified.GetCurrentTime()
    env.stub.StageEntry(api.StageEntryRequest(repository=repo, branch="main", key="logs/recopied", entry=entry))

    done = _expire(env, repo, prepared, list(addresses.items()))
    assert (done.expired, done.spared) == (1, 4) and done.commit_id
    assert not _present(env, repo, "logs/expired")
    assert all(_present(env, repo, key) for key in ("logs/rewritten", "logs/read", "logs/recopied"))
    log = env.stub.Log(api.LogRequest(repository=repo, ref="main", amount=1))
    assert log.commits[0].id == done.commit_id
    # The system's commit holds the expiry only; the user's staged changes stay staged (the
    # restaged copy is no change: an entry's identity leaves out its modification time).
    diff = env.stub.DiffBranch(api.DiffBranchRequest(repository=repo, branch="main"))
    assert sorted(d.key for d in diff.items) == ["logs/deleted", "logs/rewritten"]


def test_bad_requests_are_refused(gc_env: GCEnv) -> None:
    env = gc_env
    repo = with_rule(env, RULE)
    address = put_aged(env, repo, "logs/a", b"a", age_days=60)
    outside = put_aged(env, repo, "data/a", b"a", age_days=60)
    prepared = _prepare(env, repo)
    whole_branch = pb.LastAccessRule(branch="main", prefixes=[""], days=1)  # not a stored rule
    cases: list[tuple[list[tuple[str, str]], dict[str, Any], grpc.StatusCode]] = [
        ([], {}, grpc.StatusCode.INVALID_ARGUMENT),
        ([("logs/a", address)] * 1001, {}, grpc.StatusCode.INVALID_ARGUMENT),
        ([("data/a", outside)], {}, grpc.StatusCode.INVALID_ARGUMENT),
        ([("logs/a", address)], {"run_id": "../x"}, grpc.StatusCode.INVALID_ARGUMENT),
        ([("logs/a", address)], {"rule": whole_branch}, grpc.StatusCode.FAILED_PRECONDITION),
        ([("logs/a", address)], {"branch": "nope"}, grpc.StatusCode.NOT_FOUND),
    ]
    for entries, fields, code in cases:
        with pytest.raises(grpc.RpcError) as refused:
            _expire(env, repo, prepared, entries, **fields)
        assert refused.value.code() == code, (entries[:1], fields)
    unknown = api.ExpireEntriesRequest(repository=repo, branch="main", rule=RULE, run_id="20200101T000000Z-0000")
    unknown.entries.add(key="logs/a", physical_address=address)
    with pytest.raises(grpc.RpcError) as refused:
        env.stub.ExpireEntries(unknown)
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert _present(env, repo, "logs/a")


def test_the_runs_start_is_gravelers_not_the_callers(gc_env: GCEnv) -> None:
    """A caller naming a later `since` cannot expire an object read after the run started, and
    a read stamped just before the start but stored after the export still spares its object."""
    env = gc_env
    repo = with_rule(env, RULE)
    read_after = put_aged(env, repo, "logs/read-after-start", b"a", age_days=60)
    read_late = put_aged(env, repo, "logs/read-late", b"b", age_days=60)
    prepared = _prepare(env, repo)
    started = prepared.started.seconds + prepared.started.nanos / 1e9
    # Both stored after the export: one stamped just after the start, one 5 s before it (a late flush).
    record(env, repo, "logs/read-after-start", ev.READ, age_days=(time.time() - started - 0.001) / DAY)
    record(env, repo, "logs/read-late", ev.READ, age_days=(time.time() - started + 5) / DAY)
    wait_until(lambda: time.time() > started + 0.1, timeout=5, message="the clock to pass the reads")
    request = api.ExpireEntriesRequest(repository=repo, branch="main", rule=RULE, run_id=prepared.run_id)
    request.entries.add(key="logs/read-after-start", physical_address=read_after)
    request.entries.add(key="logs/read-late", physical_address=read_late)
    request.since.GetCurrentTime()  # a start of the caller's choosing, after the read: ignored
    done = env.stub.ExpireEntries(request)
    assert (done.expired, done.spared) == (0, 2)
    assert _present(env, repo, "logs/read-after-start") and _present(env, repo, "logs/read-late")


def test_rules_are_validated_and_round_trip(gc_env: GCEnv) -> None:
    env = gc_env
    repo = with_rule(env, RULE)
    shown = env.stub.GetGCRules(api.GetGCRulesRequest(repository=repo))
    assert list(shown.rules.last_access_rules) == [RULE]
    bad = pb.GCRules(last_access_rules=[pb.LastAccessRule(branch="main", prefixes=["x"], days=0)])
    with pytest.raises(grpc.RpcError) as refused:
        env.stub.SetGCRules(api.SetGCRulesRequest(repository=repo, rules=bad))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert list(env.stub.GetGCRules(api.GetGCRulesRequest(repository=repo)).rules.last_access_rules) == [RULE]
