"""Refusing a signed gRPC call that was seen before (a captured call sent again).

A signature covers the call's date, a random nonce, the method and the request, and is valid
for ``auth.max_clock_skew_seconds`` either side of the server's clock. Within that window a
captured call could be sent again unchanged; ``ReplayCache`` remembers every (key id, nonce)
it admitted until the call's date leaves the window, and refuses one it has seen.

It checks every method, reads included: remembering a call costs a lock and a set insert,
and a table of which methods change something would be one more thing to keep right.

**Only verified calls, accounted per key.** The interceptor admits a call here only after
its signature held (silt/rpc/interceptor.py), so every key id in the cache is a key auth
issued, and only its holder can add entries under it. Each key has its own entries (16-byte
digests in one set per second of call date, dropped as a whole once that second leaves the
window) and its own *floor*: past ``max_entries_per_key`` entries the key's oldest seconds
are dropped and every call of that key dated at or before the newest dropped second is
refused from then on, so a dropped entry can never let its call through again. A key that
floods (say 200,000 calls dated at the far edge of the window) thereby locks out only itself,
for at most the window; every other key's calls are admitted as before. Honest callers sign
each call at the moment they make it, so their floor reaches them only if they make more than
``max_entries_per_key`` calls within the window (about 650 calls a second per key and process
with the defaults).

**Bounded memory.** At most ``max_entries`` entries in all (about 80 bytes each: some 80 MB
with the default million), whatever the number of keys: past it, the keys holding the most
entries lose their oldest seconds (raising their floors), down to one cap that frees a tenth
of the room, and the smaller keys keep everything. So only the holder of several keys, each
flooding, can push on others, and its own keys pay first. Besides the entries, a key costs
one small record while it has entries or a floor within the window, and the index of which
keys have entries in which second holds at most one key id per (key, second) of the window.

Each process keeps its own cache: a call captured on its way to one replica of a service
can still be sent to another replica within the window. TLS (``tls.enabled``) is what keeps
calls from being captured at all.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable

DEFAULT_MAX_ENTRIES = 1_000_000
DEFAULT_MAX_ENTRIES_PER_KEY = 200_000


class _Key:
    """What the cache remembers about one access key."""

    __slots__ = ("count", "floor", "seconds")

    def __init__(self) -> None:
        self.seconds: dict[int, set[bytes]] = {}
        self.count = 0
        self.floor = -1  # this key's calls dated at or before this second are refused


class ReplayCache:
    def __init__(
        self,
        window_seconds: float,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        clock: Callable[[], float] = time.time,
        max_entries_per_key: int | None = None,
    ) -> None:
        self._window = window_seconds
        self._max = max_entries
        self._max_per_key = min(max_entries, max_entries_per_key or DEFAULT_MAX_ENTRIES_PER_KEY)
        self._clock = clock
        self._keys: dict[str, _Key] = {}
        # second -> the keys that had entries dated then (some perhaps dropped since): what to
        # look at when that second leaves the window.
        self._by_second: dict[int, set[str]] = {}
        self._count = 0
        self._expired_before = -1  # seconds older than this are gone from every key
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return self._count

    def keys(self) -> int:
        """How many keys the cache holds a record of."""
        return len(self._keys)

    def admit(self, access_key_id: str, nonce: str, date: int) -> bool:
        """Record a call whose signature was verified; False if that key sent it before (or may
        have: dated at or before the key's floor). date: the call's signed date, in seconds."""
        digest = hashlib.blake2b(nonce.encode(), digest_size=16).digest()
        with self._lock:
            self._expire()
            key = self._keys.get(access_key_id)
            if key is None:
                key = self._keys[access_key_id] = _Key()
            if date <= key.floor:
                return False
            seen = key.seconds.get(date)
            if seen is not None and digest in seen:
                return False
            if seen is None:
                seen = key.seconds[date] = set()
                self._by_second.setdefault(date, set()).add(access_key_id)
            seen.add(digest)
            key.count += 1
            self._count += 1
            if key.count > self._max_per_key:
                self._drop_oldest(key, key.count - (self._max_per_key - self._max_per_key // 10))
            if self._count > self._max:
                self._make_room()
        return True

    def _expire(self) -> None:
        """Drop the seconds that left the window (their calls are refused as too old anyway),
        and the records of keys with nothing left to remember."""
        oldest = int(self._clock() - self._window) - 1
        if oldest <= self._expired_before:
            return
        self._expired_before = oldest
        for second in [s for s in self._by_second if s < oldest]:
            for key_id in self._by_second.pop(second):
                key = self._keys.get(key_id)
                if key is None:
                    continue
                dropped = key.seconds.pop(second, None)
                if dropped is not None:
                    key.count -= len(dropped)
                    self._count -= len(dropped)
                if not key.seconds and key.floor < oldest:
                    del self._keys[key_id]

    def _drop_oldest(self, key: _Key, at_least: int) -> None:
        """Drop whole seconds of one key, oldest first, until at_least entries are gone; its
        floor rises to the newest dropped second. The key stays indexed under each dropped
        second, so that its record goes once its floor leaves the window."""
        dropped = 0
        for second in sorted(key.seconds):
            if dropped >= at_least:
                break
            n = len(key.seconds.pop(second))
            dropped += n
            key.count -= n
            self._count -= n
            key.floor = max(key.floor, second)

    def _make_room(self) -> None:
        """Over the total bound: the keys holding the most entries give up their oldest seconds,
        down to one cap, the largest that leaves a tenth of the room free (the smaller keys keep
        everything). One pass over the keys, however many there are."""
        target = self._max - self._max // 10
        counts = sorted((key.count for key in self._keys.values()), reverse=True)
        rest = sum(counts)
        cap = 0
        for capped, count in enumerate(counts, 1):
            rest -= count  # what the keys smaller than the `capped` largest hold
            cap = (target - rest) // capped
            if cap >= (counts[capped] if capped < len(counts) else 0):
                break
        for key in self._keys.values():
            if key.count > cap:
                self._drop_oldest(key, key.count - max(cap, 0))
