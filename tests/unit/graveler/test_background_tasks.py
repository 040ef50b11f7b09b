"""The task records both dumps/restores and GC preparation keep: context, beats, staleness, outcomes."""

from __future__ import annotations

import contextvars
import secrets
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from engine.core.refs import RepoHandle
from engine.features import background_tasks
from engine.features.background_tasks import (
    INTERRUPTED,
    RETENTION_SECONDS,
    STALE_SECONDS,
    BackgroundTasks,
    TaskRecords,
)
from silt.errors import NotFound, ResourceExhausted
from silt.graveler.v1 import model_pb2 as pb
from silt.kv.mem import MemStore
from silt.kv.store import scan_prefix

RECORDS = TaskRecords(pb.RefsTaskRecord, b"t/", "done")
REPO = RepoHandle(pb.Repository(name="repo", unique_id="u1"))
caller: contextvars.ContextVar[str] = contextvars.ContextVar("caller", default="")


@pytest.fixture
def kv() -> MemStore:
    return MemStore()


@pytest.fixture
def tasks(kv: MemStore) -> Iterator[BackgroundTasks[pb.RefsTaskRecord]]:
    tasks = BackgroundTasks(kv, RECORDS, name="test task", workers=2)
    yield tasks
    tasks.close(wait=True)


def _ended(tasks: BackgroundTasks[pb.RefsTaskRecord], task_id: str) -> pb.RefsTaskRecord:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        record = tasks.status(REPO, task_id)
        if record.done:
            return record
        time.sleep(0.01)
    raise AssertionError("the task did not end in time")


def test_work_runs_under_the_callers_context_and_its_outcome_is_recorded(
    tasks: BackgroundTasks[pb.RefsTaskRecord],
) -> None:
    def work() -> Callable[[pb.RefsTaskRecord], None]:
        seen = caller.get()

        def write(record: pb.RefsTaskRecord) -> None:
            record.location = seen

        return write

    token = caller.set("alice")
    try:
        started = tasks.start(REPO, pb.RefsTaskRecord(kind=pb.RefsTaskRecord.KIND_DUMP), work)
    finally:
        caller.reset(token)
    assert len(started.id) == 20 and not started.done
    ended = _ended(tasks, started.id)
    assert (ended.location, ended.error, ended.kind) == ("alice", "", pb.RefsTaskRecord.KIND_DUMP)


def test_a_failure_records_its_description(tasks: BackgroundTasks[pb.RefsTaskRecord]) -> None:
    def work() -> Callable[[pb.RefsTaskRecord], None]:
        raise ValueError("a detail not for the caller")

    ended = _ended(tasks, tasks.start(REPO, pb.RefsTaskRecord(), work).id)
    assert ended.error == "internal error: ValueError"


def test_a_running_task_is_beaten_and_a_stale_one_reads_interrupted(
    kv: MemStore, tasks: BackgroundTasks[pb.RefsTaskRecord], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(background_tasks, "BEAT_SECONDS", 0.02)
    release = threading.Event()

    def work() -> Callable[[pb.RefsTaskRecord], None]:
        release.wait(10)
        return lambda record: None

    started = tasks.start(REPO, pb.RefsTaskRecord(), work)
    try:
        deadline = time.monotonic() + 10
        while tasks.status(REPO, started.id).update_time == started.update_time:
            assert time.monotonic() < deadline, "the running task was not beaten"
            time.sleep(0.01)
        # A reader whose clock is past the stale limit calls it interrupted; the task goes on.
        later = BackgroundTasks(kv, RECORDS, name="test task", workers=1, clock=lambda: time.time() + STALE_SECONDS + 5)
        try:
            stale = later.status(REPO, started.id)
            assert stale.done and stale.error == INTERRUPTED
        finally:
            later.close(wait=True)
    finally:
        release.set()
    assert _ended(tasks, started.id).error == ""


@pytest.mark.parametrize("task_id", ["0" * 20, "not-a-task", "../x", "a" * 21])
def test_an_unknown_or_malformed_id_is_not_found(tasks: BackgroundTasks[pb.RefsTaskRecord], task_id: str) -> None:
    with pytest.raises(NotFound, match="test task"):
        tasks.status(REPO, task_id)


def _done_task(tasks: BackgroundTasks[pb.RefsTaskRecord]) -> str:
    task_id = tasks.start(REPO, pb.RefsTaskRecord(), lambda: lambda record: None).id
    _ended(tasks, task_id)
    return task_id


def _stored(kv: MemStore) -> int:
    return sum(1 for _ in scan_prefix(kv, REPO.partition, RECORDS.prefix))


def test_an_ended_record_expires_after_the_retention(kv: MemStore, tasks: BackgroundTasks[pb.RefsTaskRecord]) -> None:
    def ended_ago(seconds: float) -> str:
        """A record of a task that ended seconds ago, as its graveler left it."""
        task_id = secrets.token_hex(10)
        record = pb.RefsTaskRecord(id=task_id, done=True)
        record.update_time.FromNanoseconds(time.time_ns() - int(seconds * 1e9))
        kv.set(REPO.partition, RECORDS.prefix + task_id.encode(), record.SerializeToString())
        return task_id

    expired, kept = ended_ago(RETENTION_SECONDS + 60), ended_ago(RETENTION_SECONDS - 60)
    assert tasks.status(REPO, expired).done
    started = _done_task(tasks)
    with pytest.raises(NotFound):
        tasks.status(REPO, expired)
    assert tasks.status(REPO, kept).done and tasks.status(REPO, started).done
    assert _stored(kv) == 2


def test_ended_records_are_bounded_per_repository_the_oldest_removed_first(
    kv: MemStore, tasks: BackgroundTasks[pb.RefsTaskRecord], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(background_tasks, "MAX_RECORDS", 5)
    ids = [_done_task(tasks) for _ in range(9)]
    assert _stored(kv) == 5
    for task_id in ids[-5:]:
        assert tasks.status(REPO, task_id).done
    with pytest.raises(NotFound):
        tasks.status(REPO, ids[0])
    # Another repository's records are its own.
    other = RepoHandle(pb.Repository(name="other", unique_id="u2"))
    tasks.start(other, pb.RefsTaskRecord(), lambda: lambda record: None)
    assert _stored(kv) == 5


def test_running_tasks_are_never_removed_and_too_many_refuse_a_start(
    kv: MemStore, tasks: BackgroundTasks[pb.RefsTaskRecord], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(background_tasks, "MAX_RECORDS", 3)
    release = threading.Event()

    def work() -> Callable[[pb.RefsTaskRecord], None]:
        release.wait(10)
        return lambda record: None

    try:
        running = [tasks.start(REPO, pb.RefsTaskRecord(), work).id for _ in range(3)]
        with pytest.raises(ResourceExhausted):
            tasks.start(REPO, pb.RefsTaskRecord(), work)
        assert all(not tasks.status(REPO, task_id).done for task_id in running)
    finally:
        release.set()
    assert all(_ended(tasks, task_id).error == "" for task_id in running)
