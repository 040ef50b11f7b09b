"""Which keyspace and consistency settings survive losing one Cassandra node."""

from __future__ import annotations

import pytest

from silt.kv.durability import durability_warnings


def test_three_replicas_at_quorum_are_safe() -> None:
    assert durability_warnings("silt", 3, "LOCAL_QUORUM") == []
    assert durability_warnings("silt", 5, "QUORUM") == []


@pytest.mark.parametrize(
    ("replicas", "consistency", "expected"),
    [
        (1, "LOCAL_QUORUM", ["replication factor 1", "needs 1 of 1"]),
        (2, "QUORUM", ["replication factor 2", "needs 2 of 2"]),
        (3, "ONE", ["one replica only"]),
        (3, "ALL", ["needs 3 of 3"]),
        (3, "THREE", ["needs 3 of 3"]),
    ],
)
def test_unsafe_settings_warn(replicas: int, consistency: str, expected: list[str]) -> None:
    warnings = durability_warnings("silt", replicas, consistency)
    assert len(warnings) == len(expected)
    for warning, phrase in zip(warnings, expected, strict=True):
        assert phrase in warning
