"""Staging compaction: fold a branch's sealed tokens into a metarange without committing
(docs/design/compaction.md).

* CompactedState: what the other flows need to know about a compacted branch — the
  metarange its combined view ends in, and its uncommitted changes (staged values over the
  difference of the head commit's metarange to the compacted one, cached by the pair of ids);
* Compaction: the compactor's flow — seal and stamp, build, publish with set_if.

The compacted metarange is a full snapshot: the branch's content below its sealed tokens.
Replacing sealed tokens by a metarange with the same content changes no read, and every
flow that moves the head either clears it (full commit, merge, reset) or keeps it a
snapshot of the same content (a prefix commit).
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

from engine.core.builder import Build, MetaRangeBuilder, changes_of
from engine.core.cleanup import Cleaner
from engine.core.committed.diff import Difference
from engine.core.committed.manager import CommittedManager
from engine.core.committed.model import Change, MetaRangeId
from engine.core.deadline import Deadline
from engine.core.iterators import combined
from engine.core.model import StagingToken
from engine.core.refs import BranchRecord, RefManager, RepoHandle, set_tokens
from engine.core.refs.manager import now
from engine.core.staging import StagingStore, new_token
from engine.core.updater import REDO, BranchUpdater, modify_branch
from engine.core.values import TOMBSTONE, KeyValue, Value
from silt.errors import Aborted
from silt.graveler.v1 import model_pb2 as pb

log = logging.getLogger(__name__)

# Cached head-to-compacted differences: how many pairs, and the most differences one may hold
# (a bigger difference is walked again on every call instead: memory stays bounded).
DIFF_CACHE_PAIRS = 16
DIFF_CACHE_MAX_DIFFERENCES = 100_000


class StagingObserver(Protocol):
    """What the engine tells the compaction sensor about a branch's staging area."""

    def staged(self, repository: str, branch: str, tombstone: bool, sealed_tokens: int) -> None:
        """A write (tombstone: a delete) was acknowledged on the branch, which had sealed_tokens."""
        ...

    def cleared(self, repository: str, branch: str) -> None:
        """A commit, reset or compaction emptied the branch's staging area (or moved it away)."""
        ...


class NoObserver:
    def staged(self, repository: str, branch: str, tombstone: bool, sealed_tokens: int) -> None:
        pass

    def cleared(self, repository: str, branch: str) -> None:
        pass


class CompactionLost(Aborted):
    """The branch changed while a compaction built (a commit won): nothing was changed."""


class _Published(Exception):
    """The publish found its own compaction already in the branch record: done."""


@dataclass(frozen=True)
class CompactionResult:
    compacted_metarange_id: str  # empty: the staged changes amount to none, the head is the base again
    tokens_compacted: int
    records_changed: int


class CompactedState:
    def __init__(
        self,
        refs: RefManager,
        staging: StagingStore,
        committed: CommittedManager,
        pairs: int = DIFF_CACHE_PAIRS,
        max_differences: int = DIFF_CACHE_MAX_DIFFERENCES,
    ) -> None:
        self._refs = refs
        self._staging = staging
        self._committed = committed
        self._pairs = pairs
        self._max = max_differences
        self._lock = threading.Lock()
        self._cache: OrderedDict[tuple[str, str, str], tuple[list[bytes], list[Difference]]] = OrderedDict()
        self._too_big: OrderedDict[tuple[str, str, str], None] = OrderedDict()

    def head_metarange(self, repo: RepoHandle, branch: pb.Branch) -> MetaRangeId:
        return MetaRangeId(self._refs.get_commit(repo, branch.commit_id).metarange_id)

    def base_metarange(self, repo: RepoHandle, branch: pb.Branch) -> MetaRangeId:
        """Where the branch's combined view ends: the compacted metarange, else the head's."""
        if branch.compacted_metarange_id:
            return MetaRangeId(branch.compacted_metarange_id)
        return self.head_metarange(repo, branch)

    def pending(
        self,
        repo: RepoHandle,
        branch: pb.Branch,
        tokens: list[StagingToken],
        head: MetaRangeId,
        start: bytes = b"",
        prefixes: list[bytes] | None = None,
    ) -> Iterator[Change]:
        """The branch's changes over head in key order: tokens (newest first), then what the
        compacted metarange changed against head."""
        sources: list[Iterator[KeyValue]] = [self._staging.scan(token, start) for token in tokens]
        if branch.compacted_metarange_id:
            sources.append(
                self.compacted_values(repo.namespace, head, MetaRangeId(branch.compacted_metarange_id), start)
            )
        return changes_of(combined(sources), prefixes)

    def close(self, token: StagingToken) -> None:
        """StagingStore.close: before a sealed token is read to build from it."""
        self._staging.close(token)

    def compacted_values(
        self, namespace: str, head: MetaRangeId, compacted: MetaRangeId, start: bytes = b""
    ) -> Iterator[KeyValue]:
        """How compacted differs from head, as staged values (a removed key is a tombstone)."""
        for difference in self.differences(namespace, head, compacted, start):
            right = difference.right
            yield KeyValue(difference.key, TOMBSTONE if right is None else Value(right.identity, right.value))

    def differences(
        self, namespace: str, head: MetaRangeId, compacted: MetaRangeId, start: bytes = b""
    ) -> Iterator[Difference]:
        # Both metaranges are immutable, so their difference is too: cache it by the pair.
        key = (namespace, head, compacted)
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
            too_big = key in self._too_big
        if cached is not None:
            keys, found = cached
            return iter(found[bisect.bisect_left(keys, start) :])
        walk = self._committed.diff(namespace, head, compacted, start)
        if too_big or start:
            return walk
        return self._filling(key, walk)

    def _filling(self, key: tuple[str, str, str], walk: Iterator[Difference]) -> Iterator[Difference]:
        found: list[Difference] | None = []
        for difference in walk:
            if found is not None:
                found.append(difference)
                if len(found) > self._max:
                    found = None
                    with self._lock:
                        self._too_big[key] = None
                        while len(self._too_big) > self._pairs:
                            self._too_big.popitem(last=False)
            yield difference
        if found is not None:  # only a walk that ran to the end is the whole difference
            with self._lock:
                self._cache[key] = ([d.key for d in found], found)
                while len(self._cache) > self._pairs:
                    self._cache.popitem(last=False)

    def restoring(self, namespace: str, head: MetaRangeId, compacted: MetaRangeId, prefix: bytes) -> Iterator[Change]:
        """Changes that give compacted head's values under prefix (resetting part of a compaction)."""
        for difference in self.differences(namespace, head, compacted, prefix):
            if not difference.key.startswith(prefix):
                return
            left = difference.left
            yield Change.delete(difference.key) if left is None else Change.upsert(left)


class Compaction:
    """The compactor's flow on one branch (docs/design/compaction.md)."""

    def __init__(
        self,
        refs: RefManager,
        state: CompactedState,
        builder: Callable[[], MetaRangeBuilder],
        updater: BranchUpdater,
        cleaner: Cleaner,
        observer: StagingObserver,
    ) -> None:
        self._refs = refs
        self._state = state
        self.builder_of = builder
        self._updater = updater
        self._cleaner = cleaner
        self.observer = observer

    def compact(self, repo: RepoHandle, branch_name: str, deadline: Deadline) -> CompactionResult:
        # 1. Seal and stamp in one set_if: writers go to a fresh token from now on, so every
        #    acknowledged write is in a token sealed here or in a later one.
        def seal(current: BranchRecord) -> pb.Branch:
            def change(branch: pb.Branch) -> None:
                set_tokens(
                    branch, new_token(repo.partition, branch_name), [branch.staging_token, *branch.sealed_tokens]
                )
                branch.compaction_start_time.CopyFrom(now())

            return modify_branch(current, change)

        # Sealing again on the branch as it is now is right whether or not an unknown outcome
        # applied: the compaction folds every token sealed then (an extra one, maybe empty, too).
        _, sealed = self._updater.update(repo, branch_name, seal, "sealing for compaction", deadline, REDO)
        tokens = [StagingToken(t) for t in sealed.sealed_tokens]
        head = self._state.head_metarange(repo, sealed)
        base = self._state.base_metarange(repo, sealed)
        # 2. Build: the commit's apply, tombstones as deletes, onto the compacted metarange or the head's.
        deadline.check(f"compacting branch {branch_name!r}")
        for token in tokens:
            # Every conditional write admitted into a token is in what is built from it.
            self._state.close(token)
        result = self.builder_of().apply_tokens(Build(repo.namespace, base, tokens), deadline)
        compacted = "" if result.metarange_id == head else result.metarange_id
        deadline.check(f"compacting branch {branch_name!r}")

        # 3. Publish against the sealed record: fail, not rebase, if anything but the staging
        #    token moved meanwhile (a commit took the tokens, a reset dropped them, another
        #    compaction sealed more): the tokens removed are exactly those folded in.
        def published(current: BranchRecord) -> bool | None:
            """Whether this compaction's publish is in the record as it is now.

            A token it folded in still on the branch: no (nothing puts a sealed token back).
            All gone while the branch still has the staging token the seal gave it, on the head
            it sealed: yes. Every other flow that removes sealed tokens either seals or replaces
            the staging token (a commit, reset or compaction) or moves the head (a merge), so
            only this publish leaves both in place; its compacted metarange is not what tells,
            since it may be empty (the staged changes amounted to none) or have been changed
            since by a reset of a key. Anything else (a commit, reset or compaction since, or
            one of them took the tokens instead) cannot tell: None."""
            if any(token in current.tokens for token in tokens):
                return False
            branch = current.branch
            if branch.staging_token == sealed.staging_token and branch.commit_id == sealed.commit_id:
                return True
            return None

        def publish(current: BranchRecord) -> pb.Branch:
            branch = current.branch
            if published(current):
                # An earlier attempt's publish is in, though that attempt ended as a lost race
                # (its store reported the compare-and-set as refused or left its outcome
                # unknown, and it was resolved only now): refusing here would report our own
                # compaction as a concurrent change.
                raise _Published
            if (
                branch.commit_id != sealed.commit_id
                or list(branch.sealed_tokens) != list(sealed.sealed_tokens)
                or branch.compacted_metarange_id != sealed.compacted_metarange_id
            ):
                raise CompactionLost(
                    f"compaction of branch {branch_name!r} lost to a concurrent change (commit, reset or compaction)"
                )

            def change(updated: pb.Branch) -> None:
                updated.compacted_metarange_id = compacted
                set_tokens(updated, updated.staging_token, [])

            return modify_branch(current, change)

        with contextlib.suppress(_Published):
            self._updater.update(repo, branch_name, publish, "publishing compaction", deadline, published)
        self._cleaner.drop_recorded(repo.partition, tokens)  # recorded with the publish (updater.set_branch_if)
        self.observer.cleared(repo.name, branch_name)
        changed = result.records_added + result.records_removed + result.records_changed
        return CompactionResult(compacted, len(tokens), changed)
