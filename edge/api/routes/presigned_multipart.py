"""lakeFS's presigned multipart uploads (its "experimental" operations under
`/repositories/{repository}/branches/{branch}/staging/pmpu`): a client asks for an upload and a
presigned URL for each part, PUTs the parts straight to the store (S3's own presigned UploadPart
URLs; on the local store the edge's own, objects/edge_urls.py), then completes the upload, which
joins the parts and stages the object on the branch. lakectl uses them for large files when
`/config` says `pre_sign_multipart_upload` (objects/presign.py says which stores offer them).

Each upload has a record in the gateway's multipart bookkeeping (silt/multipart_uploads.py): Silt's
own upload id (what the client holds) -> the repository's identity, branch, path, the address
handed out and the block adapter's own upload id. So every call checks what lakeFS leaves to the
store: the upload is one of this repository, branch and path, and the physical address the client
sends is the one it was created for (inside the repository's storage namespace, and signed for this
repository, branch and path as getPhysicalAddress's addresses are: objects/link_addresses.py).
The gateway's expiry sweep aborts an upload never completed (gateways.s3.multipart_upload_max_age_
seconds) and the deletion of its repository aborts it, as it does the gateway's own uploads; the
S3 gateway lists it but leaves it to this API (its ListParts, parts and completion are refused).

Authorization is that of any write to the branch: WriteRepo on the repository (and ReadRepo on the
source repository of a copied part).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import secrets
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Depends, Path, Query, Request, Response
from lakefs_sdk.models import (
    AbortPresignMultipartUpload,
    CompletePresignMultipartUpload,
    PresignMultipartUpload,
    UploadPartCopyFrom,
    UploadPartFrom,
    UploadTo,
)

from edge.api.bodies import SMALL_BODY_BYTES, json_body
from edge.api.context import Ctx
from edge.api.errors import bad_request, not_found
from edge.api.objects.presign import Presigner, presigner
from edge.api.objects.stats import object_stats
from edge.api.objects.write import (
    checked_content_type,
    checked_path,
    checked_user_metadata,
    ensure_branch,
    now,
    stage_new_bytes,
)
from edge.api.responses import model_response
from edge.api.routes.staging import inside_namespace
from silt import multipart_uploads as uploads
from silt.block import PartInfo
from silt.errors import NotFound
from silt.graveler.v1 import events_pb2 as ev
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb
from silt.iam_actions import READ_OBJECT, WRITE_OBJECT
from silt.objects import DEFAULT_CONTENT_TYPE, split_address, with_user_metadata
from silt.repository_place import RepositoryPlace

router = APIRouter()

PMPU = "/repositories/{repository}/branches/{branch}/staging/pmpu"
UPLOAD = PMPU + "/{uploadId}"
PART = UPLOAD + "/parts/{partNumber}"
# S3's (and lakeFS's) cap on the parts of one upload, and so on the URLs one create signs.
MAX_PARTS = 10000
# What marks an upload's record as this API's (the gateway refuses to continue it).
ORIGIN = uploads.PRESIGNED_ORIGIN
# A completion lists at most MAX_PARTS parts (about 80 bytes each in JSON) and user metadata
# (2 KiB at most): read after the caller is authorized, within this.
COMPLETE_BODY_BYTES = 1024 * 1024
_UPLOAD_ID = re.compile(r"[0-9a-f]{32}")
_COPY_RANGE = re.compile(r"bytes=([0-9]{1,19})-([0-9]{1,19})")

UploadId = Annotated[str, Path(alias="uploadId", max_length=64)]
PartNumber = Annotated[int, Path(alias="partNumber", ge=1, le=MAX_PARTS)]


@dataclass(frozen=True)
class PartQuery:
    """The part a call about one part names, read as one value: FastAPI validates each field as
    the path parameter (or, `path`, the query parameter) of its name."""

    repository: str
    branch: str
    upload_id: UploadId
    part_number: PartNumber
    path: str | None = None


# What a part route declares to take the part it is about.
PartParams = Annotated[PartQuery, Depends()]


def _load(ctx: Ctx, repository: str, upload_id: str) -> dict[str, Any] | None:
    try:
        return dict(json.loads(ctx.backend.kv.get(uploads.PARTITION, uploads.upload_key(repository, upload_id)).value))
    except NotFound:
        return None


async def _open_upload(
    ctx: Ctx, request: Request, repository: str, branch: str, key: str, upload_id: str, given: str
) -> tuple[dict[str, Any], RepositoryPlace]:
    """The record of the open upload a call names, once the physical address the client sends is
    the one it was created for; 400 for an address that is not, 404 for an upload that is not one
    of this repository, branch and path (or no longer open)."""
    if not given:
        raise bad_request("physical_address is required")
    backend = ctx.backend
    place = await backend.place(repository, ctx.deadline)
    relative = inside_namespace(given, place.namespace)
    if relative is None:
        raise bad_request(f"physical address {given!r} is not inside the repository's storage namespace")
    presigner(request).links.check(repository, branch, key, relative)
    record = await backend.run(_load, ctx, repository, upload_id) if _UPLOAD_ID.fullmatch(upload_id) else None
    max_age = request.app.state.config.gateways.s3.multipart_upload_max_age_seconds
    if (
        record is None
        or record.get("origin") != ORIGIN
        or not uploads.belongs(record, place)
        or (record.get("branch"), record.get("key")) != (branch, key)
        or uploads.is_expired(record, max_age)
    ):
        raise not_found(f"no presigned multipart upload {upload_id[:64]!r} of path {key!r} on branch {branch!r}")
    if record["address"] != relative:
        raise bad_request(f"physical address {given!r} is not the one upload {upload_id!r} was created for")
    return record, place


async def _writable_key(
    ctx: Ctx, request: Request, repository: str, branch: str, path: str | None
) -> tuple[str, Presigner]:
    """What every call about an upload starts with: the key it writes, once the caller may write
    it on the branch and presigned multipart uploads are on (with the presigner that says so)."""
    key = checked_path(path)
    await ctx.authorize_key(WRITE_OBJECT, repository, key, branch=branch)
    signer = presigner(request)
    signer.check_multipart_enabled()
    return key, signer


def _forget(ctx: Ctx, repository: str, upload_id: str, record: dict[str, Any]) -> None:
    uploads.forget(ctx.backend.kv, repository, upload_id, record, [])


def _abort(ctx: Ctx, repository: str, upload_id: str, record: dict[str, Any]) -> None:
    """Abort the upload in the store and forget it, in the order of the gateway's expiry: unknown
    to every call first (no part is added while the bytes go), the age index last (if the store
    fails, the sweep finds the upload there and aborts it again)."""
    kv = ctx.backend.kv
    with contextlib.suppress(NotFound):
        kv.delete(uploads.PARTITION, uploads.upload_key(repository, upload_id))
    with contextlib.suppress(NotFound):  # the store forgot it already: aborted all the same
        ctx.backend.adapter.abort_multipart_upload(record["namespace"], record["address"], record["block_id"])
    uploads.forget(kv, repository, upload_id, record, [])


@router.post(PMPU, status_code=201)
async def create_presign_multipart_upload(
    ctx: Ctx,
    request: Request,
    repository: str,
    branch: str,
    path: str | None = None,
    parts: Annotated[int | None, Query()] = None,
) -> Response:
    key, signer = await _writable_key(ctx, request, repository, branch, path)
    if parts is not None and not 0 <= parts <= MAX_PARTS:
        raise bad_request(f"parts can be between 0 and {MAX_PARTS}")
    backend = ctx.backend
    place = await backend.place(repository, ctx.deadline)
    await ensure_branch(ctx, repository, branch)
    address = signer.links.issue(repository, branch, key)
    block_id = await backend.run(backend.adapter.create_multipart_upload, place.namespace, address)
    upload_id = secrets.token_hex(16)
    # The path is the S3 gateway's name of the object (ref/key): ListMultipartUploads lists it there.
    opened = uploads.new_record(f"{branch}/{key}", branch, key, place, address, block_id, ctx.caller.user_id)
    record = {"origin": ORIGIN, **opened}
    try:
        await backend.run(uploads.save, backend.kv, repository, upload_id, record)
    except BaseException:
        # Unrecorded, nothing would ever abort it.
        with contextlib.suppress(Exception):
            await backend.run(backend.adapter.abort_multipart_upload, place.namespace, address, block_id)
        raise
    urls = await backend.run(_sign_parts, signer, request, place.namespace, address, block_id, parts or 0)
    answer = PresignMultipartUpload(
        upload_id=upload_id,
        physical_address=place.namespace.rstrip("/") + "/" + address,
        presigned_urls=urls or None,
    )
    return model_response(answer, status=201)


def _sign_parts(
    signer: Presigner, request: Request, namespace: str, address: str, block_id: str, count: int
) -> list[str]:
    return [signer.sign_part(request, namespace, address, block_id, number).url for number in range(1, count + 1)]


_PartBody = TypeVar("_PartBody", UploadPartFrom, UploadPartCopyFrom)


async def _part_call(
    ctx: Ctx, request: Request, part: PartQuery, model: type[_PartBody]
) -> tuple[Presigner, _PartBody, dict[str, Any], RepositoryPlace]:
    """What a call about one part starts with: the caller may write the key, presigned multipart is on,
    and the body names this upload's own address (the upload's record and the repository's place)."""
    key, signer = await _writable_key(ctx, request, part.repository, part.branch, part.path)
    body = await json_body(request, model, SMALL_BODY_BYTES)
    given = body.physical_address
    record, place = await _open_upload(ctx, request, part.repository, part.branch, key, part.upload_id, given)
    return signer, body, record, place


@router.put(PART)
async def upload_part(ctx: Ctx, request: Request, part: PartParams) -> Response:
    signer, _, record, place = await _part_call(ctx, request, part, UploadPartFrom)
    url = await ctx.backend.run(
        signer.sign_part, request, place.namespace, record["address"], record["block_id"], part.part_number
    )
    return model_response(UploadTo(presigned_url=url.url))


def _copy_range(text: str | None, size: int) -> tuple[int, int] | None:
    if text is None:
        return None
    match = _COPY_RANGE.fullmatch(text.strip())
    if match is None:
        raise bad_request(f"copy_source.range {text[:80]!r} is not bytes=<first>-<last>")
    first, last = int(match.group(1)), int(match.group(2))
    if first > last or last >= size:
        raise bad_request(f"copy_source.range {text!r} is not inside the source's {size} bytes")
    return first, last


@router.put(PART + "/copy", status_code=204)
async def upload_part_copy(ctx: Ctx, request: Request, part: PartParams) -> Response:
    _, body, record, _ = await _part_call(ctx, request, part, UploadPartCopyFrom)
    source = body.copy_source
    # The part's bytes are the source key's: read like any copy source, key by key.
    await ctx.authorize_key(READ_OBJECT, source.repository, checked_path(source.path))
    backend = ctx.backend
    stat = api.StatEntryRequest(repository=source.repository, ref=source.ref, key=checked_path(source.path))
    entry = (await backend.stat_entry(stat, ctx.deadline)).entry
    byte_range = _copy_range(source.range, int(entry.size))
    source_namespace = await backend.namespace(source.repository, ctx.deadline)
    store_namespace, store_key = split_address(source_namespace, entry.physical_address)
    copied = await backend.run(
        backend.entry_reader(source_namespace, entry).upload_part_copy,
        record["namespace"],
        record["address"],
        record["block_id"],
        part.part_number,
        store_namespace,
        store_key,
        byte_range,
    )
    return Response(status_code=204, headers={"ETag": f'"{copied.etag}"'})


def _listed_parts(body: CompletePresignMultipartUpload) -> list[PartInfo]:
    """The parts a completion lists: some, at most MAX_PARTS, numbered 1..MAX_PARTS in ascending
    order, each once, each with an ETag (checked by the store against the parts' bytes)."""
    listed = body.parts
    if not listed:
        raise bad_request("parts are required")
    if len(listed) > MAX_PARTS:
        raise bad_request(f"a completion lists at most {MAX_PARTS} parts, not {len(listed)}")
    for part in listed:
        if not 1 <= part.part_number <= MAX_PARTS:
            raise bad_request(f"part number {part.part_number} is not between 1 and {MAX_PARTS}")
        if not part.etag.strip(' "'):
            raise bad_request(f"part {part.part_number} has no etag")
    if any(b.part_number <= a.part_number for a, b in itertools.pairwise(listed)):
        raise bad_request("parts must be listed in ascending order of part number, each once")
    return [PartInfo(part.part_number, part.etag.strip(' "')) for part in listed]


@router.put(UPLOAD)
async def complete_presign_multipart_upload(
    ctx: Ctx, request: Request, repository: str, branch: str, upload_id: UploadId, path: str | None = None
) -> Response:
    key, _ = await _writable_key(ctx, request, repository, branch, path)
    body = await json_body(request, CompletePresignMultipartUpload, COMPLETE_BODY_BYTES)
    parts = _listed_parts(body)
    user = checked_user_metadata(dict(body.user_metadata or {}))
    content_type = checked_content_type(body.content_type or DEFAULT_CONTENT_TYPE)
    record, place = await _open_upload(ctx, request, repository, branch, key, upload_id, body.physical_address)
    await ensure_branch(ctx, repository, branch)
    backend = ctx.backend
    namespace, address = record["namespace"], record["address"]
    joined = await backend.run(backend.adapter.complete_multipart_upload, namespace, address, record["block_id"], parts)
    # The store's upload is gone: so is the record, whatever the staging does (a failed one
    # removes the bytes, or leaves them to garbage collection when it may have applied).
    await backend.run(_forget, ctx, repository, upload_id, record)
    entry = pb.Entry(
        physical_address=address,
        size=joined.size,
        etag=joined.etag,
        last_modified=now(),
        content_type=content_type,
        metadata=with_user_metadata({}, user),
    )
    staged = api.StageEntryRequest(repository=repository, branch=branch, key=key, entry=entry)
    # The bytes belong to the repository the upload was opened in: never followed into another
    # created under its name since.
    await stage_new_bytes(ctx, staged, place, follow_replacement=False)
    ctx.record(ev.WRITE, repository, branch, key, entry.size)
    return model_response(object_stats(key, entry, namespace))


@router.delete(UPLOAD, status_code=204)
async def abort_presign_multipart_upload(
    ctx: Ctx, request: Request, repository: str, branch: str, upload_id: UploadId, path: str | None = None
) -> Response:
    key, _ = await _writable_key(ctx, request, repository, branch, path)
    body = await json_body(request, AbortPresignMultipartUpload, SMALL_BODY_BYTES)
    record, _ = await _open_upload(ctx, request, repository, branch, key, upload_id, body.physical_address)
    await ctx.backend.run(_abort, ctx, repository, upload_id, record)
    return Response(status_code=204)
