"""Who sent an S3 request: SigV2 or SigV4 (header or presigned), with the secret from auth."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from services.gateway import sigv2, sigv4
from services.gateway.errors import S3Error
from services.gateway.operations.common import Context

# S3's limit on the difference between the request's clock and ours.
MAX_SKEW_SECONDS = 15 * 60


async def authenticate(ctx: Context) -> None:
    """Set ctx.user_id, or raise the S3 error for a request that does not prove its sender."""
    request = ctx.request
    header = request.headers.get("authorization", "")
    if header.startswith(sigv4.ALGORITHM):
        claim4 = sigv4.parse_header(request)
    elif header.startswith("AWS "):
        claim2 = sigv2.parse_header(request)
        await _v2(ctx, claim2)
        return
    elif request.has("X-Amz-Algorithm"):
        claim4 = sigv4.parse_query(request)
    elif request.has("AWSAccessKeyId") and request.has("Signature"):
        await _v2(ctx, sigv2.parse_query(request))
        return
    else:
        raise S3Error("AccessDenied", "anonymous requests are not allowed: sign requests with an access key")
    owner = await ctx.backend.key_owner(claim4.access_key_id)
    key = sigv4.verify(
        request,
        claim4,
        owner.secret.get_secret_value(),
        ctx.config.region,
        datetime.now(UTC),
        MAX_SKEW_SECONDS,
    )
    ctx.user_id, ctx.access_key_id = owner.user_id, claim4.access_key_id
    ctx.v4 = (key, claim4)


async def _v2(ctx: Context, claim: sigv2.V2Request) -> None:
    owner = await ctx.backend.key_owner(claim.access_key_id)
    sigv2.verify(ctx.request, claim, owner.secret.get_secret_value(), time.time(), MAX_SKEW_SECONDS)
    ctx.user_id, ctx.access_key_id = owner.user_id, claim.access_key_id
