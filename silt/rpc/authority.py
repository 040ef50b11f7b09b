"""Who is asking and what they may do: the answers of auth (``Authority``), asked over gRPC
(``RemoteAuthority``, ``AioRemoteAuthority``) and cached (``CachedAuthority``,
``AioCachedAuthority``). Design: docs/design/auth.md.

**No secrets.** A service never sees the secret of an access key: to check a signed call it
gets the caller's signing key for one day and for calls to itself only (``call_key``, auth's
GetCallSigningKey; silt/rpc/signing.py).

**Caching.** Signing keys and decisions are cached for ``auth.cache_ttl_seconds``, so a call
costs a dictionary lookup and one HMAC on the hot path; a change to users, groups, policies
or keys takes effect within that time. Decisions are cached per source address too (policy
conditions may tell two addresses apart: silt/source_address.py). Every cache is bounded in
entries, and nothing a caller makes up reaches one unchecked: an access key id must have the
issued shape before it is looked up (silt/access_keys.py), unknown keys are cached apart from
known ones (so a flood of made-up ids cannot push a real key out), and a decision about a long
resource is not cached.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

import grpc
import grpc.aio
import tenacity

from silt.access_keys import check_access_key_id, is_access_key_id
from silt.errors import InvalidArgument, NotFound, PermissionDenied, SiltError, Unauthenticated, Unavailable
from silt.key_scope import KeyScope
from silt.rpc.errors import error_from_rpc

log = logging.getLogger(__name__)

DEFAULT_CACHE_TTL_SECONDS = 5.0
AUTH_CALL_TIMEOUT_SECONDS = 10.0
# Known keys are bounded by the keys auth issued; unknown ones by whatever callers make up,
# so they get a room of their own.
MAX_KNOWN_KEYS = 100_000
MAX_UNKNOWN_KEYS = 10_000
# A restarting auth is back within moments (the launcher restarts a crashed service after 1 s;
# it starts in about half a second), and a channel that saw it go then waits out its reconnect
# backoff (at most 1 s, silt/rpc/signing.py), failing calls at once meanwhile. Retrying
# UNAVAILABLE for this long hides a restart from callers; an outage is still answered
# (ServiceUnavailable) within this bound.
UNAVAILABLE_RETRY_SECONDS = 3.0
MAX_DECISIONS = 100_000
# Decisions about longer resources are asked each time: at most this many characters per entry.
MAX_CACHED_RESOURCE = 256
# Key scopes cached (one per user, object action and repository).
MAX_KEY_SCOPES = 20_000

# Seconds, monotonic; tests pass a clock they move themselves.
Clock = Callable[[], float]


@dataclass(frozen=True)
class CallKey:
    """The key an access key signs calls with, for one day and audience, and whose key it is.
    The repr leaves the key out."""

    user_id: str
    key: bytes = field(repr=False)


class Authority(Protocol):
    """What the interceptor needs from auth: auth serves it from KV, other services over gRPC."""

    def call_key(self, access_key_id: str, day: str, audience: str) -> CallKey:
        """The signing key of access_key_id for day and audience; NotFound if the key does not exist."""
        ...

    def allowed_many(self, user_id: str, action: str, resources: Sequence[str], source_ip: str = "") -> list[bool]:
        """One decision per resource, in order, for a request from source_ip ("" unknown)."""
        ...


@runtime_checkable
class KeyScopes(Protocol):
    """Auth's key scopes (silt/key_scope.py), for callers that decide many keys at once."""

    def key_scope(self, user_id: str, action: str, repository: str, branch: str = "", source_ip: str = "") -> KeyScope:
        """Which keys of repository user_id may do the object action on, staged on branch for a
        write or delete ("" none), for a request from source_ip ("" unknown)."""
        ...


_K = TypeVar("_K")
_V = TypeVar("_V")
_S = TypeVar("_S", bound=Hashable)


class TTLCache(Generic[_K, _V]):
    """A dict whose entries expire ttl seconds after they were stored; bounded in size."""

    def __init__(self, ttl: float, max_entries: int = 100_000, clock: Clock = time.monotonic) -> None:
        self.ttl = ttl
        self._max = max_entries
        self._clock = clock
        self._entries: dict[_K, tuple[float, _V]] = {}
        self._lock = threading.Lock()

    def get(self, key: _K, default: Any = None) -> Any:
        entry = self._entries.get(key)
        if entry is None or entry[0] <= self._clock():
            return default
        return entry[1]

    def put(self, key: _K, value: _V) -> None:
        if self.ttl <= 0:
            return
        with self._lock:
            if len(self._entries) >= self._max:
                self._evict()
            self._entries[key] = (self._clock() + self.ttl, value)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)

    def _evict(self) -> None:
        now = self._clock()
        live = {k: e for k, e in self._entries.items() if e[0] > now}
        if len(live) >= self._max:
            # Still full of live entries: drop the older half (dicts keep insertion order).
            live = dict(list(live.items())[len(live) // 2 :])
        self._entries = live


_cache_counters: dict[tuple[str, bool], Any] = {}


def count_cache_lookup(cache: str, hit: bool) -> None:
    """silt_auth_cache_lookups_total{cache, result}: the hit ratio of the caches of auth's answers."""
    counter = _cache_counters.get((cache, hit))
    if counter is None:
        from silt.telemetry import metrics

        counter = _cache_counters[(cache, hit)] = metrics.AUTH_CACHE.labels(cache, "hit" if hit else "miss")
    counter.inc()


def count_decisions(decisions: Sequence[bool]) -> None:
    from silt.telemetry import metrics

    for decision in decisions:
        metrics.AUTH_DECISIONS.labels("allow" if decision else "deny").inc()


class KeyCache(Generic[_S, _V]):
    """Auth's answers about access keys, by key id and a scope (a day and audience, an S3
    credential scope): known keys, and unknown key ids in a room of their own, so that made-up
    ids can never push a known key out. Only ids of the issued shape are ever stored."""

    def __init__(
        self,
        ttl: float,
        clock: Clock = time.monotonic,
        max_known: int = MAX_KNOWN_KEYS,
        max_unknown: int = MAX_UNKNOWN_KEYS,
    ) -> None:
        self.known: TTLCache[tuple[str, _S], _V] = TTLCache(ttl, max_known, clock)
        # An unknown key is cached as the message of its NotFound.
        self.unknown: TTLCache[str, str] = TTLCache(ttl, max_unknown, clock)

    def check_known(self, access_key_id: str) -> None:
        """NotFound if the key is cached as unknown."""
        missing = self.unknown.get(access_key_id)
        if missing is not None:
            count_cache_lookup("key", True)
            raise NotFound(missing, what="credential")

    def get(self, access_key_id: str, scope: _S) -> _V | None:
        """The cached answer, None on a miss; NotFound for a key cached as unknown."""
        self.check_known(access_key_id)
        cached: _V | None = self.known.get((access_key_id, scope))
        count_cache_lookup("key", cached is not None)
        return cached

    def put(self, access_key_id: str, scope: _S, value: _V) -> None:
        if is_access_key_id(access_key_id):
            self.known.put((access_key_id, scope), value)

    def put_unknown(self, access_key_id: str, message: str) -> None:
        if is_access_key_id(access_key_id):
            self.unknown.put(access_key_id, message[:200])

    def clear(self) -> None:
        self.known.clear()
        self.unknown.clear()


class _Decisions:
    """Cached decisions, shared by the sync and the async cached authority, which differ only
    in how they ask. Keyed by the source address too: a conditional statement may decide
    differently for another address."""

    def __init__(self, ttl: float, clock: Clock) -> None:
        self.cache: TTLCache[tuple[str, str, str, str], bool] = TTLCache(ttl, MAX_DECISIONS, clock)

    def decision(self, user_id: str, action: str, resource: str, source_ip: str) -> bool | None:
        return self.cache.get((user_id, action, resource, source_ip))

    def lookup(
        self, user_id: str, action: str, resources: Sequence[str], source_ip: str
    ) -> tuple[list[bool | None], list[str]]:
        """The cached decisions (None where missing) and the distinct resources to ask about."""
        decisions = [self.cache.get((user_id, action, r, source_ip)) for r in resources]
        missing = sorted({r for r, d in zip(resources, decisions, strict=True) if d is None})
        count_cache_lookup("decision", not missing)
        return decisions, missing

    def merge(
        self,
        user_id: str,
        action: str,
        resources: Sequence[str],
        source_ip: str,
        decisions: list[bool | None],
        missing: list[str],
        answers: Sequence[bool],
    ) -> list[bool]:
        fresh = dict(zip(missing, answers, strict=True))
        for resource, decision in fresh.items():
            if len(resource) <= MAX_CACHED_RESOURCE:
                self.cache.put((user_id, action, resource, source_ip), decision)
        return [bool(fresh.get(r, d)) for r, d in zip(resources, decisions, strict=True)]

    def clear(self) -> None:
        self.cache.clear()


class CachedAuthority:
    """Caches another Authority's answers, unknown keys included, for ttl seconds."""

    def __init__(self, inner: Authority, ttl: float = DEFAULT_CACHE_TTL_SECONDS, clock: Clock = time.monotonic) -> None:
        self.inner = inner
        self.keys: KeyCache[tuple[str, str], CallKey] = KeyCache(ttl, clock)
        self._decisions = _Decisions(ttl, clock)
        self._scopes: TTLCache[tuple[str, str, str, str, str], KeyScope] = TTLCache(ttl, MAX_KEY_SCOPES, clock)

    def call_key(self, access_key_id: str, day: str, audience: str) -> CallKey:
        """InvalidArgument for an id that auth never issues, before anything is looked up."""
        check_access_key_id(access_key_id)
        cached = self.keys.get(access_key_id, (day, audience))
        if cached is None:
            try:
                cached = self.inner.call_key(access_key_id, day, audience)
            except NotFound as exc:
                self.keys.put_unknown(access_key_id, str(exc))
                raise
            self.keys.put(access_key_id, (day, audience), cached)
        return cached

    def allowed(self, user_id: str, action: str, resource: str, source_ip: str = "") -> bool:
        """source_ip: where the request being decided came from ("" unknown)."""
        decision = self._decisions.decision(user_id, action, resource, source_ip)
        if decision is None:
            return self.allowed_many(user_id, action, [resource], source_ip)[0]
        return decision

    def allowed_many(self, user_id: str, action: str, resources: Sequence[str], source_ip: str = "") -> list[bool]:
        decisions, missing = self._decisions.lookup(user_id, action, resources, source_ip)
        answers = self.inner.allowed_many(user_id, action, missing, source_ip) if missing else []
        return self._decisions.merge(user_id, action, resources, source_ip, decisions, missing, answers)

    def key_scope(self, user_id: str, action: str, repository: str, branch: str = "", source_ip: str = "") -> KeyScope:
        """Which keys of repository user_id may do the object action on (silt/key_scope.py),
        staged on branch for a write or delete, for a request from source_ip ("" unknown): one
        cached AuthorizeKeys; Unavailable from an authority that cannot tell."""
        key = (user_id, action, repository, branch, source_ip)
        scope: KeyScope | None = self._scopes.get(key)
        count_cache_lookup("key_scope", scope is not None)
        if scope is None:
            if not isinstance(self.inner, KeyScopes):
                raise Unavailable("this service's authority answers no key scopes")
            scope = self.inner.key_scope(user_id, action, repository, branch, source_ip)
            if len(repository) + len(branch) <= MAX_CACHED_RESOURCE:
                self._scopes.put(key, scope)
        return scope

    def forget(self) -> None:
        """Drop everything cached (tests, and after a change made by this very process)."""
        self.keys.clear()
        self._decisions.clear()
        self._scopes.clear()

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if close is not None:
            close()


class AsyncAuthority(Protocol):
    """The decisions of auth for grpc.aio callers (the gateway)."""

    async def allowed_many(
        self, user_id: str, action: str, resources: Sequence[str], source_ip: str = ""
    ) -> list[bool]: ...

    async def key_scope(
        self, user_id: str, action: str, repository: str, branch: str = "", source_ip: str = ""
    ) -> KeyScope: ...


class AioCachedAuthority:
    """CachedAuthority's decisions for grpc.aio callers: the same cache in front of an AsyncAuthority."""

    def __init__(
        self, inner: AsyncAuthority, ttl: float = DEFAULT_CACHE_TTL_SECONDS, clock: Clock = time.monotonic
    ) -> None:
        self.inner = inner
        self._decisions = _Decisions(ttl, clock)
        self._scopes: TTLCache[tuple[str, str, str, str, str], KeyScope] = TTLCache(ttl, MAX_KEY_SCOPES, clock)

    async def key_scope(
        self, user_id: str, action: str, repository: str, branch: str = "", source_ip: str = ""
    ) -> KeyScope:
        """Which keys of repository user_id may do the object action on (silt/key_scope.py),
        staged on branch for a write or delete, for a request from source_ip ("" unknown)."""
        key = (user_id, action, repository, branch, source_ip)
        scope: KeyScope | None = self._scopes.get(key)
        count_cache_lookup("key_scope", scope is not None)
        if scope is None:
            scope = await self.inner.key_scope(user_id, action, repository, branch, source_ip)
            if len(repository) + len(branch) <= MAX_CACHED_RESOURCE:
                self._scopes.put(key, scope)
        return scope

    async def allowed(self, user_id: str, action: str, resource: str, source_ip: str = "") -> bool:
        decision = self._decisions.decision(user_id, action, resource, source_ip)
        if decision is None:
            return (await self.allowed_many(user_id, action, [resource], source_ip))[0]
        return decision

    async def allowed_many(
        self, user_id: str, action: str, resources: Sequence[str], source_ip: str = ""
    ) -> list[bool]:
        decisions, missing = self._decisions.lookup(user_id, action, resources, source_ip)
        answers = await self.inner.allowed_many(user_id, action, missing, source_ip) if missing else []
        return self._decisions.merge(user_id, action, resources, source_ip, decisions, missing, answers)

    def forget(self) -> None:
        self._decisions.clear()
        self._scopes.clear()


def auth_failure(exc: grpc.RpcError, doing: str, access_key_id: str | None = None) -> SiltError:
    """The error for a failed call to auth: NotFound for an unknown key, InvalidArgument for a
    request auth refused as such, else Unavailable (the caller cannot tell whether its own
    caller may proceed)."""
    error = error_from_rpc(exc)
    if access_key_id is not None and isinstance(error, NotFound):
        return NotFound(f"access key {access_key_id[:32]} not found", what="credential")
    if isinstance(error, InvalidArgument):
        return error
    if isinstance(error, Unauthenticated | PermissionDenied):
        log.error("auth refused this service's own credentials while trying to %s: %s", doing, error)
        return Unavailable(f"cannot {doing}: auth refused this service's credentials")
    return Unavailable(f"cannot {doing}: auth answered {type(error).__name__}: {error}")


R = TypeVar("R")


def _unavailable(exc: BaseException) -> bool:
    return isinstance(exc, grpc.aio.AioRpcError) and exc.code() == grpc.StatusCode.UNAVAILABLE


async def retry_unavailable(call: Callable[[], Awaitable[R]], within: float = UNAVAILABLE_RETRY_SECONDS) -> R:
    """call's answer, retrying UNAVAILABLE (auth restarting) for up to `within` seconds; any
    other failure, or UNAVAILABLE past that, is raised as it came."""
    async for attempt in tenacity.AsyncRetrying(
        retry=tenacity.retry_if_exception(_unavailable),
        wait=tenacity.wait_exponential(multiplier=0.1, max=1.0),
        stop=tenacity.stop_after_delay(within),
        reraise=True,
    ):
        with attempt:
            return await call()
    raise AssertionError("tenacity ends with an answer or an exception")


class RemoteAuthority:
    """Asks the auth service, signing with this service's own credentials."""

    def __init__(self, channel: grpc.Channel, timeout: float = AUTH_CALL_TIMEOUT_SECONDS) -> None:
        # Imported here: generated code exists only after `make proto`, and only services
        # that talk to auth need it.
        from silt.auth.v1 import auth_pb2, auth_pb2_grpc

        self._api = auth_pb2
        self._stub = auth_pb2_grpc.AuthServiceStub(channel)
        self._channel = channel
        self._timeout = timeout

    def call_key(self, access_key_id: str, day: str, audience: str) -> CallKey:
        request = self._api.GetCallSigningKeyRequest(access_key_id=access_key_id, day=day, audience=audience)
        try:
            reply = self._stub.GetCallSigningKey(request, timeout=self._timeout)
        except grpc.RpcError as exc:
            raise auth_failure(exc, "look up an access key", access_key_id) from None
        return CallKey(reply.user_id, reply.signing_key)

    def allowed_many(self, user_id: str, action: str, resources: Sequence[str], source_ip: str = "") -> list[bool]:
        request = self._api.AuthorizeManyRequest(
            user_id=user_id, action=action, resources=list(resources), source_ip=source_ip
        )
        try:
            reply = self._stub.AuthorizeMany(request, timeout=self._timeout)
        except grpc.RpcError as exc:
            raise auth_failure(exc, "authorize") from None
        return list(reply.allowed)

    def key_scope(self, user_id: str, action: str, repository: str, branch: str = "", source_ip: str = "") -> KeyScope:
        request = self._api.AuthorizeKeysRequest(
            user_id=user_id, action=action, repository=repository, branch=branch, source_ip=source_ip
        )
        try:
            reply = self._stub.AuthorizeKeys(request, timeout=self._timeout)
        except grpc.RpcError as exc:
            raise auth_failure(exc, "authorize") from None
        return KeyScope(repository, every_key=reply.every_key, allow=tuple(reply.allow), deny=tuple(reply.deny))

    def close(self) -> None:
        self._channel.close()


class AioRemoteAuthority:
    """RemoteAuthority's decisions over a grpc.aio channel; the channel's owner closes it."""

    def __init__(self, channel: grpc.aio.Channel, timeout: float = AUTH_CALL_TIMEOUT_SECONDS) -> None:
        from silt.auth.v1 import auth_pb2, auth_pb2_grpc

        self._api = auth_pb2
        self._stub = auth_pb2_grpc.AuthServiceStub(channel)
        self._timeout = timeout

    async def allowed_many(
        self, user_id: str, action: str, resources: Sequence[str], source_ip: str = ""
    ) -> list[bool]:
        request = self._api.AuthorizeManyRequest(
            user_id=user_id, action=action, resources=list(resources), source_ip=source_ip
        )
        try:
            reply = await retry_unavailable(lambda: self._stub.AuthorizeMany(request, timeout=self._timeout))
        except grpc.aio.AioRpcError as exc:
            raise auth_failure(exc, "authorize") from None
        return list(reply.allowed)

    async def key_scope(
        self, user_id: str, action: str, repository: str, branch: str = "", source_ip: str = ""
    ) -> KeyScope:
        request = self._api.AuthorizeKeysRequest(
            user_id=user_id, action=action, repository=repository, branch=branch, source_ip=source_ip
        )
        try:
            reply = await retry_unavailable(lambda: self._stub.AuthorizeKeys(request, timeout=self._timeout))
        except grpc.aio.AioRpcError as exc:
            raise auth_failure(exc, "authorize") from None
        return KeyScope(repository, every_key=reply.every_key, allow=tuple(reply.allow), deny=tuple(reply.deny))
