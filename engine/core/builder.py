"""Building a commit's metarange from sealed staging tokens, and dropping committed tokens:
in this process, or in worker processes.

Building is CPU-bound Python (merging staged values, cutting and encoding ranges). In the
serving process it competes for the GIL with every request, so staging writes slow down
while a large commit runs (the long-commit-with-staging benchmark). A service whose
KV store and object store are reachable from another process (every driver but `mem`)
builds in a small pool of worker processes instead, each with its own connections.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from concurrent.futures import Future
from concurrent.futures import wait as wait_for
from dataclasses import dataclass
from typing import Protocol, TypeVar

from engine.core.committed.manager import CommittedManager
from engine.core.committed.model import ApplyResult, Change, ChangeBatch, MetaRangeId, Record
from engine.core.deadline import NO_DEADLINE, Deadline
from engine.core.iterators import combined, combined_columns
from engine.core.model import StagingToken
from engine.core.staging import StagingStore
from engine.core.stores import open_stores
from engine.core.values import KeyValue
from silt.child_process import spawn_pool
from silt.config import Config, parse_cpu_list
from silt.errors import DeadlineExceeded, Unavailable


@dataclass(frozen=True)
class Build:
    """What one build applies: the staged values of tokens (newest first) onto base, a metarange
    of the repository whose storage namespace is namespace; only keys under prefixes, if given.
    One value, so that every builder (and a worker process, pickled) is handed the same thing."""

    namespace: str
    base: MetaRangeId
    tokens: list[StagingToken]
    prefixes: list[bytes] | None = None


class MetaRangeBuilder(Protocol):
    def apply_tokens(self, build: Build, deadline: Deadline = NO_DEADLINE) -> ApplyResult:
        """The metarange of build.

        Gives up with DeadlineExceeded once deadline passes (the caller stopped waiting).
        """
        ...

    def drop_token(self, token: StagingToken) -> None:
        """Delete every staged value of a token that no branch refers to any more."""
        ...

    def close(self) -> None: ...


def staged_changes(
    staging: StagingStore, tokens: list[StagingToken], start: bytes = b"", prefixes: list[bytes] | None = None
) -> Iterator[Change]:
    """The changes held by tokens (newest first) from key start on, newest value per key,
    tombstones as deletes; only keys under one of prefixes, if given."""
    return changes_of(combined([staging.scan(token, start) for token in tokens]), prefixes)


def staged_change_batches(
    staging: StagingStore, tokens: list[StagingToken], prefixes: list[bytes] | None = None
) -> Iterator[ChangeBatch]:
    """staged_changes as consecutive batches: what a commit applies.

    Read many values at a time through every layer (KV, journal, staging, merge of the
    tokens), column by column: a commit of a large staging area otherwise spends most of its
    time resuming a generator per layer per entry, and making objects per entry.
    """
    for columns in combined_columns([staging.scan_columns(token) for token in tokens]):
        if prefixes:
            under = tuple(prefixes)
            kept = [key.startswith(under) for key in columns.keys]
            if not all(kept):
                columns = columns.select(kept)
        if columns.keys:
            yield ChangeBatch(columns.keys, columns.identities, columns.data, columns.tombstones)


def changes_of(values: Iterator[KeyValue], prefixes: list[bytes] | None = None) -> Iterator[Change]:
    """Values in key order as changes, tombstones as deletes; only keys under prefixes, if given."""
    for kv in values:
        if prefixes and not kv.key.startswith(tuple(prefixes)):
            continue
        if kv.value.tombstone:
            yield Change.delete(kv.key)
        else:
            yield Change.upsert(Record(kv.key, kv.value.identity, kv.value.data))


# How many changes a build applies between two looks at its deadline.
DEADLINE_CHECK_EVERY = 1024


def until(deadline: Deadline, changes: Iterator[Change]) -> Iterator[Change]:
    """changes, raising DeadlineExceeded once the caller stopped waiting for the build."""
    for count, change in enumerate(changes):
        if count % DEADLINE_CHECK_EVERY == 0:
            deadline.check("building the commit")
        yield change
    deadline.check("building the commit")


def batches_until(deadline: Deadline, batches: Iterator[ChangeBatch]) -> Iterator[ChangeBatch]:
    """until, for changes given as batches: the deadline is looked at before each batch."""
    for batch in batches:
        deadline.check("building the commit")
        yield batch
    deadline.check("building the commit")


class InProcessBuilder:
    def __init__(self, staging: StagingStore, committed: CommittedManager, drop_pace: float = 0.0) -> None:
        self._staging = staging
        self._committed = committed
        self._drop_pace = drop_pace  # see StagingStore.drop

    def apply_tokens(self, build: Build, deadline: Deadline = NO_DEADLINE) -> ApplyResult:
        batches = batches_until(deadline, staged_change_batches(self._staging, build.tokens, build.prefixes))
        return self._committed.apply_batches(build.namespace, build.base, batches)

    def drop_token(self, token: StagingToken) -> None:
        self._staging.drop(token, self._drop_pace)

    def close(self) -> None:
        pass


_worker: InProcessBuilder | None = None


def worker_cpus(spec: str, available: set[int]) -> set[int] | None:
    """The CPUs commit workers are pinned to, or None to leave them unpinned.

    Measured on a 2-vCPU VM: an unpinned CPU-bound process, even at SCHED_IDLE, raised the
    p99 of staging writes from 1.2 to 7 ms, the same process pinned to one CPU left it at
    1.2 ms. Pinning the workers to the upper half of the CPUs leaves the rest to the
    processes that answer requests, and the workers still use any idle cycle there.
    """
    chosen = parse_cpu_list(spec)
    if chosen is None and spec.strip() == "auto" and len(available) >= 2:
        ordered = sorted(available)
        chosen = set(ordered[len(ordered) // 2 :])
    if chosen is None:  # "all", or "auto" on one CPU
        return None
    return (chosen & available) or None  # none of them available: unpinned rather than failing


def _init_worker(config: Config, niceness: int) -> None:
    """After spawn_pool's own start (dies with graveler, not dumpable)."""
    global _worker
    # Building is batch work, so it yields to the processes answering requests; but a client
    # waits for it, so it never starves. SCHED_IDLE (used before) got no CPU at all while
    # the machine stayed saturated: a commit's build then sat for seconds with its KV answers
    # unread, until the driver's request timer failed the commit. At nice 10 a build gets
    # about a tenth of a contended CPU; measured with `make bench-graveler` (longcommit), the
    # p99 of staging writes during a 100,000-entry commit stayed within the same 2x bound.
    os.nice(niceness)
    if hasattr(os, "sched_setaffinity"):
        cpus = worker_cpus(config.graveler.commit_worker_cpus, os.sched_getaffinity(0))
        if cpus is not None:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(0, cpus)
    stores = open_stores(config)
    _worker = InProcessBuilder(StagingStore(stores.kv), stores.committed(), drop_pace=DROP_PACE_SECONDS)


def _apply_in_worker(build: Build) -> ApplyResult:
    assert _worker is not None, "worker not initialised"
    return _worker.apply_tokens(build)


def _warm_up() -> None:
    assert _worker is not None, "worker not initialised"


# Background drops alternate about 1 ms of deletes with as long a rest (see StagingStore.drop).
DROP_PACE_SECONDS = 0.001


def _drop_in_worker(token: StagingToken) -> None:
    assert _worker is not None, "worker not initialised"
    _worker.drop_token(token)


# A build or drop in a worker that takes longer than this is taken as stuck, deadline or not.
WORKER_TIMEOUT_SECONDS = 600.0
# How often a wait on a worker looks whether the caller went away.
_POLL_SECONDS = 0.05
_R = TypeVar("_R")


def _wait(future: Future[_R], deadline: Deadline, what: str, limit: float) -> _R:
    """The future's result, waiting at most until deadline and never longer than limit."""
    remaining = deadline.remaining()
    budget = limit if remaining is None else min(limit, remaining)
    ends = deadline.clock() + budget
    while True:
        left = ends - deadline.clock()
        done, _ = wait_for([future], timeout=max(0.0, min(_POLL_SECONDS, left)))
        if done:
            return future.result()
        if deadline.expired() or left <= 0:
            # A running build cannot be interrupted; its result (content-addressed ranges
            # nobody names) is simply dropped, and garbage collection removes the objects.
            future.cancel()
            if deadline.expired():
                raise DeadlineExceeded(f"{what}: deadline exceeded while waiting for a commit worker")
            raise Unavailable(f"{what}: no commit worker answered within {limit:.0f} s")


class ProcessPoolBuilder:
    def __init__(
        self, config: Config, workers: int = 2, niceness: int = 10, timeout: float = WORKER_TIMEOUT_SECONDS
    ) -> None:
        self._timeout = timeout
        if config.database.type == "mem":
            raise ValueError("the mem KV driver lives in one process; build in-process instead")
        # The config is pickled whole: secrets reach the worker, masked JSON would not.
        self._pool = spawn_pool(workers, _init_worker, (config, niceness))
        # Start a worker now: spawning one (an interpreter importing pyarrow) costs ~0.3 s,
        # which would otherwise fall on the first commit.
        self._pool.submit(_warm_up)

    def apply_tokens(self, build: Build, deadline: Deadline = NO_DEADLINE) -> ApplyResult:
        deadline.check("building the commit")
        future = self._pool.submit(_apply_in_worker, build)
        return _wait(future, deadline, "building the commit", self._timeout)

    def drop_token(self, token: StagingToken) -> None:
        # Dropping a committed token is one KV delete per staged key: after a 100,000-entry
        # commit, seconds of Python that would otherwise hold the serving process's GIL.
        _wait(self._pool.submit(_drop_in_worker, token), NO_DEADLINE, "dropping a staging token", self._timeout)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
