"""GC exports run in the background (lakeFS's prepareGarbageCollectionCommitsAsync).

A task is a KV record in the repository's partition, ``gc/tasks/<id>`` (model.proto's
GCPrepareTask), kept as background_tasks.py keeps every background task's. The export is
Retention.prepare with lakeFS's commits file; a task that reads as interrupted is not re-run:
the client starts another. Records stay as lakeFS keeps its task records.
"""

from __future__ import annotations

from collections.abc import Callable

from engine.core.deadline import Deadline
from engine.core.refs import RepoHandle
from engine.features.background_tasks import STALE_SECONDS, BackgroundTasks, TaskRecords
from engine.features.retention import PreparedRun, Retention
from silt.graveler.v1 import model_pb2 as pb
from silt.kv import Store

# The longest one export may run in the background: a repository of millions of commits takes
# minutes; past this the task ends with an error rather than holding a thread for ever.
TASK_SECONDS = 6 * 3600.0
# Exports running at once in one graveler; more wait their turn (each reads every commit and
# staged entry of a repository, so a few at a time is plenty).
RUNNING = 2
STOPPED = (
    f"the GC prepare task stopped: nothing was heard of it for over {STALE_SECONDS:.0f} s "
    "(the graveler running it stopped or restarted); start another"
)


def _describe_failure(exc: BaseException) -> str:
    return f"preparing GC failed: {str(exc) or type(exc).__name__}"


def _finished(run: PreparedRun) -> Callable[[pb.GCPrepareTask], None]:
    def write(task: pb.GCPrepareTask) -> None:
        task.run_id = run.run_id
        task.location = run.location
        task.lakefs_commits_location = run.lakefs_commits_location
        task.started.CopyFrom(run.started)
        task.commits = run.commits
        task.expired_commits = run.expired_commits
        task.staged_entries = run.staged_entries

    return write


class PrepareTasks:
    def __init__(self, kv: Store, retention: Retention, running: int = RUNNING) -> None:
        self._retention = retention
        self._tasks = BackgroundTasks(
            kv,
            TaskRecords(pb.GCPrepareTask, b"gc/tasks/", "completed"),
            name="GC prepare task",
            interrupted=STOPPED,
            describe_failure=_describe_failure,
            workers=running,
        )

    def start(self, repo: RepoHandle) -> pb.GCPrepareTask:
        """Record a new task and run it in the background; the record as created."""

        def prepare() -> Callable[[pb.GCPrepareTask], None]:
            deadline = Deadline.after(TASK_SECONDS, is_active=self._tasks.running)
            return _finished(self._retention.prepare(repo, deadline, lakefs_formats=True))

        return self._tasks.start(repo, pb.GCPrepareTask(), prepare)

    def status(self, repo: RepoHandle, task_id: str) -> pb.GCPrepareTask:
        return self._tasks.status(repo, task_id)

    def close(self) -> None:
        # An export stops at its deadline's next check once closing: waiting for it is short.
        self._tasks.close(wait=True)
