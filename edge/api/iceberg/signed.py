"""SigV4-signed catalog requests: Iceberg's REST clients sign each request with an access key
and its secret (pyiceberg's and Iceberg Java's `rest.sigv4-enabled`) instead of exchanging them
for a token at /v1/oauth/tokens. The signature is checked by the gateway's SigV4 code
(edge/core/sigv4.py), with auth holding the secret (edge/core/sigv4_identity.py); the signer is
then the caller, authorized as a bearer token's user is.

What is accepted: an `Authorization: AWS4-HMAC-SHA256` header (no presigned URLs) whose
credential scope names the service `execute-api` (the clients' default signing name; the edge
hands `s3`-scoped requests to the S3 gateway) and a region the gateway accepts (its own,
us-east-1 or auto), dated within MAX_SKEW_SECONDS of the clock, over the path encoded twice as
AWS signs for services other than S3, and over the body: its SHA-256 is what the signature
covers, whether the client sends it as x-amz-content-sha256 (which must then match the body)
or leaves it out, as botocore's SigV4 does (_payload_hash). Every failure is the spec's 401 (503 while auth
cannot be reached).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl

from fastapi import Request

from edge.api.backend import Caller
from edge.api.context import authenticate, backend_of
from edge.api.iceberg.errors import IcebergError
from edge.core import sigv4
from edge.core.s3_errors import S3Error
from silt.access_keys import is_access_key_id

# As S3's: how far a request's X-Amz-Date may be from our clock, either way. A captured request
# can be replayed within this window only, and only as itself (its body and path are signed).
MAX_SKEW_SECONDS = 15 * 60
# A catalog request is metadata: schemas, snapshots and properties, never data.
MAX_BODY_BYTES = 16 * 1024 * 1024
# The scope key where RelativeForm keeps the path as the client sent (and signed) it.
SIGNED_PATH = "silt.iceberg.signed_path"
PAYLOAD_HEADER = "x-amz-content-sha256"
# Headers read as one value: sent twice, their joined value is what neither copy says.
_SINGLE_VALUED = frozenset(("authorization", "host", "x-amz-date", "date", "x-amz-content-sha256", "content-length"))


def _unauthorized(message: str) -> IcebergError:
    return IcebergError(401, message, "NotAuthorizedException")


async def read_body(request: Request) -> bytes:
    """The request's body, refused past MAX_BODY_BYTES as it arrives, read once: what a
    signed request's dependency read, its route reads again from request.state."""
    kept: bytes | None = getattr(request.state, "body", None)
    if kept is not None:
        return kept
    data = bytearray()
    async for chunk in request.stream():
        data += chunk
        if len(data) > MAX_BODY_BYTES:
            raise IcebergError(413, f"the body is larger than {MAX_BODY_BYTES} bytes", "BadRequestException")
    request.state.body = bytes(data)
    return request.state.body


def _headers(scope: Mapping[str, Any]) -> dict[str, str]:
    """Lower-case names to values (latin-1, one char per byte, as the gateway reads them);
    repeated headers joined with "," as a signer would have seen them, refused where they must
    be single."""
    headers: dict[str, str] = {}
    for raw_name, raw_value in scope.get("headers", ()):
        name, value = raw_name.decode("latin-1").lower(), raw_value.decode("latin-1")
        if name in headers:
            if name in _SINGLE_VALUED:
                raise _unauthorized(f"the {name} header may be sent only once")
            value = f"{headers[name]},{value}"
        headers[name] = value
    return headers


def signed_request(scope: Mapping[str, Any]) -> sigv4.SignedRequest:
    raw = scope.get(SIGNED_PATH) or scope.get("raw_path") or scope["path"].encode()
    query = scope.get("query_string", b"").decode("latin-1")
    return sigv4.SignedRequest(
        method=scope["method"],
        raw_path=raw.decode("latin-1").split("?", 1)[0],
        # Decoded as Iceberg's clients decode their URL's query before signing it.
        query=parse_qsl(query, keep_blank_values=True),
        headers=_headers(scope),
    )


def _payload_hash(sent: str | None, body: bytes) -> str:
    """What the canonical request ends with: the body's SHA-256 in hex. A client may also send
    it as x-amz-content-sha256, which must then be the body's: in hex (botocore's and the
    AWS SDKs' form, and the one signed as sent), or in base64 (Iceberg Java's signer, the AWS
    SDK v2 with a SHA-256 checksum, sends that and signs the hex form). A keyword
    (UNSIGNED-PAYLOAD, streaming) or another body's hash is refused: the body must be signed."""
    digest = hashlib.sha256(body).digest()
    if sent is None or sent == base64.b64encode(digest).decode():
        return digest.hex()
    if sent.lower() == digest.hex():
        return sent
    raise S3Error("XAmzContentSHA256Mismatch", "x-amz-content-sha256 must be the SHA-256 of the body")


async def verify(request: Request) -> Caller:
    """The signer of a SigV4-signed catalog request; the spec's 401 if it proves nothing."""
    backend = backend_of(request)
    signed = signed_request(request.scope)
    try:
        # The claim's scope, date and key id are checked before the body is read: a stale or
        # foreign request costs no body. Its payload hash is settled once the body is read.
        sent_hash = signed.headers.get(PAYLOAD_HEADER)
        unsent = {name: value for name, value in signed.headers.items() if name != PAYLOAD_HEADER}
        claim = sigv4.parse_header(replace(signed, headers=unsent), sigv4.EMPTY_SHA256)
        if not is_access_key_id(claim.access_key_id):
            raise S3Error("InvalidAccessKeyId")
        sigv4.check_claim(claim, backend.region, datetime.now(UTC), MAX_SKEW_SECONDS, sigv4.CATALOG_SERVICE)
        claim = replace(claim, payload_hash=_payload_hash(sent_hash, await read_body(request)))
        strings = sigv4.strings_to_sign(signed, claim, [sigv4.double_encoded_path(signed.raw_path)])
        identity = await backend.signers.verify_v4(claim, strings, sigv4.CATALOG_SERVICE)
    except S3Error as exc:
        if exc.status == 503:
            raise IcebergError(503, exc.message, "ServiceUnavailableException") from None
        raise _unauthorized(f"{exc.code}: {exc.message}") from None
    return Caller(identity.user_id, 0, claim.access_key_id)


async def authenticate_catalog(request: Request) -> Caller:
    """The caller of a catalog request: SigV4-signed, or as the REST API authenticates (a
    token as Bearer, Basic, the session cookie)."""
    if request.headers.get("authorization", "").startswith(sigv4.ALGORITHM):
        return await verify(request)
    return await authenticate(request)
