"""Work a graveler runs in the background for a repository, its status a KV record.

The record lives in the repository's partition (under a prefix of the feature's), so any graveler
replica answers for a task another one runs, and the REST API, which holds no state, asks
whichever graveler it reaches. The graveler running a task rewrites the record's update_time
every BEAT_SECONDS and writes the outcome once; a task that is not done and has not been
rewritten for STALE_SECONDS reads as interrupted (the process running it stopped; judged by the
reader's clock, so replicas whose clocks are further apart than that could call a running task
interrupted: only its status reads so, the task goes on and its record is rewritten when it
ends). Nothing re-runs an interrupted task; what to do about one is the feature's to say.

Only the graveler running a task writes its record after its creation, each time by
read-modify-set_if, as every graveler record is written.

Records do not stay forever: each start first removes the feature's records in the repository
that ended (or went stale) more than RETENTION_SECONDS ago, as lakeFS expires a task's status
after a day, and then the oldest ended ones beyond MAX_RECORDS; a start that finds MAX_RECORDS
tasks still running is refused (ResourceExhausted). So the records one feature keeps in a
repository, and what a start reads to prune them, stay bounded. A removed task's status is not
found, as in lakeFS. Each removal is conditional on the record as read, so a record that changed
meanwhile stays; what is left of a deleted repository goes with its partition.
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
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from google.protobuf.timestamp_pb2 import Timestamp

from engine.core.refs import RepoHandle
from silt.errors import Aborted, NotFound, PredicateFailed, ResourceExhausted, SiltError
from silt.kv import Store
from silt.kv.store import scan_prefix

log = logging.getLogger(__name__)

BEAT_SECONDS = 2.0
STALE_SECONDS = 30.0
# How long an ended task's record stays (lakeFS's task expiry: a day).
RETENTION_SECONDS = 24 * 3600.0
# Records of one feature in one repository: beyond it, the oldest ended ones are removed first.
MAX_RECORDS = 100
_ATTEMPTS = 20
INTERRUPTED = "interrupted: the graveler process running the task stopped before it ended"
# What secrets.token_hex(10) gives, the ids start issues.
_ISSUED_ID = r"[0-9a-f]{20}"


class TaskRecord(Protocol):
    """The fields every task record has (besides its done flag, whose name is the feature's)."""

    id: str
    error: str

    @property
    def created(self) -> Timestamp: ...

    @property
    def update_time(self) -> Timestamp: ...

    def SerializeToString(self, *, deterministic: bool = ...) -> bytes: ...

    def ParseFromString(self, serialized: bytes, /) -> int: ...


R = TypeVar("R", bound=TaskRecord)


def _stamp() -> Timestamp:
    now = Timestamp()
    now.FromNanoseconds(time.time_ns())
    return now


@dataclass(frozen=True)
class TaskRecords(Generic[R]):
    """How one feature's task records are kept: their type, their keys' prefix in the
    repository's partition, and the name of their field that says the task ended."""

    type: type[R]
    prefix: bytes
    done_field: str


def internal_errors_hidden(exc: BaseException) -> str:
    """Silt's own errors are meant for the caller; anything else is logged, not shown."""
    if isinstance(exc, SiltError):
        return str(exc) or type(exc).__name__
    return f"internal error: {type(exc).__name__}"


class BackgroundTasks(Generic[R]):
    """One feature's tasks, kept as `records` says.

    `name` names the tasks in logs, threads and the graveler's own errors; `api_name` is how the
    API's "not found" names one. `id_pattern` is the ids status accepts (by default those start
    issues). `interrupted` is the error a stale record reads with, and `describe_failure` says
    what a run that raised records as its error.
    """

    def __init__(
        self,
        kv: Store,
        records: TaskRecords[R],
        *,
        name: str,
        workers: int,
        api_name: str = "",
        id_pattern: str = _ISSUED_ID,
        interrupted: str = INTERRUPTED,
        describe_failure: Callable[[BaseException], str] = internal_errors_hidden,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._kv = kv
        self._records = records
        self._id = re.compile(id_pattern)
        self._name = name
        self._api_name = api_name or name
        self._interrupted = interrupted
        self._describe_failure = describe_failure
        self._clock = clock
        self._threads = name.lower().replace(" ", "-")
        # Tasks beyond `workers` wait their turn; their records say not done meanwhile.
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=self._threads)
        self._active: set[tuple[bytes, str]] = set()
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._beater: threading.Thread | None = None

    def running(self) -> bool:
        """False once close began: long work polls it to stop early."""
        return not self._closing.is_set()

    def start(self, repo: RepoHandle, record: R, work: Callable[[], Callable[[R], None]]) -> R:
        """Store record (its id and times filled here) and run work in the background; record as
        stored. work returns what writes its outcome into the record; done and error are set here.
        Old records of the feature in the repository are removed first (the module's docstring)."""
        self._prune(repo)
        now = _stamp()
        record.id = secrets.token_hex(10)
        record.created.CopyFrom(now)
        record.update_time.CopyFrom(now)
        self._kv.set_if(repo.partition, self._key(record.id), record.SerializeToString(), None)
        with self._lock:
            self._active.add((repo.partition, record.id))
            if self._beater is None:
                self._beater = threading.Thread(target=self._beat, name=f"{self._threads}-beat", daemon=True)
                self._beater.start()
        # The caller's context goes with the work: the journal records its writes under the call
        # that started it.
        context = contextvars.copy_context()
        self._pool.submit(context.run, self._run, repo, record.id, work)
        return record

    def status(self, repo: RepoHandle, task_id: str) -> R:
        """The task's record, reading as done with the interrupted error when it went stale."""
        try:
            got = self._kv.get(repo.partition, self._key(task_id))
        except NotFound:
            raise NotFound(self._not_found(task_id)) from None
        record = self._parse(got.value)
        stale = self._clock() - record.update_time.ToNanoseconds() / 1e9 > STALE_SECONDS
        if not self._done(record) and stale:
            self._end(record, self._interrupted)
        return record

    def close(self, *, wait: bool) -> None:
        """Stop beating and starting tasks; wait for running ones only if they stop soon when
        `running()` turns False (otherwise shutting down would wait for them to end)."""
        self._closing.set()
        self._pool.shutdown(wait=wait, cancel_futures=True)
        if self._beater is not None:
            self._beater.join()

    # --- in the background ------------------------------------------------------------------

    def _run(self, repo: RepoHandle, task_id: str, work: Callable[[], Callable[[R], None]]) -> None:
        try:
            try:
                outcome = work()
            except BaseException as exc:  # reported in the record, whatever it was
                if self._closing.is_set():
                    return  # likely stopped by the close: the record, no longer beaten, says so
                if not isinstance(exc, SiltError):
                    log.error("%s %s of repository %r failed", self._name, task_id, repo.name, exc_info=exc)
                error = self._describe_failure(exc)
                self._change(repo.partition, task_id, lambda record: self._end(record, error))
            else:

                def succeeded(record: R) -> None:
                    outcome(record)
                    self._end(record, "")

                self._change(repo.partition, task_id, succeeded)
        except SiltError:  # the repository was deleted meanwhile, or KV is away: the record goes stale
            log.warning("could not record the end of %s %s of %r", self._name, task_id, repo.name, exc_info=True)
        finally:
            with self._lock:
                self._active.discard((repo.partition, task_id))

    def _beat(self) -> None:
        while not self._closing.wait(BEAT_SECONDS):
            with self._lock:
                active = list(self._active)
            for partition, task_id in active:
                try:
                    self._change(partition, task_id, lambda record: None)
                except SiltError:  # the next beat tries again
                    log.debug("could not beat %s %s", self._name, task_id, exc_info=True)

    def _change(self, partition: bytes, task_id: str, change: Callable[[R], None]) -> None:
        """Apply change to the record as stored now and write it back with a fresh update_time;
        a record already done is left as it is (a beat racing the outcome must not undo it)."""
        key = self._key(task_id)
        for _ in range(_ATTEMPTS):
            got = self._kv.get(partition, key)
            record = self._parse(got.value)
            if self._done(record):
                return
            change(record)
            record.update_time.CopyFrom(_stamp())
            try:
                self._kv.set_if(partition, key, record.SerializeToString(), got.predicate)
            except PredicateFailed:
                continue
            return
        raise Aborted(f"{self._name} {task_id!r}: its record kept changing under {_ATTEMPTS} writes")

    # --- records ----------------------------------------------------------------------------

    def _prune(self, repo: RepoHandle) -> None:
        """Remove the repository's records that ended more than RETENTION_SECONDS ago, then the
        oldest ended ones beyond MAX_RECORDS (room left for the one being started);
        ResourceExhausted if MAX_RECORDS tasks are still running."""
        now = self._clock()
        ended: list[tuple[float, bytes]] = []  # (update time, key), a stale record counting as ended
        running = 0
        for entry in scan_prefix(self._kv, repo.partition, self._records.prefix):
            record = self._parse(entry.value)
            updated = record.update_time.ToNanoseconds() / 1e9
            if self._done(record) or now - updated > STALE_SECONDS:
                ended.append((updated, entry.key))
            else:
                running += 1
        if running >= MAX_RECORDS:
            raise ResourceExhausted(
                f"{running} {self._name}s of repository {repo.name!r} are running: wait for one to end"
            )
        ended.sort(reverse=True)  # newest first
        room = MAX_RECORDS - 1 - running
        for kept, (updated, key) in enumerate(ended):
            if kept >= room or now - updated > RETENTION_SECONDS:
                self._remove(repo.partition, key)

    def _remove(self, partition: bytes, key: bytes) -> None:
        """Delete a record unless it changed since read (a task it turned out was still running
        beats it): conditional, as every write of a record is."""
        try:
            got = self._kv.get(partition, key)
            record = self._parse(got.value)
            if not self._done(record) and self._clock() - record.update_time.ToNanoseconds() / 1e9 <= STALE_SECONDS:
                return
            self._kv.apply(partition, [], [key], condition=(key, got.predicate))
        except (NotFound, PredicateFailed):
            pass  # removed by another start meanwhile, or rewritten: either way not ours to remove

    def _key(self, task_id: str) -> bytes:
        # A malformed id is no task's, as for lakeFS: NotFound, never a key outside the prefix.
        if not self._id.fullmatch(task_id):
            raise NotFound(self._not_found(task_id))
        return self._records.prefix + task_id.encode()

    def _not_found(self, task_id: str) -> str:
        return f"{self._api_name} {task_id!r} not found"

    def _parse(self, value: bytes) -> R:
        record = self._records.type()
        record.ParseFromString(value)
        return record

    def _done(self, record: R) -> bool:
        return bool(getattr(record, self._records.done_field))

    def _end(self, record: R, error: str) -> None:
        setattr(record, self._records.done_field, True)
        record.error = error
