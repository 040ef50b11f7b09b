"""Who signed an AWS-signed request, without the edge ever holding a secret.

The S3 gateway (and, for SigV4 scoped to `execute-api`, the Iceberg catalog) parses the request
and builds the strings to sign (edge/gateway/sigv2.py, edge/core/sigv4.py); auth checks the
signature with the secret (VerifyS3Signature, services/auth/signatures.py).

* **SigV4**: auth's answer carries the signing key of the request's credential scope (date,
  region, service). It is cached per (access key id, scope) for ``auth.cache_ttl_seconds``:
  later requests of that key and scope are checked here, with one HMAC, and aws-chunked
  bodies are checked chunk by chunk with it. One call to auth per key and scope per TTL.
* **SigV2** signs with the secret itself, so every SigV2 request is checked by auth.

An access key id that auth could not have issued is refused (InvalidAccessKeyId) before
anything is asked or cached, and unknown ids are cached apart from known keys
(silt/rpc/authority.py KeyCache), so made-up ids cost auth nothing and push nothing out.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

import grpc
import grpc.aio

from edge.core import sigv4
from edge.core.s3_errors import S3Error
from silt.access_keys import is_access_key_id
from silt.auth.v1 import auth_pb2, auth_pb2_grpc
from silt.errors import InvalidArgument, NotFound
from silt.rpc.authority import AUTH_CALL_TIMEOUT_SECONDS, Clock, KeyCache, auth_failure, retry_unavailable

_DAY_RE = re.compile(r"[0-9]{8}")


@dataclass(frozen=True)
class V4Identity:
    """Who holds the key of a V4 request, and the signing key of its scope (never shown)."""

    user_id: str
    key: bytes = field(repr=False)


class S3Identities:
    def __init__(
        self, channel: grpc.aio.Channel, ttl: float, clock: Clock = time.monotonic, timeout: float = 0.0
    ) -> None:
        self._stub = auth_pb2_grpc.AuthServiceStub(channel)
        self._timeout = timeout or AUTH_CALL_TIMEOUT_SECONDS
        self.keys: KeyCache[tuple[str, str, str], V4Identity] = KeyCache(ttl, clock)

    async def verify_v4(self, claim: sigv4.V4Request, strings: list[bytes], service: str = sigv4.SERVICE) -> V4Identity:
        """The signer of a V4 request whose time and scope were checked (sigv4.check_claim),
        for the service its front end serves (`s3`, or the catalog's `execute-api`)."""
        _check_key_id(claim.access_key_id)
        sigv4.check_service(claim, service)  # (checked with the claim already; the key cache relies on it)
        if not _DAY_RE.fullmatch(claim.date):
            raise S3Error("AuthorizationHeaderMalformed", f"malformed credential scope {claim.scope[:80]!r}")
        scope = (claim.date, claim.region, claim.service)
        cached = self._cached(claim.access_key_id, scope)
        if cached is not None:
            # The key of a (key id, scope) never changes: a mismatch needs no second opinion.
            if sigv4.signature_matches(cached.key, strings, claim.signature):
                return cached
            raise S3Error("SignatureDoesNotMatch")
        request = auth_pb2.VerifyS3SignatureRequest(
            access_key_id=claim.access_key_id,
            version=auth_pb2.S3_SIGNATURE_VERSION_V4,
            strings_to_sign=strings,
            signature=claim.signature.encode("utf-8", "surrogatepass"),
            date=claim.date,
            region=claim.region,
            service=claim.service,
        )
        reply = await self._ask(request)
        identity = V4Identity(reply.user_id, reply.signing_key)
        self.keys.put(claim.access_key_id, scope, identity)
        return identity

    async def verify_v2(self, access_key_id: str, signature: str, strings: list[bytes]) -> str:
        """The user who signed a V2 request whose time was checked (sigv2.check_claim)."""
        _check_key_id(access_key_id)
        try:
            self.keys.check_known(access_key_id)  # a key known to be unknown costs auth nothing
        except NotFound:
            raise S3Error("InvalidAccessKeyId") from None
        request = auth_pb2.VerifyS3SignatureRequest(
            access_key_id=access_key_id,
            version=auth_pb2.S3_SIGNATURE_VERSION_V2,
            strings_to_sign=strings,
            signature=signature.encode("utf-8", "surrogatepass"),
        )
        return str((await self._ask(request)).user_id)

    def _cached(self, access_key_id: str, scope: tuple[str, str, str]) -> V4Identity | None:
        try:
            return self.keys.get(access_key_id, scope)
        except NotFound:
            raise S3Error("InvalidAccessKeyId") from None

    async def _ask(self, request: auth_pb2.VerifyS3SignatureRequest) -> auth_pb2.VerifyS3SignatureResponse:
        try:
            reply = await retry_unavailable(lambda: self._stub.VerifyS3Signature(request, timeout=self._timeout))
        except grpc.aio.AioRpcError as exc:
            error = auth_failure(exc, "verify a signature", request.access_key_id)
            if isinstance(error, NotFound):
                self.keys.put_unknown(request.access_key_id, str(error))
                raise S3Error("InvalidAccessKeyId") from None
            if isinstance(error, InvalidArgument):
                # What auth refuses to check (a scope too old, an oversized string) is the
                # request's fault, not a sign that auth is down.
                raise S3Error("AccessDenied", str(error)) from None
            raise S3Error("ServiceUnavailable", f"auth: {error}") from None
        if not reply.valid:
            raise S3Error("SignatureDoesNotMatch")
        return reply

    def forget(self) -> None:
        self.keys.clear()


def _check_key_id(access_key_id: str) -> None:
    if not is_access_key_id(access_key_id):
        raise S3Error("InvalidAccessKeyId")
