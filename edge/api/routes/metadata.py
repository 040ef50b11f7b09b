"""lakeFS's metadata calls: where a range or metarange of a repository lies, and its bytes.

* getMetaRange / getRange answer 200 with the file's place in a `Location` header and as
  StorageURI's `location`. As lakeFS, the place is relative to the repository's storage
  namespace (lakeFS's Spark client resolves it against the namespace): `_silt/metaranges/<id>`
  and `_silt/ranges/<id>`.
* getMetadataObject (internal) streams the file, or with `presign=true` redirects (302) to a
  presigned URL of it.

The files are Silt's own Parquet (engine/core/committed/), not lakeFS's SSTables: a reader
of lakeFS's format cannot read them; Spark reads them as Parquet. Ids are 64 lowercase hex
digits (the content hash Silt names them by); anything else is refused (400) before it could
name a key, so no id reaches outside the namespace's `_silt/ranges/` and `_silt/metaranges/`.
An id that is well-formed but absent from the namespace is 404. Reading needs ReadRepo (lakeFS:
fs:ListObjects and fs:ReadRepository).
"""

from __future__ import annotations

import re

from fastapi import APIRouter, Request, Response
from fastapi.responses import StreamingResponse
from lakefs_sdk.models import StorageURI

from edge.api.context import Ctx
from edge.api.errors import bad_request, not_found
from edge.api.objects.presign import presigner
from edge.core.object_reads import stream_reader
from silt.block.adapter import ObjectStat
from silt.errors import NotFound

router = APIRouter()

METADATA = "/repositories/{repository}/metadata"
RANGES_PREFIX = "_silt/ranges/"
METARANGES_PREFIX = "_silt/metaranges/"
_ID = re.compile(r"[0-9a-f]{64}")
# lakeFS's names of the two kinds, as its paths and getMetadataObject's `type` spell them.
_PREFIXES = {"range": RANGES_PREFIX, "meta_range": METARANGES_PREFIX}
# lakeFS's headers on the bytes: never rendered or sniffed by a browser.
_OBJECT_HEADERS = {
    "Content-Type": "application/octet-stream",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "SAMEORIGIN",
    "Content-Security-Policy": "default-src 'none'",
}


def _key(kind: str, object_id: str) -> str:
    prefix = _PREFIXES.get(kind)
    if prefix is None:
        raise bad_request(f"invalid metadata object type {kind!r}: expected range or meta_range")
    if not _ID.fullmatch(object_id):
        raise bad_request(f"invalid {kind} id {object_id!r}: expected 64 lowercase hex digits")
    return prefix + object_id


async def _located(ctx: Ctx, repository: str, kind: str, object_id: str) -> tuple[str, str, ObjectStat]:
    """(namespace, key, stat) of a range or metarange of the repository; 404 when absent.
    Its entries name keys unfiltered, so a caller any key is refused to is refused them all."""
    await ctx.authorize_every_key(repository)
    key = _key(kind, object_id)
    namespace = await ctx.backend.namespace(repository, ctx.deadline)
    try:
        stat = await ctx.backend.run(ctx.backend.adapter.stat, namespace, key)
    except NotFound:
        raise not_found(f"{kind.replace('_', '')} {object_id} not found in repository {repository!r}") from None
    return namespace, key, stat


def _storage_uri(key: str) -> Response:
    response = Response(
        StorageURI(location=key).json(by_alias=True, exclude_none=True),
        media_type="application/json",
        headers={"Location": key},
    )
    return response


@router.get(METADATA + "/meta_range/{meta_range}")
async def get_meta_range(ctx: Ctx, repository: str, meta_range: str) -> Response:
    _, key, _ = await _located(ctx, repository, "meta_range", meta_range)
    return _storage_uri(key)


@router.get(METADATA + "/range/{range}")
async def get_range(ctx: Ctx, repository: str, range: str) -> Response:  # lakeFS's name
    _, key, _ = await _located(ctx, repository, "range", range)
    return _storage_uri(key)


@router.get(METADATA + "/object/{type}/{object_id}")
async def get_metadata_object(
    ctx: Ctx,
    request: Request,
    repository: str,
    type: str,  # lakeFS's name; checked in _key
    object_id: str,
    presign: bool = False,
) -> Response:
    namespace, key, stat = await _located(ctx, repository, type, object_id)
    if presign:
        signer = presigner(request)
        signer.check_enabled()
        url = await ctx.backend.run(signer.sign_key_read, request, namespace, key, object_id)
        return Response(status_code=302, headers={"Location": url.url, "Cache-Control": "no-store"})
    reader = await ctx.backend.run(ctx.backend.adapter.get, namespace, key)
    headers = {**_OBJECT_HEADERS, "Content-Length": str(stat.size)}
    return StreamingResponse(stream_reader(ctx.backend.run, reader), headers=headers)
