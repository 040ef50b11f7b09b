"""AWS Signature Version 2 (S3's HMAC-SHA1 scheme): the Authorization header and presigned query strings."""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass

from services.gateway.errors import S3Error
from services.gateway.request import Request

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


def verify(request: Request, claim: V2Request, secret: str, now: float, max_skew: float) -> None:
    if claim.presigned:
        if now > claim.expires:
            raise S3Error("AccessDenied", "Request has expired")
    else:
        _check_date(request, now, max_skew)
    resource = "/" + request.bucket + request.raw_path if request.virtual_host else request.raw_path
    resources = [resource]
    if request.bucket and not request.path:
        # A bucket is signed as "/bucket" by some clients and "/bucket/" by others (botocore).
        resources.append(resource.rstrip("/") if resource.endswith("/") else resource + "/")
    # Clients also disagree on whether the Date line is empty when x-amz-date is sent.
    for res in resources:
        for empty_date in (False, True):
            text = string_to_sign(request, claim, empty_date, res)
            expected = base64.b64encode(hmac.new(secret.encode(), text.encode(), hashlib.sha1).digest()).decode()
            # Bytes, not str: compare_digest refuses non-ASCII str, and a client controls the claim.
            if hmac.compare_digest(expected.encode(), claim.signature.encode("utf-8", "surrogatepass")):
                return
    raise S3Error("SignatureDoesNotMatch")


def _check_date(request: Request, now: float, max_skew: float) -> None:
    from email.utils import parsedate_to_datetime

    raw = request.headers.get("x-amz-date") or request.headers.get("date")
    if not raw:
        raise S3Error("AccessDenied", "AWS authentication requires a valid Date or x-amz-date header")
    try:
        when = parsedate_to_datetime(raw).timestamp()
    except (TypeError, ValueError, OverflowError, IndexError):
        raise S3Error("AccessDenied", "AWS authentication requires a valid Date or x-amz-date header") from None
    if abs(now - when) > max_skew:
        raise S3Error("RequestTimeTooSkewed")
