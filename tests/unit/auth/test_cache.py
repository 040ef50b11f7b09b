"""TTL caching of key lookups and decisions."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
from pydantic import SecretStr

from silt.errors import NotFound
from silt.rpc.authority import AioCachedAuthority, CachedAuthority, KeyOwner, TTLCache
from tests.support.clock import ManualClock


def test_entries_expire_after_ttl() -> None:
    clock = ManualClock()
    cache: TTLCache[str, int] = TTLCache(2.0, clock=clock)
    cache.put("a", 1)
    clock.advance(1.9)
    assert cache.get("a") == 1
    clock.advance(0.2)
    assert cache.get("a") is None


def test_size_is_bounded() -> None:
    clock = ManualClock()
    cache: TTLCache[int, int] = TTLCache(10.0, max_entries=100, clock=clock)
    for i in range(1000):
        cache.put(i, i)
    assert len(cache) <= 100
    assert cache.get(999) == 999


def test_zero_ttl_caches_nothing() -> None:
    cache: TTLCache[str, int] = TTLCache(0)
    cache.put("a", 1)
    assert cache.get("a") is None


class CountingAuthority:
    def __init__(self) -> None:
        self.lookups: list[str] = []
        self.asked: list[tuple[str, str, tuple[str, ...]]] = []
        self.allow: set[str] = {"r1"}

    def key_owner(self, access_key_id: str) -> KeyOwner:
        self.lookups.append(access_key_id)
        if access_key_id != "AKIAKNOWN":
            raise NotFound(f"access key {access_key_id} not found")
        return KeyOwner("alice", SecretStr("s" * 40))

    def allowed_many(self, user_id: str, action: str, resources: Sequence[str]) -> list[bool]:
        self.asked.append((user_id, action, tuple(resources)))
        return [action == "ReadRepo" and r in self.allow for r in resources]


def test_lookups_are_cached_known_or_not() -> None:
    inner = CountingAuthority()
    cached = CachedAuthority(inner, ttl=60)
    for _ in range(3):
        assert cached.key_owner("AKIAKNOWN").user_id == "alice"
        with pytest.raises(NotFound):
            cached.key_owner("AKIAUNKNOWN")
    assert inner.lookups == ["AKIAKNOWN", "AKIAUNKNOWN"]


def test_decisions_are_cached_and_misses_batched() -> None:
    inner = CountingAuthority()
    cached = CachedAuthority(inner, ttl=60)
    assert cached.allowed("alice", "ReadRepo", "r1")
    assert cached.allowed_many("alice", "ReadRepo", ["r2", "r1", "r3", "r2"]) == [False, True, False, False]
    assert cached.allowed_many("alice", "ReadRepo", ["r3", "r1"]) == [False, True]
    assert not cached.allowed("alice", "WriteRepo", "r1")
    assert inner.asked == [
        ("alice", "ReadRepo", ("r1",)),
        ("alice", "ReadRepo", ("r2", "r3")),
        ("alice", "WriteRepo", ("r1",)),
    ]
    inner.allow = set()
    cached.forget()
    assert not cached.allowed("alice", "ReadRepo", "r1")


def test_answers_expire_on_the_injected_clock() -> None:
    clock = ManualClock()
    inner = CountingAuthority()
    cached = CachedAuthority(inner, ttl=5, clock=clock)
    assert cached.allowed("alice", "ReadRepo", "r1")
    assert cached.key_owner("AKIAKNOWN").user_id == "alice"
    inner.allow = set()
    clock.advance(4.9)
    assert cached.allowed("alice", "ReadRepo", "r1")  # still the cached answer
    clock.advance(0.2)
    assert not cached.allowed("alice", "ReadRepo", "r1")
    cached.key_owner("AKIAKNOWN")
    assert inner.lookups == ["AKIAKNOWN", "AKIAKNOWN"]


class AsyncCountingAuthority:
    """The same answers, for grpc.aio callers (the gateway)."""

    def __init__(self) -> None:
        self.sync = CountingAuthority()

    async def key_owner(self, access_key_id: str) -> KeyOwner:
        return self.sync.key_owner(access_key_id)

    async def allowed_many(self, user_id: str, action: str, resources: Sequence[str]) -> list[bool]:
        return self.sync.allowed_many(user_id, action, resources)


def test_the_async_cache_answers_like_the_sync_one() -> None:
    clock = ManualClock()
    inner = AsyncCountingAuthority()
    cached = AioCachedAuthority(inner, ttl=5, clock=clock)

    async def scenario() -> None:
        for _ in range(3):
            assert (await cached.key_owner("AKIAKNOWN")).user_id == "alice"
            with pytest.raises(NotFound) as unknown:
                await cached.key_owner("AKIAUNKNOWN")
            assert unknown.value.what == "credential"
        assert await cached.allowed("alice", "ReadRepo", "r1")
        assert await cached.allowed_many("alice", "ReadRepo", ["r2", "r1", "r2"]) == [False, True, False]
        inner.sync.allow = set()
        assert await cached.allowed("alice", "ReadRepo", "r1")
        clock.advance(5.1)
        assert not await cached.allowed("alice", "ReadRepo", "r1")

    asyncio.run(scenario())
    assert inner.sync.lookups == ["AKIAKNOWN", "AKIAUNKNOWN"]
    assert inner.sync.asked == [
        ("alice", "ReadRepo", ("r1",)),
        ("alice", "ReadRepo", ("r2",)),
        ("alice", "ReadRepo", ("r1",)),
    ]


def test_a_key_in_use_still_expires() -> None:
    """Hits do not refresh an entry: a deleted key stops working one TTL after it was looked up."""
    clock = ManualClock()
    inner = CountingAuthority()
    cached = CachedAuthority(inner, ttl=5, clock=clock)
    for _ in range(10):
        cached.key_owner("AKIAKNOWN")
        clock.advance(1)
    assert inner.lookups == ["AKIAKNOWN", "AKIAKNOWN"]
