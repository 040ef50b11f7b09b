"""AWS Signature Version 4: the Authorization header, presigned URLs, and aws-chunked bodies.

Parsing and the strings to sign live here, for the S3 gateway and for the Iceberg REST catalog
(which accepts header signatures scoped to `execute-api`, as Iceberg's REST clients sign). The
secret never reaches the edge: auth checks a request's first signature and returns the signing
key of its scope (edge/core/sigv4_identity.py).
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Protocol
from urllib.parse import quote, unquote

from edge.core.s3_errors import S3Error

ALGORITHM = "AWS4-HMAC-SHA256"
UNSIGNED = "UNSIGNED-PAYLOAD"
STREAMING = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
STREAMING_TRAILER = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
STREAMING_UNSIGNED_TRAILER = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
MAX_PRESIGNED_EXPIRY = 7 * 24 * 3600
# The service a credential scope must name: a signature scoped to another service (iam, sts)
# is not an S3 signature, and auth refuses to check one (services/auth/signatures.py).
SERVICE = "s3"
# The service the Iceberg catalog's signatures name: pyiceberg's and Iceberg Java's default
# `rest.signing-name` (API Gateway's). Never `s3`: an S3-scoped request is the gateway's.
CATALOG_SERVICE = "execute-api"

_HEADER_RE = re.compile(r"AWS4-HMAC-SHA256\s+(.*)")
_HEADER_FIELDS = frozenset(("Credential", "SignedHeaders", "Signature"))
# What a payload hash may be. Anything else would be read by no body check at all (the body
# would go unverified), so it is refused where it is parsed.
_PAYLOAD_KEYWORDS = frozenset((UNSIGNED, STREAMING, STREAMING_TRAILER, STREAMING_UNSIGNED_TRAILER))
_SHA256_HEX = re.compile(r"[0-9a-fA-F]{64}")
PAYLOAD_HASH_MESSAGE = (
    f"x-amz-content-sha256 must be {UNSIGNED}, {STREAMING_UNSIGNED_TRAILER}, {STREAMING}, "
    f"{STREAMING_TRAILER} or a valid sha256 value."
)
_SPACES = re.compile(r"\s+")
# What percent-encoding leaves as it is (RFC 3986's unreserved characters), and in a path also
# "/": most query values and paths are only these, and need no quoting pass.
_UNRESERVED = re.compile(r"[A-Za-z0-9\-_.~]*")
_UNRESERVED_PATH = re.compile(r"[A-Za-z0-9\-_.~/]*")

# The one x-amz-* header S3 lets a request carry unsigned: for a header signature its value is
# the payload hash the canonical request ends with (so it is bound anyway); a presigned URL
# cannot sign it, and its value must then agree with the URL's X-Amz-Content-Sha256.
_MAY_BE_UNSIGNED = frozenset(("x-amz-content-sha256",))
NOT_SIGNED_MESSAGE = "There were headers present in the request which were not signed"


class Request(Protocol):
    """What a signature covers of an HTTP request (the gateway's Request is one)."""

    @property
    def method(self) -> str: ...
    @property
    def raw_path(self) -> str: ...  # percent-encoded, as sent, without the query
    @property
    def query(self) -> list[tuple[str, str]]: ...  # decoded, in the order sent
    @property
    def headers(self) -> Mapping[str, str]: ...  # lower-case names


@dataclass(frozen=True)
class SignedRequest:
    """A Request built by a front end other than the gateway (the Iceberg catalog)."""

    method: str
    raw_path: str
    query: list[tuple[str, str]]
    headers: Mapping[str, str]


@dataclass(frozen=True)
class V4Request:
    """What a V4 signature claims, parsed before the secret is known."""

    access_key_id: str
    date: str  # yyyymmdd of the scope
    region: str
    service: str
    amz_date: str  # yyyymmddThhmmssZ
    signed_headers: list[str]
    signature: str
    payload_hash: str
    presigned: bool
    expires: int = 0

    @property
    def scope(self) -> str:
        return f"{self.date}/{self.region}/{self.service}/aws4_request"


def parse_time(amz_date: str) -> datetime:
    """An X-Amz-Date (yyyymmddThhmmssZ, exactly): read by position rather than by strptime,
    which costs every signed request several times as much."""
    d = amz_date
    if len(d) != 16 or d[8] != "T" or d[15] != "Z" or not (d[:8] + d[9:15]).isdecimal() or not d.isascii():
        raise S3Error("AccessDenied", f"invalid X-Amz-Date {amz_date[:32]!r}")
    try:
        return datetime(int(d[0:4]), int(d[4:6]), int(d[6:8]), int(d[9:11]), int(d[11:13]), int(d[13:15]), tzinfo=UTC)
    except ValueError:
        raise S3Error("AccessDenied", f"invalid X-Amz-Date {amz_date!r}") from None


def _from_date_header(value: str) -> str:
    """The X-Amz-Date form of an HTTP Date header: SigV4 signs with either (botocore sends Date
    when the caller set one); "" if there is none or it cannot be read."""
    if not value or len(value) > 64:
        return ""
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, OverflowError, IndexError):
        return ""
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")


def _credential(value: str) -> tuple[str, str, str, str]:
    parts = value.split("/")
    if len(parts) != 5 or parts[4] != "aws4_request":
        raise S3Error("AuthorizationHeaderMalformed", f"malformed credential {value!r}")
    return parts[0], parts[1], parts[2], parts[3]


def require_signed_headers(request: Request, signed_headers: list[str]) -> None:
    """S3's rule for SigV4, header and presigned alike: `host` and every ``x-amz-*`` header the
    request carries must be among the signed headers. Otherwise whoever holds a signed request
    (a presigned upload link) could add headers the signer never saw and that change what the
    request does: ``x-amz-copy-source`` turns an upload into a copy of anything the signer
    may read, ``x-amz-decoded-content-length`` changes how the body is read."""
    signed = {name.lower() for name in signed_headers}
    missing = [] if "host" in signed else ["host"]
    missing += sorted(
        name for name in request.headers if name.startswith("x-amz-") and name not in signed | _MAY_BE_UNSIGNED
    )
    if missing:
        raise S3Error("AccessDenied", NOT_SIGNED_MESSAGE, HeadersNotSigned=", ".join(missing))


def check_payload_hash(payload: str) -> None:
    """A payload hash is one of the forms the body checks know, or the body would go unchecked."""
    if payload not in _PAYLOAD_KEYWORDS and not _SHA256_HEX.fullmatch(payload):
        raise S3Error("InvalidArgument", PAYLOAD_HASH_MESSAGE, ArgumentName="x-amz-content-sha256")


def parse_header(request: Request, body_sha256: str = "") -> V4Request:
    """The claim of an Authorization header. S3 clients name the payload hash in
    x-amz-content-sha256; a front end whose clients may leave it out (botocore's plain SigV4
    signs the body's hash without sending it) names the hash to take instead (body_sha256)."""
    match = _HEADER_RE.match(request.headers.get("authorization", ""))
    if not match:
        raise S3Error("InvalidArgument", "malformed AWS4-HMAC-SHA256 Authorization header")
    fields: dict[str, str] = {}
    for item in match.group(1).split(","):
        name, sep, value = item.strip().partition("=")
        # Exactly the three components, once each: a parser that skipped what it does not know
        # would accept a header with anything appended to a valid signature.
        if not sep or name not in _HEADER_FIELDS or name in fields:
            component = item.strip()[:64]
            raise S3Error(
                "AuthorizationHeaderMalformed",
                f'The authorization header is malformed; the authorization component "{component}" is malformed.',
            )
        fields[name] = value
    try:
        key, date, region, service = _credential(fields["Credential"])
        signed = fields["SignedHeaders"].split(";")
        signature = fields["Signature"]
    except KeyError as exc:
        raise S3Error("InvalidArgument", f"the Authorization header lacks {exc.args[0]}") from None
    amz_date = request.headers.get("x-amz-date") or _from_date_header(request.headers.get("date", ""))
    if not amz_date:
        raise S3Error("AccessDenied", "AWS authentication requires a valid Date or X-Amz-Date header")
    payload = request.headers.get("x-amz-content-sha256", "") or body_sha256
    if not payload:
        raise S3Error("InvalidRequest", "missing required header for this request: x-amz-content-sha256")
    check_payload_hash(payload)
    require_signed_headers(request, signed)
    return V4Request(key, date, region, service, amz_date, signed, signature, payload, presigned=False)


def _arg(request: Request, name: str) -> str | None:
    """The first value of a query parameter; None if absent."""
    return next((value for key, value in request.query if key == name), None)


def parse_query(request: Request) -> V4Request:
    def need(name: str) -> str:
        value = _arg(request, name)
        if value is None:
            raise S3Error("AccessDenied", f"the presigned URL lacks {name}")
        return value

    if need("X-Amz-Algorithm") != ALGORITHM:
        raise S3Error("InvalidArgument", "X-Amz-Algorithm must be AWS4-HMAC-SHA256")
    key, date, region, service = _credential(need("X-Amz-Credential"))
    raw_expires = need("X-Amz-Expires")
    if not raw_expires.isdigit() or len(raw_expires) > 12:
        raise S3Error("AuthorizationQueryParametersError", "X-Amz-Expires must be non-negative")
    expires = int(raw_expires)
    if expires > MAX_PRESIGNED_EXPIRY:
        raise S3Error(
            "AuthorizationQueryParametersError", "X-Amz-Expires must be less than a week (in seconds) that is 604800"
        )
    signed = need("X-Amz-SignedHeaders").split(";")
    require_signed_headers(request, signed)
    # The payload hash is the URL's (signed) X-Amz-Content-Sha256, UNSIGNED-PAYLOAD without
    # one. A header cannot be signed here, so it may not say anything else: it would otherwise
    # choose how the body is checked (UNSIGNED-PAYLOAD skipping the signed hash).
    payload = _arg(request, "X-Amz-Content-Sha256") or UNSIGNED
    check_payload_hash(payload)
    header = request.headers.get("x-amz-content-sha256")
    if header is not None and header != payload:
        raise S3Error(
            "InvalidRequest", "the x-amz-content-sha256 header differs from the presigned URL's X-Amz-Content-Sha256"
        )
    return V4Request(
        key,
        date,
        region,
        service,
        need("X-Amz-Date"),
        signed,
        need("X-Amz-Signature"),
        payload,
        presigned=True,
        expires=expires,
    )


def _encode(value: str) -> str:
    if _UNRESERVED.fullmatch(value):
        return value
    return quote(value, safe="-_.~")


def _requoted_path(raw_path: str) -> str:
    """The path decoded and encoded again as AWS's SDKs encode it (a path of unreserved
    characters and "/" only comes back as it is)."""
    if _UNRESERVED_PATH.fullmatch(raw_path):
        return raw_path
    return quote(unquote(raw_path), safe="/~")


def canonical_request(request: Request, claim: V4Request, uri: str) -> str:
    query = sorted(
        (_encode(k), _encode(v)) for k, v in request.query if not (claim.presigned and k == "X-Amz-Signature")
    )
    canonical_query = "&".join(f"{k}={v}" for k, v in query)
    headers = []
    for name in claim.signed_headers:
        value = request.headers.get(name)
        if value is None:
            raise S3Error("SignatureDoesNotMatch", f"signed header {name!r} is missing from the request")
        headers.append(f"{name}:{_SPACES.sub(' ', value.strip())}\n")
    return "\n".join(
        (request.method, uri, canonical_query, "".join(headers), ";".join(claim.signed_headers), claim.payload_hash)
    )


def _wire_bytes(text: str) -> bytes:
    """The canonical request as the bytes the client hashed. Header values arrive decoded as
    latin-1 (one char per byte), so latin-1 gives back the bytes sent: a UTF-8 value such as
    x-amz-meta-x: café is signed over its UTF-8 bytes, as every SDK signs it. Everything else
    in the canonical request is ASCII (the URI and query are percent-encoded)."""
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


def _sign(key: bytes, text: str) -> str:
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def check_service(claim: V4Request, service: str = SERVICE) -> None:
    """The credential scope's service is `service` (`s3` for the gateway), with S3's answer
    otherwise: the header's or the presigned URL's parameter is malformed
    (AuthorizationHeaderMalformed or AuthorizationQueryParametersError, 400), naming the
    service it expected."""
    if claim.service == service:
        return
    incorrect = f'incorrect service "{claim.service[:32]}". This endpoint belongs to "{service}".'
    if claim.presigned:
        raise S3Error("AuthorizationQueryParametersError", f"Error parsing the X-Amz-Credential parameter; {incorrect}")
    raise S3Error("AuthorizationHeaderMalformed", f"The authorization header is malformed; {incorrect}")


def check_claim(claim: V4Request, region: str, now: datetime, max_skew: float, service: str = SERVICE) -> None:
    """What a claim must satisfy before its signature is worth checking: its scope and time."""
    check_service(claim, service)
    when = parse_time(claim.amz_date)
    if claim.date != claim.amz_date[:8]:
        raise S3Error("SignatureDoesNotMatch", "the credential scope date does not match X-Amz-Date")
    if claim.presigned:
        # Expired once the age reaches X-Amz-Expires: a URL presigned for 0 seconds never works.
        if claim.expires == 0 or (now - when).total_seconds() > claim.expires:
            raise S3Error("AccessDenied", "Request has expired")
        if (when - now).total_seconds() > max_skew:
            raise S3Error("AccessDenied", "Request is not yet valid")
    elif abs((now - when).total_seconds()) > max_skew:
        raise S3Error(
            "RequestTimeTooSkewed",
            RequestTime=claim.amz_date,
            ServerTime=now.strftime("%Y%m%dT%H%M%SZ"),
            MaxAllowedSkewMilliseconds=str(int(max_skew * 1000)),
        )
    if claim.region != region and claim.region not in ("us-east-1", "auto"):
        # Clients that do not know our region sign for us-east-1 (S3's global endpoint); others must match.
        raise S3Error("AuthorizationHeaderMalformed", f"the region is wrong; expecting {region!r}", Region=region)


def double_encoded_path(raw_path: str) -> str:
    """The canonical URI of services other than S3: the path as sent, percent-encoded once
    more (AWS's SigV4 rule; botocore's SigV4Auth and the AWS SDKs sign it so)."""
    return quote(raw_path or "/", safe="/~")


def strings_to_sign(request: Request, claim: V4Request, uris: Sequence[str] = ()) -> list[bytes]:
    """The strings to sign the request may have been signed over, as bytes: for S3, clients
    differ in how they encode the path, and S3 accepts the form the client signed; another
    service names its one canonical URI (uris). The HMAC itself is computed where the key is
    (edge/core/sigv4_identity.py)."""
    candidates = list(uris) or [request.raw_path, _requoted_path(request.raw_path)]
    return [
        "\n".join(
            (
                ALGORITHM,
                claim.amz_date,
                claim.scope,
                hashlib.sha256(_wire_bytes(canonical_request(request, claim, uri))).hexdigest(),
            )
        ).encode("utf-8", "surrogatepass")
        for uri in dict.fromkeys(candidates)
    ]


def signature_matches(key: bytes, strings: list[bytes], signature: str) -> bool:
    """Whether signature signs one of strings under the scope's signing key."""
    # Bytes, not str: compare_digest refuses non-ASCII str, and a client controls the claim.
    claimed = signature.encode("utf-8", "surrogatepass")
    matched = False
    for text in strings:
        matched |= hmac.compare_digest(hmac.new(key, text, hashlib.sha256).hexdigest().encode(), claimed)
    return matched


def chunk_signature(key: bytes, claim: V4Request, previous: str, data_sha256: str) -> str:
    text = "\n".join(("AWS4-HMAC-SHA256-PAYLOAD", claim.amz_date, claim.scope, previous, EMPTY_SHA256, data_sha256))
    return _sign(key, text)


def trailer_signature(key: bytes, claim: V4Request, previous: str, trailers_sha256: str) -> str:
    """The signature of an aws-chunked body's trailers ("name:value\\n" each, hashed)."""
    text = "\n".join(("AWS4-HMAC-SHA256-TRAILER", claim.amz_date, claim.scope, previous, trailers_sha256))
    return _sign(key, text)
