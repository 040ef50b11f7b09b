"""Signatures checked where the secret lives: S3 requests (SigV2, SigV4) for the gateway, and
the scoped keys that sign gRPC calls (silt/rpc/signing.py) for the service they are addressed to.

No answer of auth carries a secret. The gateway sends the strings to sign it built from an S3
request and the signature the request carried; auth recomputes the HMAC with the secret and
says whose key it is. For SigV4 it also returns the signing key of the request's credential
scope (AWS's kSigning: the secret's HMAC chain over date, region and service), which the
gateway needs for aws-chunked chunk signatures and uses to check later requests of the same
key and scope itself. That key signs for that day, region and service only (the service is
`s3`, or `execute-api` for the Iceberg REST catalog's signed requests, which the gateway
refuses), and is handed out only for a request that proved it holds it: for a scope its
signer already used.

Call keys (GetCallSigningKey) are handed out for the audiences of CALL_KEY_AUDIENCES only:
graveler and the compactor. Never for `auth`: auth checks calls to itself from KV, and a key
for calls to auth would let its holder sign IAM calls as anyone. Never for `s3` either: S3
requests are checked here (VerifyS3Signature), with SigV4's keys, not call keys.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from collections.abc import Sequence
from datetime import UTC, date, datetime

from pydantic import SecretStr

from silt.errors import InvalidArgument
from silt.rpc.signing import COMPACTOR_AUDIENCE, GRAVELER_AUDIENCE, is_day

# Clients build the string to sign in ways S3 accepts alike (the gateway tries each).
MAX_STRINGS_TO_SIGN = 4
# A SigV2 string to sign holds the request's x-amz-* headers; S3 caps all headers at 8 KiB.
MAX_STRING_TO_SIGN_BYTES = 64 * 1024
MAX_SIGNATURE_BYTES = 128
V4_ALGORITHM = "AWS4-HMAC-SHA256"
# A SigV4 scope's date may be up to a week old (a presigned URL lives up to 7 days), and a day
# ahead of ours (clients in other time zones sign with their own UTC date, skewed).
MAX_SCOPE_AGE_DAYS = 8
# The services a SigV4 credential scope may name: S3's, and `execute-api`, the name Iceberg's
# REST clients sign catalog requests with (pyiceberg's and Iceberg Java's default
# rest.signing-name). Each front end accepts its own service only (edge/core/sigv4.py): a
# signature for another service's scope (iam, sts) is a signature for none of Silt's requests.
S3_SERVICE = "s3"
CATALOG_SERVICE = "execute-api"
V4_SERVICES = (S3_SERVICE, CATALOG_SERVICE)
# The audiences whose call keys auth hands out (to the service users verifying for them).
CALL_KEY_AUDIENCES = (GRAVELER_AUDIENCE, COMPACTOR_AUDIENCE)
_SCOPE_PART_RE = re.compile(r"[A-Za-z0-9-]{1,32}")
_HEX64_RE = re.compile(r"[0-9a-f]{64}")


def _day(value: str) -> date:
    if not is_day(value):
        raise InvalidArgument(f"invalid day {value[:16]!r}: yyyymmdd")
    try:
        return datetime.strptime(value, "%Y%m%d").replace(tzinfo=UTC).date()
    except ValueError:
        raise InvalidArgument(f"invalid day {value!r}: yyyymmdd") from None


def check_call_key_audience(audience: str) -> str:
    """An audience whose call keys may be handed out (CALL_KEY_AUDIENCES); InvalidArgument otherwise."""
    if audience not in CALL_KEY_AUDIENCES:
        raise InvalidArgument(
            f"no call keys for audience {audience[:40]!r}: only for {', '.join(CALL_KEY_AUDIENCES)}"
            " (auth verifies calls to itself; S3 requests are verified with VerifyS3Signature)"
        )
    return audience


def check_call_scope(day: str, audience: str, now: datetime) -> None:
    """A call key is handed out for yesterday, today or tomorrow (UTC) only: a call's date is
    within minutes of the clock, so no other day's key can sign a call that is accepted."""
    check_call_key_audience(audience)
    if abs((_day(day) - now.date()).days) > 1:
        raise InvalidArgument(f"day {day} is not yesterday, today or tomorrow ({now:%Y%m%d})")


def check_strings(strings: Sequence[bytes], signature: bytes) -> None:
    if not 1 <= len(strings) <= MAX_STRINGS_TO_SIGN:
        raise InvalidArgument(f"1 to {MAX_STRINGS_TO_SIGN} strings to sign, not {len(strings)}")
    if any(len(s) > MAX_STRING_TO_SIGN_BYTES for s in strings):
        raise InvalidArgument(f"a string to sign has at most {MAX_STRING_TO_SIGN_BYTES} bytes")
    if len(signature) > MAX_SIGNATURE_BYTES:
        raise InvalidArgument(f"a signature has at most {MAX_SIGNATURE_BYTES} bytes")


def check_v4_scope(scope_date: str, region: str, service: str, now: datetime) -> str:
    """The credential scope `date/region/service/aws4_request` of a recent request."""
    age = (now.date() - _day(scope_date)).days
    if not -1 <= age <= MAX_SCOPE_AGE_DAYS:
        raise InvalidArgument(f"credential scope date {scope_date} is too far from today ({now:%Y%m%d})")
    if not _SCOPE_PART_RE.fullmatch(region):
        raise InvalidArgument(f"invalid credential scope region {region[:40]!r}")
    if service not in V4_SERVICES:
        raise InvalidArgument(f"credential scope service {service[:40]!r} is not {' or '.join(map(repr, V4_SERVICES))}")
    return f"{scope_date}/{region}/{service}/aws4_request"


def _is_v4_string_to_sign(text: bytes, scope: str) -> bool:
    """Whether text is a SigV4 request's string to sign for scope: the algorithm, an
    X-Amz-Date of the scope's day, the scope, the hex hash of a canonical request. So a key
    is handed out only for a request's signature, never for any other text signed with it."""
    lines = text.split(b"\n")
    if len(lines) != 4 or lines[0] != V4_ALGORITHM.encode() or lines[2] != scope.encode():
        return False
    amz_date = lines[1].decode("ascii", "replace")
    return (
        len(amz_date) == 16
        and amz_date[:8] == scope[:8]
        and _HEX64_RE.fullmatch(lines[3].decode("ascii", "replace")) is not None
    )


def v4_signing_key(secret: SecretStr, scope_date: str, region: str, service: str) -> bytes:
    key = ("AWS4" + secret.get_secret_value()).encode()
    for part in (scope_date, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


def verify_v4(
    secret: SecretStr,
    strings: Sequence[bytes],
    signature: bytes,
    scope_date: str,
    region: str,
    service: str,
    now: datetime,
) -> bytes | None:
    """The scope's signing key if signature signs one of strings under it; None otherwise."""
    check_strings(strings, signature)
    scope = check_v4_scope(scope_date, region, service, now)
    if not all(_is_v4_string_to_sign(s, scope) for s in strings):
        raise InvalidArgument(f"not a SigV4 string to sign for scope {scope}")
    key = v4_signing_key(secret, scope_date, region, service)
    matched = False
    for text in strings:
        expected = hmac.new(key, text, hashlib.sha256).hexdigest().encode()
        matched |= hmac.compare_digest(expected, signature)
    return key if matched else None


def verify_v2(secret: SecretStr, strings: Sequence[bytes], signature: bytes) -> bool:
    """Whether signature is the SigV2 signature (base64 HMAC-SHA1 with the secret) of one of strings."""
    check_strings(strings, signature)
    matched = False
    for text in strings:
        digest = hmac.new(secret.get_secret_value().encode(), text, hashlib.sha1).digest()
        matched |= hmac.compare_digest(base64.b64encode(digest), signature)
    return matched


def utc_now() -> datetime:
    return datetime.now(UTC)
