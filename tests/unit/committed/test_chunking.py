"""Range boundaries: content-defined from keys, within the minimum and the caps."""

from __future__ import annotations

import pytest

from engine.core.committed import ChunkingPolicy, CommittedCache, CommittedManager, Record
from silt.block.local import LocalAdapter
from silt.errors import InvalidArgument
from tests.unit.committed.conftest import NAMESPACE, SMALL_POLICY
from tests.unit.committed.support import key_of, records


def record_size(record: Record) -> int:
    return len(record.key) + len(record.identity) + len(record.value)


def check_chunking(manager: CommittedManager, written: list[Record]) -> None:
    """Each range ends at the first record where the policy says so, counting from its start."""
    policy = manager.policy
    metarange_id = manager.write_metarange(NAMESPACE, iter(written))
    ranges = manager.ranges(NAMESPACE, metarange_id)
    position = 0
    for number, info in enumerate(ranges):
        members = written[position : position + info.count]
        assert (members[0].key, members[-1].key) == (info.min_key, info.max_key)
        assert info.estimated_bytes == sum(map(record_size, members))
        size = 0
        for count, record in enumerate(members, start=1):
            size += record_size(record)
            is_end = count == len(members)
            if is_end and number == len(ranges) - 1:
                continue  # the last range may also end where the records run out
            assert policy.ends_range(count, size, record.key) == is_end
        position += info.count
    assert position == len(written)


def test_ranges_end_where_the_policy_says(manager: CommittedManager) -> None:
    check_chunking(manager, records(range(5000)))


def test_record_cap(local_adapter: LocalAdapter) -> None:
    policy = ChunkingPolicy(boundary_modulus=1_000_000, min_records=5, max_records=50)
    manager = CommittedManager(local_adapter, CommittedCache(), policy)
    check_chunking(manager, records(range(1000)))
    metarange_id = manager.write_metarange(NAMESPACE, iter(records(range(1000))))
    assert [info.count for info in manager.ranges(NAMESPACE, metarange_id)] == [50] * 20


def test_byte_cap(local_adapter: LocalAdapter) -> None:
    policy = ChunkingPolicy(boundary_modulus=1_000_000, min_records=5, max_records=10_000, max_bytes=20_000)
    manager = CommittedManager(local_adapter, CommittedCache(), policy)
    big = [Record(key_of(index), b"i" * 32, b"v" * (index % 7) * 300) for index in range(1000)]
    check_chunking(manager, big)
    metarange_id = manager.write_metarange(NAMESPACE, iter(big))
    assert all(info.estimated_bytes < 20_000 + 2200 for info in manager.ranges(NAMESPACE, metarange_id))


def test_boundaries_depend_on_keys_only(manager: CommittedManager) -> None:
    plain = records(range(3000))
    other_values = records(range(3000), version=7)
    first = manager.ranges(NAMESPACE, manager.write_metarange(NAMESPACE, iter(plain)))
    second = manager.ranges(NAMESPACE, manager.write_metarange(NAMESPACE, iter(other_values)))
    assert [info.max_key for info in first] == [info.max_key for info in second]
    assert not {info.id for info in first} & {info.id for info in second}


def test_boundary_key_frequency() -> None:
    policy = ChunkingPolicy(boundary_modulus=64)
    hits = sum(policy.is_boundary_key(key_of(index)) for index in range(20_000))
    assert 250 < hits < 380  # 20,000 / 64 = 312.5


def test_minimum_size(manager: CommittedManager) -> None:
    metarange_id = manager.write_metarange(NAMESPACE, iter(records(range(5000))))
    counts = [info.count for info in manager.ranges(NAMESPACE, metarange_id)]
    assert min(counts[:-1]) >= SMALL_POLICY.min_records


@pytest.mark.parametrize(
    "arguments",
    [
        {"boundary_modulus": 0},
        {"min_records": 0},
        {"max_bytes": 0},
        {"min_records": 10, "max_records": 9},
    ],
)
def test_policy_validation(arguments: dict[str, int]) -> None:
    with pytest.raises(InvalidArgument):
        ChunkingPolicy(**arguments)
