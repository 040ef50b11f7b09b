"""Writing objects as the S3 gateway's PutObject does, through the same edge client
(edge/core/client.py): new bytes at a fresh physical address in the repository's storage
namespace, then one StageEntry; bytes graveler certainly did not take are deleted again
(edge/core/write_outcome.py; the uncommitted sweep of garbage collection removes what a lost answer
or a crash leaves)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp
from starlette.datastructures import Headers
from starlette.requests import Request

from edge.api.backend import Backend, UploadLimits
from edge.api.context import Context
from edge.api.errors import ApiError, bad_request, from_graveler, from_silt, typed_graveler_call
from edge.api.objects.body import (
    MAX_UPLOAD_BYTES,
    MultipartContent,
    RawBody,
    RawChunks,
    Source,
    multipart_boundary,
)
from edge.core.object_writes import ConditionFailed, ObjectWriteFailed, ShortBody, SourceBody, WritePhase
from edge.core.write_outcome import certainly_not_applied
from silt.block.adapter import PutResult
from silt.errors import Aborted, FailedPrecondition, SiltError
from silt.graveler.v1 import graveler_pb2 as api
from silt.objects import (
    DEFAULT_CONTENT_TYPE,
    MAX_USER_METADATA_BYTES,
    content_type_problem,
    user_metadata_problem,
    user_metadata_size,
)
from silt.repository_place import RepositoryPlace

# Longest object path, in UTF-8 bytes (S3's and graveler's key limit).
MAX_PATH_BYTES = 1024
# lakeFS's user metadata headers: `X-Lakefs-Meta-<name>: <value>`.
METADATA_HEADER_PREFIX = "x-lakefs-meta-"


def checked_path(path: str | None, name: str = "path") -> str:
    if path is None:
        raise bad_request(f"invalid parameters: {name} is required")
    if not path:
        raise bad_request(f"{name} must not be empty")
    size = len(path.encode("utf-8", "surrogatepass"))
    if size > MAX_PATH_BYTES:
        raise bad_request(f"{name} is {size} bytes; at most {MAX_PATH_BYTES} are allowed")
    return path


def checked_user_metadata(metadata: dict[str, str]) -> dict[str, str]:
    size = user_metadata_size(metadata)
    if size > MAX_USER_METADATA_BYTES:
        raise bad_request(f"user metadata is {size} bytes; at most {MAX_USER_METADATA_BYTES} are allowed")
    problem = user_metadata_problem(metadata)
    if problem is not None:
        raise bad_request(problem)
    return metadata


def checked_content_type(content_type: str) -> str:
    problem = content_type_problem(content_type)
    if problem is not None:
        raise bad_request(problem)
    return content_type


def header_metadata(headers: Headers) -> dict[str, str]:
    """User metadata from `X-Lakefs-Meta-*` headers: names lower-cased (as HTTP header names
    are compared), everything after the prefix kept, underscores included."""
    n = len(METADATA_HEADER_PREFIX)
    found = {k[n:]: v for k, v in headers.items() if k.startswith(METADATA_HEADER_PREFIX)}
    return checked_user_metadata(found)


def now() -> Timestamp:
    stamp = Timestamp()
    stamp.GetCurrentTime()
    return stamp


async def typed_call(ctx: Context, method: Any, request: Any) -> Any:
    """One graveler call whose refusals stay typed (NotFound says what is missing), so a route
    can tell a missing object from a missing branch; other failures as ctx.call answers them."""
    return await typed_graveler_call(method, request, ctx.deadline)


async def ensure_branch(ctx: Context, repository: str, branch: str) -> None:
    """Writes go to existing branches only: checked before any byte is written."""
    backend = ctx.backend
    if backend.known_branch(repository, branch):
        return
    await ctx.call(backend.graveler.GetBranch, api.GetBranchRequest(repository=repository, name=branch))
    backend.remember_branch(repository, branch)


class UploadBody(SourceBody):
    """An upload's bytes as the edge's core reads them (CheckedBody): a raw body, or the part
    named `content` of a multipart/form-data one, within the upload's size limit and pace;
    refused before any byte is written: a declared size over the limit, a bad content type."""

    # The request itself ends a stalled body sooner (UploadLimits); this bounds a worker thread's
    # wait when the event loop no longer serves the request.
    stall_seconds = UploadLimits.idle_seconds + 30

    def __init__(
        self, source: Source, declared: int | None, content_type: str, received: Callable[[], None] | None = None
    ) -> None:
        """received: called once the whole body has been received and checked (an upload slot
        given back before the entry is staged)."""
        super().__init__(source, declared)
        self.content_type = content_type
        self._received = received

    async def finish(self, written: PutResult) -> dict[str, str]:
        # Read to its end: a body cut short of its Content-Length is refused (RawChunks).
        if not await self.ended():
            raise bad_request("the body is longer than its declared length")
        if self._received is not None:
            self._received()
        return {}


class _NotStarted:
    """The source of a RequestUpload not started yet: the core starts a body before it reads."""

    async def read(self, n: int) -> bytes:
        raise RuntimeError("an upload's body is read once it is started")


class RequestUpload(UploadBody):
    """An upload route's body, opened only once the edge's core knows the write's target takes it
    (start): one of the process's upload slots taken in `held` (given back once the body is in,
    or when `held` closes), then the raw body or the form's part named `content`, whose content
    type is checked. Refused before any byte is written: all slots taken (503), a declared size
    over the limit, a bad content type."""

    def __init__(self, backend: Backend, request: Request, held: contextlib.ExitStack) -> None:
        super().__init__(_NotStarted(), None, "")
        self._backend = backend
        self._request = request
        self._held = held

    async def start(self) -> None:
        self._received = self._held.enter_context(self._backend.upload_slot())
        chunks = RawChunks(self._request, MAX_UPLOAD_BYTES, self._backend.upload_limits)
        header_type = self._request.headers.get("content-type", "")
        boundary = multipart_boundary(header_type)
        if boundary is None:
            self._source, self._declared = RawBody(chunks), chunks.declared
            self.content_type = header_type or DEFAULT_CONTENT_TYPE
        else:
            form = MultipartContent(chunks, boundary)
            await form.start()
            self._source, self._declared = form, None
            self.content_type = form.content_type or DEFAULT_CONTENT_TYPE
        checked_content_type(self.content_type)


async def stage_new_bytes(
    ctx: Context, request: api.StageEntryRequest, place: RepositoryPlace, *, follow_replacement: bool = True
) -> RepositoryPlace:
    """Stage an entry for bytes this request wrote in place.namespace, as the edge's core does
    (EdgeClient.stage_new_bytes: the bytes deleted if graveler certainly did not take it, a
    repository created again under the name followed unless follow_replacement is off; then
    request.entry names the bytes staged). Its failure as staging_error answers it. Returns
    where the entry was staged."""
    try:
        return await ctx.backend.stage_new_bytes(request, place, ctx.deadline, follow_replacement=follow_replacement)
    except SiltError as exc:
        raise staging_error(exc, request) from None


def write_error(failed: ObjectWriteFailed, request: api.StageEntryRequest) -> ApiError:
    """A failed write of the edge's core as the API answers it, by the phase it failed in: the
    target's lookup as graveler's answer, the store's error as any (400 for a body that ended
    early), the staging as staging_error."""
    error = failed.error
    if isinstance(error, ConditionFailed):
        return ApiError(412, "path already exists")  # found before the body was read
    if failed.phase is WritePhase.STAGING:
        return staging_error(error, request)
    if isinstance(error, ShortBody):
        return bad_request(str(error))
    if failed.phase is WritePhase.BYTES:
        return from_silt(error)
    return from_graveler(error, "graveler")


def staging_error(error: SiltError, request: api.StageEntryRequest) -> ApiError:
    """A failed staging of request as the API answers it: a condition that does not hold is 412;
    a failure after which the entry may stand is 503 (retry), whatever graveler's status was; a
    repository gone is 404 as graveler answers."""
    conditional = request.if_absent or request.if_match_etag
    if conditional and isinstance(error, FailedPrecondition):
        return ApiError(412, "path already exists" if request.if_absent else "object changed")
    if conditional and isinstance(error, Aborted):
        # It may stand: not a 409, which would say it did not happen.
        return ApiError(503, f"a concurrent write raced this conditional upload, which may stand: {error}")
    if not certainly_not_applied(error):
        return ApiError(503, f"graveler may have staged the object, retry: {error}")
    return from_graveler(error, "graveler")


async def repository_replaced(ctx: Context, repository: str) -> bool:
    """Whether the repository this edge remembers under the name was deleted and another created
    under it since (then the new one is remembered instead)."""
    try:
        return await ctx.backend.remembered_replaced(repository, ctx.deadline)
    except SiltError as exc:
        raise from_graveler(exc, "graveler") from None
