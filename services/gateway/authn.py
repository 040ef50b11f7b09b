"""Who sent an S3 request: SigV2 or SigV4 (header or presigned), checked by auth with the secret
(SigV4 with the scope's signing key auth returned before: identity.py)."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from services.gateway import sigv2, sigv4
from services.gateway.errors import S3Error
from services.gateway.operations.common import Context
from silt.access_keys import is_access_key_id

# S3's limit on the difference between the request's clock and ours.
MAX_SKEW_SECONDS = 15 * 60


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
