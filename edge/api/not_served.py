"""lakeFS operations this API answers with 501 Not Implemented, and why: what a compatibility
page lists, and what routes/not_served.py answers (lakeFS's JSON error, the reason as message).

Each needs an identity provider Silt has no configuration for: logging in is checking an
identity with its provider, and answering as if it had been checked would let anyone in.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class NotServed:
    method: str
    path: str  # under /api/v1, as lakeFS's swagger names it
    reason: str


NOT_SERVED: dict[str, NotServed] = {
    "externalPrincipalLogin": NotServed(
        "POST",
        "/auth/external/principal/login",
        "not implemented: logging in as an external principal needs its provider to vouch for the identity "
        "(for AWS IAM, a presigned STS GetCallerIdentity request sent to AWS and its answer checked), and Silt "
        "has no external authenticator configured; link principals with "
        "/auth/users/{userId}/external/principals and sign in with an access key",
    ),
    "stsLogin": NotServed(
        "POST",
        "/sts/login",
        "not implemented: STS login exchanges an OIDC provider's code for a token, and Silt has no OIDC "
        "provider configured; sign in with an access key (/auth/login)",
    ),
    "oauthCallback": NotServed(
        "GET",
        "/oidc/callback",
        "not implemented: the OIDC callback completes a login started at an OIDC provider, and Silt has no "
        "OIDC provider configured; sign in with an access key (/auth/login)",
    ),
}
