"""AWS Signature Version 2 (S3's HMAC-SHA1 scheme): the Authorization header and presigned query strings."""

from __future__ import annotations

from dataclasses import dataclass

from edge.gateway.errors import S3Error
from edge.gateway.request import Request

# The sub-resources and response overrides that V2 signs (S3's documented list).
SUB_RESOURCES = frozenset(
    (
        "acl",
        "cors",
        "delete",
        "lifecycle",
        "location",
        "logging",
        "notification",
        "partNumber",
        "policy",
        "requestPayment",
        "response-cache-control",
        "response-content-disposition",
        "response-content-encoding",
        "response-content-language",
        "response-content-type",
        "response-expires",
        "restore",
        "tagging",
        "torrent",
        "uploadId",
        "uploads",
        "versionId",
        "versioning",
        "versions",
        "website",
    )
)


MAX_PRESIGNED_EXPIRY = 7 * 24 * 3600

# S3's answer to SigV2 where only SigV4 is accepted, and how an operator turns SigV2 back on.
V2_DISABLED_MESSAGE = (
    "The authorization mechanism you have provided is not supported. Please use AWS4-HMAC-SHA256. "
    "(SigV2 is disabled on this gateway: set gateways.s3.sigv2_enabled: true, or "
    "SILT_GATEWAYS_S3_SIGV2_ENABLED=true, to accept it.)"
)


@dataclass(frozen=True)
class V2Request:
    access_key_id: str
    signature: str
    presigned: bool
    expires: int = 0


def parse_header(request: Request) -> V2Request:
    credential = request.headers.get("authorization", "")[4:]
    key, sep, signature = credential.rpartition(":")
    if not sep or not key:
        raise S3Error("InvalidArgument", "malformed AWS Authorization header")
    return V2Request(key.strip(), signature.strip(), presigned=False)


def parse_query(request: Request) -> V2Request:
    try:
        expires = int(request.arg("Expires") or "")
    except ValueError:
        raise S3Error("AccessDenied", "a V2 presigned URL needs a numeric Expires") from None
    return V2Request(request.arg("AWSAccessKeyId") or "", request.arg("Signature") or "", True, expires)


def string_to_sign(request: Request, claim: V2Request, empty_date: bool, resource: str) -> str:
    headers = request.headers
    amz = sorted((k, v) for k, v in headers.items() if k.startswith("x-amz-"))
    amz_lines = "".join(f"{k}:{v.strip()}\n" for k, v in amz)
    # Presigned URLs sign their expiry time where headers sign the date.
    date = str(claim.expires) if claim.presigned else "" if empty_date else headers.get("date", "")
    subs = sorted((k, v) for k, v in request.query if k in SUB_RESOURCES)
    if subs:
        resource += "?" + "&".join(f"{k}={v}" if v else k for k, v in subs)
    return "\n".join(
        (request.method, headers.get("content-md5", ""), headers.get("content-type", ""), date, amz_lines + resource)
    )


def check_claim(request: Request, claim: V2Request, now: float, max_skew: float) -> None:
    """What a claim must satisfy before its signature is worth checking: its time."""
    if claim.presigned:
        if now > claim.expires:
            raise S3Error("AccessDenied", "Request has expired")
        # A V2 URL carries only its end, not when it was signed: without this cap a URL could
        # be made to last for ever. A week, as SigV4's X-Amz-Expires allows.
        if claim.expires - now > MAX_PRESIGNED_EXPIRY:
            raise S3Error("AccessDenied", "a presigned URL may expire at most 7 days (604800 seconds) from now")
    else:
        _check_date(request, now, max_skew)


def strings_to_sign(request: Request, claim: V2Request) -> list[bytes]:
    """The strings to sign (at most 4) the request may have been signed over, as bytes. SigV2
    signs with the secret itself, so auth computes the HMAC (edge/core/sigv4_identity.py)."""
    resource = "/" + request.bucket + request.raw_path if request.virtual_host else request.raw_path
    resources = [resource]
    if request.bucket and not request.path:
        # A bucket is signed as "/bucket" by some clients and "/bucket/" by others (botocore).
        resources.append(resource.rstrip("/") if resource.endswith("/") else resource + "/")
    # Clients disagree on whether the Date line is empty when x-amz-date is sent (S3 signs it
    # empty). Without x-amz-date the Date line must be the Date header: a signature over an empty
    # one would cover no time at all, and pass with any fresh Date added to it, for ever.
    empty_dates = (False, True) if "x-amz-date" in request.headers else (False,)
    texts = (string_to_sign(request, claim, empty_date, res) for res in resources for empty_date in empty_dates)
    return [text.encode("utf-8", "surrogatepass") for text in dict.fromkeys(texts)]


def _check_date(request: Request, now: float, max_skew: float) -> None:
    from email.utils import parsedate_to_datetime

    # x-amz-date, when sent, is the request's date even if empty (S3 then refuses the request
    # rather than falling back to Date, which the client may not have meant to sign).
    headers = request.headers
    raw = headers.get("x-amz-date") if "x-amz-date" in headers else headers.get("date")
    if not raw:
        raise S3Error("AccessDenied", "AWS authentication requires a valid Date or x-amz-date header")
    try:
        when = parsedate_to_datetime(raw).timestamp()
    except (TypeError, ValueError, OverflowError, IndexError):
        raise S3Error("AccessDenied", "AWS authentication requires a valid Date or x-amz-date header") from None
    if when < 0:
        # Not a time a request was sent at: a malformed date, as S3 answers it.
        raise S3Error("AccessDenied", "AWS authentication requires a valid Date or x-amz-date header")
    if abs(now - when) > max_skew:
        raise S3Error("RequestTimeTooSkewed")
