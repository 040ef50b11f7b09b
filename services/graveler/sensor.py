"""The compaction sensor (docs/design/compaction.md): decides, inside graveler, when a branch
needs compacting, claims it and triggers the compactor service.

The engine reports every acknowledged staged write and every commit, reset or compaction
that empties a branch's staging area (the StagingObserver protocol of compaction.py). The
sensor keeps a count of staged deletes per branch in memory — rebuilt from the staging
tokens in KV when graveler starts — and looks at the sealed-token count the writer saw.
When a threshold is crossed it claims the branch with one set_if of
``compaction_start_time`` (refused when another claim is younger than ``claim_seconds``:
replicas rarely compact the same branch, clocks permitting) and triggers the compactor.

None of this runs on the write path: a write only bumps a counter; claiming and triggering
run on one background thread, with the trigger's own timeout, at most once per branch at a time.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from google.protobuf.timestamp_pb2 import Timestamp

from engine.core.refs import BranchRecord, RefManager, branch_tokens
from engine.core.staging import StagingStore
from engine.core.updater import Raced, set_branch_if
from silt.errors import NotFound, PredicateFailed
from silt.graveler.v1 import model_pb2 as pb
from silt.journal.context import background_context

log = logging.getLogger(__name__)

# Sends the compactor a trigger for (repository, branch); raises on failure.
Trigger = Callable[[str, str], None]


@dataclass(frozen=True)
class Thresholds:
    tombstones: int = 10_000
    sealed_tokens: int = 20
    claim_seconds: float = 300.0


@dataclass
class _Counts:
    tombstones: int = 0
    puts: int = 0


@dataclass
class SensorStats:
    """What the sensor did, for tests and logs."""

    triggered: int = 0
    claims_refused: int = 0
    trigger_failures: int = 0
    triggered_branches: list[tuple[str, str]] = field(default_factory=list)


class Sensor:
    def __init__(
        self,
        refs: RefManager,
        staging: StagingStore,
        thresholds: Thresholds,
        trigger: Trigger,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._refs = refs
        self._staging = staging
        self.thresholds = thresholds
        self._trigger = trigger
        self._clock = clock
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, str], _Counts] = {}
        self._pending: set[tuple[str, str]] = set()
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="compaction-sensor")
        self.stats = SensorStats()

    # --- the StagingObserver protocol: called on the write path, so only counting here ------

    def staged(self, repository: str, branch: str, tombstone: bool, sealed_tokens: int = 0) -> None:
        key = (repository, branch)
        with self._lock:
            counts = self._counts.setdefault(key, _Counts())
            if tombstone:
                counts.tombstones += 1
            else:
                counts.puts += 1
            due = (
                counts.tombstones >= self.thresholds.tombstones or sealed_tokens >= self.thresholds.sealed_tokens
            ) and key not in self._pending
            if due:
                self._pending.add(key)
        if due:
            self._pool.submit(self._claim_and_trigger, repository, branch)

    def cleared(self, repository: str, branch: str) -> None:
        with self._lock:
            self._counts.pop((repository, branch), None)

    # --- state ---------------------------------------------------------------------------

    def tombstones(self, repository: str, branch: str) -> int:
        with self._lock:
            counts = self._counts.get((repository, branch))
        return 0 if counts is None else counts.tombstones

    def rebuild(self) -> int:
        """Count the staged deletes of every branch from KV (at start-up); returns the branches seen."""
        seen = 0
        for repository in self._refs.list_repositories():
            try:
                repo = self._refs.repository(repository.name)
                branches = list(self._refs.list_branches(repo))
            except NotFound:
                continue  # deleted meanwhile
            for branch in branches:
                counts = _Counts()
                for token in branch_tokens(branch):
                    for item in self._staging.scan(token):
                        if item.value.tombstone:
                            counts.tombstones += 1
                        else:
                            counts.puts += 1
                with self._lock:
                    self._counts[(repository.name, branch.name)] = counts
                seen += 1
        return seen

    def flush(self, timeout: float | None = None) -> None:
        """Wait until the claims and triggers submitted so far are done (one thread runs them in order)."""
        self._pool.submit(lambda: None).result(timeout)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    # --- claiming and triggering (background thread) --------------------------------------

    def _claim_and_trigger(self, repository: str, branch: str) -> None:
        key = (repository, branch)
        try:
            if not self.claim(repository, branch):
                self.stats.claims_refused += 1
                return
            with self._lock:
                # The compaction folds what was counted; deletes after this count anew.
                self._counts.pop(key, None)
            self._trigger(repository, branch)
            self.stats.triggered += 1
            self.stats.triggered_branches.append(key)
        except Exception:
            self.stats.trigger_failures += 1
            log.warning("could not trigger a compaction of %s/%s", repository, branch, exc_info=True)
        finally:
            with self._lock:
                self._pending.discard(key)

    def claim(self, repository: str, branch_name: str) -> bool:
        """Stamp compaction_start_time with set_if, unless a claim younger than claim_seconds exists."""
        with background_context("compaction_claim", repository):
            return self._claim(repository, branch_name)

    def _claim(self, repository: str, branch_name: str) -> bool:
        repo = self._refs.repository(repository)
        record = self._refs.get_branch(repo, branch_name)
        now = self._clock()
        last = record.branch.compaction_start_time
        if record.branch.HasField("compaction_start_time") and now - _seconds(last) < self.thresholds.claim_seconds:
            return False
        claimed = pb.Branch()
        claimed.CopyFrom(record.branch)
        claimed.compaction_start_time.CopyFrom(_timestamp(now))

        def applied(current: BranchRecord) -> bool:
            # The stamp is this claim's own (its time, to the nanosecond): seals and commits keep it.
            return current.branch.compaction_start_time == claimed.compaction_start_time

        try:
            set_branch_if(self._refs, repo, record, claimed, f"compaction claim of {branch_name!r}", applied)
        except (PredicateFailed, Raced):
            return False  # the branch changed (maybe another replica claimed it): the next delete retries
        except NotFound:
            return False  # deleted while an unknown outcome was looked into: nothing to compact
        return True


def _seconds(stamp: Timestamp) -> float:
    return stamp.seconds + stamp.nanos / 1e9


def _timestamp(seconds: float) -> Timestamp:
    stamp = Timestamp()
    stamp.FromNanoseconds(int(seconds * 1e9))
    return stamp
