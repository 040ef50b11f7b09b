"""Who is asking and what they may do: the answers of auth (``Authority``), asked over gRPC
(``RemoteAuthority``, ``AioRemoteAuthority``) and cached (``CachedAuthority``,
``AioCachedAuthority``). Design: docs/design/auth.md.

**Caching.** Key lookups and decisions are cached for ``auth.cache_ttl_seconds``, so a call
costs a dictionary lookup and one HMAC on the hot path; a change to users, groups, policies
or keys takes effect within that time. Unknown keys are cached too, so that a caller
retrying with a bad key costs auth nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

import grpc
import grpc.aio
from pydantic import SecretStr

from silt.errors import InvalidArgument, NotFound, PermissionDenied, SiltError, Unauthenticated, Unavailable
from silt.rpc.errors import error_from_rpc

log = logging.getLogger(__name__)

DEFAULT_CACHE_TTL_SECONDS = 5.0
AUTH_CALL_TIMEOUT_SECONDS = 10.0

# Seconds, monotonic; tests pass a clock they move themselves.
Clock = Callable[[], float]


class KeyOwner(NamedTuple):
    user_id: str
    secret: SecretStr


class Authority(Protocol):
    """What the interceptor needs from auth: auth serves it from KV, other services over gRPC."""

    def key_owner(self, access_key_id: str) -> KeyOwner:
        """The user holding the key and its secret; NotFound if the key does not exist."""
        ...

    def allowed_many(self, user_id: str, action: str, resources: Sequence[str]) -> list[bool]:
        """One decision per resource, in order."""
        ...


_K = TypeVar("_K")
_V = TypeVar("_V")


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


class AsyncAuthority(Protocol):
    """Authority for grpc.aio callers (the gateway)."""

    async def key_owner(self, access_key_id: str) -> KeyOwner: ...

    async def allowed_many(self, user_id: str, action: str, resources: Sequence[str]) -> list[bool]: ...


class _Answers:
    """The cached answers of an authority: key owners (unknown keys included) and decisions.
    Shared by the sync and the async cached authority, which differ only in how they ask."""

    def __init__(self, ttl: float, clock: Clock) -> None:
        # An unknown key is cached as the message of its NotFound.
        self.owners: TTLCache[str, KeyOwner | str] = TTLCache(ttl, clock=clock)
        self.decisions: TTLCache[tuple[str, str, str], bool] = TTLCache(ttl, clock=clock)

    def owner(self, access_key_id: str) -> KeyOwner | str | None:
        """The cached owner, the message of a cached NotFound, or None on a miss."""
        cached = self.owners.get(access_key_id)
        count_cache_lookup("key", cached is not None)
        return cached

    def remember_owner(self, access_key_id: str, owner: KeyOwner | str) -> None:
        self.owners.put(access_key_id, owner)

    @staticmethod
    def owner_or_raise(owner: KeyOwner | str) -> KeyOwner:
        if isinstance(owner, str):
            raise NotFound(owner, what="credential")
        return owner

    def decision(self, user_id: str, action: str, resource: str) -> bool | None:
        return self.decisions.get((user_id, action, resource))

    def lookup(self, user_id: str, action: str, resources: Sequence[str]) -> tuple[list[bool | None], list[str]]:
        """The cached decisions (None where missing) and the distinct resources to ask about."""
        decisions = [self.decisions.get((user_id, action, r)) for r in resources]
        missing = sorted({r for r, d in zip(resources, decisions, strict=True) if d is None})
        count_cache_lookup("decision", not missing)
        return decisions, missing

    def merge(
        self,
        user_id: str,
        action: str,
        resources: Sequence[str],
        decisions: list[bool | None],
        missing: list[str],
        answers: Sequence[bool],
    ) -> list[bool]:
        fresh = dict(zip(missing, answers, strict=True))
        for resource, decision in fresh.items():
            self.decisions.put((user_id, action, resource), decision)
        return [bool(fresh.get(r, d)) for r, d in zip(resources, decisions, strict=True)]

    def clear(self) -> None:
        self.owners.clear()
        self.decisions.clear()


class CachedAuthority:
    """Caches another Authority's answers, unknown keys included, for ttl seconds."""

    def __init__(self, inner: Authority, ttl: float = DEFAULT_CACHE_TTL_SECONDS, clock: Clock = time.monotonic) -> None:
        self.inner = inner
        self._answers = _Answers(ttl, clock)

    def key_owner(self, access_key_id: str) -> KeyOwner:
        cached = self._answers.owner(access_key_id)
        if cached is None:
            try:
                cached = self.inner.key_owner(access_key_id)
            except NotFound as exc:
                cached = str(exc)
            self._answers.remember_owner(access_key_id, cached)
        return self._answers.owner_or_raise(cached)

    def allowed(self, user_id: str, action: str, resource: str) -> bool:
        decision = self._answers.decision(user_id, action, resource)
        if decision is None:
            return self.allowed_many(user_id, action, [resource])[0]
        return decision

    def allowed_many(self, user_id: str, action: str, resources: Sequence[str]) -> list[bool]:
        decisions, missing = self._answers.lookup(user_id, action, resources)
        answers = self.inner.allowed_many(user_id, action, missing) if missing else []
        return self._answers.merge(user_id, action, resources, decisions, missing, answers)

    def forget(self) -> None:
        """Drop everything cached (tests, and after a change made by this very process)."""
        self._answers.clear()

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if close is not None:
            close()


class AioCachedAuthority:
    """CachedAuthority for grpc.aio callers: the same caches in front of an AsyncAuthority."""

    def __init__(
        self, inner: AsyncAuthority, ttl: float = DEFAULT_CACHE_TTL_SECONDS, clock: Clock = time.monotonic
    ) -> None:
        self.inner = inner
        self._answers = _Answers(ttl, clock)

    async def key_owner(self, access_key_id: str) -> KeyOwner:
        cached = self._answers.owner(access_key_id)
        if cached is None:
            try:
                cached = await self.inner.key_owner(access_key_id)
            except NotFound as exc:
                cached = str(exc)
            self._answers.remember_owner(access_key_id, cached)
        return self._answers.owner_or_raise(cached)

    async def allowed(self, user_id: str, action: str, resource: str) -> bool:
        decision = self._answers.decision(user_id, action, resource)
        if decision is None:
            return (await self.allowed_many(user_id, action, [resource]))[0]
        return decision

    async def allowed_many(self, user_id: str, action: str, resources: Sequence[str]) -> list[bool]:
        decisions, missing = self._answers.lookup(user_id, action, resources)
        answers = await self.inner.allowed_many(user_id, action, missing) if missing else []
        return self._answers.merge(user_id, action, resources, decisions, missing, answers)

    def forget(self) -> None:
        self._answers.clear()


def _auth_failure(exc: grpc.RpcError, doing: str, access_key_id: str | None = None) -> SiltError:
    """The error for a failed call to auth: NotFound for an unknown key, else Unavailable (the
    caller cannot tell whether its own caller may proceed)."""
    error = error_from_rpc(exc)
    if access_key_id is not None and isinstance(error, NotFound | InvalidArgument):
        return NotFound(f"access key {access_key_id[:32]} not found", what="credential")
    if isinstance(error, Unauthenticated | PermissionDenied):
        log.error("auth refused this service's own credentials while trying to %s: %s", doing, error)
        return Unavailable(f"cannot {doing}: auth refused this service's credentials")
    return Unavailable(f"cannot {doing}: auth answered {type(error).__name__}: {error}")


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

    def key_owner(self, access_key_id: str) -> KeyOwner:
        request = self._api.GetCredentialSecretRequest(access_key_id=access_key_id)
        try:
            reply = self._stub.GetCredentialSecret(request, timeout=self._timeout)
        except grpc.RpcError as exc:
            raise _auth_failure(exc, "look up an access key", access_key_id) from None
        return KeyOwner(reply.user_id, SecretStr(reply.secret_access_key))

    def allowed_many(self, user_id: str, action: str, resources: Sequence[str]) -> list[bool]:
        request = self._api.AuthorizeManyRequest(user_id=user_id, action=action, resources=list(resources))
        try:
            reply = self._stub.AuthorizeMany(request, timeout=self._timeout)
        except grpc.RpcError as exc:
            raise _auth_failure(exc, "authorize") from None
        return list(reply.allowed)

    def close(self) -> None:
        self._channel.close()


class AioRemoteAuthority:
    """RemoteAuthority over a grpc.aio channel; the channel's owner closes it."""

    def __init__(self, channel: grpc.aio.Channel, timeout: float = AUTH_CALL_TIMEOUT_SECONDS) -> None:
        from silt.auth.v1 import auth_pb2, auth_pb2_grpc

        self._api = auth_pb2
        self._stub = auth_pb2_grpc.AuthServiceStub(channel)
        self._timeout = timeout

    async def key_owner(self, access_key_id: str) -> KeyOwner:
        request = self._api.GetCredentialSecretRequest(access_key_id=access_key_id)
        try:
            reply = await self._stub.GetCredentialSecret(request, timeout=self._timeout)
        except grpc.aio.AioRpcError as exc:
            raise _auth_failure(exc, "look up an access key", access_key_id) from None
        return KeyOwner(reply.user_id, SecretStr(reply.secret_access_key))

    async def allowed_many(self, user_id: str, action: str, resources: Sequence[str]) -> list[bool]:
        request = self._api.AuthorizeManyRequest(user_id=user_id, action=action, resources=list(resources))
        try:
            reply = await self._stub.AuthorizeMany(request, timeout=self._timeout)
        except grpc.aio.AioRpcError as exc:
            raise _auth_failure(exc, "authorize") from None
        return list(reply.allowed)
