"""The compactor as `make run` runs it: its own process behind the auth interceptor,
`silt branch compact` and `silt branch show`, a kill -9 in the middle of a compaction, and
graveler's sensor triggering it."""

from __future__ import annotations

import signal
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import pytest

from silt.compactor.v1 import compactor_pb2 as capi
from silt.compactor.v1 import compactor_pb2_grpc as capi_grpc
from silt.graveler.v1 import graveler_pb2 as api
from silt.launcher import Stack
from silt.rpc.signing import Credentials, signed_channel
from tests.e2e.conftest import Silt, graveler_stub, stage_tree
from tests.support.wait import wait_until


def compactor_stub(stack: Stack, credentials: Credentials | None = None) -> capi_grpc.CompactorServiceStub:
    options = [("grpc.initial_reconnect_backoff_ms", 100), ("grpc.max_reconnect_backoff_ms", 500)]
    channel = signed_channel(stack.endpoints["compactor"], credentials or stack.admin, options)  # type: ignore[arg-type]
    return capi_grpc.CompactorServiceStub(channel)


def listing(stack: Stack, repo: str, ref: str) -> list[str]:
    stub = graveler_stub(stack)
    keys: list[str] = []
    after = ""
    while True:
        page = stub.ListEntries(api.ListEntriesRequest(repository=repo, ref=ref, after=after, amount=1000), timeout=30)
        keys.extend(item.key for item in page.items)
        if not page.has_more:
            return keys
        after = page.items[-1].key


def delete_all(stack: Stack, repo: str, keys: list[str]) -> None:
    stub = graveler_stub(stack)
    with ThreadPoolExecutor(8) as pool:
        list(
            pool.map(
                lambda k: stub.DeleteEntry(api.DeleteEntryRequest(repository=repo, branch="main", key=k), timeout=30),
                keys,
            )
        )


def test_compact_by_hand_and_show_the_state(stack: Stack, silt: Silt) -> None:
    repo = f"cmp-{uuid.uuid4().hex[:8]}"
    silt("repo", "create", repo)
    keys = [f"k/{i:04d}" for i in range(200)]
    stage_tree(stack, repo, "main", keys)
    silt("commit", f"silt://{repo}/main", "-m", "base")
    delete_all(stack, repo, keys[:150])

    before = silt("branch", "show", f"silt://{repo}/main", "--json").json()
    assert before["compaction"]["compacted_metarange_id"] is None
    done = silt("branch", "compact", f"silt://{repo}/main", "--json").json()
    assert done["tokens_compacted"] >= 1 and done["records_changed"] == 150
    after = silt("branch", "show", f"silt://{repo}/main", "--json").json()
    state = after["compaction"]
    assert state["compacted_metarange_id"] and state["last_started"] and state["sealed_tokens"] == 0
    assert "Compacted:" in silt("branch", "show", f"silt://{repo}/main").out
    assert listing(stack, repo, "main") == keys[150:]
    assert len(listing(stack, repo, "main@")) == 200

    # The compactor authenticates: an unsigned call is refused.
    unsigned = capi_grpc.CompactorServiceStub(grpc.insecure_channel(stack.endpoints["compactor"]))
    try:
        unsigned.GetStatus(capi.GetStatusRequest(repository=repo, branch="main"), timeout=10)
        raise AssertionError("an unsigned call was served")
    except grpc.RpcError as exc:
        assert exc.code() == grpc.StatusCode.UNAUTHENTICATED


def test_a_compactor_killed_mid_run_leaves_the_branch_readable(stack: Stack, silt: Silt) -> None:
    repo = f"cmp-{uuid.uuid4().hex[:8]}"
    silt("repo", "create", repo)
    stub = compactor_stub(stack)
    restarts = stack.restarts("compactor")
    keys: list[str] = []
    compacted_before = 0  # keys a compaction that finished too soon folded in already
    # Large enough that the compaction is usually still building when the kill comes. On a
    # loaded machine the first status calls can take longer than a whole compaction: that run
    # did not test a kill mid-run, so it goes again over twice as many staged keys.
    for attempt in range(4):
        more = [f"k/{attempt}/{i:05d}" for i in range(6000 * 2**attempt)]
        stage_tree(stack, repo, "main", more)
        keys = sorted(keys + more)
        future = stub.Compact.future(capi.CompactRequest(repository=repo, branch="main"), timeout=120)

        def running(call: Any = future) -> bool:
            return bool(
                call.done() or stub.GetStatus(capi.GetStatusRequest(repository=repo, branch="main"), timeout=10).running
            )

        wait_until(running, 30, "the compaction running", interval=0.005)
        if not future.done():
            break
        future.result()  # finished before it was seen running: a compaction that succeeded
        compacted_before = len(keys)
    else:
        raise AssertionError("every compaction finished before it was seen running")
    stack.kill("compactor", signal.SIGKILL)
    try:
        future.result()
        raise AssertionError("the compaction finished although its process was killed")
    except grpc.RpcError as exc:
        assert exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED, grpc.StatusCode.UNKNOWN)

    # The seal happened, the publish did not: the branch reads the same through its sealed tokens.
    branch = graveler_stub(stack).GetBranch(api.GetBranchRequest(repository=repo, name="main"), timeout=10)
    assert branch.commit_id
    assert listing(stack, repo, "main") == keys
    stack.wait_ready("compactor", timeout=60)
    assert stack.restarts("compactor") == restarts + 1
    result = compactor_stub(stack).Compact(capi.CompactRequest(repository=repo, branch="main"), timeout=120)
    assert result.compacted_metarange_id and result.records_changed == len(keys) - compacted_before
    status = compactor_stub(stack).GetStatus(capi.GetStatusRequest(repository=repo, branch="main"), timeout=10)
    assert status.sealed_tokens == 0 and status.compacted_metarange_id == result.compacted_metarange_id
    assert listing(stack, repo, "main") == keys
    assert listing(stack, repo, "main@") == []


def test_graveler_sensor_triggers_the_compactor_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Processes as `make run` starts them, with a low threshold: staged deletes alone get
    the branch compacted (graveler's sensor claims it and calls the compactor, signed)."""
    monkeypatch.setenv("SILT_COMPACTOR_TOMBSTONE_THRESHOLD", "40")
    services = ["auth", "graveler", "compactor"]
    with Stack(tmp_path, ports=dict.fromkeys(services, 0), services=services, on_event=lambda _: None) as stack:
        graveler = graveler_stub(stack)
        graveler.CreateRepository(
            api.CreateRepositoryRequest(name="sensed", storage_namespace="local://sensed"), timeout=30
        )
        keys = [f"k/{i:03d}" for i in range(60)]
        stage_tree(stack, "sensed", "main", keys)
        graveler.Commit(api.CommitRequest(repository="sensed", branch="main", message="base"), timeout=60)
        compactor = compactor_stub(stack)
        request = capi.GetStatusRequest(repository="sensed", branch="main")
        delete_all(stack, "sensed", keys[:39])
        time.sleep(1.0)  # the scenario: time for a compaction that must not come
        assert not compactor.GetStatus(request, timeout=10).compacted_metarange_id  # below the threshold
        delete_all(stack, "sensed", keys[39:45])

        def compacted() -> capi.GetStatusResponse | None:
            status = compactor.GetStatus(request, timeout=10)
            return status if status.compacted_metarange_id and not status.running else None

        status = wait_until(compacted, 60, "the sensor getting the branch compacted", interval=0.1)
        assert status.compaction_start_time.seconds > 0
        assert listing(stack, "sensed", "main") == keys[45:]
