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


ATTACKER = "AKIAATTACKER00000000"
HONEST = "AKIAHONEST0000000000"
NOW = 1_700_000_000


def test_a_flooding_key_locks_out_only_itself() -> None:
    """The finding: any key holder sent more calls than the cache holds, all dated at the far
    edge of the window, and the one global floor then refused every caller's calls for about
    five minutes. Each key has its own floor now: the flood locks out the flooder alone."""
    cache = ReplayCache(300, max_entries=1000, clock=lambda: NOW)
    for i in range(1001):
        cache.admit(ATTACKER, f"{i:032x}", NOW + 299)
    assert cache.admit(HONEST, "f" * 32, NOW)
    assert cache.admit(HONEST, "e" * 32, NOW + 60)
    assert not cache.admit(HONEST, "f" * 32, NOW)  # still a replay cache
    assert not cache.admit(ATTACKER, "a" * 32, NOW)  # the flooder's floor is its own
    assert len(cache) <= 1000


def test_each_key_has_its_own_limit_and_the_total_stays_bounded() -> None:
    clock = ManualClock(float(NOW))
    cache = ReplayCache(300, max_entries=3_000, max_entries_per_key=1_000, clock=clock)
    honest = [secrets.token_hex(16) for _ in range(50)]
    for nonce in honest:
        assert cache.admit(HONEST, nonce, NOW)
    # Five keys of one attacker, each just under its own limit: together over the total.
    attackers = [f"AKIAATTACKER{n:08d}" for n in range(5)]
    for key_id in attackers:
        for _ in range(999):
            cache.admit(key_id, secrets.token_hex(16), NOW + 299)
        assert len(cache) <= 3_000
    # The largest keys paid; the honest key kept every entry and is admitted as before.
    assert not any(cache.admit(HONEST, nonce, NOW) for nonce in honest)
    assert cache.admit(HONEST, secrets.token_hex(16), NOW)
    assert cache.admit(HONEST, secrets.token_hex(16), NOW + 1)
    # One key over its own limit loses its oldest seconds, and only its own calls up to them.
    cache.admit(attackers[0], secrets.token_hex(16), NOW + 299)
    for _ in range(1_001):
        cache.admit(attackers[1], secrets.token_hex(16), NOW + 298)
    assert not cache.admit(attackers[1], secrets.token_hex(16), NOW + 298)
    assert cache.admit(HONEST, secrets.token_hex(16), NOW + 2)


def test_records_of_quiet_keys_leave_with_the_window() -> None:
    """A key's record (and its floor) goes once nothing it remembers is inside the window."""
    clock = ManualClock(float(NOW))
    cache = ReplayCache(300, max_entries_per_key=10, clock=clock)
    for n in range(100):
        cache.admit(f"AKIAQUIET{n:011d}", secrets.token_hex(16), NOW)
    for _ in range(20):
        cache.admit(ATTACKER, secrets.token_hex(16), NOW + 299)
    assert cache.keys() == 101
    clock.advance(302)
    cache.admit(HONEST, secrets.token_hex(16), int(clock()))
    assert cache.keys() == 2  # the flooder's floor (NOW + 299) is still inside the window
    assert not cache.admit(ATTACKER, secrets.token_hex(16), NOW + 299)
    clock.advance(300)
    cache.admit(HONEST, secrets.token_hex(16), int(clock()))
    assert (cache.keys(), len(cache)) == (1, 2)  # the honest calls of NOW + 302 and NOW + 602
