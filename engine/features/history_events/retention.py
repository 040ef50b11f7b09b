"""Dropping history hours older than `graveler.history.retention_days`.

A background task walks the repositories one at a time. For each it first takes a claim in the
repository's partition (`history-retention`, set_if on a timestamp): among graveler replicas
only one prunes a repository per interval, and a crashed pruner's claim simply ages out. It
then deletes, hour by hour, every key of each hour partition past the cutoff and last that
hour's index key, so an interrupted run leaves an indexed hour the next run finishes. Deleting
pauses between hours (`pause`) so that pruning never competes with serving.
"""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass

from engine.core.refs import RefManager
from engine.core.refs.manager import RepoHandle
from engine.features.history_events.writer import EventWriter
from silt.errors import NotFound, PredicateFailed
from silt.history_events import layout
from silt.history_events.reader import all_event_hours
from silt.journal.store import raw_store
from silt.kv.store import Store

log = logging.getLogger(__name__)

CLAIM_KEY = b"history-retention"
_CLAIM = struct.Struct(">d")


@dataclass(frozen=True)
class RetentionPolicy:
    retention_days: float = 30.0
    # A repository is pruned at most once per interval, by whichever replica claims it first.
    interval_seconds: float = 3600.0
    # Between two hours' deletions: pruning is background work.
    pause_seconds: float = 0.01


@dataclass
class PruneStats:
    repositories: int = 0
    hours: int = 0
    events: int = 0


class HistoryRetention:
    def __init__(
        self,
        refs: RefManager,
        writer: EventWriter,
        policy: RetentionPolicy,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._refs = refs
        self._writer = writer
        self.policy = policy
        self._clock = clock
        self._sleep = sleep

    def prune_all(self) -> PruneStats:
        """One pass over every repository; errors in one repository do not stop the others."""
        stats = PruneStats()
        for record in list(self._refs.list_repositories()):
            repo = RepoHandle(record)
            try:
                if self._claim(repo):
                    self.prune(repo, stats)
                    stats.repositories += 1
            except Exception:  # the next pass retries; history is best effort
                log.warning("history retention: could not prune %s", record.name, exc_info=True)
        return stats

    def prune(self, repo: RepoHandle, stats: PruneStats | None = None) -> PruneStats:
        """Delete the hours of repo that ended before the cutoff."""
        stats = stats or PruneStats()
        cutoff_us = int((self._clock() - self.policy.retention_days * 86400) * 1_000_000)
        kv = raw_store(self._refs.kv)
        for branch, hour in list(all_event_hours(kv, repo.partition)):
            if layout.hour_start_us(hour) + layout.HOUR_US > cutoff_us:
                continue
            stats.events += drop_hour(kv, repo.partition, branch, hour)
            self._writer.forget(repo.partition, branch, hour)
            stats.hours += 1
            self._sleep(self.policy.pause_seconds)
        return stats

    def _claim(self, repo: RepoHandle) -> bool:
        """Take this interval's claim on pruning repo; False if another replica holds it."""
        kv = raw_store(self._refs.kv)
        now = self._clock()
        value = _CLAIM.pack(now)
        try:
            current = kv.get(repo.partition, CLAIM_KEY)
        except NotFound:
            predicate = None
        else:
            (claimed_at,) = _CLAIM.unpack(current.value) if len(current.value) == _CLAIM.size else (0.0,)
            if now - claimed_at < self.policy.interval_seconds:
                return False
            predicate = current.predicate
        try:
            kv.set_if(repo.partition, CLAIM_KEY, value, predicate)
        except PredicateFailed:
            return False
        return True


def drop_hour(kv: Store, repository_partition: bytes, branch: str, hour: int) -> int:
    """Delete one hour partition's events, then its index key; return how many events went.
    The scan is lazy (a page at a time), so an hour of any size is deleted in bounded memory."""
    partition = layout.events_partition(repository_partition, branch, hour)
    deleted = 0
    for entry in kv.scan(partition):
        kv.delete(partition, entry.key)
        deleted += 1
    kv.delete(repository_partition, layout.hour_key(branch, hour))
    return deleted


def drop_history(kv: Store, repository_partition: bytes) -> None:
    """Delete every history partition of a repository being deleted (before its own partition,
    whose index keys are what finds them)."""
    for branch, hour in list(all_event_hours(kv, repository_partition)):
        drop_hour(kv, repository_partition, branch, hour)
