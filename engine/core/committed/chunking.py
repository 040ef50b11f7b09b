"""Where ranges end: content-defined boundaries from the keys, with a minimum and a cap.

A record ends its range when, counting from the previous boundary, the range has at least
``min_records`` records and a hash of the record's key hits ``boundary_modulus``, or when
the range reaches ``max_records`` records or ``max_bytes`` bytes.

Everything is measured from the previous boundary over the sorted record sequence, so the
chunking is a pure function of that sequence: the same records always give the same ranges
(the canonical form that makes ``apply`` and ``write_metarange`` agree on ids). Because
hash boundaries depend on the key alone, a change only moves boundaries until the next
key-chosen boundary that both chunkings share; ``apply`` re-chunks that stretch and reuses
every range after it. Cap-ended ranges do not re-synchronise that way (their end depends on
counts), which is why the caps sit far above the typical range size: with the defaults a
range reaches ``max_records`` with probability about (1 - 1/8192) ** 64512 ≈ 0.04 %.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from silt.errors import InvalidArgument


@dataclass(frozen=True, slots=True)
class ChunkingPolicy:
    # Mean range length is about min_records + boundary_modulus (geometric past the minimum).
    # 8192 measured best on 1M entry-like records (~230 bytes): ~7.4k records and ~0.8 MiB of
    # Parquet a range, a one-entry apply from a cold cache ~40 ms; half that modulus doubles
    # the objects per record for ~15 ms less, double it doubles the per-commit rewrite.
    boundary_modulus: int = 8192
    min_records: int = 1024
    max_records: int = 65536
    # Bounds one range's memory when reading and writing it, whatever the entry size.
    max_bytes: int = 16 * 1024 * 1024

    def __post_init__(self) -> None:
        if self.boundary_modulus < 1 or self.min_records < 1 or self.max_bytes < 1:
            raise InvalidArgument("chunking parameters must be positive")
        if self.max_records < self.min_records:
            raise InvalidArgument("max_records must be at least min_records")

    def is_boundary_key(self, key: bytes) -> bool:
        digest = hashlib.blake2b(key, digest_size=8).digest()
        return int.from_bytes(digest, "little") % self.boundary_modulus == 0

    def ends_range(self, count: int, nbytes: int, last_key: bytes) -> bool:
        """Whether a range holding ``count`` records and ``nbytes`` bytes ends at ``last_key``."""
        if count >= self.max_records or nbytes >= self.max_bytes:
            return True
        return count >= self.min_records and self.is_boundary_key(last_key)

    def scan(
        self,
        keys: Sequence[bytes],
        identities: Sequence[bytes],
        values: Sequence[bytes],
        start: int,
        stop: int,
        count: int,
        nbytes: int,
    ) -> tuple[int, int, int]:
        """Continue a range of ``count`` records and ``nbytes`` bytes over records start..stop-1.

        Returns ``(end, count, nbytes)``: ``end`` is the index just past the first record that
        ends the range (-1 if none does) and the totals are up to there. The same rule as
        ``ends_range``, inlined because this loop is the cost of writing records.
        """
        blake2b, from_bytes = hashlib.blake2b, int.from_bytes
        min_records, max_records, max_bytes = self.min_records, self.max_records, self.max_bytes
        modulus = self.boundary_modulus
        for index in range(start, stop):
            key = keys[index]
            count += 1
            nbytes += len(key) + len(identities[index]) + len(values[index])
            if count >= min_records:
                if (
                    count >= max_records
                    or nbytes >= max_bytes
                    or from_bytes(blake2b(key, digest_size=8).digest(), "little") % modulus == 0
                ):
                    return index + 1, count, nbytes
            elif nbytes >= max_bytes:
                return index + 1, count, nbytes
        return -1, count, nbytes
