"""Commits built in worker processes (as the graveler service runs them), on the local driver."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from engine.core.builder import ProcessPoolBuilder, worker_cpus
from engine.core.deadline import NO_DEADLINE
from engine.core.model import StagingToken
from engine.open import open_graveler
from silt.block import open_adapter
from silt.config import Config, load_config
from silt.graveler.v1 import model_pb2 as pb
from silt.kv import open_store
from silt.sandbox.process import is_dumpable
from tests.support.wait import wait_until

# Pools of worker processes, started and stopped per test.
pytestmark = pytest.mark.slow


def local_config(root: Path, cpus: str) -> Config:
    return load_config(
        env={
            "SILT_DATABASE_TYPE": "local",
            "SILT_DATABASE_LOCAL_PATH": str(root / "kv.db"),
            "SILT_BLOCKSTORE_TYPE": "local",
            "SILT_BLOCKSTORE_LOCAL_PATH": str(root / "data"),
            "SILT_GRAVELER_COMMIT_WORKER_CPUS": cpus,
        }
    )


@pytest.mark.parametrize("cpus", ["auto", "all"])
def test_a_commit_built_by_workers_is_complete_and_its_token_is_dropped(tmp_path: Path, cpus: str) -> None:
    config = local_config(tmp_path, cpus)
    kv = open_store(config.database)
    builder = ProcessPoolBuilder(config, workers=1)
    graveler = open_graveler(kv, open_adapter(config.blockstore), builder=builder)
    try:
        graveler.lifecycle.create_repository("workers", "local://workers", "main", False)
        keys = [f"k/{i:05d}" for i in range(3000)]
        for key in keys:
            graveler.stage_entry("workers", "main", key, pb.Entry(physical_address=f"p/{key}", size=1, etag=key))
        token = StagingToken(graveler.refs.get_branch(graveler.refs.repository("workers"), "main").branch.staging_token)
        graveler.commit("workers", "main", "by workers")

        listed = graveler.entries.list(graveler.refs.repository("workers"), "main@", "", "", "", 10_000, NO_DEADLINE)
        assert [key.decode() for key, _ in listed.items] == keys

        # The sealed token is dropped in the background, by a worker, in paced bursts.
        wait_until(lambda: graveler.staging.is_empty(token), 60, "the committed token dropped")

        pids = list(builder._pool._processes or {})  # the workers' pids
        assert pids, "the commit ran in no worker process"
        expected = worker_cpus(cpus, os.sched_getaffinity(0)) or os.sched_getaffinity(0)
        assert all(os.sched_getaffinity(pid) == expected for pid in pids)
        # Niced, not at SCHED_IDLE, which gets no CPU at all while the machine is saturated:
        # a commit waits for its build, and the build's KV reads time out.
        assert all(os.sched_getscheduler(pid) == os.SCHED_OTHER for pid in pids)
        niced = min(19, os.getpriority(os.PRIO_PROCESS, 0) + 10)
        assert all(os.getpriority(os.PRIO_PROCESS, pid) == niced for pid in pids)
    finally:
        graveler.close()
        kv.close()


def test_the_workers_are_not_dumpable(tmp_path: Path) -> None:
    """A worker holds graveler's store credentials: like graveler, it keeps its memory and
    environment from processes of the same user (exec made it dumpable again)."""
    builder = ProcessPoolBuilder(local_config(tmp_path, "all"), workers=1)
    try:
        assert builder._pool.submit(is_dumpable).result(timeout=60) is False
    finally:
        builder.close()
