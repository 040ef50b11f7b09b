"""kill -9 graveler while clients write: every acknowledged write survives the restart."""

from __future__ import annotations

import signal
import threading
import time

import grpc

from silt.graveler.v1 import graveler_pb2 as api
from silt.launcher import Stack
from tests.e2e.conftest import Silt, entry, graveler_stub

REPO = "e2e-crash"
WRITERS = 6


def test_acknowledged_writes_survive_kill_9(stack: Stack, silt: Silt) -> None:
    silt("repo", "create", REPO)
    stub = graveler_stub(stack)
    acked: list[str] = []
    acked_commits: list[str] = []
    failures = 0
    lock = threading.Lock()
    progress = threading.Condition(lock)  # notified on every acknowledged write
    stop = threading.Event()

    def wait_for_writes(more_than: int) -> int:
        with progress:
            assert progress.wait_for(lambda: len(acked) > more_than, timeout=60), (
                f"writers stalled at {len(acked)} acknowledged writes"
            )
            return len(acked)

    def writer(n: int) -> None:
        nonlocal failures
        i = 0
        while not stop.is_set():
            key = f"w{n}/obj-{i:05d}"
            i += 1
            try:
                stub.StageEntry(
                    api.StageEntryRequest(repository=REPO, branch="main", key=key, entry=entry(key)), timeout=5
                )
            except grpc.RpcError:
                with lock:
                    failures += 1
                time.sleep(0.02)  # the scenario: a client's pause before it tries again
                continue
            with progress:
                acked.append(key)
                progress.notify_all()

    def committer() -> None:
        while not stop.is_set():
            try:
                done = stub.Commit(api.CommitRequest(repository=REPO, branch="main", message="periodic"), timeout=30)
                acked_commits.append(done.id)
            except grpc.RpcError:
                pass
            time.sleep(0.2)  # the scenario: commits now and then while the writers write

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(WRITERS)] + [
        threading.Thread(target=committer)
    ]
    for t in threads:
        t.start()
    try:
        before_kill = wait_for_writes(50)  # the writers are busy
        restarts = stack.restarts("graveler")
        stack.kill("graveler", signal.SIGKILL)
        stack.wait_ready("graveler", timeout=60)
        assert stack.restarts("graveler") == restarts + 1
        with lock:
            at_restart = len(acked)
        wait_for_writes(at_restart + 20)  # writers reconnect and go on
    finally:
        stop.set()
        for t in threads:
            t.join(30)

    assert before_kill > 50, "writers should have been busy before the kill"
    assert len(acked) > before_kill, "writers should have resumed after the restart"
    assert failures > 0, "the kill should have been noticed by the writers"
    assert any("graveler stopped (signal 9)" in line for line in stack.events)

    # Every acknowledged write is there: committed or still staged.
    listed: set[str] = set()
    after = ""
    while True:
        page = stub.ListEntries(api.ListEntriesRequest(repository=REPO, ref="main", after=after, amount=10000))
        listed.update(item.key for item in page.items)
        if not page.has_more:
            break
        after = page.items[-1].key
    missing = [k for k in acked if k not in listed]
    assert not missing, f"{len(missing)} acknowledged writes lost, e.g. {missing[:5]}"
    log = {c.id for c in stub.Log(api.LogRequest(repository=REPO, ref="main", amount=1000)).commits}
    assert set(acked_commits) <= log, "an acknowledged commit is missing from history"
