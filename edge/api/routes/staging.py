"""The staging API (lakeFS's getPhysicalAddress and linkPhysicalAddress): a client asks for an
address, writes the bytes there itself (with a presigned PUT URL, or the store's own
credentials), then links the address to a path of a branch.

Linking is checked before anything is staged (lakeFS checks less; docs/clients/lakefs.md):
- an address inside the repository's storage namespace must be one getPhysicalAddress handed
  out for this repository, branch and path within 24 hours (objects/link_addresses.py);
- any other address must lie under `graveler.allowed_import_prefixes` (graveler checks again, and
  keeps such entries out of garbage collection's reach);
- the object must be there, with the size and checksum (ETag) the client states: an entry never
  points at bytes that are missing or other than the client meant. The store's own version of
  the object checked (GCS generation, S3 VersionId in a versioned bucket, Azure ETag) is recorded
  in the entry, and reads of a linked address are pinned to it and to the ETag
  (silt/block/external.py reads_pinned): the store's presigned PUT URL stays usable until it
  expires, and a second PUT to it after the link never changes what the entry serves.
A link refused leaves the uploaded bytes in place, for the client to link again (garbage
collection removes what is never linked).
"""

from __future__ import annotations

import time
from typing import Annotated

import grpc
import grpc.aio
from fastapi import APIRouter, Header, Request, Response
from google.protobuf.timestamp_pb2 import Timestamp
from lakefs_sdk.models import StagingLocation, StagingMetadata

from edge.api.bodies import SMALL_BODY_BYTES, json_body
from edge.api.context import Ctx
from edge.api.errors import ApiError, bad_request, from_rpc
from edge.api.objects.presign import presigner
from edge.api.objects.stats import object_stats
from edge.api.objects.write import checked_content_type, checked_path, checked_user_metadata, ensure_branch, now
from edge.api.responses import model_response
from silt.block.rules import normalize_etag
from silt.errors import InvalidArgument, NotFound
from silt.graveler.v1 import events_pb2 as ev
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb
from silt.iam_actions import WRITE_OBJECT
from silt.namespaces import Namespace, parse_roots
from silt.objects import DEFAULT_CONTENT_TYPE, SOURCE_VERSION_KEY, split_address, with_user_metadata

router = APIRouter()

BACKING = "/repositories/{repository}/branches/{branch}/staging/backing"
# A link's body: a staging location, a checksum and user metadata (2 KiB at most, checked
# below), well within this.
LINK_BODY_BYTES = SMALL_BODY_BYTES
# An mtime a client may set: from the epoch to the year 9999.
MAX_MTIME = 253402300799


@router.get(BACKING)
async def get_physical_address(
    ctx: Ctx, request: Request, repository: str, branch: str, path: str | None = None, presign: bool = False
) -> Response:
    key = checked_path(path)
    await ctx.authorize_key(WRITE_OBJECT, repository, key)
    signer = presigner(request)
    if presign:
        signer.check_enabled()
    backend = ctx.backend
    namespace = await backend.namespace(repository, ctx.deadline)
    await ensure_branch(ctx, repository, branch)
    address = signer.links.issue(repository, branch, key)
    url = await backend.run(signer.sign_upload, request, namespace, address) if presign else None
    location = StagingLocation(
        physical_address=namespace.rstrip("/") + "/" + address,
        presigned_url=url.url if url is not None else None,
        presigned_url_expiry=url.expires if url is not None else None,
    )
    return model_response(location)


def _inside(address: str, namespace: str) -> str | None:
    """The address relative to the namespace if it lies below it, else None."""
    prefix = namespace.rstrip("/") + "/"
    return address[len(prefix) :] if address.startswith(prefix) and len(address) > len(prefix) else None


def _check_external(address: str, allowed: list[str]) -> None:
    """An address outside the namespace must lie under an allowed import prefix (before the store
    is asked anything about it: no probing of places the repository may not name)."""
    scheme, sep, rest = address.partition("://")
    parts = tuple(rest.split("/"))
    if not sep or any(part in ("", ".", "..") for part in parts):
        raise bad_request(f"invalid physical address {address!r}: expected scheme://bucket/key, no empty, . or .. part")
    place = Namespace(scheme.lower(), parts)
    if not any(prefix.contains(place) for prefix in parse_roots(allowed)):
        raise bad_request(
            f"physical address {address!r} is outside the repository's storage namespace and every allowed import "
            "prefix (graveler.allowed_import_prefixes)"
        )


def _conditions(if_none_match: str | None, if_match: str | None) -> tuple[bool, str]:
    """(if_absent, if_match_etag), as lakeFS takes them: If-None-Match only `*`, not both."""
    if if_none_match is not None and if_match is not None:
        raise ApiError(501, "cannot specify both If-Match and If-None-Match")
    if if_none_match is not None and if_none_match.strip() != "*":
        raise ApiError(501, "If-None-Match only supports '*'")
    return if_none_match is not None, (if_match or "").strip().strip('"')


def _mtime(seconds: int | None) -> Timestamp:
    if seconds is None:
        return now()
    if not 0 <= seconds <= MAX_MTIME:
        raise bad_request(f"mtime {seconds} is not a time (Unix seconds from 0 to {MAX_MTIME})")
    return Timestamp(seconds=seconds)


@router.put(BACKING)
async def link_physical_address(
    ctx: Ctx,
    request: Request,
    repository: str,
    branch: str,
    path: str | None = None,
    if_none_match: Annotated[str | None, Header(max_length=1024)] = None,
    if_match: Annotated[str | None, Header(max_length=1024)] = None,
) -> Response:
    key = checked_path(path)
    await ctx.authorize_key(WRITE_OBJECT, repository, key)  # before the body is read
    body = await json_body(request, StagingMetadata, LINK_BODY_BYTES)
    if_absent, if_match_etag = _conditions(if_none_match, if_match)
    given = body.staging.physical_address
    if not given:
        raise bad_request("staging.physical_address is required")
    checksum = normalize_etag(body.checksum)
    if not checksum:
        raise bad_request("checksum is required")
    if body.size_bytes < 0:
        raise bad_request(f"size_bytes must not be negative, got {body.size_bytes}")
    user = checked_user_metadata(dict(body.user_metadata or {}))
    content_type = checked_content_type(body.content_type or DEFAULT_CONTENT_TYPE)
    modified = _mtime(body.mtime)
    backend = ctx.backend
    place = await backend.place(repository, ctx.deadline)
    namespace = place.namespace
    relative = _inside(given, namespace)
    if relative is not None:
        presigner(request).links.check(repository, branch, key, relative)
        stored = relative
    else:
        _check_external(given, request.app.state.config.graveler.allowed_import_prefixes)
        stored = given
    await ensure_branch(ctx, repository, branch)
    version = await _check_object(ctx, namespace, stored, body.size_bytes, checksum)
    metadata = with_user_metadata({}, user)
    if version:
        # The store's version of what was checked: reads ask for exactly it (silt/block/external.py).
        metadata[SOURCE_VERSION_KEY] = version
    entry = pb.Entry(
        physical_address=stored,
        size=body.size_bytes,
        etag=checksum,
        last_modified=modified,
        content_type=content_type,
        metadata=metadata,
    )
    staged = api.StageEntryRequest(
        repository=repository, branch=branch, key=key, entry=entry, if_absent=if_absent, if_match_etag=if_match_etag
    )
    if relative is not None:
        # Bytes in the namespace looked up: graveler refuses them if the repository was deleted since.
        staged.repository_id = place.repository_id
    await _stage(ctx, staged)
    ctx.record(ev.WRITE, repository, branch, key, entry.size)
    stats = object_stats(key, entry, namespace)
    stats.physical_address = given
    return model_response(stats)


async def _check_object(ctx: Ctx, namespace: str, address: str, size: int, checksum: str) -> str:
    """Refuse (400) a link to an object that is missing or not of this size and ETag; the store's
    own version of the object checked ("" where it has none: S3 without versioning, a local disk)."""
    backend = ctx.backend
    store_namespace, store_key = split_address(namespace, address)
    try:
        stat = await backend.run(backend.adapter.stat, store_namespace, store_key)
    except NotFound:
        raise bad_request(f"no object at physical address {address!r}: upload it before linking") from None
    except InvalidArgument as exc:
        raise bad_request(f"invalid blockstore type or address: {exc}") from None
    if stat.size != size:
        raise bad_request(f"size_bytes is {size}, but the object at the physical address has {stat.size} bytes")
    stored = normalize_etag(stat.etag)
    if stored != checksum:
        raise bad_request(f"checksum {checksum!r} differs from the ETag {stored!r} of the object at the address")
    return stat.version


async def _stage(ctx: Ctx, request: api.StageEntryRequest) -> None:
    """StageEntry with lakeFS's answers to its conditions: 412 when one does not hold, 409 when a
    commit raced a conditional write."""
    remaining = ctx.deadline - time.monotonic()
    if remaining <= 0:
        raise ApiError(503, "graveler did not answer within the request's deadline")
    try:
        await ctx.backend.graveler.StageEntry(request, timeout=remaining)
    except grpc.aio.AioRpcError as exc:
        conditional = request.if_absent or request.if_match_etag
        if conditional and exc.code() == grpc.StatusCode.FAILED_PRECONDITION:
            raise ApiError(412, "path already exists" if request.if_absent else "object changed") from None
        if conditional and exc.code() == grpc.StatusCode.NOT_FOUND and request.if_match_etag:
            raise ApiError(412, "object changed: there is no object at this path") from None
        if conditional and exc.code() == grpc.StatusCode.ABORTED:
            # It may stand: not a 409, which would say it did not happen.
            raise ApiError(
                503, f"a concurrent write raced this conditional link, which may stand: {exc.details()}"
            ) from None
        raise from_rpc(exc, "graveler") from None
