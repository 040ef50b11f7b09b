"""What every operation shares: the request context, responses, authorization, XML and entry helpers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from xml.etree import ElementTree
from xml.sax.saxutils import escape

from edge.core.object_writes import NoSuchBranch, NotABranch, ObjectWriteFailed, ShortBody, WritePhase
from edge.gateway.backend import Backend, s3_error, store_error
from edge.gateway.errors import S3Error
from edge.gateway.metadata_values import stored_value
from edge.gateway.request import DECIMAL_CAP, Request, decimal
from engine.core.validation import validate_ref_name
from silt.config import S3GatewayConfig
from silt.errors import InvalidArgument, SiltError
from silt.graveler.v1 import events_pb2 as ev
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb
from silt.iam_actions import READ_OBJECT
from silt.key_scope import KeyScope
from silt.objects import MAX_USER_METADATA_BYTES, USER_METADATA_PREFIX

# Shared with the REST API (one layout of objects in a namespace); operations import them from here.
from silt.objects import new_physical_address as new_physical_address
from silt.objects import split_address as split_address
from silt.repository_place import RepositoryPlace

XMLNS = "http://s3.amazonaws.com/doc/2006-03-01/"
XML_DECL = '<?xml version="1.0" encoding="UTF-8"?>\n'
# Standard headers kept with an object and returned on GET/HEAD, besides x-amz-meta-*.
STORED_HEADERS = ("cache-control", "content-disposition", "content-encoding", "content-language", "expires")


@dataclass
class Response:
    status: int = 200
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    stream: AsyncIterator[bytes] | None = None
    length: int | None = None  # Content-Length of a streamed body


@dataclass
class Context:
    request: Request
    backend: Backend
    config: S3GatewayConfig
    user_id: str = ""
    access_key_id: str = ""
    # (signing key, claim) of a SigV4-signed request: aws-chunked bodies verify each chunk with them.
    v4: tuple[bytes, Any] | None = None
    # The request named its object by a ref-neutral address (`@<branch>/<key>`): a write records
    # the key (StageEntryRequest.neutral); request.path then names the branch as `<branch>/<key>`.
    neutral: bool = False

    async def authorize(self, action: str, repository: str) -> None:
        if not await self.backend.allowed(self.user_id, action, repository, self.request.source_ip):
            raise S3Error("AccessDenied", f"{self.user_id} may not {action} on {repository}")

    async def key_scope(self, action: str, repository: str, branch: str = "") -> KeyScope:
        """The keys of repository this user may do an object action on; AccessDenied for none.
        branch: where a write or delete is staged (its WriteBranch statements count)."""
        scope = await self.backend.key_scope(self.user_id, action, repository, branch, self.request.source_ip)
        if scope.nothing:
            where = f"{repository}@{branch}" if branch else repository
            raise S3Error("AccessDenied", f"{self.user_id} may not {action} on {where}")
        return scope

    async def authorize_key(self, action: str, repository: str, key: str, branch: str = "") -> None:
        """AccessDenied unless this user may do the object action on key (no ref in it), staged
        on branch for a write or delete."""
        scope = await self.backend.key_scope(self.user_id, action, repository, branch, self.request.source_ip)
        if not scope.allows(key):
            where = f"{repository}@{branch}" if branch and scope.nothing else f"{repository}/{key}"
            raise S3Error("AccessDenied", f"{self.user_id} may not {action} on {where}")

    def record(
        self, event_type: ev.HistoryEventType.ValueType, repository: str, ref: str, key: str, size: int = 0
    ) -> None:
        """A history event for what this request did (queued, never waited for)."""
        self.backend.history.emit(event_type, repository, ref, key, self.user_id, size)


def parse_xml(raw: bytes) -> ElementTree.Element:
    """A request's XML document (DeleteObjects, CompleteMultipartUpload), or MalformedXML.

    Not only ParseError: a declared encoding Python does not know (`encoding="U0TF-8"`) is a
    LookupError from the parser, and once answered 500.
    """
    try:
        return ElementTree.fromstring(raw)
    except (ElementTree.ParseError, LookupError, ValueError):
        raise S3Error("MalformedXML") from None


def xml_response(body: str, status: int = 200) -> Response:
    return Response(status, [("Content-Type", "application/xml")], (XML_DECL + body).encode())


# Characters an XML parser would not give back as they are: a CR is normalized to LF, and the
# C0 controls other than TAB, LF and CR are not XML 1.0 text at all. S3 writes every C0 control
# as a character reference (a client that cannot parse those asks for encoding-type=url, as
# the SDKs do by default).
_CONTROL_REFERENCES = {c: f"&#x{c:X};" for c in range(0x00, 0x20)}


def x(value: str) -> str:
    escaped = escape(value)
    if any(ord(c) < 0x20 for c in escaped):
        escaped = escaped.translate(_CONTROL_REFERENCES)
    return escaped


def iso_time(when: datetime) -> str:
    # Milliseconds matter: `aws s3 sync` re-uploads files whose local mtime is newer than this.
    when = when.astimezone(UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def http_time(when: datetime) -> str:
    """An HTTP date (RFC 9110 IMF-fixdate), written directly: every object response carries one."""
    t = when.astimezone(UTC)
    return (
        f"{_WEEKDAYS[t.weekday()]}, {t.day:02d} {_MONTHS[t.month - 1]} {t.year:04d} "
        f"{t.hour:02d}:{t.minute:02d}:{t.second:02d} GMT"
    )


EPOCH = datetime.fromtimestamp(0, UTC)


def entry_time(entry: pb.Entry) -> datetime:
    if entry.HasField("last_modified"):
        # What Timestamp.ToDatetime(tzinfo=UTC) gives (nanoseconds cut to microseconds),
        # without its general conversion: every object answer reads it.
        stamp = entry.last_modified
        return EPOCH + timedelta(seconds=stamp.seconds, microseconds=stamp.nanos // 1000)
    return EPOCH


def quoted_etag(etag: str) -> str:
    etag = etag.strip('"')
    return f'"{etag}"'


_META_PREFIX = USER_METADATA_PREFIX


def user_metadata(request: Request) -> dict[str, str]:
    """The user metadata (x-amz-meta-*) and stored headers a write sends. Nothing else is kept
    from its headers: checksums and the other transport headers are never user metadata."""
    headers = request.headers
    out = {k: stored_value(v) for k, v in headers.items() if k.startswith(_META_PREFIX)}
    # S3 counts the UTF-8 bytes of names and values.
    size = sum(len(k) - len(_META_PREFIX) + len(v.encode("utf-8", "surrogatepass")) for k, v in out.items())
    if size > MAX_USER_METADATA_BYTES:
        raise S3Error(
            "MetadataTooLarge",
            f"user metadata is {size} bytes; S3 allows {MAX_USER_METADATA_BYTES}",
            Size=str(size),
            MaxSizeAllowed=str(MAX_USER_METADATA_BYTES),
        )
    for name in STORED_HEADERS:
        value = headers.get(name)
        if value and name == "content-encoding":
            # aws-chunked describes how this request's body was framed, not the object. Anything
            # else is kept exactly as sent (S3 returns "deflate, gzip" as it came).
            codings = [c.strip() for c in value.split(",")]
            if any(c.lower() == "aws-chunked" for c in codings):
                value = ",".join(c for c in codings if c and c.lower() != "aws-chunked")
        if value:
            out[name] = value
    return out


async def stat_entry(ctx: Context, repository: str, ref: str, key: str) -> pb.Entry:
    """The entry at ref/key, in one graveler call that resolves the ref and reads the entry.

    The caller has authorized ReadRepo on the repository.
    """
    if not key:
        raise S3Error("NoSuchKey")
    backend = ctx.backend
    # Graveler's NotFound says whether the repository or the key is missing (NoSuchBucket or
    # NoSuchKey): no extra lookup.
    info = await backend.stat_entry(api.StatEntryRequest(repository=repository, ref=ref, key=key))
    return info.entry


# A path's first element that starts with this names no ref but a ref-neutral key: ref names
# never hold "@" (engine/core/validation.py) and a ref expression has it only after its base
# (`main@`, committed only), so a leading "@" is unambiguous.
NEUTRAL_MARKER = "@"


def parse_neutral(path: str) -> tuple[str, str]:
    """(branch, key) of a ref-neutral path `@<branch>/<key>` (key "" for `@<branch>` or
    `@<branch>/`); InvalidArgument, saying the form, for anything else after the marker."""
    branch, _, key = path[len(NEUTRAL_MARKER) :].partition("/")
    try:
        validate_ref_name(branch)
    except InvalidArgument as exc:
        raise S3Error(
            "InvalidArgument",
            f"a ref-neutral address is @<branch>/<key>; {branch[:64]!r} is not a branch name: {exc}",
        ) from None
    return branch, key


async def neutral_entry(ctx: Context, repository: str, key: str) -> pb.Entry:
    """The entry recorded for a ref-neutral key, read by the key alone (no ref): NoSuchKey if
    none is. The caller has authorized ReadObject on the key."""
    if not key:
        raise S3Error("NoSuchKey")
    info = await ctx.backend.neutral_entry(api.GetNeutralEntryRequest(repository=repository, key=key))
    return info.entry


async def source_entry(ctx: Context, repository: str, ref: str, key: str) -> pb.Entry:
    """A copy source's entry (CopyObject, UploadPartCopy): at ref/key, or, for a ref-neutral
    `@<branch>`, the record of key. The caller has authorized ReadObject on the key."""
    if ref.startswith(NEUTRAL_MARKER):
        parse_neutral(f"{ref}/{key}")
        return await neutral_entry(ctx, repository, key)
    return await stat_entry(ctx, repository, ref, key)


@dataclass(frozen=True)
class WriteCondition:
    """S3's conditional write headers (PutObject, CompleteMultipartUpload)."""

    if_absent: bool = False  # If-None-Match: *
    if_match_etag: str = ""  # If-Match: <etag>

    @property
    def any(self) -> bool:
        return self.if_absent or bool(self.if_match_etag)


def write_condition(request: Request) -> WriteCondition:
    """The condition a write's headers ask for; checked by graveler as it stages the entry."""
    if_none_match = request.headers.get("if-none-match")
    if if_none_match is not None and if_none_match.strip() != "*":
        raise S3Error("NotImplemented", "If-None-Match on a write takes only *", Header="If-None-Match")
    if_match = (request.headers.get("if-match") or "").strip().strip('"')  # "*": any existing version
    return WriteCondition(if_absent=if_none_match is not None, if_match_etag=if_match)


async def precheck_write_condition(
    ctx: Context, repository: str, branch: str, key: str, condition: WriteCondition, own_address: str = ""
) -> None:
    """Refuse a conditional write that certainly fails before it consumes anything (the parts
    of a multipart upload); the exact check is still the one graveler makes as it stages.
    own_address: the physical address this write stages (a retried CompleteMultipartUpload's);
    a current entry naming it is this write's own, from an earlier attempt whose answer was
    lost, and graveler takes the retry as a success."""
    if not condition.any:
        return
    # Reading the current entry is a read: a writer who may not read the key learns nothing from it.
    await ctx.authorize_key(READ_OBJECT, repository, key)
    try:
        current: pb.Entry | None = await stat_entry(ctx, repository, branch, key)
    except S3Error as exc:
        if exc.code != "NoSuchKey":
            raise
        current = None
    if own_address and current is not None and current.physical_address == own_address:
        return
    if condition.if_absent and current is not None:
        raise S3Error("PreconditionFailed", Condition="If-None-Match")
    if condition.if_match_etag:
        if current is None:
            raise S3Error("NoSuchKey")
        if condition.if_match_etag != "*" and current.etag.strip('"') != condition.if_match_etag:
            raise S3Error("PreconditionFailed", Condition="If-Match")


def stage_request(
    repository: str, branch: str, key: str, entry: pb.Entry, condition: WriteCondition | None = None
) -> api.StageEntryRequest:
    request = api.StageEntryRequest(repository=repository, branch=branch, key=key, entry=entry)
    if condition is not None and condition.any:
        request.if_absent = condition.if_absent
        request.if_match_etag = condition.if_match_etag
    return request


def staging_error(error: SiltError, request: api.StageEntryRequest) -> S3Error:
    """A failed StageEntry as S3 answers it. Graveler answers FAILED_PRECONDITION for a condition
    that does not hold, NOT_FOUND for If-Match on a missing key (the branch was checked before
    the bytes were written)."""
    if request.if_absent or request.if_match_etag:
        return s3_error(error, "NoSuchKey", "PreconditionFailed")
    if request.neutral:
        # The key was recorded with other content: a ref-neutral key never changes.
        return s3_error(error, "NoSuchBucket", "PreconditionFailed")
    return s3_error(error, "NoSuchBucket")


async def stage_new_bytes(
    ctx: Context,
    repository: str,
    branch: str,
    key: str,
    entry: pb.Entry,
    place: RepositoryPlace,
    condition: WriteCondition | None = None,
    *,
    follow_replacement: bool = True,
) -> None:
    """Stage an entry for bytes this request just wrote in place.namespace, as the edge's core
    does (EdgeClient.stage_new_bytes: the bytes deleted if graveler certainly did not take it,
    a repository created again under the name followed unless follow_replacement is off, as
    for a write that belongs to the old repository alone: an upload opened in it)."""
    request = stage_request(repository, branch, key, entry, condition)
    request.neutral = ctx.neutral
    try:
        await ctx.backend.stage_new_bytes(request, place, follow_replacement=follow_replacement)
    except SiltError as exc:
        raise staging_error(exc, request) from None


async def repository_replaced(ctx: Context, repository: str) -> bool:
    """Whether the repository this edge remembers under the name was deleted and another created
    under it since (then the new one is remembered instead)."""
    try:
        return await ctx.backend.remembered_replaced(repository)
    except SiltError as exc:
        raise s3_error(exc, "NoSuchBucket") from None


def object_key_required(ref: str, key: str) -> None:
    """An object write names a branch and a key: <branch>/<key>."""
    if not ref or not key:
        raise S3Error("InvalidArgument", "an object key needs a branch and a name: <branch>/<key>")


async def writable_branch(ctx: Context, repository: str, ref: str) -> RepositoryPlace:
    """The storage namespace (and identity) of a repository whose ref is a branch (a write
    target), as the edge's core checks it (EdgeClient.writable_place).

    Authorization is the caller's, once, before this: this only resolves. Both lookups are
    cached, so a write to a known branch costs no graveler call here.
    """
    if not ref:
        raise S3Error("InvalidArgument", "an object key needs a branch and a name: <branch>/<key>")
    try:
        return await ctx.backend.writable_place(repository, ref)
    except SiltError as exc:
        raise core_write_error(exc) from None


def core_write_error(error: SiltError | ObjectWriteFailed, request: api.StageEntryRequest | None = None) -> S3Error:
    """A failed write of the edge's core as S3 answers it, by the phase it failed in: looking up
    the target (NoSuchBucket for a repository or branch missing, MethodNotAllowed for a ref that
    is not a branch), writing the bytes (the store's error; IncompleteBody for a body that ended
    early), staging request's entry (staging_error)."""
    phase = WritePhase.TARGET
    if isinstance(error, ObjectWriteFailed):
        phase, error = error.phase, error.error
    if isinstance(error, NotABranch):
        return S3Error("MethodNotAllowed", str(error))
    if isinstance(error, NoSuchBranch):
        return S3Error("NoSuchBucket", str(error))
    if isinstance(error, ShortBody):
        return S3Error("IncompleteBody", str(error))
    if phase is WritePhase.BYTES:
        return store_error(error)
    if phase is WritePhase.STAGING and request is not None:
        return staging_error(error, request)
    return s3_error(error, "NoSuchBucket")


def declared_body_size(ctx: Context) -> int | None:
    """The size of the object the request carries, as its headers declare it (aws-chunked decoded)."""
    headers = ctx.request.headers
    declared = decimal(headers.get("x-amz-decoded-content-length") or headers.get("content-length") or "")
    return declared if declared is not None and declared < DECIMAL_CAP else None
