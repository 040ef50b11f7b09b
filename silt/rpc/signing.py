"""Signing every gRPC call with an access key, on the client side; the server checks it
(silt/rpc/interceptor.py). Design: docs/design/auth.md, "Signed calls between services".

**Scheme: HMAC-signed calls under a derived, scoped key.** A caller holds an access key (id +
secret, issued by auth). It never signs with the secret itself but with a key derived from it
for one UTC day and one *audience*, the service called (``auth``, ``graveler``,
``compactor``; by default the ``silt.<audience>.v1`` package of the method)::

    signing key = HMAC-SHA256 chain over ("SILT2" + secret) of: day, audience, "silt2_request"

Five metadata entries go with each call:

    x-silt-access-key-id   AKIA...
    x-silt-date            the caller's clock, in whole seconds since the epoch
    x-silt-scope           <yyyymmdd of that date, UTC>/<audience>
    x-silt-nonce           32 hex digits, random for every call
    x-silt-signature       hex HMAC-SHA256(signing key, string-to-sign)

    string-to-sign = "SILT3-HMAC-SHA256" \\n date \\n scope \\n nonce \\n full method name \\n
                     access key id \\n hex SHA-256 of the request message, serialized deterministically \\n
                     "acting-user=" length ":" acting user \\n "client-ip=" length ":" client address

Both trailing fields are always there, "" (length 0) when the call carries no such header, and
each value is prefixed with its length in characters: no value of one field can be read as the
other's tag, or as a line of its own, so each pair of values has a string-to-sign of its own.

The acting-user header (an IAM call the REST API makes for the user it authenticated,
services/auth/acting.py) changes whose rights the call is judged by, so it is signed with the
call: nobody on the way can add it to, or change it in, a call signed without it. So is the
client-address header, the address of the HTTP client an edge makes a call for: policy
conditions on the source address (silt/policy_conditions.py) judge the user's call by it, and
it is believed only where the acting user is (the caller holds auth:ActForUser on that user).

The server gets the signing key of (key id, day, its own audience) from auth
(``GetCallSigningKey``; auth derives it itself), recomputes the signature, accepts the call
if it matches and the date is within ``auth.max_clock_skew_seconds`` of its own clock, and
refuses a (key id, nonce) it has seen before (silt/rpc/replay.py). So no service holds a
user's secret, and a service that leaks the keys it was given can forge calls only to itself.

Why not bearer tokens: a token is as good as a password until it expires, must be fetched
and refreshed by every client, and needs a signing key shared by all services. Signing
with the access key works the same for users and services.

Secrets are ``SecretValue`` throughout (silt/secret.py: the CLI's ``Secret`` or pydantic's
``SecretStr``): no repr, log line or error message shows them.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import re
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NamedTuple

import grpc
import grpc.aio
from google.protobuf.message import Message

from silt.errors import ConfigError
from silt.rpc.channels import ClientTLS, client_tls, open_aio_channel, open_channel
from silt.secret import SecretValue
from silt.telemetry.requestid import METADATA_KEY as REQUEST_ID_HEADER
from silt.telemetry.requestid import current as current_request_id

if TYPE_CHECKING:
    from silt.config import Config

ACCESS_KEY_HEADER = "x-silt-access-key-id"
DATE_HEADER = "x-silt-date"
SCOPE_HEADER = "x-silt-scope"
NONCE_HEADER = "x-silt-nonce"
SIGNATURE_HEADER = "x-silt-signature"
# What a signed call must carry; a server refuses a call without them before reading it.
REQUIRED_HEADERS = (ACCESS_KEY_HEADER, DATE_HEADER, SCOPE_HEADER, NONCE_HEADER, SIGNATURE_HEADER)
SIGNED_HEADERS = frozenset((*REQUIRED_HEADERS, REQUEST_ID_HEADER))
# The user an IAM call is made for; part of the signature when present.
ACTING_USER_HEADER = "x-silt-acting-user"
# The address of the client a call is made for (silt/source_address.py); signed when present.
CLIENT_IP_HEADER = "x-silt-client-ip"
ALGORITHM = "SILT3-HMAC-SHA256"
NONCE_BYTES = 16

# The services that verify signed calls, each for calls to itself.
AUTH_AUDIENCE = "auth"
GRAVELER_AUDIENCE = "graveler"
COMPACTOR_AUDIENCE = "compactor"
AUDIENCES = (AUTH_AUDIENCE, GRAVELER_AUDIENCE, COMPACTOR_AUDIENCE)
_AUDIENCE_RE = re.compile(r"[a-z][a-z0-9-]{0,31}")
_DAY_RE = re.compile(r"[0-9]{8}")
_NONCE_RE = re.compile(f"[0-9a-f]{{{2 * NONCE_BYTES}}}")
_SIGNATURE_RE = re.compile("[0-9a-f]{64}")


@dataclass(frozen=True)
class Credentials:
    """An access key as a caller holds it. The repr shows the id only."""

    access_key_id: str
    secret_access_key: SecretValue

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


def is_audience(value: str) -> bool:
    return _AUDIENCE_RE.fullmatch(value) is not None


def is_day(value: str) -> bool:
    return _DAY_RE.fullmatch(value) is not None


def is_nonce(value: str) -> bool:
    return _NONCE_RE.fullmatch(value) is not None


def is_signature(value: str) -> bool:
    """A hex HMAC-SHA256, as sign() writes it."""
    return _SIGNATURE_RE.fullmatch(value) is not None


def day_of(date: int) -> str:
    """The UTC day (yyyymmdd) of a call's date (seconds since the epoch)."""
    return _day_name(date // 86_400)


@functools.lru_cache(maxsize=8)
def _day_name(day_number: int) -> str:
    # Every signed call and every check asks for the day of its date, and all of them fall on
    # a handful of days: formatting a datetime each time was a visible share of a call's cost.
    return datetime.fromtimestamp(day_number * 86_400, UTC).strftime("%Y%m%d")


def audience_of(method: str) -> str:
    """The audience of a call to a Silt service: <audience> of /silt.<audience>.v1.Service/Method."""
    package = method.lstrip("/").split("/", 1)[0].split(".")
    if len(package) < 3 or package[0] != "silt" or not is_audience(package[1]):
        raise ValueError(f"{method!r} is not a method of a Silt service: pass the audience to sign it")
    return package[1]


def derive_call_key(secret: SecretValue, day: str, audience: str) -> bytes:
    """The key that signs calls with this secret on day (yyyymmdd, UTC) to audience.

    The same construction as SigV4's signing key, under another prefix and terminator, so
    that no SigV4 key is ever a call key or the reverse. Knowing it reveals neither the
    secret nor the key of any other day or audience."""
    key = ("SILT2" + secret.get_secret_value()).encode()
    for part in (day, audience, "silt2_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


def sign(
    key: bytes,
    date: str,
    scope: str,
    nonce: str,
    method: str,
    access_key_id: str,
    digest: str,
    acting: str = "",
    client_ip: str = "",
) -> str:
    parts = (
        ALGORITHM,
        date,
        scope,
        nonce,
        method,
        access_key_id,
        digest,
        f"acting-user={len(acting)}:{acting}",
        f"client-ip={len(client_ip)}:{client_ip}",
    )
    return hmac.new(key, "\n".join(parts).encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()


def _header_of(metadata: Sequence[Any] | None, name: str) -> str:
    values = [v.decode() if isinstance(v, bytes) else str(v) for k, v in (metadata or ()) if k == name]
    return ",".join(values)


def acting_user_of(metadata: Sequence[Any] | None) -> str:
    """The acting-user header's values as signed: joined by "," when repeated (auth refuses a
    repeated one anyway), "" when absent."""
    return _header_of(metadata, ACTING_USER_HEADER)


def client_ip_of(metadata: Sequence[Any] | None) -> str:
    """The client-address header's values as signed: joined by "," when repeated (which then
    names no address: unknown), "" when absent."""
    return _header_of(metadata, CLIENT_IP_HEADER)


class _CallDetails(NamedTuple):
    method: str
    timeout: float | None
    metadata: Sequence[tuple[str, str | bytes]]
    credentials: grpc.CallCredentials | None
    wait_for_ready: bool | None
    compression: grpc.Compression | None


class SigningInterceptor(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):
    """Client side: signs every call with the caller's access key."""

    def __init__(
        self, credentials: Credentials, clock: Callable[[], float] = time.time, audience: str | None = None
    ) -> None:
        self._credentials = credentials
        self._clock = clock
        self._audience = audience
        # (day, audience) -> signing key: a channel signs for one or two days at a time.
        self._keys: dict[tuple[str, str], bytes] = {}

    def _key(self, day: str, audience: str) -> bytes:
        key = self._keys.get((day, audience))
        if key is None:
            if len(self._keys) >= 8:
                self._keys.clear()
            key = self._keys[(day, audience)] = derive_call_key(self._credentials.secret_access_key, day, audience)
        return key

    def _signed(self, details: grpc.ClientCallDetails, request: Message) -> _CallDetails:
        method = details.method.decode() if isinstance(details.method, bytes) else details.method
        seconds = int(self._clock())
        date, day = str(seconds), day_of(seconds)
        audience = self._audience or audience_of(method)
        scope = f"{day}/{audience}"
        nonce = secrets.token_hex(NONCE_BYTES)
        key_id = self._credentials.access_key_id
        acting = acting_user_of(details.metadata)
        client_ip = client_ip_of(details.metadata)
        signature = sign(
            self._key(day, audience), date, scope, nonce, method, key_id, payload_digest(request), acting, client_ip
        )
        metadata: list[tuple[str, str | bytes]] = [
            (k, v) for k, v in (details.metadata or ()) if k not in SIGNED_HEADERS
        ]
        metadata += [
            (ACCESS_KEY_HEADER, key_id),
            (DATE_HEADER, date),
            (SCOPE_HEADER, scope),
            (NONCE_HEADER, nonce),
            (SIGNATURE_HEADER, signature),
        ]
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


def signed_channel(
    target: str,
    credentials: Credentials,
    options: Sequence[tuple[str, Any]] = (),
    tls: ClientTLS | None = None,
    *,
    audience: str | None = None,
) -> grpc.Channel:
    """A channel to target whose every call is signed with credentials; over TLS with tls.
    audience: the service at target (default: the package of each method called)."""
    from silt.telemetry.setup import tracing_enabled

    signer = SigningInterceptor(credentials, audience=audience)
    channel = grpc.intercept_channel(open_channel(target, tls, options), signer)
    if not tracing_enabled():  # the `silt` CLI: OpenTelemetry is not even imported
        return channel
    from silt.telemetry.rpc import traced_channel

    return traced_channel(channel)


def _as_bytes(method: str | bytes) -> bytes:
    return method.encode() if isinstance(method, str) else method


class AioSigningInterceptor(grpc.aio.UnaryUnaryClientInterceptor, grpc.aio.UnaryStreamClientInterceptor):
    """Client side for grpc.aio channels: the same signature as SigningInterceptor."""

    def __init__(
        self, credentials: Credentials, clock: Callable[[], float] = time.time, audience: str | None = None
    ) -> None:
        # Reuses the sync interceptor's signing so that both kinds of channel stay identical.
        self._signer = SigningInterceptor(credentials, clock, audience)

    def _signed(self, details: Any, request: Message) -> grpc.aio.ClientCallDetails:
        signed = self._signer._signed(details, request)
        # grpc.aio's call machinery wants the method as bytes (its stubs say str); the signature
        # covers it as text.
        return grpc.aio.ClientCallDetails(
            _as_bytes(details.method),  # type: ignore[arg-type]
            signed.timeout,
            grpc.aio.Metadata(*signed.metadata),
            signed.credentials,
            signed.wait_for_ready,
        )

    async def intercept_unary_unary(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        return await continuation(self._signed(client_call_details, request), request)

    async def intercept_unary_stream(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        return await continuation(self._signed(client_call_details, request), request)

    def for_streams(self) -> AioStreamSigningInterceptor:
        return AioStreamSigningInterceptor(self)


class AioStreamSigningInterceptor(grpc.aio.UnaryStreamClientInterceptor):
    """The same signature on server-streaming calls. grpc.aio files each interceptor under the
    first kind it implements only (unary-unary for AioSigningInterceptor), so streaming calls
    need an interceptor that is of that kind alone."""

    def __init__(self, signer: AioSigningInterceptor) -> None:
        self._signer = signer

    async def intercept_unary_stream(self, continuation: Any, client_call_details: Any, request: Any) -> Any:
        return await self._signer.intercept_unary_stream(continuation, client_call_details, request)


def signed_aio_channel(
    target: str,
    credentials: Credentials,
    options: Sequence[tuple[str, Any]] = (),
    tls: ClientTLS | None = None,
    *,
    audience: str | None = None,
) -> grpc.aio.Channel:
    """A grpc.aio channel to target whose every call is signed with credentials; over TLS with tls.
    audience: the service at target (default: the package of each method called)."""
    from silt.telemetry.rpc import aio_client_interceptors

    signer = AioSigningInterceptor(credentials, audience=audience)
    interceptors = [*aio_client_interceptors(), signer, signer.for_streams()]
    return open_aio_channel(target, tls, options, interceptors=interceptors)


# Reconnect soon after a service restarts instead of backing off for up to two minutes: calls
# keep coming while it is down (history events every 200 ms, health checks), and gRPC's default
# backoff grows with each failed connect, so a restarted auth would stay unreachable long after.
RECONNECT_SOON = (
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
)
_HTTP_FACING_OPTIONS = (("grpc.max_receive_message_length", 64 * 1024 * 1024), *RECONNECT_SOON)


class ServiceChannels(NamedTuple):
    auth: grpc.aio.Channel
    graveler: grpc.aio.Channel


def service_aio_channels(config: Config, credentials: Credentials) -> ServiceChannels:
    """The signed grpc.aio channels to auth and graveler of an HTTP-facing process (the S3
    gateway, the REST API), over TLS when config.tls says so; their owner closes them."""
    tls = client_tls(config.tls)
    return ServiceChannels(
        signed_aio_channel(config.auth.endpoint, credentials, _HTTP_FACING_OPTIONS, tls, audience=AUTH_AUDIENCE),
        signed_aio_channel(
            config.graveler.dial_address, credentials, _HTTP_FACING_OPTIONS, tls, audience=GRAVELER_AUDIENCE
        ),
    )
