"""Dumps and restores run in the background (lakeFS's dumpSubmit / restoreSubmit), each a task.

A task's status is a record in its repository's KV partition (key ``refs_tasks/<id>``,
model.proto's RefsTaskRecord), so any graveler replica answers for a task another one runs, and
the REST API, which holds no state, asks whichever graveler it reaches. The graveler thread that
runs a task rewrites the record's update_time every BEAT_SECONDS and writes the outcome once; a
task that is not done and has not been rewritten for STALE_SECONDS reads as interrupted (the
process running it stopped; judged by the reader's clock, so replicas whose clocks are further
apart than that could call a running task interrupted: only its status reads so, the task goes
on and its record is rewritten when it ends). Nothing re-runs an interrupted task: a dump left half written is
files nobody names, and a restore left half done is a repository no longer bare, which its
operator deletes and restores again (docs/operations.md, "Backing up").

Only the running thread writes a record after its creation, each time by read-modify-set_if,
as every graveler record is written (no key here is also written by plain writes).
"""

from __future__ import annotations

import contextvars
import logging
import re
import secrets
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

from google.protobuf.timestamp_pb2 import Timestamp

from engine.core.refs import RepoHandle
from engine.features.lifecycle import Lifecycle
from silt.errors import Aborted, NotFound, PredicateFailed, SiltError
from silt.graveler.v1 import model_pb2 as pb
from silt.kv import Store

log = logging.getLogger(__name__)

TASKS = b"refs_tasks/"
DUMP = pb.RefsTaskRecord.KIND_DUMP
RESTORE = pb.RefsTaskRecord.KIND_RESTORE
BEAT_SECONDS = 2.0
STALE_SECONDS = 30.0
INTERRUPTED = "interrupted: the graveler process running the task stopped before it ended"
_ID = re.compile(r"[0-9a-f]{1,64}")
_ATTEMPTS = 20
# Tasks running at once in one graveler; more wait their turn (their records say not done).
WORKERS = 4


class Counts(NamedTuple):
    location: str
    commits: int
    branches: int
    tags: int


def _key(task_id: str) -> bytes:
    if not _ID.fullmatch(task_id):
        raise NotFound(f"task {task_id!r} not found")
    return TASKS + task_id.encode()


def _stamp() -> Timestamp:
    now = Timestamp()
    now.FromNanoseconds(time.time_ns())
    return now


class RefsTasks:
    def __init__(self, kv: Store, lifecycle: Lifecycle, clock: Callable[[], float] = time.time) -> None:
        self._kv = kv
        self._lifecycle = lifecycle
        self._clock = clock
        self._pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="refs-task")
        self._closing = threading.Event()

    # --- starting ------------------------------------------------------------------------------

    def start_dump(self, repo: RepoHandle) -> pb.RefsTaskRecord:
        def dump() -> Counts:
            dumped = self._lifecycle.dump_refs(repo)
            return Counts(dumped.location, dumped.commits, dumped.branches, dumped.tags)

        return self._start(repo, DUMP, "", dump)

    def start_restore(self, repo: RepoHandle, location: str) -> pb.RefsTaskRecord:
        """Refused at once (as lakeFS refuses at submit) when the location is not a dump's or the
        repository is not bare; the restore itself checks both again when it runs."""
        self._lifecycle.check_restorable(repo, location)

        def restore() -> Counts:
            restored = self._lifecycle.restore_refs(repo, location)
            return Counts(location, restored.commits, restored.branches, restored.tags)

        return self._start(repo, RESTORE, location, restore)

    def _start(
        self, repo: RepoHandle, kind: pb.RefsTaskRecord.Kind.ValueType, location: str, work: Callable[[], Counts]
    ) -> pb.RefsTaskRecord:
        now = _stamp()
        record = pb.RefsTaskRecord(id=secrets.token_hex(10), kind=kind, created=now, update_time=now, location=location)
        self._kv.set_if(repo.partition, _key(record.id), record.SerializeToString(), None)
        # The caller's context (whose journal records the restore's writes are) goes with the work.
        context = contextvars.copy_context()
        self._pool.submit(context.run, self._run, repo, record.id, work)
        return record

    # --- running -------------------------------------------------------------------------------

    def _run(self, repo: RepoHandle, task_id: str, work: Callable[[], Counts]) -> None:
        outcome: list[Counts | BaseException] = []
        context = contextvars.copy_context()

        def run() -> None:
            try:
                outcome.append(work())
            except BaseException as exc:  # reported in the record, whatever it was
                outcome.append(exc)

        worker = threading.Thread(target=context.run, args=(run,), name=f"refs-task-{task_id}", daemon=True)
        worker.start()
        while worker.is_alive():
            worker.join(BEAT_SECONDS)
            if worker.is_alive() and not self._closing.is_set():
                self._change(repo, task_id, lambda record: None)
        if self._closing.is_set() and not outcome:
            return  # stopped with the engine: the record goes stale and reads as interrupted
        result = outcome[0] if outcome else RuntimeError("the task ended without an outcome")

        def finish(record: pb.RefsTaskRecord) -> None:
            record.done = True
            if isinstance(result, Counts):
                record.location = result.location
                record.commits, record.branches, record.tags = result.commits, result.branches, result.tags
            elif isinstance(result, SiltError):
                record.error = str(result) or type(result).__name__
            else:
                log.error("refs task %s of %s failed", task_id, repo.name, exc_info=result)
                record.error = f"internal error: {type(result).__name__}"

        try:
            self._change(repo, task_id, finish)
        except SiltError:  # the repository was deleted meanwhile, or KV is away: the record goes stale
            log.warning("could not record the end of refs task %s of %s", task_id, repo.name, exc_info=True)

    def _change(self, repo: RepoHandle, task_id: str, change: Callable[[pb.RefsTaskRecord], None]) -> None:
        key = _key(task_id)
        for _ in range(_ATTEMPTS):
            got = self._kv.get(repo.partition, key)
            record = pb.RefsTaskRecord()
            record.ParseFromString(got.value)
            change(record)
            record.update_time.CopyFrom(_stamp())
            try:
                self._kv.set_if(repo.partition, key, record.SerializeToString(), got.predicate)
            except PredicateFailed:
                continue
            return
        raise Aborted(f"refs task {task_id!r}: its record kept changing under {_ATTEMPTS} writes")

    # --- status --------------------------------------------------------------------------------

    def status(self, repo: RepoHandle, kind: pb.RefsTaskRecord.Kind.ValueType, task_id: str) -> pb.RefsTaskRecord:
        """The task's record; NotFound for an id no task of this kind has in this repository."""
        try:
            got = self._kv.get(repo.partition, _key(task_id))
        except NotFound:
            raise NotFound(f"task {task_id!r} not found") from None
        record = pb.RefsTaskRecord()
        record.ParseFromString(got.value)
        if record.kind != kind:
            raise NotFound(f"task {task_id!r} not found")
        if not record.done and self._clock() - record.update_time.ToNanoseconds() / 1e9 > STALE_SECONDS:
            record.done = True
            record.error = INTERRUPTED
        return record

    def close(self) -> None:
        self._closing.set()
        self._pool.shutdown(wait=False, cancel_futures=True)
