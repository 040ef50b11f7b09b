"""Signing every gRPC call with an access key, on the client side; the server checks it
(silt/rpc/interceptor.py). Design: docs/design/auth.md, "Signed calls between services".

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

Secrets are ``SecretStr`` throughout: no repr, log line or error message shows them.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import grpc
import grpc.aio
from google.protobuf.message import Message
from pydantic import SecretStr

from silt.errors import ConfigError
from silt.telemetry.requestid import METADATA_KEY as REQUEST_ID_HEADER
from silt.telemetry.requestid import current as current_request_id

if TYPE_CHECKING:
    from silt.config import Config

ACCESS_KEY_HEADER = "x-silt-access-key-id"
DATE_HEADER = "x-silt-date"
SIGNATURE_HEADER = "x-silt-signature"
ALGORITHM = "SILT-HMAC-SHA256"
SIGNED_HEADERS = frozenset((ACCESS_KEY_HEADER, DATE_HEADER, SIGNATURE_HEADER, REQUEST_ID_HEADER))


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
    metadata: Sequence[tuple[str, str | bytes]]
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
        metadata: list[tuple[str, str | bytes]] = [
            (k, v) for k, v in (details.metadata or ()) if k not in SIGNED_HEADERS
        ]
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


def signed_aio_channel(
    target: str, credentials: Credentials, options: Sequence[tuple[str, Any]] = ()
) -> grpc.aio.Channel:
    """A grpc.aio channel to target whose every call is signed with credentials."""
    from silt.telemetry.rpc import aio_client_interceptors

    return grpc.aio.insecure_channel(
        target, options=list(options), interceptors=[*aio_client_interceptors(), AioSigningInterceptor(credentials)]
    )
