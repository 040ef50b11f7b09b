"""Presigned URLs the edge signs and serves itself (routes/presigned.py), at
`/_silt/presigned/<scheme>/<the object's place>`: for the local blockstore, whose disk has no URLs
of its own, and for imported objects on any store, whose reads must check that the source is
still as imported (silt/block/external.py), which a store's own URL cannot.

A URL lets its holder do one thing to one object until it expires: GET it (HEAD too, which tells
less), PUT it, or PUT one part of a multipart upload of it (a presigned multipart upload,
routes/presigned_multipart.py: `X-Silt-Upload-Id` names the block adapter's upload and
`X-Silt-Part-Number` the part). What it allows is in its path (the object's address) and its query
(`X-Silt-Method`, `X-Silt-Expires` in Unix seconds, `X-Silt-Filename` for a download's name, and
for an imported object the version its reads must find: `X-Silt-Size`, `X-Silt-ETag`,
`X-Silt-Mtime`), and `X-Silt-Signature` is an HMAC of all of them with the edge's key
(signing.py): a changed letter anywhere, an expired time, another method, is refused (403).
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import parse_qsl, quote, urlencode

from edge.api.errors import forbidden
from edge.api.objects.signing import mac
from edge.core.asgi import PRESIGNED_PREFIX
from silt.block.adapter import PresignedURL, PresignMethod
from silt.block.external import SourceVersion
from silt.block.rules import MAX_PRESIGN_SECONDS

METHOD = "X-Silt-Method"
EXPIRES = "X-Silt-Expires"
FILENAME = "X-Silt-Filename"
SIZE = "X-Silt-Size"
ETAG = "X-Silt-ETag"
MTIME = "X-Silt-Mtime"
# The store's own version of an imported object (SourceVersion.store_version), when recorded:
# optional, and signed only when present, so URLs made without it still verify.
STORE_VERSION = "X-Silt-Source-Version"
UPLOAD_ID = "X-Silt-Upload-Id"
PART_NUMBER = "X-Silt-Part-Number"
SIGNATURE = "X-Silt-Signature"
_REQUIRED = {METHOD, EXPIRES, SIGNATURE}
_VERSION = {SIZE, ETAG, MTIME}
_PART = {UPLOAD_ID, PART_NUMBER}
_NAMES = _REQUIRED | _VERSION | _PART | {FILENAME, STORE_VERSION}
# A URL's query names a method, a time, a file name, a version and a signature: nothing longer.
MAX_QUERY_BYTES = 4096
_MAX_DIGITS = 19


@dataclass(frozen=True)
class Grant:
    """What a verified URL allows."""

    address: str  # local://<name>/<key...>, or an imported object's URI
    method: PresignMethod
    expires: int
    filename: str
    version: SourceVersion | None  # an imported object: what its source must still be
    part: UploadPartGrant | None = None  # a PUT of one part of a multipart upload, not of the object


@dataclass(frozen=True)
class UploadPartGrant:
    """Part `number` of the block adapter's multipart upload `upload_id` of the granted object."""

    upload_id: str
    number: int


def _signed_text(
    method: str, address: str, expires: int, filename: str, version: SourceVersion | None, part: UploadPartGrant | None
) -> bytes:
    # JSON: no choice of separator can make two different grants sign alike.
    fields: list[object] = [method, address, expires, filename]
    if version is not None:
        fields += [version.size, version.etag, version.mtime_ns]
        if version.store_version:
            fields.append(version.store_version)
    if part is not None:
        # Marked, so that no object grant's fields can read as a part grant's.
        fields += ["part", part.upload_id, part.number]
    return json.dumps(["silt-presigned-url/v1", *fields], ensure_ascii=False).encode("utf-8", "surrogatepass")


def _encode(signature: bytes) -> str:
    return base64.urlsafe_b64encode(signature).decode().rstrip("=")


def url_path(address: str) -> str:
    """`/_silt/presigned/<scheme>/<rest>` of `<scheme>://<rest>`."""
    scheme, _, rest = address.partition("://")
    return f"{PRESIGNED_PREFIX}{scheme}/{rest}"


def address_of(path: str) -> str:
    """The address a (decoded) URL path names: url_path's inverse."""
    scheme, _, rest = path[len(PRESIGNED_PREFIX) :].partition("/")
    return f"{scheme}://{rest}"


def _number(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or len(text) > _MAX_DIGITS:
        raise forbidden("malformed presigned URL")
    return int(text)


class EdgeUrls:
    def __init__(self, key: bytes, clock: Callable[[], float] = time.time) -> None:
        self._key = key
        self._clock = clock

    def sign(
        self,
        origin: str,
        address: str,
        method: PresignMethod,
        expires_in: int,
        filename: str = "",
        version: SourceVersion | None = None,
        part: UploadPartGrant | None = None,
    ) -> PresignedURL:
        """A URL on origin (`http://host:port`) for one method on the object at address (with
        part, a PUT of that part of a multipart upload of it)."""
        if "://" not in address:
            raise ValueError(f"not an object's address: {address!r}")
        if part is not None and (method != "PUT" or version is not None or filename):
            raise ValueError("a part's URL is a PUT of the part, nothing else")
        expires = int(self._clock()) + min(max(expires_in, 1), MAX_PRESIGN_SECONDS)
        query = {METHOD: method, EXPIRES: str(expires)}
        if filename:
            query[FILENAME] = filename
        if version is not None:
            query.update({SIZE: str(version.size), ETAG: version.etag, MTIME: str(version.mtime_ns)})
            if version.store_version:
                query[STORE_VERSION] = version.store_version
        if part is not None:
            query.update({UPLOAD_ID: part.upload_id, PART_NUMBER: str(part.number)})
        query[SIGNATURE] = _encode(mac(self._key, _signed_text(method, address, expires, filename, version, part)))
        path = quote(url_path(address), safe="/")
        return PresignedURL(f"{origin}{path}?{urlencode(query, quote_via=quote)}", expires)

    def verify(self, path: str, query: bytes, method: str) -> Grant:
        """What the URL of a request allows its method (path decoded, query raw), or 403."""
        if not path.startswith(PRESIGNED_PREFIX) or len(query) > MAX_QUERY_BYTES:
            raise forbidden("not a presigned URL of this server")
        try:
            pairs = parse_qsl(query.decode("ascii"), keep_blank_values=True, strict_parsing=True)
        except (UnicodeDecodeError, ValueError):
            raise forbidden("malformed presigned URL") from None
        params = dict(pairs)
        names = set(params)
        if len(params) != len(pairs) or not names <= _NAMES or not names >= _REQUIRED:
            raise forbidden("malformed presigned URL: each of its parameters must appear once")
        if (names & _VERSION or STORE_VERSION in names) and not names >= _VERSION:
            raise forbidden("malformed presigned URL: an incomplete version")
        if names & _PART and not names >= _PART:
            raise forbidden("malformed presigned URL: an incomplete part")
        granted = params[METHOD]
        if granted not in ("GET", "PUT"):
            raise forbidden("malformed presigned URL")
        expires = _number(params[EXPIRES])
        filename = params.get(FILENAME, "")
        version = None
        if SIZE in params:
            version = SourceVersion(
                _number(params[SIZE]), params[ETAG], _number(params[MTIME]), params.get(STORE_VERSION, "")
            )
        part = None
        if UPLOAD_ID in params:
            part = UploadPartGrant(params[UPLOAD_ID], _number(params[PART_NUMBER]))
        address = address_of(path)
        signature = params[SIGNATURE]
        try:
            given = base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4))
        except (binascii.Error, ValueError):
            raise forbidden("malformed presigned URL signature") from None
        expected = mac(self._key, _signed_text(granted, address, expires, filename, version, part))
        if not hmac.compare_digest(given, expected):
            raise forbidden("the presigned URL's signature does not match: it was changed, or not made here")
        allowed = ("GET", "HEAD") if granted == "GET" else ("PUT",)
        if method not in allowed:
            raise forbidden(f"this presigned URL allows {granted} only")
        if self._clock() >= expires:
            raise forbidden("Request has expired: ask for a new presigned URL")
        return Grant(address, granted, expires, filename, version, part)  # type: ignore[arg-type]
