"""The rows a close or a fence writes sort after the row they replace: on a Cassandra older than
2.2, compare-and-sets in one millisecond carry one write time and the larger value is kept, so a
close that sorted before OPEN, or a fence before the guard it replaced, would be lost to the
write it was ordered after (engine/core/staging.py)."""

from __future__ import annotations

from engine.core.staging import CLOSED, OPEN, _decode_guard, _encode_fence, _encode_guard
from engine.core.values import Value


def test_closed_sorts_after_open() -> None:
    assert CLOSED > OPEN


def test_a_fence_sorts_after_the_guard_it_replaces_and_admits_nothing() -> None:
    for stamp in (1, 2**20, 2**62):
        guard = _encode_guard(stamp, Value(b"id", b"\xff" * 64), None)
        fence = _encode_fence(guard)
        assert fence > guard
        assert _decode_guard(fence)[3] and not _decode_guard(guard)[3]
        assert _encode_fence(fence) > fence  # a fence over a fence, too
    assert _decode_guard(_encode_fence(None))[3]
