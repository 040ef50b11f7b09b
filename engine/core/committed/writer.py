"""Builds one metarange from a sorted stream of records and whole reused ranges."""

from __future__ import annotations

import operator
from collections.abc import Iterable, Set
from itertools import islice

from engine.core.committed.chunking import ChunkingPolicy
from engine.core.committed.model import MetaRangeId, RangeInfo, Record
from engine.core.committed.store import ObjectStore
from silt.errors import InvalidArgument

# Records are taken from a stream in batches, so ordering checks and chunking run over lists.
BATCH_RECORDS = 4096


class MetaRangeWriter:
    """Cuts records into ranges by the chunking policy and collects the metarange's rows.

    Whole ranges may be added only at a boundary (no records pending), which is exactly when
    a fresh chunker over that range's records would reproduce it unchanged.
    """

    def __init__(
        self, store: ObjectStore, namespace: str, policy: ChunkingPolicy, base_ids: Set[str] = frozenset()
    ) -> None:
        self._store = store
        self._namespace = namespace
        self._policy = policy
        self._base_ids = base_ids
        self._ranges: list[RangeInfo] = []
        self._keys: list[bytes] = []
        self._identities: list[bytes] = []
        self._values: list[bytes] = []
        self._bytes = 0
        self._last_key: bytes | None = None
        self.ranges_written = 0
        self.ranges_reused = 0

    @property
    def at_boundary(self) -> bool:
        return not self._keys

    def add_run(self, keys: list[bytes], identities: list[bytes], values: list[bytes]) -> None:
        """Append records given as parallel lists, in strictly increasing key order."""
        if not keys:
            return
        self._check_order(keys)
        self._last_key = keys[-1]
        start, stop = 0, len(keys)
        while start < stop:
            end, _, nbytes = self._policy.scan(keys, identities, values, start, stop, len(self._keys), self._bytes)
            cut = stop if end < 0 else end
            self._keys.extend(keys[start:cut])
            self._identities.extend(identities[start:cut])
            self._values.extend(values[start:cut])
            self._bytes = nbytes
            if end < 0:
                return
            self._flush()
            start = end

    def add_records(self, records: Iterable[Record]) -> None:
        iterator = iter(records)
        while batch := list(islice(iterator, BATCH_RECORDS)):
            keys, identities, values = (list(column) for column in zip(*batch, strict=True))
            self.add_run(keys, identities, values)

    def add_range(self, info: RangeInfo) -> None:
        if self._keys:
            raise AssertionError("a whole range can only follow a range boundary")
        if self._last_key is not None and info.min_key <= self._last_key:
            raise InvalidArgument(f"range {info.id} starts at {info.min_key!r}, not after {self._last_key!r}")
        self._last_key = info.max_key
        self._ranges.append(info)
        self.ranges_reused += 1

    def _check_order(self, keys: list[bytes]) -> None:
        if self._last_key is not None and keys[0] <= self._last_key:
            raise InvalidArgument(f"records out of order: {keys[0]!r} after {self._last_key!r}")
        # One C-level pass; the slow search for the culprit only runs on bad input.
        if not all(map(operator.lt, keys, islice(keys, 1, None))):
            index = next(i for i in range(1, len(keys)) if keys[i] <= keys[i - 1])
            raise InvalidArgument(f"records out of order: {keys[index]!r} after {keys[index - 1]!r}")

    def _flush(self) -> None:
        info = self._store.write_range(
            self._namespace, self._keys, self._identities, self._values, self._bytes, self._base_ids
        )
        self._ranges.append(info)
        if info.id in self._base_ids:
            self.ranges_reused += 1
        else:
            self.ranges_written += 1
        self._keys, self._identities, self._values, self._bytes = [], [], [], 0

    def finish(self) -> MetaRangeId:
        if self._keys:
            self._flush()
        return self._store.write_metarange(self._namespace, self._ranges)
