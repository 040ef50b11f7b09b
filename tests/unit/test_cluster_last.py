"""tests/support/cluster_last.py: the 3-node cluster's tests run last, each group in its order."""

from __future__ import annotations

from typing import Any

from tests.support import cluster_last


class _Item:
    def __init__(self, name: str, *marks: str) -> None:
        self.name, self.marks = name, set(marks)

    def get_closest_marker(self, name: str) -> Any:
        return name if name in self.marks else None


def test_the_clusters_tests_go_last_and_keep_their_order() -> None:
    items: list[Any] = [
        _Item("replicas[node]", "cassandra"),
        _Item("replicas[cluster]", "cassandra_cluster"),
        _Item("unit"),
        _Item("faults", "cassandra_cluster"),
        _Item("model[cassandra]", "cassandra"),
    ]
    cluster_last.pytest_collection_modifyitems(items)
    assert [i.name for i in items] == ["replicas[node]", "unit", "model[cassandra]", "replicas[cluster]", "faults"]


def test_a_run_without_the_cluster_is_left_as_it_is() -> None:
    items: list[Any] = [_Item("b"), _Item("a", "cassandra")]
    before = list(items)
    cluster_last.pytest_collection_modifyitems(items)
    assert items == before


def test_it_runs_after_the_hooks_that_order_and_deselect() -> None:
    # pytest's own reordering by higher-scoped fixtures, and `-m`, come first.
    assert cluster_last.pytest_collection_modifyitems.pytest_impl["trylast"]  # type: ignore[attr-defined]
