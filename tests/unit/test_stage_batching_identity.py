"""StageBatcher and repository identities: writes for two incarnations of a repository's name
(deleted and created again while the edge remembered the old one) never share a call, and each
call names the identity its writes' bytes were written under."""

from __future__ import annotations

import asyncio

from edge.core.stage_batching import StageBatcher
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb
from tests.unit.test_stage_batching import Graveler, in_a_loop, settle


def write(key: str, repository_id: str) -> api.StageEntryRequest:
    entry = pb.Entry(physical_address=f"data/{key}", etag=key)
    return api.StageEntryRequest(repository="repo", branch="main", key=key, entry=entry, repository_id=repository_id)


@in_a_loop
async def test_writes_for_two_incarnations_of_a_name_never_share_a_call() -> None:
    graveler = Graveler(hold=True)
    batcher = StageBatcher(graveler)
    tasks = []
    for key, identity in [("a", "old"), ("b", "old"), ("c", "new"), ("d", "new")]:
        # Two calls in flight for each identity: what follows waits, per identity.
        tasks.append(asyncio.create_task(batcher.StageEntry(write(key, identity), timeout=5)))
        await settle()
    waiting = [
        asyncio.create_task(batcher.StageEntry(write(key, identity), timeout=5))
        for key, identity in [("o1", "old"), ("n1", "new"), ("o2", "old"), ("n2", "new")]
    ]
    await settle()
    graveler.release.set()
    await asyncio.gather(*tasks, *waiting)

    calls = []
    for method, request, _ in graveler.calls:
        if method == "StageEntry":
            calls.append((request.repository_id, [request.key]))
        else:
            calls.append((request.repository_id, [staged.key for staged in request.entries]))
    assert ("old", ["o1", "o2"]) in calls and ("new", ["n1", "n2"]) in calls
    for identity, keys in calls:
        assert all(key.startswith("a") or key.startswith("b") or key.startswith("o") for key in keys) == (
            identity == "old"
        )
