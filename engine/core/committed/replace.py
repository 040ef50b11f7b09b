"""Replacing a region of a metarange with the records of another: how an import lands on a branch.

The result holds the base's records outside the region and every record of the source (whose
keys all lie inside the region), as ``write_metarange`` would store them: same ranges, same ids.
The walk reuses whole ranges wherever that is exact, so its cost follows the ranges that mix
both sides, not the size of either:

* a source range is reused while the writer stands at a range boundary, no kept base record
  falls inside it and the chunker would end a range where it ends (``ends_range``);
* a base range likewise, if in addition the region cannot reach into it;
* a base range the region covers whole (both its ends under one replaced prefix) is dropped
  unread;
* anything else is read and its records go through the chunker, which re-synchronises with
  the ranges of either side at their content-defined boundaries.

An import of a fresh prefix is therefore a few range reads around its edges, whatever its size.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from engine.core.committed.chunking import ChunkingPolicy
from engine.core.committed.metarange import MetaRange
from engine.core.committed.model import MetaRangeId, RangeInfo
from engine.core.committed.ranges import RangeData
from engine.core.committed.store import ObjectStore
from engine.core.committed.writer import MetaRangeWriter


@dataclass(frozen=True)
class Region:
    """Keys an import replaces: every key under one of `prefixes`, and each of `keys` exactly."""

    prefixes: tuple[bytes, ...] = ()
    keys: frozenset[bytes] = frozenset()

    def contains(self, key: bytes) -> bool:
        return key in self.keys or any(key.startswith(prefix) for prefix in self.prefixes)

    def reaches(self, low: bytes, high: bytes) -> bool:
        """Whether some key between low and high (inclusive) may be in the region."""
        if any(low <= key <= high for key in self.keys):
            return True
        # Keys under p run from p up to the last key starting with p: a low above p that does
        # not itself start with p is past all of them.
        return any(high >= p and (low <= p or low.startswith(p)) for p in self.prefixes)

    def covers(self, low: bytes, high: bytes) -> bool:
        """Whether every key between low and high (inclusive) is in the region."""
        return any(low.startswith(p) and high.startswith(p) for p in self.prefixes)


class _Side:
    """One metarange walked range by range, a range's records loaded only when needed."""

    def __init__(self, store: ObjectStore, namespace: str, ranges: Sequence[RangeInfo]) -> None:
        self._store = store
        self._namespace = namespace
        self._ranges = ranges
        self._index = 0
        self._data: RangeData | None = None  # the current range, once loaded
        self._position = 0

    def _settle(self) -> None:
        # A loaded range whose records are all taken is done with.
        if self._data is not None and self._position >= len(self._data.keys):
            self._data, self._position = None, 0
            self._index += 1

    @property
    def unread_range(self) -> RangeInfo | None:
        """The current range if none of its records has been loaded or taken yet."""
        self._settle()
        if self._data is None and self._index < len(self._ranges):
            return self._ranges[self._index]
        return None

    def next_key(self) -> bytes | None:
        """The smallest key this side may still hold (a lower bound for an unread range)."""
        self._settle()
        if self._index >= len(self._ranges):
            return None
        if self._data is None:
            return self._ranges[self._index].min_key
        return self._data.keys[self._position]

    def skip_range(self) -> None:
        self._index += 1

    def take(
        self, limit: bytes | None, inclusive: bool, keep: Callable[[bytes], bool] | None
    ) -> tuple[list[bytes], list[bytes], list[bytes]]:
        """Records of the current range up to `limit` (None: all of it), those keep() accepts."""
        if self._data is None:
            self._data = self._store.read_range(self._namespace, self._ranges[self._index].id)
            self._position = 0
        data = self._data
        start = self._position
        if limit is None:
            end = len(data.keys)
        elif inclusive:
            end = bisect_right(data.keys, limit, start)
        else:
            end = bisect_left(data.keys, limit, start)
        self._position = end
        keys, identities, values = data.keys[start:end], data.identities[start:end], data.values[start:end]
        if keep is None:
            return keys, identities, values
        chosen = [i for i, key in enumerate(keys) if keep(key)]
        if len(chosen) == len(keys):
            return keys, identities, values
        return [keys[i] for i in chosen], [identities[i] for i in chosen], [values[i] for i in chosen]


def replace_region(
    store: ObjectStore,
    namespace: str,
    policy: ChunkingPolicy,
    base: MetaRange,
    source: MetaRange,
    region: Region,
) -> MetaRangeId:
    """The metarange of base's records outside region, plus all of source's (which lie inside it)."""
    known = frozenset(info.id for info in base.ranges) | frozenset(info.id for info in source.ranges)
    writer = MetaRangeWriter(store, namespace, policy, known)
    head = _Side(store, namespace, base.ranges)
    imported = _Side(store, namespace, source.ranges)

    def kept(key: bytes) -> bool:
        return not region.contains(key)

    while True:
        head_key, source_key = head.next_key(), imported.next_key()
        if head_key is None and source_key is None:
            break
        from_head = source_key is None or (head_key is not None and head_key <= source_key)
        side, other_key = (head, source_key) if from_head else (imported, head_key)
        info = side.unread_range
        if info is not None:
            if from_head and region.covers(info.min_key, info.max_key):
                head.skip_range()  # replaced whole: nothing of it is kept
                continue
            if (
                writer.at_boundary
                and (other_key is None or info.max_key < other_key)
                and policy.ends_range(info.count, info.estimated_bytes, info.max_key)
                and not (from_head and region.reaches(info.min_key, info.max_key))
            ):
                writer.add_range(info)
                side.skip_range()
                continue
        # Records up to the other side's next key. From the base, a record at that very key is
        # in the region (every source key is), so it is taken, and dropped, with the rest.
        keys, identities, values = side.take(other_key, from_head, kept if from_head else None)
        writer.add_run(keys, identities, values)
    return writer.finish()
