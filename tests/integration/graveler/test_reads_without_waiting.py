"""engine/reads.py: a point read told not to wait (StatEntry's wait=False), as the edge runs it on
its event loop. It answers what the waiting read answers, or gives up with ReadWouldWait where
that read could take long: a branch changed under it (the next attempt sleeps first), a committed
range not decoded in memory, an ancestor to walk to."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from engine.reads import ReadEngine, ReadWouldWait
from silt.errors import NotFound
from silt.graveler.v1 import graveler_pb2 as api
from tests.integration.graveler.conftest import GravelerEnv


def _reads(env: GravelerEnv) -> ReadEngine:
    assert env.reads is not None
    return env.reads


def _commit_during_the_next_read(env: GravelerEnv, repo: str, key: str) -> list[int]:
    """Make the next branch re-check of env's reader see a commit made after the read began (the
    race a read of a branch meets), once; the list counts the re-checks."""
    refs = _reads(env).refs
    fresh_branch: Callable[..., Any] = refs.fresh_branch
    checks: list[int] = []

    def racing(*args: Any, **kwargs: Any) -> Any:
        checks.append(1)
        if len(checks) == 1:
            env.put(repo, "main", key, "changed")
            env.stub.Commit(api.CommitRequest(repository=repo, branch="main", message="during the read"))
        return fresh_branch(*args, **kwargs)

    refs.fresh_branch = racing  # type: ignore[method-assign]
    return checks


def test_a_read_told_not_to_wait_answers_as_the_waiting_read(env: GravelerEnv) -> None:
    repo = env.new_repo()
    entry = env.put(repo, "main", "staged", "one")
    env.stub.Commit(api.CommitRequest(repository=repo, branch="main", message="first"))
    env.put(repo, "main", "later", "two")
    reads = _reads(env)
    for ref in ("main", "main@"):
        for key in ("staged", "later"):
            request = api.StatEntryRequest(repository=repo, ref=ref, key=key)
            if ref == "main@" and key == "later":
                with pytest.raises(NotFound):
                    reads.StatEntry(request, timeout=10)
                with pytest.raises(NotFound):
                    reads.StatEntry(request, timeout=10, wait=False)
                continue
            # The waiting read first: it leaves the committed ranges it read decoded in memory.
            expected = reads.StatEntry(request, timeout=10)
            assert reads.StatEntry(request, timeout=10, wait=False) == expected
    got = reads.StatEntry(api.StatEntryRequest(repository=repo, ref="main", key="staged"), timeout=10, wait=False)
    assert got.entry.physical_address == entry.physical_address


def test_a_committed_entry_not_in_memory_is_not_read_and_decoded_without_waiting(env: GravelerEnv) -> None:
    repo = env.new_repo()
    env.put(repo, "main", "k", "committed")
    env.stub.Commit(api.CommitRequest(repository=repo, branch="main", message="first"))
    reads = _reads(env)
    request = api.StatEntryRequest(repository=repo, ref="main", key="k")
    with pytest.raises(ReadWouldWait, match="not in memory"):
        reads.StatEntry(request, timeout=10, wait=False)
    assert reads.StatEntry(request, timeout=10).entry.etag == "committed"
    # Read and decoded once by the waiting read, the range answers the next read from memory.
    assert reads.StatEntry(request, timeout=10, wait=False).entry.etag == "committed"


def test_an_ancestor_is_not_resolved_without_waiting(env: GravelerEnv) -> None:
    repo = env.new_repo()
    env.put(repo, "main", "k", "one")
    env.stub.Commit(api.CommitRequest(repository=repo, branch="main", message="first"))
    env.put(repo, "main", "k", "two")
    env.stub.Commit(api.CommitRequest(repository=repo, branch="main", message="second"))
    reads = _reads(env)
    for ref in ("main~1", "main^", "main@~1"):
        request = api.StatEntryRequest(repository=repo, ref=ref, key="k")
        with pytest.raises(ReadWouldWait, match="ancestor"):
            reads.StatEntry(request, timeout=10, wait=False)
        assert reads.StatEntry(request, timeout=10).entry.etag == "one"


def test_a_read_that_meets_a_branch_change_gives_up_rather_than_wait(env: GravelerEnv) -> None:
    repo = env.new_repo()
    env.put(repo, "main", "k", "before")
    checks = _commit_during_the_next_read(env, repo, "k")
    request = api.StatEntryRequest(repository=repo, ref="main", key="k")
    with pytest.raises(ReadWouldWait):
        _reads(env).StatEntry(request, timeout=10, wait=False)
    assert len(checks) == 1, "a read not allowed to wait made a second attempt"
    # Run again where it may wait (as the edge does, in a thread), it reads what the commit left.
    assert _reads(env).StatEntry(request, timeout=10).entry.etag == "changed"


def test_the_waiting_read_reads_again_after_the_same_change(env: GravelerEnv) -> None:
    repo = env.new_repo()
    env.put(repo, "main", "k", "before")
    checks = _commit_during_the_next_read(env, repo, "k")
    got = _reads(env).StatEntry(api.StatEntryRequest(repository=repo, ref="main", key="k"), timeout=10)
    assert got.entry.etag == "changed"
    assert len(checks) == 2
