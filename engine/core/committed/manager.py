"""CommittedManager: the committed layer's API over one block adapter and one cache."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from engine.core.committed.apply import apply_change_batches, apply_changes
from engine.core.committed.cache import CommittedCache
from engine.core.committed.chunking import ChunkingPolicy
from engine.core.committed.diff import (
    Difference,
    DifferenceRun,
    diff_changes,
    diff_metaranges,
    diff_metaranges_grouped,
    spans_differ,
)
from engine.core.committed.iterators import iterate_records, iterate_slices
from engine.core.committed.merge import MergeResult, Resolver, merge_metaranges
from engine.core.committed.model import ApplyResult, Change, ChangeBatch, MetaRangeId, RangeId, RangeInfo, Record
from engine.core.committed.replace import Region, replace_region
from engine.core.committed.store import CommittedStats, ObjectStore
from engine.core.committed.writer import MetaRangeWriter
from engine.core.deadline import NO_DEADLINE, Deadline
from silt.block.adapter import BlockAdapter


class CommittedManager:
    """Writes, applies changes to and reads immutable metaranges in storage namespaces.

    Thread-safe: it holds no per-call state, and the caches and counters lock themselves.
    The chunking policy must be the same for every writer of a repository, or ids of equal
    content diverge (still correct, but ranges stop being shared).
    """

    def __init__(
        self, adapter: BlockAdapter, cache: CommittedCache | None = None, policy: ChunkingPolicy | None = None
    ) -> None:
        self.adapter = adapter
        self._store = ObjectStore(adapter, cache if cache is not None else CommittedCache())
        self.policy = policy if policy is not None else ChunkingPolicy()

    def stats(self) -> CommittedStats:
        return self._store.stats()

    def write_metarange(self, namespace: str, records: Iterable[Record]) -> MetaRangeId:
        """Store records given in strictly increasing key order; no records gives the empty metarange."""
        writer = MetaRangeWriter(self._store, namespace, self.policy)
        writer.add_records(records)
        return writer.finish()

    def apply(self, namespace: str, base: MetaRangeId | None, changes: Iterable[Change]) -> ApplyResult:
        """Apply changes in strictly increasing key order to ``base`` (None: the empty metarange).

        Upserts of an identical record (same identity) and deletes of absent keys change
        nothing; when nothing changes the result is ``base`` itself.
        """
        base_metarange = self._store.read_metarange(namespace, base) if base is not None else None
        return apply_changes(self._store, namespace, self.policy, base_metarange, changes)

    def apply_batches(self, namespace: str, base: MetaRangeId | None, batches: Iterable[ChangeBatch]) -> ApplyResult:
        """apply, with the changes given as consecutive batches (empty ones allowed): for
        callers that read changes many at a time, so that no per-change work is left to do here
        beyond what the ranges they fall in need."""
        base_metarange = self._store.read_metarange(namespace, base) if base is not None else None
        return apply_change_batches(self._store, namespace, self.policy, base_metarange, batches)

    def replace(self, namespace: str, base: MetaRangeId, source: MetaRangeId, region: Region) -> MetaRangeId:
        """``base`` with every key in ``region`` replaced by the records of ``source`` (all inside
        it): an import's commit. Whole ranges of either side are reused where exact (replace.py)."""
        base_metarange = self._store.read_metarange(namespace, base)
        source_metarange = self._store.read_metarange(namespace, source)
        return replace_region(self._store, namespace, self.policy, base_metarange, source_metarange, region)

    def iterate(self, namespace: str, metarange_id: MetaRangeId, start: bytes = b"") -> Iterator[Record]:
        """Records with key >= ``start`` in key order, read lazily range by range."""
        # Read eagerly so a missing metarange fails here, not at the caller's first next().
        metarange = self._store.read_metarange(namespace, metarange_id)
        return iterate_records(self._store, namespace, metarange, start)

    def iterate_slices(
        self, namespace: str, metarange_id: MetaRangeId, start: bytes, size: int
    ) -> Iterator[tuple[list[bytes], list[bytes], list[bytes]]]:
        """iterate's records as (keys, identities, values) lists of at most size, none empty."""
        metarange = self._store.read_metarange(namespace, metarange_id)
        return iterate_slices(self._store, namespace, metarange, start, size)

    def get(self, namespace: str, metarange_id: MetaRangeId, key: bytes) -> Record | None:
        metarange = self._store.read_metarange(namespace, metarange_id)
        info = metarange.range_for(key)
        if info is None:
            return None
        return self._store.read_range(namespace, info.id).find(key)

    def get_in_memory(self, namespace: str, metarange_id: MetaRangeId, key: bytes) -> Record | None:
        """get, answered from the decoded metarange and range in memory alone: NotInMemory
        (store.py) when either is not there, for a caller that must not read and decode one."""
        metarange = self._store.metarange_in_memory(namespace, metarange_id)
        info = metarange.range_for(key)
        if info is None:
            return None
        return self._store.range_in_memory(namespace, info.id).find(key)

    def ranges(self, namespace: str, metarange_id: MetaRangeId) -> list[RangeInfo]:
        """The metarange's ranges in key order, for walks that skip ranges with equal ids."""
        return list(self._store.read_metarange(namespace, metarange_id).ranges)

    def range_records(self, namespace: str, range_id: RangeId, start: bytes = b"") -> Iterator[Record]:
        """The records of one range with key >= ``start``, for walks that must open a range."""
        return self._store.read_range(namespace, range_id).records(start)

    def diff(self, namespace: str, left: MetaRangeId, right: MetaRangeId, start: bytes = b"") -> Iterator[Difference]:
        """How ``right`` differs from ``left`` at keys >= ``start``, in key order, lazily.

        Ranges with equal ids on both sides are skipped unread, so the ranges read follow
        the size of the change, not of the metaranges.
        """
        left_metarange = self._store.read_metarange(namespace, left)
        right_metarange = self._store.read_metarange(namespace, right)
        return diff_metaranges(self._store, namespace, left_metarange, right_metarange, start)

    def diff_grouped(
        self, namespace: str, left: MetaRangeId, right: MetaRangeId, start: bytes = b""
    ) -> Iterator[Difference | DifferenceRun]:
        """diff(), with stretches of keys on one side only as DifferenceRuns: for readers of
        many differences (summaries), which need no record per key."""
        left_metarange = self._store.read_metarange(namespace, left)
        right_metarange = self._store.read_metarange(namespace, right)
        return diff_metaranges_grouped(self._store, namespace, left_metarange, right_metarange, start)

    def diff_changes(self, namespace: str, base: MetaRangeId, changes: Iterable[Change]) -> Iterator[Difference]:
        """What applying ``changes`` (strictly increasing keys) to ``base`` would change, lazily.

        For a branch's uncommitted changes: upserts of an identical record and deletes of
        absent keys yield nothing, and only ranges that changes fall in are read.
        """
        return diff_changes(self._store, namespace, self._store.read_metarange(namespace, base), changes)

    def merge(
        self,
        namespace: str,
        base: MetaRangeId,
        source: MetaRangeId,
        dest: MetaRangeId,
        resolve: Resolver | None = None,
        deadline: Deadline = NO_DEADLINE,
    ) -> MergeResult:
        """Three-way merge of ``source`` into ``dest`` from their common ancestor ``base``.

        Conflicts go to ``resolve`` (see merge.py for ready resolvers); None fails them all.
        If any fails, the result has no metarange and lists the failed conflicts (all, unless
        ``conflicts_truncated``). DeadlineExceeded once ``deadline`` passes, checked per conflict.
        """
        read = self._store.read_metarange
        return merge_metaranges(
            self._store,
            namespace,
            self.policy,
            read(namespace, base),
            read(namespace, source),
            read(namespace, dest),
            resolve,
            deadline,
        )

    def changed_paths(
        self,
        namespace: str,
        left: MetaRangeId,
        right: MetaRangeId,
        keys: Iterable[bytes] = (),
        prefixes: Iterable[bytes] = (),
    ) -> bool:
        """Whether any of ``keys``, or any key starting with one of ``prefixes``, differs.

        For history filtered by paths: only ranges overlapping the keys and prefixes and
        differing by id are read, and the walk stops at the first difference; a key alone is
        looked up in the one part of each range that may hold it. Equal ids are equal trees:
        answered without reading either (a commit that changed nothing, a merge that took one
        side).
        """
        if left == right:
            return False
        # Range-boundary indexes: a small file per commit of the history, not its metarange.
        left_metarange = self._store.read_boundaries(namespace, left)
        right_metarange = self._store.read_boundaries(namespace, right)
        return spans_differ(self._store, namespace, left_metarange, right_metarange, keys, prefixes)
