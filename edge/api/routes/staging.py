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

Also lakeFS's stageObject (an entry pointing at an object that is already somewhere, as an
import of one object would) and uploadObjectPreflight (may the caller write there). stageObject
takes only addresses under `graveler.allowed_import_prefixes`, checked and then stat'ed as a
link's outside address is: never the repository's own namespace (its addresses are handed out
and linked as above) nor another's (import prefixes never overlap a namespace root).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Annotated

import grpc
import grpc.aio
from fastapi import APIRouter, Header, Request, Response
from google.protobuf.timestamp_pb2 import Timestamp
from lakefs_sdk.models import ObjectStageCreation, StagingLocation, StagingMetadata

from edge.api.bodies import SMALL_BODY_BYTES, json_body
from edge.api.context import Ctx
from edge.api.errors import ApiError, bad_request, from_rpc
from edge.api.objects.presign import presigner
from edge.api.objects.stats import object_stats
from edge.api.objects.write import checked_content_type, checked_path, checked_user_metadata, ensure_branch, now
from edge.api.responses import model_response, no_content
from silt.block.external import LOCAL_EXTERNAL, external_prefixes
from silt.block.rules import normalize_etag
from silt.config import Config
from silt.errors import InvalidArgument, NotFound
from silt.graveler.v1 import events_pb2 as ev
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb
from silt.iam_actions import WRITE_OBJECT
from silt.objects import (
    DEFAULT_CONTENT_TYPE,
    SOURCE_MTIME_KEY,
    SOURCE_VERSION_KEY,
    split_address,
    with_user_metadata,
)

router = APIRouter()

BACKING = "/repositories/{repository}/branches/{branch}/staging/backing"
BRANCH_OBJECTS = "/repositories/{repository}/branches/{branch}/objects"
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
    await ctx.authorize_key(WRITE_OBJECT, repository, key, branch=branch)
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


def import_prefixes(config: Config) -> list[str]:
    """Where an entry may point besides its namespace, as graveler counts them (engine/open.py):
    graveler.allowed_import_prefixes, and the local blockstore's importable directories."""
    return [*config.graveler.allowed_import_prefixes, *external_prefixes(config.blockstore)]


def inside_namespace(address: str, namespace: str) -> str | None:
    """The address relative to the namespace if it lies below it, else None."""
    prefix = namespace.rstrip("/") + "/"
    return address[len(prefix) :] if address.startswith(prefix) and len(address) > len(prefix) else None


def _under(scheme: str, rest: str, prefix: str) -> bool:
    """Whether scheme://rest lies strictly below an import prefix, compared as graveler compares
    them (engine/core/physical_addresses.py): `local:///landing` is a directory of the machine and
    never the store's `local://landing`."""
    prefix_scheme, sep, prefix_rest = prefix.partition("://")
    root = prefix_rest.rstrip("/")
    return bool(sep and root) and prefix_scheme.lower() == scheme.lower() and rest.startswith(root + "/")


def _check_external(address: str, allowed: list[str]) -> None:
    """An address outside the namespace must lie under an allowed import prefix (before the store
    is asked anything about it: no probing of places the repository may not name)."""
    scheme, sep, rest = address.partition("://")
    # A local file outside the store is lakeFS's local:// and an absolute path.
    path = rest[1:] if scheme.lower() == "local" and rest.startswith("/") else rest
    if not sep or any(part in ("", ".", "..") for part in path.split("/")):
        raise bad_request(f"invalid physical address {address!r}: expected scheme://bucket/key, no empty, . or .. part")
    if not any(_under(scheme, rest, prefix) for prefix in allowed):
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


@dataclass(frozen=True)
class _Described:
    """What a link or a stageObject says of the object it names, checked as far as it can be
    without the store."""

    checksum: str
    size: int
    user_metadata: dict[str, str]
    content_type: str
    modified: Timestamp


def _described(
    checksum: str | None, size: int, user_metadata: dict[str, str] | None, content_type: str | None, mtime: int | None
) -> _Described:
    etag = normalize_etag(checksum or "")
    if not etag:
        raise bad_request("checksum is required")
    if size < 0:
        raise bad_request(f"size_bytes must not be negative, got {size}")
    return _Described(
        etag,
        size,
        checked_user_metadata(dict(user_metadata or {})),
        checked_content_type(content_type or DEFAULT_CONTENT_TYPE),
        _mtime(mtime),
    )


async def _checked_entry(ctx: Ctx, namespace: str, stored: str, described: _Described) -> pb.Entry:
    """The entry naming stored, once the store has it as described (size, ETag)."""
    pinned = await _check_object(ctx, namespace, stored, described.size, described.checksum)
    # The store's version of what was checked: reads ask for exactly it (silt/block/external.py).
    return pb.Entry(
        physical_address=stored,
        size=described.size,
        etag=described.checksum,
        last_modified=described.modified,
        content_type=described.content_type,
        metadata=with_user_metadata(pinned, described.user_metadata),
    )


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
    await ctx.authorize_key(WRITE_OBJECT, repository, key, branch=branch)  # before the body is read
    body = await json_body(request, StagingMetadata, LINK_BODY_BYTES)
    if_absent, if_match_etag = _conditions(if_none_match, if_match)
    given = body.staging.physical_address
    if not given:
        raise bad_request("staging.physical_address is required")
    described = _described(body.checksum, body.size_bytes, body.user_metadata, body.content_type, body.mtime)
    backend = ctx.backend
    place = await backend.place(repository, ctx.deadline)
    namespace = place.namespace
    relative = inside_namespace(given, namespace)
    if relative is not None:
        presigner(request).links.check(repository, branch, key, relative)
        stored = relative
    else:
        _check_external(given, import_prefixes(request.app.state.config))
        stored = given
    await ensure_branch(ctx, repository, branch)
    entry = await _checked_entry(ctx, namespace, stored, described)
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


async def _check_object(ctx: Ctx, namespace: str, address: str, size: int, checksum: str) -> dict[str, str]:
    """Refuse (400) a link to an object that is missing or not of this size and ETag; the entry
    metadata that pins reads to the version checked: the store's own version (none where it has
    none: S3 without versioning, the namespace of a local disk), or a local file's mtime."""
    backend = ctx.backend
    try:
        if address.startswith(LOCAL_EXTERNAL):
            # A file under the local blockstore's importable directories (docs/import.md).
            found = await backend.run(backend.external_files.describe, address)
            actual_size, etag, pinned = found.size, found.etag, {SOURCE_MTIME_KEY: str(found.mtime_ns)}
        else:
            store_namespace, store_key = split_address(namespace, address)
            stat = await backend.run(backend.adapter.stat, store_namespace, store_key)
            actual_size, etag = stat.size, stat.etag
            pinned = {SOURCE_VERSION_KEY: stat.version} if stat.version else {}
    except NotFound:
        raise bad_request(f"no object at physical address {address!r}: upload it before linking") from None
    except InvalidArgument as exc:
        raise bad_request(f"invalid blockstore type or address: {exc}") from None
    if actual_size != size:
        raise bad_request(f"size_bytes is {size}, but the object at the physical address has {actual_size} bytes")
    stored = normalize_etag(etag)
    if stored != checksum:
        raise bad_request(f"checksum {checksum!r} differs from the ETag {stored!r} of the object at the address")
    return pinned


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


@router.get(BRANCH_OBJECTS + "/stage_allowed", status_code=204)
async def upload_object_preflight(ctx: Ctx, repository: str, branch: str, path: str | None = None) -> Response:
    # As lakeFS: only whether the caller may write the path (repository and branch are not looked
    # up; the upload itself answers 404 for them).
    await ctx.authorize_key(WRITE_OBJECT, repository, checked_path(path), branch=branch)
    return no_content()


@router.put(BRANCH_OBJECTS, status_code=201)
async def stage_object(ctx: Ctx, request: Request, repository: str, branch: str, path: str | None = None) -> Response:
    key = checked_path(path)
    await ctx.authorize_key(WRITE_OBJECT, repository, key, branch=branch)  # before the body is read
    body = await json_body(request, ObjectStageCreation, LINK_BODY_BYTES)
    given = body.physical_address
    if not given:
        raise bad_request("physical_address is required")
    described = _described(body.checksum, body.size_bytes, body.metadata, body.content_type, body.mtime)
    namespace = await ctx.backend.namespace(repository, ctx.deadline)
    if inside_namespace(given, namespace) is not None:
        raise bad_request(
            f"physical address {given!r} is inside the repository's storage namespace: stageObject names objects"
            " under an allowed import prefix; link uploads to the namespace with linkPhysicalAddress"
        )
    _check_external(given, import_prefixes(request.app.state.config))
    await ensure_branch(ctx, repository, branch)
    # `force` (lakeFS: write to a read-only repository) changes nothing: Silt has no read-only
    # repositories, and branch protection binds every writer alike.
    entry = await _checked_entry(ctx, namespace, given, described)
    await _stage(ctx, api.StageEntryRequest(repository=repository, branch=branch, key=key, entry=entry))
    ctx.record(ev.WRITE, repository, branch, key, entry.size)
    return model_response(object_stats(key, entry, namespace), 201)
