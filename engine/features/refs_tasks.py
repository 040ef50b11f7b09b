"""Dumps and restores run in the background (lakeFS's dumpSubmit / restoreSubmit), each a task.

A task's status is a record in its repository's KV partition (key ``refs_tasks/<id>``,
model.proto's RefsTaskRecord), kept as background_tasks.py keeps every background task's.
Nothing re-runs an interrupted task: a dump left half written is files nobody names, and a
restore left half done is a repository no longer bare, which its operator deletes and restores
again (docs/operations.md, "Backing up"). One restore into a repository runs at a time: a second
one, synchronous or not, is refused (AlreadyExists) while the first holds the repository's
restore lease (engine/features/leases.py), which a graveler that died stops renewing.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from engine.core.refs import RepoHandle
from engine.features.background_tasks import BackgroundTasks, TaskRecords
from engine.features.leases import Lease
from engine.features.lifecycle import Lifecycle
from silt.errors import NotFound
from silt.graveler.v1 import model_pb2 as pb
from silt.kv import Store

DUMP = pb.RefsTaskRecord.KIND_DUMP
RESTORE = pb.RefsTaskRecord.KIND_RESTORE
# Tasks running at once in one graveler; more wait their turn (their records say not done).
WORKERS = 4


def _counts(location: str, commits: int, branches: int, tags: int) -> Callable[[pb.RefsTaskRecord], None]:
    def write(record: pb.RefsTaskRecord) -> None:
        record.location = location
        record.commits, record.branches, record.tags = commits, branches, tags

    return write


class RefsTasks:
    def __init__(self, kv: Store, lifecycle: Lifecycle, clock: Callable[[], float] = time.time) -> None:
        self._lifecycle = lifecycle
        # Leases of restores submitted and not yet started.
        self._waiting: set[Lease] = set()
        self._tasks = BackgroundTasks(
            kv,
            TaskRecords(pb.RefsTaskRecord, b"refs_tasks/", "done"),
            name="refs task",
            api_name="task",
            id_pattern=r"[0-9a-f]{1,64}",
            workers=WORKERS,
            clock=clock,
        )

    def start_dump(self, repo: RepoHandle) -> pb.RefsTaskRecord:
        def dump() -> Callable[[pb.RefsTaskRecord], None]:
            dumped = self._lifecycle.dump_refs(repo)
            return _counts(dumped.location, dumped.commits, dumped.branches, dumped.tags)

        return self._tasks.start(repo, pb.RefsTaskRecord(kind=DUMP), dump)

    def start_restore(self, repo: RepoHandle, location: str) -> pb.RefsTaskRecord:
        """Refused at once (as lakeFS refuses at submit) when the location is not a dump's or the
        repository is not bare, and (AlreadyExists) while another restore into it runs: the
        repository's restore lease is taken here, held while the task waits and runs, and given
        back when it ends. The restore itself checks the location and bareness again when it runs."""
        lease = self._lifecycle.restore_lease(repo)
        try:
            self._lifecycle.check_restorable(repo, location)

            def restore() -> Callable[[pb.RefsTaskRecord], None]:
                with lease:
                    self._waiting.discard(lease)
                    restored = self._lifecycle.restore_refs(repo, location, lease)
                return _counts(location, restored.commits, restored.branches, restored.tags)

            self._waiting.add(lease)
            return self._tasks.start(repo, pb.RefsTaskRecord(kind=RESTORE, location=location), restore)
        except BaseException:
            self._waiting.discard(lease)
            lease.release()
            raise

    def status(self, repo: RepoHandle, kind: pb.RefsTaskRecord.Kind.ValueType, task_id: str) -> pb.RefsTaskRecord:
        """The task's record; NotFound for an id no task of this kind has in this repository."""
        record = self._tasks.status(repo, task_id)
        if record.kind != kind:
            raise NotFound(f"task {task_id!r} not found")
        return record

    def close(self) -> None:
        # A dump or restore cannot stop half way: the engine's close does not wait for one.
        self._tasks.close(wait=False)
        # Restores that never started (the close cancels them) give their leases back.
        for lease in list(self._waiting):
            lease.release()
