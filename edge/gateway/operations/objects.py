"""Object operations: Get, Head, Put, Copy, Delete and DeleteObjects."""

from __future__ import annotations

import base64
import binascii
import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp

from edge.core import sigv4
from edge.core.client import SMALL_BODY
from edge.core.object_reads import NotOneRange, RangeNotSatisfiable, parse_byte_range, stream_reader
from edge.core.object_writes import ObjectWriteFailed, ShortBody, SourceBody
from edge.gateway import checksums
from edge.gateway.backend import Backend
from edge.gateway.errors import S3Error
from edge.gateway.metadata_values import header_value
from edge.gateway.operations.common import (
    NEUTRAL_MARKER,
    XMLNS,
    Context,
    Response,
    core_write_error,
    declared_body_size,
    entry_time,
    http_time,
    iso_time,
    neutral_entry,
    object_key_required,
    parse_neutral,
    parse_xml,
    quoted_etag,
    repository_replaced,
    source_entry,
    split_address,
    stage_request,
    stat_entry,
    user_metadata,
    writable_branch,
    write_condition,
    x,
    xml_response,
)
from edge.gateway.payload import AwsChunked, DeclaredLength, Sha256Checked, Source
from edge.gateway.request import decimal, decode_component
from edge.gateway.routing import split_path
from engine.core.validation import validate_ref_name
from silt.block.adapter import PutResult
from silt.errors import InvalidArgument, NotFound
from silt.graveler.v1 import events_pb2 as ev
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb
from silt.iam_actions import DELETE_OBJECT, READ_OBJECT, WRITE_OBJECT
from silt.objects import DEFAULT_CONTENT_TYPE, USER_METADATA_PREFIX

_SHA256_HEX = re.compile(r"^[0-9a-fA-F]{64}$")
_OVERRIDES = {
    "response-content-type": "Content-Type",
    "response-content-language": "Content-Language",
    "response-expires": "Expires",
    "response-cache-control": "Cache-Control",
    "response-content-disposition": "Content-Disposition",
    "response-content-encoding": "Content-Encoding",
}


def now_timestamp() -> Timestamp:
    stamp = Timestamp()
    stamp.GetCurrentTime()
    return stamp


# --- reading -------------------------------------------------------------------------------


def _parse_range(header: str, size: int) -> tuple[int, int] | None:
    """(start, end) inclusive, None to serve the whole object: S3 ignores what is not one range
    of bytes (several ranges, garbage) and serves the whole object."""
    try:
        return parse_byte_range(header, size)
    except NotOneRange:
        return None
    except RangeNotSatisfiable:
        raise S3Error("InvalidRange", ActualObjectSize=str(size)) from None


# The MD5 of no bytes: the ETag S3 gives an empty object.
EMPTY_MD5 = "d41d8cd98f00b204e9800998ecf8427e"


def _http_date(value: str) -> datetime | None:
    try:
        return parsedate_to_datetime(value)
    except (TypeError, ValueError, OverflowError, IndexError):
        return None


# Keys one DeleteObjects takes (S3's limit, and graveler's for one DeleteEntries call).
MAX_DELETE_KEYS = 1000
# Branches one DeleteObjects names: each costs an AuthorizeKeys call before any key is deleted,
# so the keys' own cap would let one request make a thousand (S3A's bulk deletes name one).
MAX_DELETE_BRANCHES = 10
# The longest branch, tag or ref name (engine/core/validation.py's limit).
MAX_REF_BYTES = 256

# Entry metadata Silt keeps for itself; never a header of its own, kept through copies.
PART_SIZES = "x-silt-part-sizes"
MAX_PART_NUMBER = 10_000


def encode_part_sizes(sizes: list[int]) -> str:
    """Part sizes of a multipart object: "<count>x<size>+<last>" when all but the last are equal
    (what every SDK uploads), else the sizes separated by commas."""
    if len(set(sizes[:-1])) <= 1:
        return f"{len(sizes) - 1}x{sizes[0] if len(sizes) > 1 else 0}+{sizes[-1]}"
    return ",".join(map(str, sizes))


def decode_part_sizes(text: str) -> list[int]:
    if "x" in text:
        count, _, rest = text.partition("x")
        size, _, last = rest.partition("+")
        return [int(size)] * int(count) + [int(last)]
    return [int(size) for size in text.split(",")]


def _part_range(ctx: Context, entry: pb.Entry) -> tuple[tuple[int, int] | None, int | None]:
    """GET/HEAD ?partNumber=N: the byte range of part N, and the object's part count (None
    unless it was uploaded in parts). A single-part object has one part: all of it."""
    number = decimal(ctx.request.arg("partNumber") or "")
    if number is None or not 1 <= number <= MAX_PART_NUMBER:
        raise S3Error(
            "InvalidArgument", "Part number must be an integer between 1 and 10000", ArgumentName="partNumber"
        )
    if "range" in ctx.request.headers:
        raise S3Error("InvalidRequest", "Cannot specify both Range header and partNumber query parameter")
    layout = entry.metadata.get(PART_SIZES)
    sizes = decode_part_sizes(layout) if layout else [entry.size]
    if number > len(sizes):
        # S3's answer for a part the object does not have (not InvalidPartNumber, 416).
        raise S3Error(
            "InvalidPart", f"the object has {len(sizes)} part{'s' if len(sizes) > 1 else ''}", PartNumber=str(number)
        )
    count = len(sizes) if layout else None
    start, size = sum(sizes[: number - 1]), sizes[number - 1]
    return ((start, start + size - 1) if size else None), count


def _check_conditions(ctx: Context, entry: pb.Entry) -> None:
    """GET/HEAD preconditions: PreconditionFailed (412) or NotModified (304)."""
    check_conditions(ctx.request.headers, entry, "", ctx.request.method in ("GET", "HEAD"))


def check_copy_source_conditions(ctx: Context, source: pb.Entry) -> None:
    """CopyObject / UploadPartCopy preconditions on the source: every failure is a 412."""
    check_conditions(ctx.request.headers, source, "x-amz-copy-source-", reading=False)


def check_conditions(headers: dict[str, str], entry: pb.Entry, prefix: str, reading: bool) -> None:
    """RFC 7232 as S3 applies it: If-Match wins over If-Unmodified-Since, If-None-Match over
    If-Modified-Since; a failed If-None-Match or If-Modified-Since is NotModified when reading."""
    etag = entry.etag.strip('"')

    def matches(header: str) -> bool:
        tags = [t.strip().strip('"') for t in header.split(",")]
        return "*" in tags or etag in tags

    def not_modified(condition: str) -> S3Error:
        return S3Error("NotModified") if reading else S3Error("PreconditionFailed", Condition=condition)

    if_match = headers.get(prefix + "if-match")
    if if_match is not None and not matches(if_match):
        raise S3Error("PreconditionFailed", Condition=prefix + "If-Match")
    if_unmodified = headers.get(prefix + "if-unmodified-since")
    if if_match is None and if_unmodified:
        when = _http_date(if_unmodified)
        if when is not None and _modified(entry) > when:
            raise S3Error("PreconditionFailed", Condition=prefix + "If-Unmodified-Since")
    if_none_match = headers.get(prefix + "if-none-match")
    if if_none_match is not None and matches(if_none_match):
        raise not_modified(prefix + "If-None-Match")
    if_modified = headers.get(prefix + "if-modified-since")
    if if_none_match is None and if_modified:
        when = _http_date(if_modified)
        if when is not None and _modified(entry) <= when:
            raise not_modified(prefix + "If-Modified-Since")


def _modified(entry: pb.Entry) -> datetime:
    """When entry was last modified, to the second, as HTTP dates compare."""
    return entry_time(entry).replace(microsecond=0)


def _object_headers(ctx: Context, entry: pb.Entry) -> list[tuple[str, str]]:
    headers = [
        ("ETag", quoted_etag(entry.etag)),
        ("Last-Modified", http_time(entry_time(entry))),
        ("Content-Type", entry.content_type or DEFAULT_CONTENT_TYPE),
        ("Accept-Ranges", "bytes"),
    ]
    for name, value in entry.metadata.items():
        if name.startswith(USER_METADATA_PREFIX):
            headers.append((name, header_value(value)))
        elif name in _STORED:
            headers.append((name, value))
    overrides: dict[str, str | None] = {}
    for param, value in ctx.request.query:
        header = _OVERRIDES.get(param)
        if header is not None:
            overrides.setdefault(header, value)  # the first one given, as Request.arg reads it
    if overrides:
        headers = [(k, v) for k, v in headers if k not in overrides] + [(k, v or "") for k, v in overrides.items()]
    # Objects are served on the origin of the cookie-authenticated REST API: a browser must
    # never sniff a type or run an uploaded page's scripts with that origin's rights.
    return headers + _ACTIVE_CONTENT_GUARDS


_ACTIVE_CONTENT_GUARDS = [("X-Content-Type-Options", "nosniff"), ("Content-Security-Policy", "sandbox")]
_STORED = frozenset(("cache-control", "content-disposition", "content-encoding", "content-language", "expires"))


async def get_object(ctx: Context, head: bool = False) -> Response:
    try:
        return await _get_object(ctx, head)
    except NotFound:
        # The entry's bytes are not where the remembered namespace says: if the repository was
        # deleted and created again under its name since, the entry is the new one's, and so
        # are its bytes, in the new namespace.
        if not await repository_replaced(ctx, ctx.request.bucket):
            raise
        return await _get_object(ctx, head)


async def get_neutral_object(ctx: Context, head: bool = False) -> Response:
    """GET/HEAD of `@<branch>/<key>`: the entry recorded for key, whatever any ref holds now
    (the branch named is not read: it may be gone). Authorized as the key's read on any ref."""
    repository = ctx.request.bucket
    branch, key = parse_neutral(ctx.request.path)
    await ctx.authorize_key(READ_OBJECT, repository, key)
    entry = await neutral_entry(ctx, repository, key)
    try:
        if head:
            # A HEAD reads no bytes: whether they are still there is asked of the store, so that
            # HEAD and GET agree on a record whose bytes were collected.
            namespace = await ctx.backend.namespace(repository)
            ns, address = split_address(namespace, entry.physical_address)
            await ctx.backend.run(ctx.backend.entry_reader(namespace, entry).stat, ns, address)
        return await serve_entry(ctx, repository, branch, key, entry, head)
    except NotFound:
        # Recorded, and its bytes collected since: no commit or staged entry held them.
        raise S3Error("NoSuchKey", f"the bytes of {key} are gone: no ref held them") from None


async def _get_object(ctx: Context, head: bool) -> Response:
    repository = ctx.request.bucket
    ref, key = split_path(ctx.request.path)
    await ctx.authorize_key(READ_OBJECT, repository, key)
    backend = ctx.backend
    small: bytes | None = None  # a whole small object, read with its entry
    if head or not key or ctx.request.has("partNumber") or "range" in ctx.request.headers:
        entry = await stat_entry(ctx, repository, ref, key)
    else:
        namespace = await backend.namespace(repository)
        request = api.StatEntryRequest(repository=repository, ref=ref, key=key)
        entry, small = await backend.stat_entry_then(request, functools.partial(_read_small, backend, namespace))
    return await serve_entry(ctx, repository, ref, key, entry, head, small)


async def serve_entry(
    ctx: Context, repository: str, ref: str, key: str, entry: pb.Entry, head: bool, small: bytes | None = None
) -> Response:
    """GET/HEAD's answer for entry (read at ref/key, or by a ref-neutral key): conditions,
    ranges, parts and headers as S3 has them; small: its whole bytes when already read."""
    try:
        _check_conditions(ctx, entry)
    except S3Error as exc:
        if exc.code == "NotModified":
            return Response(304, [("ETag", quoted_etag(entry.etag))])
        raise
    headers = _object_headers(ctx, entry)
    size = entry.size
    ctx.record(ev.READ, repository, ref, key, size)
    if ctx.request.has("partNumber"):
        byte_range, parts_count = _part_range(ctx, entry)
        if parts_count is not None:
            headers.append(("x-amz-mp-parts-count", str(parts_count)))
    elif "range" in ctx.request.headers:
        byte_range = _parse_range(ctx.request.headers["range"], size)
    else:
        byte_range = None
    status = 200
    if byte_range is not None:
        status = 206
        start, end = byte_range
        headers.append(("Content-Range", f"bytes {start}-{end}/{size}"))
        length = end - start + 1
    else:
        length = size
        if ctx.request.headers.get("x-amz-checksum-mode", "").upper() == "ENABLED":
            # Only for the whole object: a checksum of the whole answering a range would fail
            # every client that validates it.
            stored = checksums.from_metadata(entry.metadata)
            if stored:
                kind = "COMPOSITE" if "-" in stored[0][1] else "FULL_OBJECT"
                headers += [*stored, ("x-amz-checksum-type", kind)]
    if head:
        return Response(status, [*headers, ("Content-Length", str(length))])
    if small is not None:
        return Response(status, headers, small)
    namespace = await ctx.backend.namespace(repository)
    ns, address = split_address(namespace, entry.physical_address)
    adapter = ctx.backend.entry_reader(namespace, entry)
    if size == 0:
        return Response(status, headers, b"")
    if length <= SMALL_BODY:
        data = await ctx.backend.read_small(adapter, ns, address, byte_range)
        return Response(status, headers, data)
    if byte_range is not None:
        reader = await ctx.backend.run(adapter.get_range, ns, address, byte_range[0], byte_range[1])
    else:
        reader = await ctx.backend.run(adapter.get, ns, address)
    return Response(status, headers, stream=stream_reader(ctx.backend.run, reader), length=length)


def _read_small(backend: Backend, namespace: str, entry: pb.Entry, wait: bool) -> bytes | None:
    """A whole object of at most SMALL_BODY bytes (None if it is larger), as get_object answers
    it; wait as stat_entry_then's step has it (read_small_here)."""
    if entry.size > SMALL_BODY:
        return None
    if entry.size == 0:
        return b""
    ns, address = split_address(namespace, entry.physical_address)
    return backend.read_small_here(backend.entry_reader(namespace, entry), ns, address, None, wait=wait)


# --- writing -------------------------------------------------------------------------------


def body_source(ctx: Context) -> Source:
    """The decoded, checked body of a write, by how the request was signed."""
    request = ctx.request
    auth = ctx.v4
    # What the signature covers: for SigV4 the claim's payload hash (the header's value, or a
    # presigned URL's X-Amz-Content-Sha256), never an unsigned header; SigV2 signs the header.
    payload = auth[1].payload_hash if auth is not None else request.headers.get("x-amz-content-sha256", "")
    declared = request.headers.get("x-amz-decoded-content-length")
    decoded_length = decimal(declared) if declared is not None else None
    if declared is not None and decoded_length is None:
        raise S3Error("InvalidArgument", "x-amz-decoded-content-length must be a number of bytes")
    if payload in (sigv4.STREAMING, sigv4.STREAMING_TRAILER):
        if auth is None:
            raise S3Error("InvalidRequest", f"{payload} bodies need SigV4 in the Authorization header")
        key, claim = auth

        def sign(previous: str, digest: str) -> str:
            return sigv4.chunk_signature(key, claim, previous, digest)

        def sign_trailer(previous: str, digest: str) -> str:
            return sigv4.trailer_signature(key, claim, previous, digest)

        trailer_signer = sign_trailer if payload == sigv4.STREAMING_TRAILER else None
        return AwsChunked(request.body, sign, claim.signature, decoded_length, trailer_signer)
    if payload == sigv4.STREAMING_UNSIGNED_TRAILER:
        return AwsChunked(request.body, None, "", decoded_length)
    content_length = decimal(request.headers.get("content-length") or "")
    body: Source = request.body if content_length is None else DeclaredLength(request.body, content_length)
    if _SHA256_HEX.match(payload):
        return Sha256Checked(body, payload)
    return body


def _content_md5(ctx: Context) -> bytes | None:
    value = ctx.request.headers.get("content-md5")
    if value is None:
        return None
    try:
        digest = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise S3Error("InvalidDigest") from None
    if len(digest) != 16:
        raise S3Error("InvalidDigest")
    return digest


@dataclass(frozen=True)
class Received:
    size: int
    etag: str  # hex MD5
    checksum: tuple[str, str] | None  # (x-amz-checksum-<algorithm>, base64) when one was asked for

    def checksum_headers(self) -> list[tuple[str, str]]:
        return checksum_headers(self.checksum)


def checksum_headers(checksum: tuple[str, str] | None) -> list[tuple[str, str]]:
    return [checksum] if checksum else []


class S3Body(SourceBody):
    """A write's body with every check S3 makes on it, as the edge's core reads it (CheckedBody):
    the payload's signature or SHA-256, aws-chunked framing, Content-MD5 and the checksum asked
    for. Refused before any byte is written: a malformed Content-MD5, a bad declared length.

    upload_algorithm: the checksum algorithm of the multipart upload a part belongs to.
    """

    def __init__(self, ctx: Context, upload_algorithm: str | None = None) -> None:
        length = ctx.request.headers.get("x-amz-decoded-content-length") or ctx.request.headers.get("content-length")
        super().__init__(ctx.request.body, decimal(length or ""))
        self._ctx = ctx
        self._upload_algorithm = upload_algorithm
        self._request = ctx.request
        self._expected_md5: bytes | None = None
        self._wanted: checksums.Requested | None = None
        self._checked: checksums.ChecksumComputed | None = None
        self.checksum: tuple[str, str] | None = None  # once finished

    async def start(self) -> None:
        # The headers are checked once the target is known (a missing branch answers first).
        self._expected_md5 = _content_md5(self._ctx)
        source = body_source(self._ctx)
        self._wanted = checksums.wanted(self._request.headers, isinstance(source, AwsChunked), self._upload_algorithm)
        if self._wanted is not None:
            trailers = source.trailers if isinstance(source, AwsChunked) else {}
            source = self._checked = checksums.ChecksumComputed(source, self._wanted, lambda: trailers)
        self._source = source

    async def finish(self, written: PutResult) -> dict[str, str]:
        # Adapters stop at the declared size; reading on to the end runs the checks that need the
        # whole body (payload SHA-256, the final chunk and trailer signatures, the checksum)
        # before anything is staged.
        if not await self.ended() or self._request.body.overrun:
            raise S3Error("IncompleteBody", "the body is longer than its declared length")
        if self._expected_md5 is not None and written.etag.strip('"') != self._expected_md5.hex():
            raise S3Error("BadDigest")
        if self._checked is not None and self._wanted is not None and self._checked.value is not None:
            self.checksum = (self._wanted.header, self._checked.value)
        # The checksum of the whole object is kept with its metadata, for GET/HEAD with
        # x-amz-checksum-mode: ENABLED.
        return checksums.as_metadata(self.checksum)


async def receive_into(
    ctx: Context, put: Callable[..., Any], *args: object, upload_algorithm: str | None = None
) -> Received:
    """Run a block adapter write fed from the request body, with every check S3 makes on it."""
    body = S3Body(ctx, upload_algorithm)
    try:
        written = await ctx.backend.receive(body, put, *args)
    except ShortBody as exc:
        raise S3Error("IncompleteBody", str(exc)) from None
    return Received(written.size, written.etag, body.checksum)


async def put_object(ctx: Context) -> Response:
    """PutObject, one way down: parse and check what can be before any byte is read, authorize
    once, then one write through the edge's core (branch, bytes, entry), answer."""
    request = ctx.request
    if "x-amz-copy-source" in request.headers:
        return await copy_object(ctx)
    repository = request.bucket
    ref, key = split_path(request.path)
    await ctx.authorize_key(WRITE_OBJECT, repository, key, branch=ref)
    if ref and not key:
        return await _put_branch_root_marker(ctx, repository, ref)
    object_key_required(ref, key)
    entry = pb.Entry(
        content_type=request.headers.get("content-type", DEFAULT_CONTENT_TYPE),
        metadata=user_metadata(request),  # refused before any byte is written
    )
    staged = stage_request(repository, ref, key, entry, write_condition(request))
    staged.neutral = ctx.neutral
    body = S3Body(ctx)
    try:
        await ctx.backend.write_object(staged, body)
    except ObjectWriteFailed as failed:
        raise core_write_error(failed, staged) from None
    ctx.record(ev.WRITE, repository, ref, key, staged.entry.size)
    return Response(200, [("ETag", quoted_etag(staged.entry.etag)), *checksum_headers(body.checksum)])


async def _put_branch_root_marker(ctx: Context, repository: str, ref: str) -> Response:
    """PUT of "<branch>/": Hadoop's S3A writes this directory marker for the root of a path.

    The branch itself is that directory, so an empty marker is accepted and nothing is stored;
    S3A deletes it again later, which is equally a no-op. Anything with content is refused.
    The caller has authorized WriteRepo.
    """
    await writable_branch(ctx, repository, ref)
    if declared_body_size(ctx) != 0:
        raise S3Error("InvalidArgument", "the root of a branch can only take an empty directory marker")
    return Response(200, [("ETag", quoted_etag(EMPTY_MD5))])


def parse_copy_source(value: str) -> tuple[str, str, str]:
    """(repository, ref, key) of an x-amz-copy-source header."""
    source = decode_component(value.partition("?")[0]).lstrip("/")
    repository, _, path = source.partition("/")
    ref, key = split_path(path)
    if not repository or not ref or not key:
        raise S3Error("InvalidArgument", f"invalid x-amz-copy-source {value!r}: expected /<repository>/<ref>/<key>")
    return repository, ref, key


async def copy_object(ctx: Context) -> Response:
    try:
        return await _copy_object(ctx)
    except S3Error as exc:
        # A copy within the bucket names the identity of the repository this edge looked up
        # before reading the source; if the edge remembered one deleted (and created again
        # under the name) since, graveler refused it and the copy is made again in the new one.
        if exc.what != "repository" or not await repository_replaced(ctx, ctx.request.bucket):
            raise
        return await _copy_object(ctx)


async def _copy_object(ctx: Context) -> Response:
    request = ctx.request
    repository = request.bucket
    ref, key = split_path(request.path)
    src_repo, src_ref, src_key = parse_copy_source(request.headers["x-amz-copy-source"])
    await ctx.authorize_key(READ_OBJECT, src_repo, src_key)
    # Within the bucket the copy shares the source's bytes: the repository is looked up before
    # the source is read, and the entry names its identity. Identities are never reused, so
    # graveler taking the entry means the source was read in that same repository, and its
    # address is one of that repository's namespace, not of one deleted since.
    read_in = (await ctx.backend.place(repository)).repository_id if src_repo == repository else ""
    source = await source_entry(ctx, src_repo, src_ref, src_key)
    check_copy_source_conditions(ctx, source)
    await ctx.authorize_key(WRITE_OBJECT, repository, key, branch=ref)
    object_key_required(ref, key)
    place = await writable_branch(ctx, repository, ref)
    directive = request.headers.get("x-amz-metadata-directive", "COPY").upper()
    if directive not in ("COPY", "REPLACE"):
        raise S3Error("InvalidArgument", "x-amz-metadata-directive must be COPY or REPLACE")
    if directive == "COPY" and (src_repo, src_ref, src_key) == (repository, ref, key):
        raise S3Error(
            "InvalidRequest",
            "This copy request is illegal because it is trying to copy an object to itself without changing "
            "the object's metadata.",
        )
    entry = pb.Entry()
    entry.CopyFrom(source)
    entry.last_modified.CopyFrom(now_timestamp())
    if directive == "REPLACE":
        entry.content_type = request.headers.get("content-type", DEFAULT_CONTENT_TYPE)
        kept = {k: v for k, v in source.metadata.items() if k.startswith((checksums.HEADER_PREFIX, "x-silt-"))}
        entry.ClearField("metadata")
        entry.metadata.update(user_metadata(request))
        entry.metadata.update(kept)  # the same bytes: their checksum still holds
    # Another repository has its own storage namespace (and garbage collection): the core copies
    # the bytes; within one repository the new entry shares them, objects being immutable.
    src_namespace = await ctx.backend.namespace(src_repo) if src_repo != repository else ""
    staged = stage_request(repository, ref, key, entry)
    staged.neutral = ctx.neutral
    try:
        await ctx.backend.copy_entry(staged, place, source, src_namespace, read_in)
    except ObjectWriteFailed as failed:
        raise core_write_error(failed, staged) from None
    ctx.record(ev.WRITE, repository, ref, key, entry.size)
    body = (
        f"<CopyObjectResult><LastModified>{iso_time(entry_time(entry))}</LastModified>"
        f"<ETag>{x(quoted_etag(entry.etag))}</ETag></CopyObjectResult>"
    )
    return xml_response(body)


# --- deleting ------------------------------------------------------------------------------


async def _delete(ctx: Context, repository: str, ref: str, key: str) -> None:
    backend = ctx.backend
    request = api.DeleteEntryRequest(repository=repository, branch=ref, key=key)
    try:
        await backend.call(backend.graveler.DeleteEntry, request, "NoSuchKey")
    except S3Error as exc:
        if exc.code != "NoSuchKey":
            raise
        # S3 deletes are idempotent: deleting a missing key succeeds (a missing branch does not).
        return
    ctx.record(ev.DELETE, repository, ref, key)


async def delete_object(ctx: Context) -> Response:
    repository = ctx.request.bucket
    ref, key = split_path(ctx.request.path)
    await ctx.authorize_key(DELETE_OBJECT, repository, key, branch=ref)
    await writable_branch(ctx, repository, ref)
    if key:  # "<branch>/" is the branch root marker, never stored: deleted as asked
        await _delete(ctx, repository, ref, key)
    return Response(204)


async def delete_objects(ctx: Context) -> Response:
    """DeleteObjects: parse, authorize once per branch named (at most MAX_DELETE_BRANCHES; S3A's
    bulk deletes of directory markers name one), then one graveler call per branch, each key
    with its own outcome."""
    repository = ctx.request.bucket
    raw = await ctx.request.body.read_all()
    root = parse_xml(raw)
    ns = root.tag[: root.tag.index("}") + 1] if root.tag.startswith("{") else ""
    quiet = (root.findtext(f"{ns}Quiet") or "").strip().lower() == "true"
    paths = [(obj.findtext(f"{ns}Key") or "") for obj in root.findall(f"{ns}Object")]
    if not paths or len(paths) > MAX_DELETE_KEYS:
        raise S3Error("MalformedXML", f"DeleteObjects takes 1 to {MAX_DELETE_KEYS} keys")
    refs = list(dict.fromkeys(_deleted_at(path)[0] for path in paths))
    if len(refs) > MAX_DELETE_BRANCHES:
        raise S3Error("MalformedXML", f"DeleteObjects takes keys of at most {MAX_DELETE_BRANCHES} branches")
    # A name that is no branch's is refused per key, without asking auth about it.
    misnamed = {ref: error for ref in refs if (error := _branch_name_error(ref)) is not None}
    # Each branch's own scope (its WriteBranch statements count); a request allowed no key on any
    # of them is refused whole, as one without the action at all.
    scopes = {
        ref: await ctx.backend.key_scope(ctx.user_id, DELETE_OBJECT, repository, ref, ctx.request.source_ip)
        for ref in refs
        if ref not in misnamed
    }
    if scopes:  # else every key is refused for its name alone, whoever asks and wherever
        if all(scope.nothing for scope in scopes.values()):
            raise S3Error("AccessDenied", f"{ctx.user_id} may not {DELETE_OBJECT} on {repository}")
        await ctx.backend.namespace(repository)
    keys_by_ref: dict[str, list[str]] = {}
    outcomes: dict[tuple[str, str], S3Error | None] = {}
    for path in paths:
        ref, key = _deleted_at(path)
        if ref in misnamed:
            outcomes[(ref, key)] = misnamed[ref]
        elif scopes[ref].allows(key):
            keys_by_ref.setdefault(ref, []).append(key)
        else:  # refused alone, as S3 refuses a key the caller may not delete
            outcomes[(ref, key)] = S3Error("AccessDenied", f"{ctx.user_id} may not {DELETE_OBJECT} on {key}")
    for ref, keys in keys_by_ref.items():
        for key, error in zip(keys, await _delete_on_branch(ctx, repository, ref, keys), strict=True):
            outcomes[(ref, key)] = error
    deleted = [path for path in paths if outcomes[_deleted_at(path)] is None]
    errors = [(path, error) for path in paths if (error := outcomes[_deleted_at(path)]) is not None]
    parts = [] if quiet else [f"<Deleted><Key>{x(k)}</Key></Deleted>" for k in deleted]
    parts += [
        f"<Error><Key>{x(k)}</Key><Code>{e.code}</Code><Message>{x(e.message)}</Message></Error>" for k, e in errors
    ]
    return xml_response(f'<DeleteResult xmlns="{XMLNS}">{"".join(parts)}</DeleteResult>')


def _deleted_at(path: str) -> tuple[str, str]:
    """(branch or ref, key) a DeleteObjects key names: `@<branch>/<key>` deletes on the branch
    (S3A deletes a ref-neutral file's parent directory markers so); a malformed marker is left
    for _branch_name_error to refuse."""
    ref, key = split_path(path)
    if ref.startswith(NEUTRAL_MARKER):
        try:
            return parse_neutral(path)
        except S3Error:
            pass
    return ref, key


def _branch_name_error(ref: str) -> S3Error | None:
    """The error of each key of ref when ref can name no branch, else None: MethodNotAllowed, as
    a write to a ref expression, a tag or a commit answers."""
    if not ref:
        return S3Error("InvalidArgument", "a key needs a branch and a name")
    if len(ref.encode()) > MAX_REF_BYTES:  # no ref of any kind is this long; not echoed back
        return S3Error("InvalidArgument", f"a key's branch is at most {MAX_REF_BYTES} bytes")
    try:
        validate_ref_name(ref)
    except InvalidArgument as exc:
        return S3Error("MethodNotAllowed", f"{exc}: only branches can be written")
    return None


async def _delete_on_branch(ctx: Context, repository: str, ref: str, keys: list[str]) -> list[S3Error | None]:
    """Delete keys of one branch in one graveler call; the error of each key, None if deleted.

    A missing key counts as deleted (S3 deletes are idempotent), and so does "<branch>/", the
    branch root marker, which is never stored. Only an unavailable graveler fails the request.
    """
    stored = list(dict.fromkeys(key for key in keys if key))
    backend = ctx.backend
    request = api.DeleteEntriesRequest(repository=repository, branch=ref, keys=stored)
    try:
        await writable_branch(ctx, repository, ref)
    except S3Error as exc:
        if exc.code in ("ServiceUnavailable", "SlowDown"):
            raise
        return [exc] * len(keys)  # not a branch of this repository: every key refused alike
    try:
        reply = await backend.call(backend.graveler.DeleteEntries, request, "NoSuchKey") if stored else None
    except S3Error as exc:
        if exc.code in ("ServiceUnavailable", "SlowDown"):
            raise
        return [None if exc.code == "NoSuchKey" else exc] * len(keys)
    errors: dict[str, S3Error | None] = {}
    for outcome in reply.outcomes if reply is not None else ():
        if outcome.result == api.DeleteEntryOutcome.RESULT_INVALID_KEY:
            errors[outcome.key] = S3Error("InvalidArgument", outcome.message)
            continue
        errors[outcome.key] = None
        if outcome.result == api.DeleteEntryOutcome.RESULT_DELETED:
            ctx.record(ev.DELETE, repository, ref, outcome.key)
    return [errors.get(key) if key else None for key in keys]
