"""Objects: get (with Range), head, stat, list, upload, delete, bulk delete, copy, user metadata.

Bytes go straight between the client and the block adapter, as in the S3 gateway, and are laid
out as the gateway lays them out (silt/objects.py): an object uploaded here is read over S3 and
the other way round. Only metadata goes through graveler. With `presign=true` (presign.py) the
bytes do not pass here at all: get answers a redirect to a presigned URL, stat and list put one
in `physical_address`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse
from lakefs_sdk.models import (
    ObjectCopyCreation,
    ObjectError,
    ObjectErrorList,
    PathList,
    UnderlyingObjectProperties,
    UpdateObjectUserMetadata,
)

from edge.api.bodies import json_body
from edge.api.context import Ctx
from edge.api.errors import ApiError, bad_request, from_silt
from edge.api.filtered_pages import listing_of, next_offset, resume_after
from edge.api.objects.listing import EMPTY, USER, listing_page, namespace_base, object_row
from edge.api.objects.presign import Presigner, download_name, presigner
from edge.api.objects.stats import object_headers
from edge.api.objects.write import (
    RequestUpload,
    checked_path,
    checked_user_metadata,
    ensure_branch,
    header_metadata,
    now,
    repository_replaced,
    typed_call,
    write_error,
)
from edge.api.paging import MAX_TOKEN, After, Amount, Prefix, page_size
from edge.api.responses import model_response, no_content
from edge.core.client import SMALL_BODY
from edge.core.filtered_scan import Scanned, scan_visible
from edge.core.object_reads import RangeNotSatisfiable, parse_byte_range, stream_reader
from edge.core.object_writes import ObjectWriteFailed
from silt.block.adapter import PresignedURL
from silt.errors import FailedPrecondition, NotFound, SiltError
from silt.graveler.v1 import events_pb2 as ev
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb
from silt.iam_actions import DELETE_OBJECT, READ_OBJECT, WRITE_OBJECT
from silt.key_scope import KeyScope
from silt.objects import split_address, with_user_metadata
from silt.paging import MAX_PAGE
from silt.repository_place import RepositoryPlace

router = APIRouter()
T = TypeVar("T")

REF_OBJECTS = "/repositories/{repository}/refs/{ref}/objects"
BRANCH_OBJECTS = "/repositories/{repository}/branches/{branch}/objects"
# lakeFS's cap on one bulk delete.
MAX_DELETE_PATHS = 1000
# Paths of one bulk delete deleted at the same time (each is one graveler call).
DELETE_CONCURRENCY = 16
JSON = "application/json"

# Checked by checked_path (bytes, not characters, and a message that names the parameter).
ObjectPath = Annotated[str | None, Query(description="the object's path in the ref")]
Delimiter = Annotated[str, Query(max_length=MAX_TOKEN, description="group paths by this delimiter")]


async def _entry(ctx: Ctx, repository: str, ref: str, path: str | None) -> pb.Entry:
    request = api.StatEntryRequest(repository=repository, ref=ref, key=checked_path(path))
    info = await ctx.backend.stat_entry(request, ctx.deadline)
    return info.entry


# --- reading -------------------------------------------------------------------------------


def _range_refused(size: int, message: str) -> Response:
    return JSONResponse({"message": message}, status_code=416, headers={"Content-Range": f"bytes */{size}"})


def _byte_range(request: Request, size: int) -> tuple[int, int] | None:
    header = request.headers.get("range")
    return None if header is None else parse_byte_range(header, size)


async def _presigned_read(ctx: Ctx, request: Request, repository: str, key: str, entry: pb.Entry) -> PresignedURL:
    signer = presigner(request)
    signer.check_enabled()
    namespace = await ctx.backend.namespace(repository, ctx.deadline)
    url: PresignedURL = await ctx.backend.run(signer.sign_read, request, namespace, entry, download_name(key))
    return url


@router.get(REF_OBJECTS)
async def get_object(
    ctx: Ctx, request: Request, repository: str, ref: str, path: ObjectPath = None, presign: bool = False
) -> Response:
    await ctx.authorize_key(READ_OBJECT, repository, checked_path(path))
    entry = await _entry(ctx, repository, ref, path)
    headers = object_headers(entry)
    if_none_match = request.headers.get("if-none-match")
    if if_none_match is not None and if_none_match.strip().strip('"') == entry.etag.strip('"'):
        return Response(status_code=304, headers={"ETag": headers["ETag"]})
    if presign:
        # As lakeFS: a redirect to the bytes at the store; the client sends its Range there.
        url = await _presigned_read(ctx, request, repository, checked_path(path), entry)
        ctx.record(ev.READ, repository, ref, checked_path(path), entry.size)
        return Response(status_code=302, headers={"Location": url.url, "Cache-Control": "no-store"})
    ctx.record(ev.READ, repository, ref, checked_path(path), entry.size)
    try:
        byte_range = _byte_range(request, entry.size)
    except RangeNotSatisfiable as exc:
        return _range_refused(entry.size, str(exc))
    status, length = 200, entry.size
    if byte_range is not None:
        status, length = 206, byte_range[1] - byte_range[0] + 1
        headers["Content-Range"] = f"bytes {byte_range[0]}-{byte_range[1]}/{entry.size}"
    headers["Content-Length"] = str(length)
    if length == 0:
        return Response(b"", status_code=status, headers=headers)
    try:
        return await _read_object(ctx, repository, entry, byte_range, length, status, headers)
    except NotFound:
        # The entry's bytes are not where the remembered namespace says: if the repository was
        # deleted and created again under its name since, the entry is the new one's, and so
        # are its bytes, in the new namespace.
        if not await repository_replaced(ctx, repository):
            raise
        return await _read_object(ctx, repository, entry, byte_range, length, status, headers)


async def _read_object(
    ctx: Ctx,
    repository: str,
    entry: pb.Entry,
    byte_range: tuple[int, int] | None,
    length: int,
    status: int,
    headers: dict[str, str],
) -> Response:
    backend = ctx.backend
    repository_namespace = await backend.namespace(repository, ctx.deadline)
    namespace, address = split_address(repository_namespace, entry.physical_address)
    source = backend.entry_reader(repository_namespace, entry)
    if length <= SMALL_BODY:
        data = await backend.read_small(source, namespace, address, byte_range)
        return Response(data, status_code=status, headers=headers)
    if byte_range is None:
        reader = await backend.run(source.get, namespace, address)
    else:
        reader = await backend.run(source.get_range, namespace, address, *byte_range)
    return StreamingResponse(stream_reader(backend.run, reader), status_code=status, headers=headers)


@router.head(REF_OBJECTS)
async def head_object(ctx: Ctx, request: Request, repository: str, ref: str, path: ObjectPath = None) -> Response:
    await ctx.authorize_key(READ_OBJECT, repository, checked_path(path))
    entry = await _entry(ctx, repository, ref, path)
    ctx.record(ev.READ, repository, ref, checked_path(path), entry.size)
    headers = object_headers(entry)
    try:
        byte_range = _byte_range(request, entry.size)
    except RangeNotSatisfiable:
        return Response(status_code=416, headers={"Content-Range": f"bytes */{entry.size}"})
    if byte_range is None:
        headers["Content-Length"] = str(entry.size)
        return Response(status_code=200, headers=headers)
    headers["Content-Range"] = f"bytes {byte_range[0]}-{byte_range[1]}/{entry.size}"
    headers["Content-Length"] = str(byte_range[1] - byte_range[0] + 1)
    return Response(status_code=206, headers=headers)


@router.get(REF_OBJECTS + "/stat")
async def stat_object(
    ctx: Ctx,
    request: Request,
    repository: str,
    ref: str,
    path: ObjectPath = None,
    user_metadata: bool = True,
    presign: bool = False,
) -> Response:
    await ctx.authorize_key(READ_OBJECT, repository, checked_path(path))
    entry = await _entry(ctx, repository, ref, path)
    ctx.record(ev.READ, repository, ref, checked_path(path), entry.size)
    namespace = await ctx.backend.namespace(repository, ctx.deadline)
    url = await _presigned_read(ctx, request, repository, checked_path(path), entry) if presign else None
    row = object_row(checked_path(path), entry, namespace_base(namespace), USER if user_metadata else EMPTY, url)
    return Response(row, media_type=JSON)


@router.get(REF_OBJECTS + "/underlyingProperties")
async def get_underlying_properties(ctx: Ctx, repository: str, ref: str, path: ObjectPath = None) -> Response:
    """What the object store says of the object's bytes: its storage class, where the store
    names one (silt/block/adapter.py ObjectStat.storage_class), else null."""
    await ctx.authorize_key(READ_OBJECT, repository, checked_path(path))
    entry = await _entry(ctx, repository, ref, path)
    namespace = await ctx.backend.namespace(repository, ctx.deadline)
    store_namespace, store_key = split_address(namespace, entry.physical_address)
    stat = await ctx.backend.run(ctx.backend.adapter.stat, store_namespace, store_key)
    return model_response(UnderlyingObjectProperties(storage_class=stat.storage_class))


def _presigned_urls(signer: Presigner, request: Request, namespace: str, items: list[Any]) -> list[PresignedURL | None]:
    """Each object's presigned GET URL (None for a common prefix), in a worker thread: the
    store's signer may take a while over a page of 1,000."""
    return [
        None if item.common_prefix else signer.sign_read(request, namespace, item.entry, download_name(item.key))
        for item in items
    ]


@router.get(REF_OBJECTS + "/ls")
async def list_objects(
    ctx: Ctx,
    request: Request,
    repository: str,
    ref: str,
    prefix: Prefix = "",
    after: After = "",
    amount: Amount = 100,
    delimiter: Delimiter = "",
    user_metadata: bool = True,
    presign: bool = False,
) -> Response:
    scope = await ctx.key_scope(READ_OBJECT, repository)
    if presign:
        presigner(request).check_enabled()
    size = page_size(amount)
    namespace = await ctx.backend.namespace(repository, ctx.deadline)
    cursor_listing = listing_of(ctx, "objects", repository, ref, prefix, delimiter)
    listing = api.ListEntriesRequest(
        repository=repository,
        ref=ref,
        prefix=prefix,
        delimiter=delimiter,
        after=resume_after(ctx, after, cursor_listing, scope, delimiter),
        amount=size,
    )
    offset = None
    if scope.whole:
        reply = await ctx.backend.list_entries(listing, ctx.deadline)
        items, has_more = list(reply.items), reply.has_more
    else:
        page = await _visible_entries(ctx, listing, scope, size)
        items, has_more = page.items, page.has_more
        offset = next_offset(ctx, page, cursor_listing, items[-1].key if items else "")
    urls = None
    if presign:
        urls = await ctx.backend.run(_presigned_urls, presigner(request), request, namespace, list(items))
    # The page's JSON written as text (objects/listing.py), the model's bytes; a page that says
    # "more" names where they start, or clients ask for it forever.
    return Response(listing_page(items, namespace, user_metadata, has_more, size, urls, offset), media_type=JSON)


async def _visible_entries(ctx: Ctx, listing: api.ListEntriesRequest, scope: KeyScope, size: int) -> Scanned[Any]:
    """Up to size items of a listing that scope lets the caller see (objects it may read,
    common prefixes below which such an object can lie), and whether more follow. Pages are
    read on past the others until one more visible item than asked is found, the listing ends
    or MAX_SCANNED items were read (edge/core/filtered_scan.py): has_more and next_offset then
    tell only of what the caller may see."""

    async def read(after: str, amount: int) -> tuple[list[Any], bool]:
        request = api.ListEntriesRequest()
        request.CopyFrom(listing)
        request.after, request.amount = after, amount
        reply = await ctx.backend.list_entries(request, ctx.deadline)
        return list(reply.items), reply.has_more

    def shown(item: Any) -> bool:
        return scope.may_allow_under(item.key) if item.common_prefix else scope.allows(item.key)

    # Pages of the most graveler answers at once: a filtered page may keep few of its items.
    return await scan_visible(read, shown, _key_of, listing.after, size, MAX_PAGE)


def _key_of(item: Any) -> str:
    key: str = item.key
    return key


# --- writing -------------------------------------------------------------------------------


@router.post(BRANCH_OBJECTS, status_code=201)
async def upload_object(
    ctx: Ctx,
    request: Request,
    repository: str,
    branch: str,
    path: ObjectPath = None,
    force: bool = False,
    storage_class: Annotated[str | None, Query(alias="storageClass", max_length=64)] = None,
) -> Response:
    key = checked_path(path)
    await ctx.authorize_key(WRITE_OBJECT, repository, key, branch=branch)
    metadata = header_metadata(request.headers)  # refused before any byte is written
    if_none_match = request.headers.get("if-none-match")
    if if_none_match is not None and if_none_match.strip() != "*":
        raise ApiError(501, "If-None-Match on an upload takes only *")
    if_match = (request.headers.get("if-match") or "").strip().strip('"')
    backend = ctx.backend
    staged = api.StageEntryRequest(
        repository=repository,
        branch=branch,
        key=key,
        entry=pb.Entry(metadata=with_user_metadata({}, metadata)),
        if_absent=if_none_match is not None,
        if_match_etag=if_match,
    )
    # One write through the edge's core: the repository and the branch as lakeFS checks them, an
    # If-None-Match: * refused before the body is read (graveler checks it again), then the
    # body (an upload slot held until it is in, edge/api/objects/write.py) and the entry staged.
    try:
        with contextlib.ExitStack() as held:
            body = RequestUpload(backend, request, held)
            place = await backend.write_object(
                staged, body, ctx.deadline, pool=backend.upload_pool, branch_by_name=True, absent_first=True
            )
    except ApiError as exc:  # the body's own (413, 408, 400), or all upload slots taken
        # The rest of the body is not read: the connection cannot carry another request.
        headers = {"Connection": "close"}
        if exc.status == 503:  # all upload slots taken
            headers["Retry-After"] = str(backend.upload_limits.retry_after_seconds)
        return JSONResponse({"message": exc.message}, status_code=exc.status, headers=headers)
    except ObjectWriteFailed as failed:
        raise write_error(failed, staged) from None
    entry = staged.entry
    ctx.record(ev.WRITE, repository, branch, key, entry.size)
    # The ObjectStats as its model writes it, without building the model: a tenth of the time of
    # a small upload's answer (tests/unit/api/test_object_rows.py holds the two to the same bytes).
    return Response(object_row(key, staged.entry, namespace_base(place.namespace)), status_code=201, media_type=JSON)


async def _delete(ctx: Ctx, repository: str, branch: str, key: str) -> None:
    request = api.DeleteEntryRequest(repository=repository, branch=branch, key=key)
    try:
        await typed_call(ctx, ctx.backend.graveler.DeleteEntry, request)
    except NotFound as exc:
        if exc.what != "object":
            raise
        # Deleting a missing object succeeds, as in lakeFS and S3 (a missing branch does not).
        return
    ctx.record(ev.DELETE, repository, branch, key)


@router.delete(BRANCH_OBJECTS, status_code=204)
async def delete_object(
    ctx: Ctx,
    repository: str,
    branch: str,
    path: ObjectPath = None,
    force: bool = False,
    no_tombstone: bool = False,
) -> Response:
    key = checked_path(path)
    await ctx.authorize_key(DELETE_OBJECT, repository, key, branch=branch)
    await ensure_branch(ctx, repository, branch)
    await _delete(ctx, repository, branch, key)
    return no_content()


@router.post(BRANCH_OBJECTS + "/delete")
async def delete_objects(
    ctx: Ctx, request: Request, repository: str, branch: str, force: bool = False, no_tombstone: bool = False
) -> Response:
    scope = await ctx.key_scope(DELETE_OBJECT, repository, branch)  # before the body is read
    body = await json_body(request, PathList)
    if len(body.paths) > MAX_DELETE_PATHS:
        raise bad_request(f"a bulk delete takes at most {MAX_DELETE_PATHS} paths; {len(body.paths)} were given")
    await ensure_branch(ctx, repository, branch)
    limit = asyncio.Semaphore(DELETE_CONCURRENCY)

    async def delete_one(path: str) -> ObjectError | None:
        if not path:
            return None  # the branch itself (Spark deletes "main/"): nothing to delete, as lakeFS answers
        if not scope.allows(path):  # refused alone, as lakeFS refuses each path it may not delete
            return ObjectError(
                status_code=403, message=f"user {ctx.caller.user_id} may not {DELETE_OBJECT} on {path}", path=path
            )
        try:
            async with limit:
                await _delete(ctx, repository, branch, checked_path(path))
        except (ApiError, SiltError) as exc:
            error = exc if isinstance(exc, ApiError) else from_silt(exc)
            if error.status >= 500:
                raise
            return ObjectError(status_code=error.status, message=error.message, path=path)
        return None

    # A TaskGroup: an unavailable graveler fails the whole request and cancels what is left.
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(delete_one(path)) for path in body.paths]
    except* Exception as failed:
        raise failed.exceptions[0] from None
    errors = [error for task in tasks if (error := task.result()) is not None]
    return model_response(ObjectErrorList(errors=errors))


@router.post(BRANCH_OBJECTS + "/copy", status_code=201)
async def copy_object(
    ctx: Ctx, request: Request, repository: str, branch: str, dest_path: ObjectPath = None
) -> Response:
    destination = checked_path(dest_path, "dest_path")
    await ctx.authorize_key(WRITE_OBJECT, repository, destination, branch=branch)  # before the body is read
    body = await json_body(request, ObjectCopyCreation)
    source_ref = body.src_ref or branch
    source_path = checked_path(body.src_path, "src_path")
    await ctx.authorize_key(READ_OBJECT, repository, source_path)
    await ensure_branch(ctx, repository, branch)

    async def copy() -> tuple[pb.Entry, RepositoryPlace]:
        # Within one repository the copy shares the source's bytes, as the gateway's CopyObject
        # does: bytes are immutable, and garbage collection keeps them while any entry refers
        # to them. The repository is looked up before the source is read and the entry names
        # its identity: identities are never reused, so graveler taking the entry means the
        # source was read in that same repository, not in one deleted since.
        place = await ctx.backend.place(repository, ctx.deadline)
        source = await _entry(ctx, repository, source_ref, source_path)
        entry = pb.Entry()
        entry.CopyFrom(source)
        entry.last_modified.CopyFrom(now())
        staged = api.StageEntryRequest(
            repository=repository, branch=branch, key=destination, entry=entry, repository_id=place.repository_id
        )
        await typed_call(ctx, ctx.backend.staging.StageEntry, staged)
        return entry, place

    entry, place = await _in_current_repository(ctx, repository, copy)
    ctx.record(ev.WRITE, repository, branch, destination, entry.size)
    return Response(object_row(destination, entry, namespace_base(place.namespace)), status_code=201, media_type=JSON)


async def _in_current_repository(ctx: Ctx, repository: str, write: Callable[[], Awaitable[T]]) -> T:
    """write(), which reads an entry and stages one naming the identity of the repository it
    looked up first; again once if graveler refused it because this edge remembered a
    repository deleted (and created again under the name) since."""
    try:
        return await write()
    except NotFound as exc:
        if exc.what != "repository" or not await repository_replaced(ctx, repository):
            raise
    return await write()


@router.put(BRANCH_OBJECTS + "/stat/user_metadata", status_code=204)
async def update_object_user_metadata(
    ctx: Ctx, request: Request, repository: str, branch: str, path: ObjectPath = None
) -> Response:
    key = checked_path(path)
    # The update reads the entry it replaces: a read of the key as well as a write.
    await ctx.authorize_key(WRITE_OBJECT, repository, key, branch=branch)  # before the body is read
    await ctx.authorize_key(READ_OBJECT, repository, key)
    body = await json_body(request, UpdateObjectUserMetadata)
    metadata = checked_user_metadata(dict(body.set))
    await ensure_branch(ctx, repository, branch)

    async def update() -> None:
        # The repository first, its identity named by the write (see copy_object).
        place = await ctx.backend.place(repository, ctx.deadline)
        current = await _entry(ctx, repository, branch, key)
        entry = pb.Entry()
        entry.CopyFrom(current)
        entry.ClearField("metadata")
        entry.metadata.update(with_user_metadata(current.metadata, metadata))
        # Only over the version just read: an upload landing meanwhile is not replaced by old bytes.
        staged = api.StageEntryRequest(
            repository=repository,
            branch=branch,
            key=key,
            entry=entry,
            if_match_etag=current.etag.strip('"') or "*",
            repository_id=place.repository_id,
        )
        try:
            await typed_call(ctx, ctx.backend.graveler.StageEntry, staged)
        except FailedPrecondition:
            raise ApiError(409, "the object changed while its metadata was updated; try again") from None

    await _in_current_repository(ctx, repository, update)
    return no_content()
