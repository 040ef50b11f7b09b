"""The compaction sensor in graveler, triggering a real compactor gRPC server (docs/design/compaction.md)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import grpc
import pytest

from engine.core.deadline import NO_DEADLINE
from engine.open import open_graveler
from services.compactor.compactor import Compactor
from services.compactor.server import start as start_compactor
from services.graveler.sensor import Sensor, Thresholds, Trigger
from silt.block.local import LocalAdapter
from silt.compactor.v1 import compactor_pb2 as capi
from silt.compactor.v1 import compactor_pb2_grpc as capi_grpc
from silt.graveler.v1 import graveler_pb2 as api
from silt.kv import Store
from tests.integration.graveler.conftest import GravelerEnv
from tests.support.wait import wait_until

THRESHOLDS = Thresholds(tombstones=20, sealed_tokens=4, claim_seconds=60)


@pytest.fixture
def compactor(env: GravelerEnv, store: Store) -> Iterator[capi_grpc.CompactorServiceStub]:
    """A compactor service on the same KV and object store, with its own engine."""
    engine = open_graveler(store, LocalAdapter(env.data_root))
    service = Compactor(engine, timeout=60)
    server, port = start_compactor(service, "127.0.0.1:0")
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield capi_grpc.CompactorServiceStub(channel)
    finally:
        channel.close()
        server.stop(None)
        service.close()


def grpc_trigger(stub: capi_grpc.CompactorServiceStub, timeout: float = 2.0) -> Trigger:
    def trigger(repository: str, branch: str) -> None:
        stub.Trigger(capi.TriggerRequest(repository=repository, branch=branch), timeout=timeout)

    return trigger


def attach(env: GravelerEnv, trigger: Trigger, clock: object = time.time) -> Sensor:
    sensor = Sensor(env.graveler.refs, env.graveler.staging, THRESHOLDS, trigger, clock=clock)  # type: ignore[arg-type]
    env.graveler.observer = sensor
    return sensor


def seeded(env: GravelerEnv, keys: int = 30) -> str:
    repo = env.new_repo("sensor")
    for i in range(keys):
        env.put(repo, "main", f"k{i:03d}")
    env.commit(repo, "main")
    return repo


def delete(env: GravelerEnv, repo: str, *keys: str) -> None:
    for key in keys:
        env.stub.DeleteEntry(api.DeleteEntryRequest(repository=repo, branch="main", key=key))


def wait_compacted(compactor: capi_grpc.CompactorServiceStub, repo: str, timeout: float = 30) -> capi.GetStatusResponse:
    def compacted() -> capi.GetStatusResponse | None:
        status = compactor.GetStatus(capi.GetStatusRequest(repository=repo, branch="main"))
        return status if status.compacted_metarange_id and not status.running else None

    return wait_until(compacted, timeout, "the branch compacted", interval=0.02)


def test_staged_deletes_past_the_threshold_trigger_a_compaction(
    env: GravelerEnv, compactor: capi_grpc.CompactorServiceStub
) -> None:
    repo = seeded(env)
    sensor = attach(env, grpc_trigger(compactor))
    delete(env, repo, *[f"k{i:03d}" for i in range(19)])
    sensor.flush(10)
    assert sensor.stats.triggered == 0 and sensor.tombstones(repo, "main") == 19
    delete(env, repo, "k019")
    sensor.flush(10)
    assert sensor.stats.triggered_branches == [(repo, "main")]
    assert sensor.tombstones(repo, "main") == 0  # the compaction takes what was counted
    status = wait_compacted(compactor, repo)
    assert status.sealed_tokens == 0
    assert env.list_all(repo, "main") == [f"k{i:03d}" for i in range(20, 30)]


def test_a_recent_claim_blocks_another_replica(env: GravelerEnv, compactor: capi_grpc.CompactorServiceStub) -> None:
    repo = seeded(env)
    now = [1_000_000.0]
    triggered: list[str] = []
    first = attach(env, lambda r, b: triggered.append("first"), clock=lambda: now[0])
    other = Sensor(env.graveler.refs, env.graveler.staging, THRESHOLDS, lambda r, b: None, clock=lambda: now[0])
    assert first.claim(repo, "main")
    assert not other.claim(repo, "main")  # another replica, 0 s later
    now[0] += 59
    assert not other.claim(repo, "main")
    now[0] += 2
    assert other.claim(repo, "main")
    # A refused claim triggers nothing.
    now[0] += 1
    delete(env, repo, *[f"k{i:03d}" for i in range(20)])
    first.flush(10)
    assert triggered == [] and first.stats.claims_refused == 1


def test_commit_and_reset_clear_the_counts_and_start_up_rebuilds_them(env: GravelerEnv) -> None:
    repo = seeded(env)
    sensor = attach(env, lambda r, b: None)
    delete(env, repo, "k000", "k001")
    assert sensor.tombstones(repo, "main") == 2
    env.commit(repo, "main")
    assert sensor.tombstones(repo, "main") == 0
    delete(env, repo, "k002")
    env.stub.ResetBranch(api.ResetBranchRequest(repository=repo, branch="main", all=True))
    assert sensor.tombstones(repo, "main") == 0
    delete(env, repo, "k003", "k004", "k005")
    restarted = Sensor(env.graveler.refs, env.graveler.staging, THRESHOLDS, lambda r, b: None)
    assert restarted.rebuild() >= 1
    assert restarted.tombstones(repo, "main") == 3


def test_many_sealed_tokens_trigger_a_compaction(env: GravelerEnv, compactor: capi_grpc.CompactorServiceStub) -> None:
    repo = seeded(env)
    sensor = attach(env, grpc_trigger(compactor))
    refs = env.graveler.refs
    for _ in range(THRESHOLDS.sealed_tokens):
        # What commits that fail after sealing leave behind.
        env.graveler.committer._seal(refs.repository(repo), "main", NO_DEADLINE)
    env.put(repo, "main", "new")
    sensor.flush(10)
    assert sensor.stats.triggered == 1
    assert wait_compacted(compactor, repo).sealed_tokens == 0
    assert "new" in env.list_all(repo, "main")


def test_an_unreachable_compactor_never_fails_or_slows_writes(env: GravelerEnv) -> None:
    repo = seeded(env)
    dead = capi_grpc.CompactorServiceStub(grpc.insecure_channel("127.0.0.1:1"))
    sensor = attach(env, grpc_trigger(dead, timeout=0.5))
    started = time.monotonic()
    delete(env, repo, *[f"k{i:03d}" for i in range(25)])
    assert time.monotonic() - started < 5  # the failed trigger ran in the background
    sensor.flush(10)
    assert sensor.stats.trigger_failures == 1 and sensor.stats.triggered == 0
    assert len(env.list_all(repo, "main")) == 5
