"""A blind write that a commit's seal made write again keeps its first stamp.

A delete lands in the staging token; before it re-reads the branch a commit seals that token;
a conditional create judges the key absent from the delete's tombstone in the sealed token and
stages its value in the new token; then the delete writes its tombstone again, into the new
token. The create judged the delete and must stay after it: the delete's second write is the
same write at the same stamp, and the create was stamped past the tombstone it judged."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import grpc
import pytest

from engine.core.staging import StagingStore
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb
from tests.integration.graveler.conftest import GravelerEnv
from tests.integration.graveler.test_concurrency import _HeldBuilder


def test_a_delete_written_again_after_a_seal_does_not_hide_the_create_that_judged_it(
    env: GravelerEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = env.new_repo("again")
    env.put(repo, "main", "k", "old")
    env.commit(repo, "main")

    staging: StagingStore = env.graveler.staging
    original_set = staging.set
    deleting: list[threading.Thread] = []
    written, resume = threading.Event(), threading.Event()

    def set_then_pause(*args: Any, **kwargs: Any) -> int:
        stamp = original_set(*args, **kwargs)
        if threading.current_thread() in deleting and not written.is_set():
            written.set()  # the tombstone is in the token; the branch not yet re-read
            assert resume.wait(30)
        return stamp

    monkeypatch.setattr(staging, "set", set_then_pause)
    errors: list[BaseException] = []

    def delete() -> None:
        try:
            env.graveler.delete_entry(repo, "main", "k")
        except BaseException as exc:  # reported below
            errors.append(exc)

    deleter = threading.Thread(target=delete)
    deleting.append(deleter)
    held = _HeldBuilder(env.graveler.builder)
    env.graveler.builder = held
    committer = threading.Thread(target=lambda: env.commit(repo, "main", "seals the delete's token"))
    try:
        deleter.start()
        assert written.wait(30), "the delete never wrote"
        committer.start()
        assert held.building.wait(30), "the commit never sealed the token"
        entry = pb.Entry(etag="new", physical_address=f"data/{uuid.uuid4().hex}")
        # The key is absent by the sealed token's tombstone: the create stands.
        env.stub.StageEntry(
            api.StageEntryRequest(repository=repo, branch="main", key="k", entry=entry, if_absent=True), timeout=30
        )
    finally:
        resume.set()
        deleter.join(30)
        held.release.set()
        committer.join(30)
        env.graveler.builder = held.inner
    assert not errors, errors
    assert held.released_in_time
    assert env.etag(repo, "main", "k") == "new"
    with pytest.raises(grpc.RpcError) as refused:
        env.stub.StageEntry(
            api.StageEntryRequest(
                repository=repo, branch="main", key="k", entry=pb.Entry(etag="again"), if_absent=True
            ),
            timeout=30,
        )
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
