"""Authentication and authorization of every gRPC call, shared by all Silt services.

**Scheme: HMAC-signed calls.** A caller holds an access key (id + secret, issued by auth)
and signs every call; the secret itself never travels. Three metadata entries go with
each call:

    x-silt-access-key-id   AKIA...
    x-silt-date            the caller's clock, in whole seconds since the epoch
    x-silt-signature       hex HMAC-SHA256(secret, string-to-sign)

    string-to-sign = "SILT-HMAC-SHA256" \\n date \\n full method name \\n access key id \\n
                     hex SHA-256 of the request message, serialized deterministically

The server looks the access key up (``Authority.key_owner``: the owner's user id and the
secret), recomputes the signature, and accepts the call if it matches and the date is
within ``auth.max_clock_skew_seconds`` of its own clock. Because the signature covers the
method and the request, a captured call can only be replayed unchanged, and only briefly.
Payloads themselves are not encrypted: across untrusted networks run gRPC over TLS.

Why not bearer tokens: a token is as good as a password until it expires, must be fetched
and refreshed by every client, and needs a signing key shared by all services. Signing
with the access key works the same for users and services and reuses what the S3 gateway
needs anyway (auth's GetCredentialSecret).

**Authorization.** Every method of a service has a ``Rule`` (a table per service, e.g.
services/graveler/permissions.py); a method without one is refused, so nothing is open
by default. A rule names the action and how to find the resource in the request, or lets
any authenticated caller in and narrows the response to what the caller may see.

**Caching.** Key lookups and decisions are cached for ``auth.cache_ttl_seconds``
(``CachedAuthority``), so a call costs a dictionary lookup and one HMAC on the hot path; a
change to users, groups, policies or keys takes effect within that time.

Secrets are ``SecretStr`` throughout: no repr, log line or error message shows them.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import hmac
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, Protocol, TypeVar

import grpc
import grpc.aio
from google.protobuf.message import Message
from pydantic import SecretStr

from silt.errors import ConfigError, InvalidArgument, NotFound, SiltError, Unavailable
from silt.rpc.errors import details_of, status_of
from silt.telemetry.requestid import METADATA_KEY as REQUEST_ID_HEADER
from silt.telemetry.requestid import current as current_request_id

if TYPE_CHECKING:
    from silt.config import Config

log = logging.getLogger(__name__)

ACCESS_KEY_HEADER = "x-silt-access-key-id"
DATE_HEADER = "x-silt-date"
SIGNATURE_HEADER = "x-silt-signature"
ALGORITHM = "SILT-HMAC-SHA256"
_OUR_HEADERS = frozenset((ACCESS_KEY_HEADER, DATE_HEADER, SIGNATURE_HEADER, REQUEST_ID_HEADER))

DEFAULT_MAX_SKEW_SECONDS = 300.0
DEFAULT_CACHE_TTL_SECONDS = 5.0
AUTH_CALL_TIMEOUT_SECONDS = 10.0


class Unauthenticated(SiltError):
    """Credentials are missing, unknown, or do not sign the call."""


class PermissionDenied(SiltError):
    """The caller is authenticated but no policy allows the action on the resource."""


_STATUS = {Unauthenticated: grpc.StatusCode.UNAUTHENTICATED, PermissionDenied: grpc.StatusCode.PERMISSION_DENIED}


def _status(exc: SiltError) -> grpc.StatusCode:
    return _STATUS.get(type(exc)) or status_of(exc)


# --- signing -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Credentials:
    """An access key as a caller holds it. The repr shows the id only."""

    access_key_id: str
    secret_access_key: SecretStr

    @classmethod
    def from_config(cls, config: Config) -> Credentials:
        section = config.credentials
        if not section.access_key_id or section.secret_access_key is None:
            raise ConfigError(
                "credentials.access_key_id and credentials.secret_access_key must be set: "
                "this service signs its calls to other Silt services with them"
            )
        return cls(section.access_key_id, section.secret_access_key)


def payload_digest(request: Message) -> str:
    return hashlib.sha256(request.SerializeToString(deterministic=True)).hexdigest()


def sign(secret: SecretStr, date: str, method: str, access_key_id: str, digest: str) -> str:
    text = "\n".join((ALGORITHM, date, method, access_key_id, digest))
    return hmac.new(secret.get_secret_value().encode(), text.encode(), hashlib.sha256).hexdigest()


class _CallDetails(NamedTuple):
    method: str
    timeout: float | None
    metadata: Sequence[tuple[str, str]] | None
    credentials: grpc.CallCredentials | None
    wait_for_ready: bool | None
    compression: grpc.Compression | None


class SigningInterceptor(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):
    """Client side: signs every call with the caller's access key."""

    def __init__(self, credentials: Credentials, clock: Callable[[], float] = time.time) -> None:
        self._credentials = credentials
        self._clock = clock

    def _signed(self, details: grpc.ClientCallDetails, request: Message) -> _CallDetails:
        method = details.method.decode() if isinstance(details.method, bytes) else details.method
        date = str(int(self._clock()))
        key_id = self._credentials.access_key_id
        signature = sign(self._credentials.secret_access_key, date, method, key_id, payload_digest(request))
        metadata = [(k, v) for k, v in (details.metadata or ()) if k not in _OUR_HEADERS]
        metadata += [(ACCESS_KEY_HEADER, key_id), (DATE_HEADER, date), (SIGNATURE_HEADER, signature)]
        # The S3 request this call serves, for the receiving service's logs. Added here rather
        # than by an interceptor of its own: each grpc.aio interceptor costs a task per call.
        request_id = current_request_id.get()
        if request_id is not None:
            metadata.append((REQUEST_ID_HEADER, request_id))
        return _CallDetails(
            method,
            details.timeout,
            metadata,
            details.credentials,
            getattr(details, "wait_for_ready", None),
            getattr(details, "compression", None),
        )

    def intercept_unary_unary(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        return continuation(self._signed(client_call_details, request), request)

    def intercept_unary_stream(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        return continuation(self._signed(client_call_details, request), request)


def signed_channel(target: str, credentials: Credentials, options: Sequence[tuple[str, Any]] = ()) -> grpc.Channel:
    """A channel to target whose every call is signed with credentials."""
    from silt.telemetry.rpc import traced_channel

    return traced_channel(
        grpc.intercept_channel(grpc.insecure_channel(target, options=list(options)), SigningInterceptor(credentials))
    )


def _as_bytes(method: str | bytes) -> bytes:
    return method.encode() if isinstance(method, str) else method


class AioSigningInterceptor(grpc.aio.UnaryUnaryClientInterceptor, grpc.aio.UnaryStreamClientInterceptor):
    """Client side for grpc.aio channels: the same signature as SigningInterceptor."""

    def __init__(self, credentials: Credentials, clock: Callable[[], float] = time.time) -> None:
        # Reuses the sync interceptor's signing so that both kinds of channel stay identical.
        self._signer = SigningInterceptor(credentials, clock)

    def _signed(self, details: Any, request: Message) -> grpc.aio.ClientCallDetails:
        signed = self._signer._signed(details, request)
        # grpc.aio's call machinery wants the method as bytes; the signature covers it as text.
        return grpc.aio.ClientCallDetails(
            _as_bytes(details.method),
            signed.timeout,
            grpc.aio.Metadata(*signed.metadata),
            signed.credentials,
            signed.wait_for_ready,
        )

    async def intercept_unary_unary(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        return await continuation(self._signed(client_call_details, request), request)

    async def intercept_unary_stream(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        return await continuation(self._signed(client_call_details, request), request)


def signed_aio_channel(
    target: str, credentials: Credentials, options: Sequence[tuple[str, Any]] = ()
) -> grpc.aio.Channel:
    """A grpc.aio channel to target whose every call is signed with credentials."""
    from silt.telemetry.rpc import aio_client_interceptors

    return grpc.aio.insecure_channel(
        target, options=list(options), interceptors=[*aio_client_interceptors(), AioSigningInterceptor(credentials)]
    )


# --- who is asking, and what they may do ------------------------------------------------


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

    def __init__(self, ttl: float, max_entries: int = 100_000, clock: Callable[[], float] = time.monotonic) -> None:
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


_MISS = object()


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


class CachedAuthority:
    """Caches another Authority's answers, unknown keys included, for ttl seconds."""

    def __init__(self, inner: Authority, ttl: float = DEFAULT_CACHE_TTL_SECONDS) -> None:
        self.inner = inner
        self._owners: TTLCache[str, KeyOwner | str] = TTLCache(ttl)
        self._decisions: TTLCache[tuple[str, str, str], bool] = TTLCache(ttl)

    def key_owner(self, access_key_id: str) -> KeyOwner:
        cached = self._owners.get(access_key_id, _MISS)
        count_cache_lookup("key", cached is not _MISS)
        if cached is _MISS:
            try:
                cached = self.inner.key_owner(access_key_id)
            except NotFound as exc:
                cached = str(exc)
            self._owners.put(access_key_id, cached)
        if isinstance(cached, str):
            raise NotFound(cached)
        return cached

    def allowed(self, user_id: str, action: str, resource: str) -> bool:
        decision = self._decisions.get((user_id, action, resource), _MISS)
        if decision is _MISS:
            return self.allowed_many(user_id, action, [resource])[0]
        return bool(decision)

    def allowed_many(self, user_id: str, action: str, resources: Sequence[str]) -> list[bool]:
        decisions = [self._decisions.get((user_id, action, r)) for r in resources]
        missing = sorted({r for r, d in zip(resources, decisions, strict=True) if d is None})
        count_cache_lookup("decision", not missing)
        if missing:
            fresh = dict(zip(missing, self.inner.allowed_many(user_id, action, missing), strict=True))
            for resource, decision in fresh.items():
                self._decisions.put((user_id, action, resource), decision)
            decisions = [fresh.get(r, d) for r, d in zip(resources, decisions, strict=True)]
        return [bool(d) for d in decisions]

    def forget(self) -> None:
        """Drop everything cached (tests, and after a change made by this very process)."""
        self._owners.clear()
        self._decisions.clear()

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if close is not None:
            close()


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

    def _failure(self, exc: grpc.RpcError, what: str) -> SiltError:
        code = exc.code()
        if code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
            log.error("auth refused this service's own credentials while %s: %s", what, exc.details())
            return Unavailable(f"cannot {what}: auth refused this service's credentials")
        return Unavailable(f"cannot {what}: auth answered {code.name}: {exc.details()}")

    def key_owner(self, access_key_id: str) -> KeyOwner:
        request = self._api.GetCredentialSecretRequest(access_key_id=access_key_id)
        try:
            reply = self._stub.GetCredentialSecret(request, timeout=self._timeout)
        except grpc.RpcError as exc:
            if exc.code() in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT):
                raise NotFound(f"access key {access_key_id[:32]} not found") from None
            raise self._failure(exc, "look up an access key") from None
        return KeyOwner(reply.user_id, SecretStr(reply.secret_access_key))

    def allowed_many(self, user_id: str, action: str, resources: Sequence[str]) -> list[bool]:
        request = self._api.AuthorizeManyRequest(user_id=user_id, action=action, resources=list(resources))
        try:
            reply = self._stub.AuthorizeMany(request, timeout=self._timeout)
        except grpc.RpcError as exc:
            raise self._failure(exc, "authorize") from None
        return list(reply.allowed)

    def close(self) -> None:
        self._channel.close()


# --- rules -------------------------------------------------------------------------------

# (action, resources) -> one decision per resource, for the caller of the current call.
MayFn = Callable[[str, Sequence[str]], list[bool]]


@dataclass(frozen=True)
class Require:
    """The caller needs `action` on the resource that `resource` reads from the request.

    `unless_self` names the user a request is about (empty: the caller): a user may always
    read about itself (its own record, groups, policies and keys), without any policy.
    """

    action: str
    # One resource, or several that all need the action (e.g. attaching a policy needs it
    # on the user and on the policy, so that nobody attaches a policy they were not given).
    resource: Callable[[Any], str | tuple[str, ...]]
    unless_self: Callable[[Any], str] | None = None


@dataclass(frozen=True)
class Authenticated:
    """Any authenticated caller (e.g. WhoAmI)."""


@dataclass(frozen=True)
class Narrowed:
    """Any authenticated caller; the answer is narrowed to what it may see.

    `narrow(call, request, may)` returns the response; `call(request)` runs the handler and
    may be called more than once (to fill a page after filtering).
    """

    narrow: Callable[[Callable[[Any], Any], Any, MayFn], Any]


Rule = Require | Authenticated | Narrowed


def field(name: str) -> Callable[[Any], str]:
    """A resource function reading one request field."""

    def read(request: Any) -> str:
        return str(getattr(request, name))

    read.__name__ = f"field_{name}"
    return read


# --- the interceptor ---------------------------------------------------------------------


@dataclass(frozen=True)
class Principal:
    user_id: str
    access_key_id: str


_principal: contextvars.ContextVar[Principal | None] = contextvars.ContextVar("silt_principal", default=None)


def current_principal() -> Principal:
    """The authenticated caller of the call being handled."""
    principal = _principal.get()
    if principal is None:
        raise Unauthenticated("no authenticated caller: the service runs without AuthInterceptor")
    return principal


class AuthInterceptor(grpc.ServerInterceptor):
    """Authenticates and authorizes every call before its handler runs."""

    def __init__(
        self,
        authority: CachedAuthority,
        rules: Mapping[str, Rule],
        max_skew_seconds: float = DEFAULT_MAX_SKEW_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.authority = authority
        self._rules = dict(rules)
        self._max_skew = max_skew_seconds
        self._clock = clock

    def close(self) -> None:
        self.authority.close()

    # -- admission

    def _authenticate(self, method: str, metadata: Sequence[Any], request: Message) -> Principal:
        headers = {m.key: m.value for m in metadata or () if m.key in _OUR_HEADERS}
        key_id = headers.get(ACCESS_KEY_HEADER)
        date = headers.get(DATE_HEADER)
        signature = headers.get(SIGNATURE_HEADER)
        if not key_id or not date or not signature:
            raise Unauthenticated(
                f"missing credentials: sign calls with an access key ({ACCESS_KEY_HEADER}, {DATE_HEADER}, "
                f"{SIGNATURE_HEADER}; see silt.rpc.auth.signed_channel)"
            )
        try:
            skew = abs(self._clock() - int(date))
        except (ValueError, OverflowError):
            raise Unauthenticated(f"{DATE_HEADER} must be whole seconds since the epoch") from None
        if skew > self._max_skew:
            raise Unauthenticated(
                f"request date is {skew:.0f} s away from the server's clock (at most {self._max_skew:.0f} s allowed)"
            )
        try:
            owner = self.authority.key_owner(key_id)
        except (NotFound, InvalidArgument):
            raise Unauthenticated(f"unknown access key id {key_id[:32]!r}") from None
        expected = sign(owner.secret, date, method, key_id, payload_digest(request))
        if not hmac.compare_digest(expected.encode(), signature.encode(errors="replace")):
            raise Unauthenticated(f"signature does not match for access key {key_id}: wrong secret?")
        return Principal(owner.user_id, key_id)

    def _authorize(self, rule: Rule | None, method: str, principal: Principal, request: Any) -> None:
        if rule is None:
            raise PermissionDenied(f"{method} has no permission rule, so nobody may call it")
        if not isinstance(rule, Require):
            return
        if rule.unless_self is not None and rule.unless_self(request) in ("", principal.user_id):
            return
        resources = rule.resource(request)
        for resource in (resources,) if isinstance(resources, str) else resources:
            if not self.authority.allowed(principal.user_id, rule.action, resource):
                raise PermissionDenied(f"user {principal.user_id!r} may not {rule.action} on {resource!r}")

    def _admit(self, method: str, metadata: Sequence[Any], request: Any, rule: Rule | None) -> Principal:
        principal = self._authenticate(method, metadata, request)
        try:
            self._authorize(rule, method, principal, request)
        except PermissionDenied as exc:
            log.info("denied %s: %s", method, exc)
            raise
        return principal

    # -- wrapping handlers

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        method = handler_call_details.method
        metadata = handler_call_details.invocation_metadata
        rule = self._rules.get(method)
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                self._guard(handler.unary_unary, method, metadata, rule),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream is not None:
            if isinstance(rule, Narrowed):
                rule = None  # narrowing a stream is not supported: refuse rather than leak
            return grpc.unary_stream_rpc_method_handler(
                self._guard_stream(handler.unary_stream, method, metadata, rule),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        # Streamed requests cannot be signed up front; no Silt API has them. Fail closed.
        return _refuse(handler, f"{method}: streamed requests are not supported by the auth interceptor")

    def _enter(self, method: str, metadata: Sequence[Any], request: Any, rule: Rule | None, context: Any) -> Principal:
        try:
            return self._admit(method, metadata, request, rule)
        except SiltError as exc:
            if isinstance(exc, Unauthenticated):
                log.info("unauthenticated call to %s: %s", method, exc)
            context.abort(_status(exc), details_of(exc))
            raise  # abort raises; this keeps type checkers and readers sure nothing follows

    def _guard(self, behavior: Callable[[Any, Any], Any], method: str, metadata: Any, rule: Rule | None) -> Any:
        def handle(request: Any, context: grpc.ServicerContext) -> Any:
            principal = self._enter(method, metadata, request, rule, context)
            token = _principal.set(principal)
            try:
                if isinstance(rule, Narrowed):
                    return self._narrowed(rule, behavior, request, context, principal)
                return behavior(request, context)
            finally:
                _principal.reset(token)

        return handle

    def _narrowed(self, rule: Narrowed, behavior: Any, request: Any, context: Any, principal: Principal) -> Any:
        def may(action: str, resources: Sequence[str]) -> list[bool]:
            return self.authority.allowed_many(principal.user_id, action, resources)

        try:
            return rule.narrow(lambda r: behavior(r, context), request, may)
        except SiltError as exc:
            context.abort(_status(exc), details_of(exc))

    def _guard_stream(self, behavior: Callable[[Any, Any], Any], method: str, metadata: Any, rule: Rule | None) -> Any:
        def handle(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
            principal = self._enter(method, metadata, request, rule, context)
            token = _principal.set(principal)
            try:
                yield from behavior(request, context)
            finally:
                # A cancelled stream may be closed from another thread, i.e. another context.
                with contextlib.suppress(ValueError):
                    _principal.reset(token)

        return handle


def _refuse(handler: grpc.RpcMethodHandler, message: str) -> grpc.RpcMethodHandler:
    def refuse(_: Any, context: grpc.ServicerContext) -> Any:
        context.abort(grpc.StatusCode.PERMISSION_DENIED, message)

    factory = (
        grpc.stream_stream_rpc_method_handler if handler.response_streaming else grpc.stream_unary_rpc_method_handler
    )
    return factory(
        refuse, request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer
    )


def remote_interceptor(config: Config, rules: Mapping[str, Rule]) -> AuthInterceptor:
    """The interceptor for a service other than auth: asks auth at config.auth.endpoint,
    signing with config.credentials. Close it (``interceptor.close()``) on shutdown."""
    channel = signed_channel(config.auth.endpoint, Credentials.from_config(config))
    authority = CachedAuthority(RemoteAuthority(channel), ttl=config.auth.cache_ttl_seconds)
    return AuthInterceptor(authority, rules, max_skew_seconds=config.auth.max_clock_skew_seconds)
