"""An import's commit replaces a region of the branch's metarange at range granularity: the
result must be exactly the metarange write_metarange makes of the records it should hold (same
id), however the region, the base and the imported records fall across ranges."""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

from engine.core.committed.cache import CommittedCache
from engine.core.committed.chunking import ChunkingPolicy
from engine.core.committed.manager import CommittedManager
from engine.core.committed.model import Record
from engine.core.committed.replace import Region
from silt.block.local import LocalAdapter

NAMESPACE = "local://replace"
# Small ranges, so that a few hundred records span many of them and their boundaries.
POLICY = ChunkingPolicy(boundary_modulus=16, min_records=4, max_records=64, max_bytes=1 << 20)


def record(key: bytes, tag: bytes) -> Record:
    value = tag + key
    return Record(key, hashlib.sha256(value).digest(), value)


def test_replace_equals_writing_the_expected_records(tmp_path: Path) -> None:
    rnd = random.Random(7)
    manager = CommittedManager(LocalAdapter(tmp_path), CommittedCache(), POLICY)
    for _ in range(40):
        base = {}
        for _ in range(rnd.randint(0, 300)):
            key = f"{rnd.choice('abcd')}/{rnd.randint(0, 300):04d}".encode()
            base[key] = record(key, b"base")
        prefixes = tuple({f"{rnd.choice('abcde')}/{rnd.choice(['', '0', '01', '02'])}".encode() for _ in range(2)})
        exact = frozenset(f"{rnd.choice('abcd')}/{rnd.randint(0, 300):04d}".encode() for _ in range(rnd.randint(0, 3)))
        region = Region(prefixes[: rnd.randint(0, 2)], exact)
        imported = {}
        for _ in range(rnd.randint(0, 300)):
            if region.prefixes and rnd.random() < 0.8:
                key = rnd.choice(region.prefixes) + f"{rnd.randint(0, 300):04d}".encode()
            elif exact:
                key = rnd.choice(sorted(exact))
            else:
                continue
            imported[key] = record(key, b"import" + bytes([rnd.randint(0, 1)]))
        expected = {k: v for k, v in base.items() if not region.contains(k)} | imported
        base_id = manager.write_metarange(NAMESPACE, [base[k] for k in sorted(base)])
        imported_id = manager.write_metarange(NAMESPACE, [imported[k] for k in sorted(imported)])
        expected_id = manager.write_metarange(NAMESPACE, [expected[k] for k in sorted(expected)])
        assert manager.replace(NAMESPACE, base_id, imported_id, region) == expected_id


def test_a_fresh_prefix_reuses_every_range_of_both_sides(tmp_path: Path) -> None:
    manager = CommittedManager(LocalAdapter(tmp_path), CommittedCache(), POLICY)
    base = [record(f"a/{i:05d}".encode(), b"b") for i in range(2000)] + [
        record(f"z/{i:05d}".encode(), b"b") for i in range(2000)
    ]
    imported = [record(f"m/{i:05d}".encode(), b"i") for i in range(2000)]
    base_id = manager.write_metarange(NAMESPACE, base)
    imported_id = manager.write_metarange(NAMESPACE, imported)
    before = manager.stats()
    cold = CommittedManager(LocalAdapter(tmp_path), CommittedCache(), POLICY)
    result = cold.replace(NAMESPACE, base_id, imported_id, Region((b"m/",)))
    assert result == manager.write_metarange(NAMESPACE, sorted(base + imported))
    # Only the ranges at the seams are read: a handful, not the hundreds of either side.
    assert cold.stats().range_reads <= 6 and before.ranges_uploaded > 100
