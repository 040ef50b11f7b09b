"""Writers keep uploading, staging and committing while a GC run marks and sweeps.

The grace period is what protects an upload between its bytes landing and its entry being
staged (docs/design/gc.md, "Races the design must close"); it must exceed that gap, here a
few milliseconds, so the test uses 30 s. Garbage from before the run (backdated an hour) must still go.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

from jobs.gc.job import GCOptions, run_gc
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb
from tests.integration.gc.conftest import GCEnv

WRITERS = 2


def test_nothing_acknowledged_is_lost(spark: Any, gc_env: GCEnv) -> None:
    env = gc_env
    repo = env.new_repo(default_days=0)
    garbage = [env.upload(repo, f"garbage {i}".encode()) for i in range(20)]
    for i in range(WRITERS):
        env.stub.CreateBranch(api.CreateBranchRequest(repository=repo, name=f"w{i}", source_ref="main"))
    acknowledged: dict[str, tuple[str, str, bytes]] = {}  # address -> (branch, key, content)
    lock = threading.Lock()
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer(branch: str) -> None:
        try:
            count = 0
            while not stop.is_set():
                key = f"k/{uuid.uuid4().hex}"
                content = f"{branch} {key}".encode()
                address = env.upload(repo, content, backdate=False)
                env.stub.StageEntry(
                    api.StageEntryRequest(
                        repository=repo,
                        branch=branch,
                        key=key,
                        entry=pb.Entry(physical_address=address, size=len(content)),
                    )
                )
                with lock:
                    acknowledged[address] = (branch, key, content)
                count += 1
                if count % 4 == 0:
                    env.stub.Commit(api.CommitRequest(repository=repo, branch=branch, message=f"{count}"))
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(f"w{i}",)) for i in range(WRITERS)]
    for thread in threads:
        thread.start()
    try:
        summary = run_gc(spark, env.stub, repo, env.blockstore, GCOptions(grace_seconds=30, unsafe_short_grace=True))
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
    assert not errors, errors
    assert len(acknowledged) > 10, "the writers barely ran during GC"
    assert summary.deleted >= len(garbage)
    assert not any(env.exists(repo, address) for address in garbage)
    for address, (branch, key, content) in acknowledged.items():
        assert env.read(repo, address) == content
        stat = env.stub.StatEntry(api.StatEntryRequest(repository=repo, ref=branch, key=key))
        assert stat.entry.physical_address == address
