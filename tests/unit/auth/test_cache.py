"""TTL caching of signing keys and decisions, and the bounds that keep made-up key ids out."""

from __future__ import annotations

import asyncio
import secrets
import string
import tracemalloc
from collections.abc import Sequence

import pytest

from silt.errors import InvalidArgument, NotFound, Unavailable
from silt.key_scope import KeyScope
from silt.rpc.authority import MAX_CACHED_RESOURCE, AioCachedAuthority, CachedAuthority, CallKey, KeyCache, TTLCache
from tests.support.clock import ManualClock

KNOWN = "AKIAKNOWNKNOWNKNOWN2"
UNKNOWN = "AKIAUNKNOWNUNKNOWN22"
DAY = "20250101"


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

    def call_key(self, access_key_id: str, day: str, audience: str) -> CallKey:
        self.lookups.append(access_key_id)
        if access_key_id != KNOWN:
            raise NotFound(f"access key {access_key_id} not found")
        return CallKey("alice", f"{day}/{audience}".encode())

    def allowed_many(self, user_id: str, action: str, resources: Sequence[str], source_ip: str = "") -> list[bool]:
        self.asked.append((user_id, action, tuple(resources)))
        return [action == "ReadRepo" and r in self.allow for r in resources]


def test_lookups_are_cached_known_or_not() -> None:
    inner = CountingAuthority()
    cached = CachedAuthority(inner, ttl=60)
    for _ in range(3):
        assert cached.call_key(KNOWN, DAY, "graveler").user_id == "alice"
        with pytest.raises(NotFound):
            cached.call_key(UNKNOWN, DAY, "graveler")
    assert inner.lookups == [KNOWN, UNKNOWN]
    # A key's signing key is per day and audience: another scope is another question.
    assert cached.call_key(KNOWN, "20250102", "graveler").key == b"20250102/graveler"
    assert inner.lookups == [KNOWN, UNKNOWN, KNOWN]


def test_the_repr_of_a_call_key_hides_the_key() -> None:
    assert "secret-bytes" not in repr(CallKey("alice", b"secret-bytes"))


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


def test_decisions_about_long_resources_are_not_cached() -> None:
    inner = CountingAuthority()
    cached = CachedAuthority(inner, ttl=60)
    long = "r" * (MAX_CACHED_RESOURCE + 1)
    for _ in range(2):
        assert not cached.allowed("alice", "ReadRepo", long)
    assert len(inner.asked) == 2


def test_answers_expire_on_the_injected_clock() -> None:
    clock = ManualClock()
    inner = CountingAuthority()
    cached = CachedAuthority(inner, ttl=5, clock=clock)
    assert cached.allowed("alice", "ReadRepo", "r1")
    assert cached.call_key(KNOWN, DAY, "graveler").user_id == "alice"
    inner.allow = set()
    clock.advance(4.9)
    assert cached.allowed("alice", "ReadRepo", "r1")  # still the cached answer
    clock.advance(0.2)
    assert not cached.allowed("alice", "ReadRepo", "r1")
    cached.call_key(KNOWN, DAY, "graveler")
    assert inner.lookups == [KNOWN, KNOWN]


class AsyncCountingAuthority:
    """The same decisions, for grpc.aio callers (the gateway)."""

    def __init__(self) -> None:
        self.sync = CountingAuthority()

    async def allowed_many(
        self, user_id: str, action: str, resources: Sequence[str], source_ip: str = ""
    ) -> list[bool]:
        return self.sync.allowed_many(user_id, action, resources)

    async def key_scope(
        self, user_id: str, action: str, repository: str, branch: str = "", source_ip: str = ""
    ) -> KeyScope:
        # Object actions as the repository's: every key or none.
        return KeyScope(repository, every_key=(await self.allowed_many(user_id, action, [repository]))[0])


def test_the_async_cache_answers_like_the_sync_one() -> None:
    clock = ManualClock()
    inner = AsyncCountingAuthority()
    cached = AioCachedAuthority(inner, ttl=5, clock=clock)

    async def scenario() -> None:
        assert await cached.allowed("alice", "ReadRepo", "r1")
        assert await cached.allowed_many("alice", "ReadRepo", ["r2", "r1", "r2"]) == [False, True, False]
        inner.sync.allow = set()
        assert await cached.allowed("alice", "ReadRepo", "r1")
        clock.advance(5.1)
        assert not await cached.allowed("alice", "ReadRepo", "r1")

    asyncio.run(scenario())
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
        cached.call_key(KNOWN, DAY, "graveler")
        clock.advance(1)
    assert inner.lookups == [KNOWN, KNOWN]


def _random_key_id(size: int) -> str:
    return "".join(secrets.choice(string.ascii_uppercase + string.digits) for _ in range(size))


def test_huge_made_up_key_ids_are_refused_before_any_lookup_and_never_cached() -> None:
    """10,000 random 8 KiB key ids: no lookup, no cache entry, no memory kept; the known key stays cached."""
    inner = CountingAuthority()
    cached = CachedAuthority(inner, ttl=60)
    cached.call_key(KNOWN, DAY, "graveler")
    hostile = [secrets.token_hex(4096).upper() for _ in range(10_000)]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for key_id in hostile:
            with pytest.raises(InvalidArgument):
                cached.call_key(key_id, DAY, "graveler")
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert inner.lookups == [KNOWN]
    assert len(cached.keys.known) == 1 and len(cached.keys.unknown) == 0
    assert grown < 256 * 1024, f"the cache kept {grown} bytes for refused key ids"
    assert cached.call_key(KNOWN, DAY, "graveler").user_id == "alice"
    assert inner.lookups == [KNOWN]


def test_made_up_key_ids_of_the_right_shape_cannot_push_a_known_key_out() -> None:
    inner = CountingAuthority()
    cached = CachedAuthority(inner, ttl=60)
    cached.keys = KeyCache(60, max_known=1000, max_unknown=100)
    cached.call_key(KNOWN, DAY, "graveler")
    for _ in range(5_000):
        with pytest.raises(NotFound):
            cached.call_key("AKIA" + _random_key_id(16), DAY, "graveler")
    assert len(cached.keys.unknown) <= 100
    assert cached.call_key(KNOWN, DAY, "graveler").user_id == "alice"
    assert inner.lookups.count(KNOWN) == 1


def test_the_key_cache_stores_only_issued_shapes() -> None:
    keys: KeyCache[str, int] = KeyCache(60)
    keys.put("x" * 8192, "scope", 1)
    keys.put_unknown("y" * 8192, "not found")
    keys.put(KNOWN, "scope", 2)
    assert len(keys.known) == 1 and len(keys.unknown) == 0
    assert keys.get(KNOWN, "scope") == 2


class ScopingAuthority(CountingAuthority):
    """Also answers key scopes, as auth's AuthorizeKeys does."""

    def __init__(self) -> None:
        super().__init__()
        self.scoped: list[tuple[str, str, str, str, str]] = []

    def key_scope(self, user_id: str, action: str, repository: str, branch: str = "", source_ip: str = "") -> KeyScope:
        self.scoped.append((user_id, action, repository, branch, source_ip))
        return KeyScope(repository, every_key=True, deny=(f"{repository}/secret/*",))


def test_key_scopes_are_cached_per_user_action_repository_branch_and_address() -> None:
    """Graveler's check of the keys a merge changes asks these for every merge: cached, apart
    for each branch (its WriteBranch statements count) and source address (conditions)."""
    inner = ScopingAuthority()
    cached = CachedAuthority(inner, ttl=60)
    for _ in range(3):
        assert not cached.key_scope("alice", "WriteObject", "r1").allows("secret/x")
    cached.key_scope("alice", "DeleteObject", "r1")
    cached.key_scope("bob", "WriteObject", "r1")
    cached.key_scope("alice", "WriteObject", "r1", "dev")
    cached.key_scope("alice", "WriteObject", "r1", "dev", "10.0.0.1")
    cached.key_scope("alice", "WriteObject", "r1", "dev")
    assert inner.scoped == [
        ("alice", "WriteObject", "r1", "", ""),
        ("alice", "DeleteObject", "r1", "", ""),
        ("bob", "WriteObject", "r1", "", ""),
        ("alice", "WriteObject", "r1", "dev", ""),
        ("alice", "WriteObject", "r1", "dev", "10.0.0.1"),
    ]
    cached.forget()
    cached.key_scope("alice", "WriteObject", "r1")
    assert len(inner.scoped) == 6


def test_an_authority_without_key_scopes_is_unavailable_for_them() -> None:
    with pytest.raises(Unavailable):
        CachedAuthority(CountingAuthority(), ttl=60).key_scope("alice", "WriteObject", "r1")
