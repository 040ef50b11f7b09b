"""The replay cache: a (key id, nonce) is admitted once, memory stays bounded, and a bound
never lets a forgotten call through again."""

from __future__ import annotations

import secrets

from silt.rpc.replay import ReplayCache
from tests.support.clock import ManualClock

KEY = "AKIAALICEALICEALICE2"


def test_a_nonce_is_admitted_once_per_key() -> None:
    clock = ManualClock(1_000_000.0)
    cache = ReplayCache(300, clock=clock)
    nonce = secrets.token_hex(16)
    assert cache.admit(KEY, nonce, 1_000_000)
    assert not cache.admit(KEY, nonce, 1_000_000)
    assert cache.admit("AKIABOBBOBBOBBOBBOB2", nonce, 1_000_000)


def test_seconds_leave_the_cache_with_the_window() -> None:
    clock = ManualClock(1_000_000.0)
    cache = ReplayCache(300, clock=clock)
    for second in range(1_000_000, 1_000_010):
        assert cache.admit(KEY, secrets.token_hex(16), second)
    clock.advance(400)
    cache.admit(KEY, secrets.token_hex(16), int(clock()))
    assert len(cache) == 1


def test_memory_is_bounded_and_forgotten_calls_stay_refused() -> None:
    clock = ManualClock(1_000_000.0)
    cache = ReplayCache(300, max_entries=1_000, clock=clock)
    admitted: list[tuple[str, int]] = []
    for i in range(10_000):
        second = 1_000_000 - 299 + i // 20  # 20 calls a second, all within the window
        nonce = secrets.token_hex(16)
        assert cache.admit(KEY, nonce, second)
        admitted.append((nonce, second))
    assert len(cache) <= 1_000
    # Every call seen, forgotten or not, is refused when sent again.
    assert not any(cache.admit(KEY, nonce, second) for nonce, second in admitted)
    # A fresh call of the present second still goes through.
    assert cache.admit(KEY, secrets.token_hex(16), admitted[-1][1] + 1)
