"""GC exports run in the background (lakeFS's prepareGarbageCollectionCommitsAsync).

A task is a KV record in the repository's partition, ``gc/tasks/<id>`` (model.proto's
GCPrepareTask), so its status is read by whichever graveler an API replica reaches, not only
the one running it. The graveler that started the task runs the export (Retention.prepare,
with lakeFS's commits file) in a thread and keeps the record's update_time fresh; a record
that is not completed and has not been beaten for STALE_SECONDS reads as interrupted: the
process running it stopped, and the client starts another.

Records stay until the repository is deleted (its partition goes with it), as lakeFS keeps its
task records.
"""

from __future__ import annotations

import contextlib
import logging
import re
import secrets
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from google.protobuf.timestamp_pb2 import Timestamp

from engine.core.deadline import Deadline
from engine.core.refs import RepoHandle
from engine.features.retention import PreparedRun, Retention
from silt.errors import Aborted, NotFound, PredicateFailed, SiltError
from silt.graveler.v1 import model_pb2 as pb
from silt.kv import Store

log = logging.getLogger(__name__)

TASKS = b"gc/tasks/"
# lakeFS answers 404 for an id that is not one of its tasks; so does a malformed one here.
_ID = re.compile(r"[0-9a-f]{20}")
BEAT_SECONDS = 2.0
STALE_SECONDS = 30.0
# The longest one export may run in the background: a repository of millions of commits takes
# minutes; past this the task ends with an error rather than holding a thread for ever.
TASK_SECONDS = 6 * 3600.0
# Exports running at once in one graveler; more wait their turn (each reads every commit and
# staged entry of a repository, so a few at a time is plenty).
RUNNING = 2
_ATTEMPTS = 20


def _now() -> Timestamp:
    stamp = Timestamp()
    stamp.FromNanoseconds(time.time_ns())
    return stamp


def _key(task_id: str) -> bytes:
    if not _ID.fullmatch(task_id):
        raise NotFound(f"GC prepare task {task_id!r} not found")
    return TASKS + task_id.encode()


def is_stale(task: pb.GCPrepareTask, now_seconds: float) -> bool:
    return not task.completed and now_seconds - task.update_time.ToNanoseconds() / 1e9 > STALE_SECONDS


class PrepareTasks:
    def __init__(self, kv: Store, retention: Retention, running: int = RUNNING) -> None:
        self._kv = kv
        self._retention = retention
        self._pool = ThreadPoolExecutor(max_workers=running, thread_name_prefix="gc-prepare")
        self._active: dict[tuple[bytes, str], None] = {}
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._beater: threading.Thread | None = None

    def start(self, repo: RepoHandle) -> pb.GCPrepareTask:
        """Record a new task and run it in the background; the record as created."""
        now = _now()
        task = pb.GCPrepareTask(id=secrets.token_hex(10), created=now, update_time=now)
        self._kv.set_if(repo.partition, _key(task.id), task.SerializeToString(), None)
        with self._lock:
            self._active[(repo.partition, task.id)] = None
            if self._beater is None:
                self._beater = threading.Thread(target=self._beat, name="gc-prepare-beat", daemon=True)
                self._beater.start()
        self._pool.submit(self._run, repo, task.id)
        return task

    def status(self, repo: RepoHandle, task_id: str) -> pb.GCPrepareTask:
        task = self._get(repo.partition, task_id)
        if is_stale(task, time.time()):
            task.completed = True
            task.error = (
                f"the GC prepare task stopped: nothing was heard of it for over {STALE_SECONDS:.0f} s "
                "(the graveler running it stopped or restarted); start another"
            )
        return task

    def close(self) -> None:
        self._closing.set()
        self._pool.shutdown(wait=True, cancel_futures=True)
        if self._beater is not None:
            self._beater.join()

    # --- in the background ------------------------------------------------------------------

    def _run(self, repo: RepoHandle, task_id: str) -> None:
        try:
            deadline = Deadline.after(TASK_SECONDS, is_active=lambda: not self._closing.is_set())
            run = self._retention.prepare(repo, deadline, lakefs_formats=True)
            self._change(repo.partition, task_id, lambda task: _finished(task, run))
        except Exception as exc:
            if self._closing.is_set():
                return  # stopped with this process: the record, no longer beaten, says so
            if not isinstance(exc, SiltError):
                log.exception("GC prepare task %s of repository %r failed", task_id, repo.name)
            error = str(exc) or type(exc).__name__
            with contextlib.suppress(SiltError):
                self._change(repo.partition, task_id, lambda task: _failed(task, error))
        finally:
            with self._lock:
                self._active.pop((repo.partition, task_id), None)

    def _beat(self) -> None:
        while not self._closing.wait(BEAT_SECONDS):
            with self._lock:
                active = list(self._active)
            for partition, task_id in active:
                with contextlib.suppress(SiltError):  # the next beat tries again
                    self._change(partition, task_id, lambda task: not task.completed)

    def _get(self, partition: bytes, task_id: str) -> pb.GCPrepareTask:
        try:
            got = self._kv.get(partition, _key(task_id))
        except NotFound:
            raise NotFound(f"GC prepare task {task_id!r} not found") from None
        return pb.GCPrepareTask.FromString(got.value)

    def _change(self, partition: bytes, task_id: str, change: Callable[[pb.GCPrepareTask], bool]) -> None:
        """Apply change to the record as stored now and write it back (with a fresh update_time),
        unless change returns False."""
        key = _key(task_id)
        for _ in range(_ATTEMPTS):
            got = self._kv.get(partition, key)
            task = pb.GCPrepareTask.FromString(got.value)
            if not change(task):
                return
            task.update_time.CopyFrom(_now())
            try:
                self._kv.set_if(partition, key, task.SerializeToString(), got.predicate)
            except PredicateFailed:
                continue
            return
        raise Aborted(f"GC prepare task {task_id!r}: its record kept changing")


def _finished(task: pb.GCPrepareTask, run: PreparedRun) -> bool:
    task.completed = True
    task.error = ""
    task.run_id = run.run_id
    task.location = run.location
    task.lakefs_commits_location = run.lakefs_commits_location
    task.started.CopyFrom(run.started)
    task.commits = run.commits
    task.expired_commits = run.expired_commits
    task.staged_entries = run.staged_entries
    return True


def _failed(task: pb.GCPrepareTask, error: str) -> bool:
    task.completed = True
    task.error = f"preparing GC failed: {error}"
    return True
