"""Which CPUs commit workers are pinned to."""

from __future__ import annotations

import pytest

from engine.core.builder import worker_cpus
from silt.config import parse_cpu_list


@pytest.mark.parametrize(
    ("spec", "available", "expected"),
    [
        ("auto", {0}, None),  # one CPU: nothing to keep free
        ("auto", {0, 1}, {1}),
        ("auto", {0, 1, 2, 3}, {2, 3}),
        ("auto", {4, 5, 6}, {5, 6}),  # the upper half of what this process may use
        ("all", {0, 1}, None),
        ("1", {0, 1}, {1}),
        ("0,2-3", {0, 1, 2, 3}, {0, 2, 3}),
        ("2-3", {0, 1, 2}, {2}),  # only CPUs the process may use
        ("7", {0, 1}, None),  # none of them: left unpinned rather than failing
    ],
)
def test_worker_cpus(spec: str, available: set[int], expected: set[int] | None) -> None:
    assert worker_cpus(spec, available) == expected


@pytest.mark.parametrize("spec", ["", "x", "1-", "-1", "3-1", "1,,2", "auto,1"])
def test_malformed_cpu_lists_are_refused(spec: str) -> None:
    with pytest.raises(ValueError, match="CPU ids"):
        parse_cpu_list(spec)
