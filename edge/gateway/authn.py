"""Who sent an S3 request: SigV2 or SigV4 (header or presigned), checked by auth with the secret
(SigV4 with the scope's signing key auth returned before: identity.py)."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from edge.core import sigv4
from edge.gateway import sigv2
from edge.gateway.errors import S3Error
from edge.gateway.operations.common import Context
from edge.gateway.request import Request
from silt.access_keys import is_access_key_id

# S3's limit on the difference between the request's clock and ours.
MAX_SKEW_SECONDS = 15 * 60

# Headers read as one value: who signed (and how), the time and payload hash the signature
# covers, which bucket is named, how long the body is and what it is checked against, what a
# copy reads. Sent twice, their values would be joined into one that neither copy says, and a
# proxy in front that kept only the first would disagree with the gateway about what was
# signed, which bucket is meant, or where the body ends.
SINGLE_VALUED_HEADERS = frozenset(
    (
        "authorization",
        "host",
        "date",
        "x-amz-date",
        "x-amz-content-sha256",
        "x-amz-decoded-content-length",
        "x-amz-security-token",
        "content-length",
        "content-md5",
        "x-amz-copy-source",
        "x-amz-copy-source-range",
        "range",
    )
)
ONE_MECHANISM_MESSAGE = (
    "Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter, Signature query string "
    "parameter or the Authorization header should be specified"
)
_V4_QUERY = ("X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Signature")
_V2_QUERY = ("AWSAccessKeyId", "Signature")


def check_unambiguous(request: Request) -> None:
    """Refuse a request that names its credentials, or a value they cover, more than once.

    Each way of signing is read on its own (the header, V4 query, V2 query), so a second one
    next to it would be ignored: whatever it says must not ride along on the first's signature.
    """
    if "authorization" in request.repeated:
        raise S3Error("InvalidArgument", "Only one Authorization header is allowed", ArgumentName="Authorization")
    repeated = sorted(request.repeated & SINGLE_VALUED_HEADERS)
    if repeated:
        raise S3Error("InvalidArgument", f"The {repeated[0]} header may be sent only once", ArgumentName=repeated[0])
    mechanisms = (
        ("authorization" in request.headers)
        + any(request.has(name) for name in _V4_QUERY)
        + any(request.has(name) for name in _V2_QUERY)
    )
    if mechanisms > 1:
        raise S3Error("InvalidArgument", ONE_MECHANISM_MESSAGE, ArgumentName="Authorization")
    for name in (*_V4_QUERY, *_V2_QUERY, "X-Amz-Date", "X-Amz-Expires", "X-Amz-SignedHeaders", "Expires"):
        if sum(key == name for key, _ in request.query) > 1:
            raise S3Error("InvalidArgument", f"The {name} query parameter may be given only once", ArgumentName=name)


async def authenticate(ctx: Context) -> None:
    """Set ctx.user_id, or raise the S3 error for a request that does not prove its sender."""
    request = ctx.request
    header = request.headers.get("authorization", "")
    if header.startswith(sigv4.ALGORITHM):
        claim4 = sigv4.parse_header(request)
    elif header.startswith("AWS "):
        _require_sigv2(ctx)
        claim2 = sigv2.parse_header(request)
        await _v2(ctx, claim2)
        return
    elif request.has("X-Amz-Algorithm"):
        claim4 = sigv4.parse_query(request)
    elif request.has("AWSAccessKeyId") and request.has("Signature"):
        _require_sigv2(ctx)
        await _v2(ctx, sigv2.parse_query(request))
        return
    else:
        raise S3Error("AccessDenied", "anonymous requests are not allowed: sign requests with an access key")
    _check_key_id(claim4.access_key_id)
    sigv4.check_claim(claim4, ctx.config.region, datetime.now(UTC), MAX_SKEW_SECONDS)
    identity = await ctx.backend.identities.verify_v4(claim4, sigv4.strings_to_sign(request, claim4))
    ctx.user_id, ctx.access_key_id = identity.user_id, claim4.access_key_id
    ctx.v4 = (identity.key, claim4)


def _require_sigv2(ctx: Context) -> None:
    if not ctx.config.sigv2_enabled:
        raise S3Error("InvalidRequest", sigv2.V2_DISABLED_MESSAGE)


async def _v2(ctx: Context, claim: sigv2.V2Request) -> None:
    _check_key_id(claim.access_key_id)
    sigv2.check_claim(ctx.request, claim, time.time(), MAX_SKEW_SECONDS)
    strings = sigv2.strings_to_sign(ctx.request, claim)
    ctx.user_id = await ctx.backend.identities.verify_v2(claim.access_key_id, claim.signature, strings)
    ctx.access_key_id = claim.access_key_id


def _check_key_id(access_key_id: str) -> None:
    """A key id auth could not have issued is refused before anything else: it costs no
    lookup, no call to auth and no cache entry, whatever its size."""
    if not is_access_key_id(access_key_id):
        raise S3Error("InvalidAccessKeyId")
