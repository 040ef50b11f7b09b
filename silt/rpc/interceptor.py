"""Authentication and authorization of every gRPC call, shared by all Silt services: the
server interceptor and the rules it enforces. Design: docs/design/auth.md.

Every method of a service has a ``Rule`` (a table per service, e.g.
services/graveler/permissions.py); a method without one is refused, so nothing is open
by default. A rule names the action and how to find the resource in the request, or lets
any authenticated caller in and narrows the response to what the caller may see.
The caller proves who it is by signing the call (silt/rpc/signing.py); what it may do comes
from auth through a cached ``Authority`` (silt/rpc/authority.py).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hmac
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import grpc
from google.protobuf.message import Message

from silt.access_keys import is_access_key_id
from silt.errors import InvalidArgument, NotFound, PermissionDenied, SiltError, Unauthenticated
from silt.grpc_handlers import HandlerInterceptor, in_scope, refusal, within, wrapped
from silt.iam_actions import MAX_RESOURCE_LENGTH
from silt.names import validate_repository_name
from silt.rpc.authority import CachedAuthority, Clock, RemoteAuthority
from silt.rpc.channels import client_tls
from silt.rpc.errors import abort
from silt.rpc.replay import ReplayCache
from silt.rpc.signing import (
    ACCESS_KEY_HEADER,
    AUTH_AUDIENCE,
    DATE_HEADER,
    NONCE_HEADER,
    RECONNECT_SOON,
    REQUIRED_HEADERS,
    SCOPE_HEADER,
    SIGNATURE_HEADER,
    SIGNED_HEADERS,
    Credentials,
    acting_user_of,
    client_ip_of,
    day_of,
    is_nonce,
    is_signature,
    payload_digest,
    sign,
    signed_channel,
)
from silt.source_address import canonical, grpc_peer_address

if TYPE_CHECKING:
    from silt.config import Config

log = logging.getLogger(__name__)

DEFAULT_MAX_SKEW_SECONDS = 300.0

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


def repository_field(name: str) -> Callable[[Any], str]:
    """A resource function reading a repository name, refusing names no repository can have."""

    def read(request: Any) -> str:
        return validate_repository_name(str(getattr(request, name)))

    read.__name__ = f"repository_{name}"
    return read


def check_resource_length(resource: str) -> str:
    if len(resource) > MAX_RESOURCE_LENGTH:
        raise InvalidArgument(
            f"resource {resource[:64]!r}... is {len(resource)} characters; at most {MAX_RESOURCE_LENGTH} are allowed"
        )
    return resource


# --- the interceptor ---------------------------------------------------------------------


class SignatureHeaders(NamedTuple):
    access_key_id: str
    date: str
    seconds: int
    day: str
    scope: str
    nonce: str
    signature: str


@dataclass(frozen=True)
class Principal:
    user_id: str
    access_key_id: str
    # Where the call came from, for policy conditions (silt/source_address.py; "" unknown): the
    # gRPC peer's address, or, for a user another service acts for, the client address it reported.
    source_ip: str = ""
    # The client address the caller reported for the user it makes the call for (signed header
    # x-silt-client-ip; "" without one). Believed only for a user the caller may act for.
    reported_ip: str = ""


_principal: contextvars.ContextVar[Principal | None] = contextvars.ContextVar("silt_principal", default=None)


def current_principal() -> Principal:
    """The authenticated caller of the call being handled."""
    principal = _principal.get()
    if principal is None:
        raise Unauthenticated("no authenticated caller: the service runs without AuthInterceptor")
    return principal


def _peer_ip(context: Any) -> str:
    """The calling peer's address ("" for a Unix socket, or a context that names no peer)."""
    peer = getattr(context, "peer", None)
    return grpc_peer_address(peer()) if callable(peer) else ""


class AuthInterceptor(HandlerInterceptor):
    """Authenticates and authorizes every call before its handler runs."""

    def __init__(
        self,
        authority: CachedAuthority,
        rules: Mapping[str, Rule],
        max_skew_seconds: float = DEFAULT_MAX_SKEW_SECONDS,
        clock: Callable[[], float] = time.time,
        *,
        audience: str,
    ) -> None:
        """audience: this service's name (silt/rpc/signing.py), which every call to it must be signed for."""
        self.authority = authority
        self.audience = audience
        self._rules = dict(rules)
        self._max_skew = max_skew_seconds
        self._clock = clock
        self.replays = ReplayCache(max_skew_seconds, clock=clock)

    def close(self) -> None:
        self.authority.close()

    # -- admission

    def check_headers(self, metadata: Sequence[Any]) -> SignatureHeaders:
        """A call's signature headers, if they could belong to a valid signed call: present, of
        the right shape, dated within the skew, scoped to that day and this service.
        Unauthenticated otherwise.

        It uses nothing but the headers and the clock, so admission (silt/rpc/limits.py) runs it
        on gRPC's polling thread before the request is read: such a call never waits."""
        headers = {m.key: m.value for m in metadata or () if m.key in SIGNED_HEADERS}
        missing = [name for name in REQUIRED_HEADERS if not headers.get(name)]
        if missing:
            raise Unauthenticated(
                f"missing credentials ({', '.join(missing)}): sign calls with an access key "
                "(see silt.rpc.signing.signed_channel)"
            )
        names = (ACCESS_KEY_HEADER, DATE_HEADER, SCOPE_HEADER, NONCE_HEADER, SIGNATURE_HEADER)
        key_id, date, scope, nonce, signature = (str(headers[name]) for name in names)
        # The shape of everything the caller sent is checked before anything is looked up,
        # asked of auth or remembered: a made-up key id of any size costs nothing.
        if not is_access_key_id(key_id):
            raise Unauthenticated(f"malformed access key id {key_id[:32]!r}: 20 upper-case letters and digits")
        if not (date.isascii() and date.isdigit() and len(date) <= 12):
            raise Unauthenticated(f"{DATE_HEADER} must be whole seconds since the epoch")
        seconds = int(date)
        skew = abs(self._clock() - seconds)
        if skew > self._max_skew:
            raise Unauthenticated(
                f"request date is {skew:.0f} s away from the server's clock (at most {self._max_skew:.0f} s allowed)"
            )
        day = day_of(seconds)
        if scope != f"{day}/{self.audience}":
            raise Unauthenticated(
                f"{SCOPE_HEADER} {scope[:40]!r} is not {day}/{self.audience}: calls to the {self.audience} "
                "service are signed for it, on the day of their date"
            )
        if not is_nonce(nonce):
            raise Unauthenticated(f"{NONCE_HEADER} must be 32 lower-case hex digits")
        if not is_signature(signature):
            raise Unauthenticated(f"{SIGNATURE_HEADER} must be 64 lower-case hex digits")
        return SignatureHeaders(key_id, date, seconds, day, scope, nonce, signature)

    def _authenticate(self, method: str, metadata: Sequence[Any], request: Message, peer_ip: str = "") -> Principal:
        """peer_ip: the gRPC peer's address ("" unknown), the principal's source for conditions."""
        key_id, date, seconds, day, scope, nonce, signature = self.check_headers(metadata)
        try:
            key = self.authority.call_key(key_id, day, self.audience)
        except (NotFound, InvalidArgument):
            raise Unauthenticated(f"unknown access key id {key_id!r}") from None
        acting = acting_user_of(metadata)
        client_ip = client_ip_of(metadata)
        expected = sign(key.key, date, scope, nonce, method, key_id, payload_digest(request), acting, client_ip)
        if not hmac.compare_digest(expected.encode(), signature.encode()):
            raise Unauthenticated(f"signature does not match for access key {key_id}: wrong secret?")
        # Only a call whose signature holds is remembered, under its own key: the cache holds
        # issued keys only, and a key that floods it locks out only itself (silt/rpc/replay.py).
        if not self.replays.admit(key_id, nonce, seconds):
            raise Unauthenticated(f"replayed call: access key {key_id} already made a call with this nonce")
        return Principal(key.user_id, key_id, source_ip=peer_ip, reported_ip=canonical(client_ip))

    def _authorize(self, rule: Rule | None, method: str, principal: Principal, request: Any) -> None:
        if rule is None:
            raise PermissionDenied(f"{method} has no permission rule, so nobody may call it")
        if not isinstance(rule, Require):
            return
        if rule.unless_self is not None and rule.unless_self(request) in ("", principal.user_id):
            return
        # Every resource is checked before auth is asked about any: the request's fields are the
        # caller's, and a name no service accepts must cost auth nothing (InvalidArgument).
        found = rule.resource(request)
        resources = (found,) if isinstance(found, str) else found
        for resource in resources:
            check_resource_length(resource)
        for resource in resources:
            if not self.authority.allowed(principal.user_id, rule.action, resource, principal.source_ip):
                raise PermissionDenied(f"user {principal.user_id!r} may not {rule.action} on {resource!r}")

    def _admit(
        self, method: str, metadata: Sequence[Any], request: Any, rule: Rule | None, peer_ip: str = ""
    ) -> Principal:
        principal = self._authenticate(method, metadata, request, peer_ip)
        try:
            self._authorize(rule, method, principal, request)
        except PermissionDenied as exc:
            log.info("denied %s: %s", method, exc)
            raise
        return principal

    # -- wrapping handlers

    def wrap(self, handler: grpc.RpcMethodHandler, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        method, metadata = details.method, details.invocation_metadata
        if handler.request_streaming:
            # Streamed requests cannot be signed up front; no Silt API has them. Fail closed.
            message = f"{method}: streamed requests are not supported by the auth interceptor"
            return refusal(handler, grpc.StatusCode.PERMISSION_DENIED, message)
        rule = self._rules.get(method)
        if handler.response_streaming and isinstance(rule, Narrowed):
            rule = None  # narrowing a stream is not supported: refuse rather than leak
        admitted = functools.partial(self._admitted, method, metadata, rule)
        if isinstance(rule, Narrowed):
            narrowed = functools.partial(self._narrowed, rule)
            return wrapped(handler, lambda behavior: in_scope(functools.partial(narrowed, behavior), admitted))
        return within(handler, admitted)

    def _enter(self, method: str, metadata: Sequence[Any], request: Any, rule: Rule | None, context: Any) -> Principal:
        try:
            return self._admit(method, metadata, request, rule, _peer_ip(context))
        except SiltError as exc:
            if isinstance(exc, Unauthenticated):
                log.info("unauthenticated call to %s: %s", method, exc)
            abort(context, exc)

    @contextlib.contextmanager
    def _admitted(
        self, method: str, metadata: Sequence[Any], rule: Rule | None, request: Any, context: Any
    ) -> Iterator[None]:
        """A call's scope: admitted on entry (ended with its status otherwise), its caller the
        current principal until it ends."""
        token = _principal.set(self._enter(method, metadata, request, rule, context))
        try:
            yield
        finally:
            # A cancelled stream may be closed from another thread, i.e. another context.
            with contextlib.suppress(ValueError):
                _principal.reset(token)

    def _narrowed(self, rule: Narrowed, behavior: Any, request: Any, context: Any) -> Any:
        principal = current_principal()

        def may(action: str, resources: Sequence[str]) -> list[bool]:
            return self.authority.allowed_many(principal.user_id, action, resources, principal.source_ip)

        try:
            return rule.narrow(lambda r: behavior(r, context), request, may)
        except SiltError as exc:
            abort(context, exc)


def remote_interceptor(
    config: Config, rules: Mapping[str, Rule], audience: str, cache_clock: Clock = time.monotonic
) -> AuthInterceptor:
    """The interceptor for the service `audience`, other than auth: asks auth at
    config.auth.endpoint, signing with config.credentials, for the signing keys of calls to
    `audience`. Close it (``interceptor.close()``) on shutdown."""
    credentials = Credentials.from_config(config)
    channel = signed_channel(
        config.auth.endpoint, credentials, RECONNECT_SOON, tls=client_tls(config.tls), audience=AUTH_AUDIENCE
    )
    authority = CachedAuthority(RemoteAuthority(channel), ttl=config.auth.cache_ttl_seconds, clock=cache_clock)
    return AuthInterceptor(authority, rules, max_skew_seconds=config.auth.max_clock_skew_seconds, audience=audience)
