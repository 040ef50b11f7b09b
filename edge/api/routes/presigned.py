"""The edge's own presigned URLs, served: GET (and HEAD, one `Range` honoured) and PUT of the one
object a URL names (objects/edge_urls.py checks it). No credentials: the URL is the credential. Bytes
stream between the client and the store in 1 MiB pieces, as getObject streams them; an imported
object's only while its source is as imported (else 410, naming the source, as getObject
answers); a PUT must declare its Content-Length (as S3 requires of presigned PUTs), at most 5 GiB.

A PUT never replaces an object: the addresses getPhysicalAddress hands out are new, and once
the bytes are linked into a branch a second PUT with the same URL must not change what a commit
holds. S3's presigned PUTs cannot promise that; here it is 412.

A part's URL (a presigned multipart upload, routes/presigned_multipart.py) PUTs one part of the
block adapter's upload instead: sent again, it replaces the part, as S3's UploadPart does; once
the upload is completed or aborted it is 404 (the object itself is never written through it).
"""

from __future__ import annotations

from email.utils import format_datetime
from typing import BinaryIO

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse

from edge.api.backend import Backend
from edge.api.context import backend_of
from edge.api.errors import ApiError, bad_request, forbidden
from edge.api.objects.body import MAX_UPLOAD_BYTES, RawBody, RawChunks
from edge.api.objects.edge_urls import Grant, UploadPartGrant
from edge.api.objects.presign import download_name, presigner
from edge.api.objects.stats import ACTIVE_CONTENT_GUARDS
from edge.api.objects.write import UploadBody
from edge.core.asgi import PRESIGNED_PREFIX
from edge.core.client import SMALL_BODY
from edge.core.object_reads import RangeNotSatisfiable, parse_byte_range, read_all, stream_reader
from edge.core.object_writes import ShortBody, Written
from silt.block.adapter import PutResult
from silt.block.external import ObjectReader, SourceReader, split_external
from silt.block.rules import attachment
from silt.errors import AlreadyExists, NotFound

router = APIRouter(include_in_schema=False)
ROUTE = PRESIGNED_PREFIX + "{place:path}"


def _grant(request: Request) -> Grant:
    signer = presigner(request)
    if not signer.enabled:
        raise forbidden("presigned URLs are turned off on this server")
    return signer.edge.verify(request.scope["path"], request.scope.get("query_string", b""), request.method)


def _reader(backend: Backend, grant: Grant) -> ObjectReader:
    """What reads the granted object: the adapter, or for an imported one a reader that checks its
    source is the version the URL was signed for."""
    if grant.version is None:
        return backend.adapter
    return SourceReader(backend.adapter, backend.external_files, grant.address, grant.version)


@router.api_route(ROUTE, methods=["GET", "HEAD"])
async def read_presigned(request: Request, place: str) -> Response:
    grant = _grant(request)
    backend = backend_of(request)
    adapter = _reader(backend, grant)
    namespace, key = split_external(grant.address)
    stat = await backend.run(adapter.stat, namespace, key)
    headers = {
        "Content-Type": "application/octet-stream",
        "Content-Disposition": attachment(grant.filename or download_name(key)),
        "ETag": f'"{stat.etag}"',
        "Last-Modified": format_datetime(stat.mtime, usegmt=True),
        "Accept-Ranges": "bytes",
        "Cache-Control": "no-store",
        **ACTIVE_CONTENT_GUARDS,
    }
    status, start, length = 200, 0, stat.size
    header = request.headers.get("range")
    if header is not None:
        try:
            first, last = parse_byte_range(header, stat.size)
        except RangeNotSatisfiable as exc:
            refused = {"Content-Range": f"bytes */{stat.size}"}
            return JSONResponse({"message": str(exc)}, status_code=416, headers=refused)
        status, start, length = 206, first, last - first + 1
        headers["Content-Range"] = f"bytes {first}-{last}/{stat.size}"
    headers["Content-Length"] = str(length)
    if request.method == "HEAD" or length == 0:
        return Response(status_code=status, headers=headers)
    if status == 206:
        reader = await backend.run(adapter.get_range, namespace, key, start, start + length - 1)
    else:
        reader = await backend.run(adapter.get, namespace, key)
    if length <= SMALL_BODY:
        return Response(await backend.run(read_all, reader), status_code=status, headers=headers)
    return StreamingResponse(stream_reader(backend.run, reader), status_code=status, headers=headers)


async def _exists(backend: Backend, namespace: str, key: str) -> bool:
    try:
        await backend.run(backend.adapter.stat, namespace, key)
    except NotFound:
        return False
    return True


async def _write(
    backend: Backend, request: Request, namespace: str, key: str, declared: int, part: UploadPartGrant | None
) -> Written:
    body = UploadBody(RawBody(RawChunks(request, MAX_UPLOAD_BYTES, backend.upload_limits)), declared, "")
    try:
        if part is not None:
            adapter = backend.adapter

            def put_part(stream: BinaryIO, size: int | None) -> PutResult:
                stored = adapter.upload_part(namespace, key, part.upload_id, part.number, stream, size)
                return PutResult(declared, stored.etag)

            return await backend.receive(body, put_part, pool=backend.upload_pool)
        return await backend.receive(body, backend.adapter.put_if_absent, namespace, key, pool=backend.upload_pool)
    except ShortBody as exc:
        raise bad_request(str(exc)) from None


def _refused(status: int, message: str, retry_after: int | None = None) -> JSONResponse:
    # The body is not read: the connection cannot carry another request.
    headers = {"Connection": "close"}
    if retry_after is not None:
        headers["Retry-After"] = str(retry_after)
    return JSONResponse({"message": message}, status_code=status, headers=headers)


@router.put(ROUTE)
async def write_presigned(request: Request, place: str) -> Response:
    grant = _grant(request)
    backend = backend_of(request)
    namespace, key = split_external(grant.address)
    length = request.headers.get("content-length")
    if "transfer-encoding" in request.headers or length is None or not (length.isascii() and length.isdigit()):
        return _refused(411, "MissingContentLength: a presigned PUT must send its Content-Length")
    declared = int(length)
    if declared > MAX_UPLOAD_BYTES:
        return _refused(413, f"EntityTooLarge: a presigned PUT takes at most {MAX_UPLOAD_BYTES} bytes")
    if grant.part is None and await _exists(backend, namespace, key):
        return _refused(412, "PreconditionFailed: this URL's object was already uploaded; ask for a new address")
    try:
        with backend.upload_slot():
            result = await _write(backend, request, namespace, key, declared, grant.part)
    except NotFound:
        # Only a part's upload looks anything up: its multipart upload was completed or aborted.
        return _refused(404, "NoSuchUpload: this URL's multipart upload was completed or aborted")
    except AlreadyExists:
        return _refused(412, "PreconditionFailed: this URL's object was already uploaded; ask for a new address")
    except ApiError as exc:
        retry = backend.upload_limits.retry_after_seconds if exc.status == 503 else None
        return _refused(exc.status, exc.message, retry)
    return Response(status_code=200, headers={"ETag": f'"{result.etag}"'})
