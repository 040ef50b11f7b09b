"""Multipart uploads.

**Persistence.** The bytes of parts live in the block adapter's own multipart upload at the
object's final physical address (local: a directory under the store; S3: a real S3 multipart
upload). What S3 clients need besides (upload id -> repository, branch, key, physical address,
the adapter's upload id; and each part's ETag and size, for ListParts and for validating
Complete) is kept in KV, partition `gateway-multipart`, so uploads survive gateway restarts
and any gateway replica can continue an upload another one started. The records of uploads
and their indexes are silt/multipart_uploads.py's; besides them:

    c/<repository>/<upload id>        a completed upload's answer, for a retried Complete (JSON)

**Expiry.** An upload never completed nor aborted is aborted once it is older than
`gateways.s3.multipart_upload_max_age_seconds` (7 days by default): from then on it is
unknown to every call, and each gateway process's sweep (every
`gateways.s3.multipart_expiry_interval_seconds`) aborts it in the block adapter and forgets it.

SDKs retry CompleteMultipartUpload when its response was lost; S3 answers the retry with the
same result. A completed upload therefore leaves its answer (not its parts) for
COMPLETED_REPLAY_SECONDS; each later Complete in the repository prunes a few expired ones.

**A Complete whose staging failed after the parts were composed.** Composing consumes the parts
(the local adapter removes the upload's directory; S3 forgets the upload), so a retry could not
compose them again. Before staging, the upload's record says what was composed (`composed`: the
parts listed, and the entry staged for the object at the upload's address). A retried Complete
with the same parts skips composing, checks that the object is still at that address and stages
the same entry again: graveler takes a current entry equal to it (but for last_modified, at an
address this upload has to itself) as this write's own, a success even under If-None-Match.
Other parts after composition are InvalidPart; UploadPart and UploadPartCopy are NoSuchUpload.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import logging
import re
import secrets
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import quote

from edge.gateway import checksums
from edge.gateway.backend import Backend
from edge.gateway.errors import S3Error
from edge.gateway.operations.common import (
    Context,
    Response,
    WriteCondition,
    iso_time,
    new_physical_address,
    object_key_required,
    parse_xml,
    precheck_write_condition,
    quoted_etag,
    source_entry,
    split_address,
    stage_new_bytes,
    user_metadata,
    writable_branch,
    write_condition,
    x,
    xml_response,
)
from edge.gateway.operations.objects import (
    PART_SIZES,
    check_copy_source_conditions,
    encode_part_sizes,
    now_timestamp,
    parse_copy_source,
    receive_into,
)
from edge.gateway.request import decimal
from edge.gateway.routing import split_path
from silt import multipart_uploads as uploads
from silt.block import PartInfo
from silt.config import S3GatewayConfig
from silt.errors import NotFound
from silt.graveler.v1 import events_pb2 as ev
from silt.graveler.v1 import model_pb2 as pb
from silt.iam_actions import READ_OBJECT, WRITE_OBJECT
from silt.kv.store import scan_prefix
from silt.objects import DEFAULT_CONTENT_TYPE
from silt.repository_place import RepositoryPlace

log = logging.getLogger(__name__)

PARTITION = uploads.PARTITION
# The `origin` of the records of the REST API's presigned multipart uploads
# (edge/api/routes/presigned_multipart.py), which share these records.
PRESIGNED_ORIGIN = uploads.PRESIGNED_ORIGIN
COMPLETED_REPLAY_SECONDS = 3600
_PRUNE_BATCH = 64
MIN_PART_SIZE = 5 * 1024 * 1024
MAX_PART_NUMBER = 10000
_XMLNS = 'xmlns="http://s3.amazonaws.com/doc/2006-03-01/"'
_COPY_RANGE = re.compile(r"^bytes=([0-9]+)-([0-9]+)$")


def _completed_key(repository: str, upload_id: str) -> bytes:
    return f"c/{repository}/{upload_id}".encode()


def _part_key(upload_id: str, number: int) -> bytes:
    return uploads.part_prefix(upload_id) + f"{number:05d}".encode()


async def _upload(ctx: Context, action: str, composed_ok: bool = False) -> tuple[str, dict, RepositoryPlace]:
    """The upload a request names, its record, and the repository (now named by the bucket)
    it belongs to; composed_ok: also one whose parts were composed by a Complete whose staging
    failed (only a Complete, Abort or ListParts may go on). action: the object action the
    request needs on the upload's key."""
    request = ctx.request
    repository = request.bucket
    ref, key = split_path(request.path)
    await ctx.authorize_key(action, repository, key, branch=ref)
    upload_id = request.arg("uploadId") or ""
    record = None
    if re.fullmatch(r"[0-9a-f]{32}", upload_id):
        record = await ctx.backend.run(ctx.backend.kv_get, PARTITION, uploads.upload_key(repository, upload_id))
    if record is None or record["path"] != request.path:
        raise S3Error("NoSuchUpload", UploadId=upload_id)
    if record.get("origin") == PRESIGNED_ORIGIN:
        # Its parts go straight to the store, unrecorded here: only the REST API completes it.
        raise S3Error(
            "NoSuchUpload",
            "a presigned multipart upload of the REST API: complete or abort it there",
            UploadId=upload_id,
        )
    place = await _owner(ctx, repository, record)
    if place is None:
        # Opened in a repository deleted since (its deletion aborts it): not this one's.
        raise S3Error("NoSuchUpload", "the upload's repository was deleted", UploadId=upload_id)
    if uploads.is_expired(record, ctx.config.multipart_upload_max_age_seconds):
        raise S3Error("NoSuchUpload", "the upload expired", UploadId=upload_id)  # the sweep aborts it
    if "composed" in record and not composed_ok:
        raise S3Error("NoSuchUpload", "the upload's parts were composed by a Complete", UploadId=upload_id)
    return upload_id, record, place


async def _owner(ctx: Context, repository: str, record: dict) -> RepositoryPlace | None:
    """The repository now named `repository`, if the upload's record belongs to it; else None.
    A repository this edge remembers that the record is not of is looked up again first: the
    edge may remember one deleted since, and the upload be the new one's."""
    backend = ctx.backend
    place = await backend.place(repository)
    if uploads.belongs(record, place):
        return place
    backend.forget_namespace(repository)
    place = await backend.place(repository)
    return place if uploads.belongs(record, place) else None


def _part_number(ctx: Context) -> int:
    number = decimal(ctx.request.arg("partNumber") or "")
    if number is None or not 1 <= number <= MAX_PART_NUMBER:
        raise S3Error(
            "InvalidArgument", "Part number must be an integer between 1 and 10000", ArgumentName="partNumber"
        )
    return number


async def create(ctx: Context) -> Response:
    request = ctx.request
    repository = request.bucket
    ref, key = split_path(request.path)
    await ctx.authorize_key(WRITE_OBJECT, repository, key, branch=ref)
    object_key_required(ref, key)
    place = await writable_branch(ctx, repository, ref)
    algorithm = checksums.upload_algorithm(request.headers)
    address = new_physical_address()
    block_id = await ctx.backend.run(ctx.backend.adapter.create_multipart_upload, place.namespace, address)
    upload_id = secrets.token_hex(16)
    record = {
        **uploads.new_record(request.path, ref, key, place, address, block_id, ctx.user_id),
        "content_type": request.headers.get("content-type", DEFAULT_CONTENT_TYPE),
        "metadata": user_metadata(request),
        "checksum_algorithm": algorithm,
    }
    await ctx.backend.run(uploads.save, ctx.backend.kv, repository, upload_id, record)
    response = xml_response(
        f"<InitiateMultipartUploadResult {_XMLNS}><Bucket>{x(repository)}</Bucket><Key>{x(request.path)}</Key>"
        f"<UploadId>{upload_id}</UploadId></InitiateMultipartUploadResult>"
    )
    if algorithm:
        kind = "FULL_OBJECT" if algorithm in checksums.FULL_OBJECT_ONLY else "COMPOSITE"
        response.headers += [("x-amz-checksum-algorithm", algorithm.upper()), ("x-amz-checksum-type", kind)]
    return response


async def upload_part(ctx: Context) -> Response:
    number = _part_number(ctx)
    upload_id, record, _ = await _upload(ctx, WRITE_OBJECT)
    adapter = ctx.backend.adapter
    if "x-amz-copy-source" in ctx.request.headers:
        return await _upload_part_copy(ctx, upload_id, record, number)
    received = await receive_into(
        ctx,
        adapter.upload_part,
        record["namespace"],
        record["address"],
        record["block_id"],
        number,
        upload_algorithm=record.get("checksum_algorithm"),
    )
    await _save_part(ctx, upload_id, number, received.etag, received.size, received.checksum)
    return Response(200, [("ETag", quoted_etag(received.etag)), *received.checksum_headers()])


async def _save_part(
    ctx: Context, upload_id: str, number: int, etag: str, size: int, checksum: tuple[str, str] | None = None
) -> str:
    modified = datetime.now(UTC)
    part = {"etag": etag, "size": size, "last_modified": modified.isoformat()}
    if checksum is not None:
        part["checksum"] = list(checksum)
    await ctx.backend.run(ctx.backend.kv_put, PARTITION, _part_key(upload_id, number), part)
    return iso_time(modified)


async def _upload_part_copy(ctx: Context, upload_id: str, record: dict, number: int) -> Response:
    headers = ctx.request.headers
    src_repo, src_ref, src_key = parse_copy_source(headers["x-amz-copy-source"])
    await ctx.authorize_key(READ_OBJECT, src_repo, src_key)
    source = await source_entry(ctx, src_repo, src_ref, src_key)
    check_copy_source_conditions(ctx, source)
    src_range = None
    size = source.size
    if "x-amz-copy-source-range" in headers:
        match = _COPY_RANGE.match(headers["x-amz-copy-source-range"].strip())
        if not match:
            raise S3Error("InvalidArgument", "x-amz-copy-source-range must be bytes=<first>-<last>")
        start, end = decimal(match.group(1)) or 0, decimal(match.group(2)) or 0
        if start > end or end >= source.size:
            raise S3Error("InvalidRange", ActualObjectSize=str(source.size))
        src_range = (start, end)
        size = end - start + 1
    src_namespace = await ctx.backend.namespace(src_repo)
    src_ns, src_address = split_address(src_namespace, source.physical_address)
    info = await ctx.backend.run(
        ctx.backend.entry_reader(src_namespace, source).upload_part_copy,
        record["namespace"],
        record["address"],
        record["block_id"],
        number,
        src_ns,
        src_address,
        src_range,
    )
    modified = await _save_part(ctx, upload_id, number, info.etag, size)
    return xml_response(
        f"<CopyPartResult {_XMLNS}><LastModified>{modified}</LastModified>"
        f"<ETag>{x(quoted_etag(info.etag))}</ETag></CopyPartResult>"
    )


@dataclass(frozen=True)
class RequestedPart:
    number: int
    etag: str
    checksums: dict[str, str]  # x-amz-checksum-<algorithm> -> base64, as the client listed them


def _checksum_element(header: str) -> str:
    """The XML element of a checksum header: x-amz-checksum-crc32 -> ChecksumCRC32."""
    return "Checksum" + header.removeprefix(checksums.HEADER_PREFIX).upper()


def _requested_parts(raw: bytes) -> list[RequestedPart]:
    root = parse_xml(raw)
    ns = root.tag[: root.tag.index("}") + 1] if root.tag.startswith("{") else ""
    parts = []
    for part in root.findall(f"{ns}Part"):
        number, etag = decimal((part.findtext(f"{ns}PartNumber") or "").strip()), part.findtext(f"{ns}ETag")
        if number is None or etag is None:
            raise S3Error("MalformedXML")
        if not 1 <= number <= MAX_PART_NUMBER:
            raise S3Error(
                "InvalidArgument", "Part number must be an integer between 1 and 10000", ArgumentName="PartNumber"
            )
        listed = {
            checksums.HEADER_PREFIX + name.removeprefix("Checksum").lower(): (child.text or "").strip()
            for child in part
            if (name := child.tag.removeprefix(ns)).startswith("Checksum") and name != "ChecksumType"
        }
        parts.append(RequestedPart(number, etag.strip().strip('"'), listed))
    if not parts:
        raise S3Error("MalformedXML", "The XML you provided lists no parts")
    return parts


def _listed_by_number(requested: list[RequestedPart]) -> dict[int, list[RequestedPart]]:
    """The parts a Complete lists, by number: ascending, where a number may be listed again right
    after itself (a part uploaded twice, each upload's ETag listed) but never going back."""
    if any(b.number < a.number for a, b in itertools.pairwise(requested)):
        raise S3Error("InvalidPartOrder")
    listed: dict[int, list[RequestedPart]] = {}
    for want in requested:
        listed.setdefault(want.number, []).append(want)
    return listed


def _chosen_parts(listed: dict[int, list[RequestedPart]], stored: dict[int, dict | None]) -> list[RequestedPart]:
    """The part of each number listed that makes the object: the upload of that number that
    completed last (the one stored), as on S3, which must be one the client lists by its ETag.
    A client that uploaded a part twice, the first upload finishing last, may list both."""
    chosen = []
    for number, wants in listed.items():
        part = stored.get(number)
        match = next((want for want in wants if part is not None and part["etag"] == want.etag), None)
        if match is None:
            etags = ", ".join(want.etag for want in wants)
            raise S3Error("InvalidPart", f"part {number} was not uploaded with ETag {etags}", PartNumber=str(number))
        chosen.append(match)
    return chosen


async def complete(ctx: Context) -> Response:
    condition = write_condition(ctx.request)
    try:
        upload_id, record, owner = await _upload(ctx, WRITE_OBJECT, composed_ok=True)
    except S3Error as exc:
        if exc.code != "NoSuchUpload":
            raise
        return await _replay_complete(ctx, exc)
    requested = _requested_parts(await ctx.request.body.read_all())
    if "composed" in record:
        return await _complete_composed(ctx, upload_id, record, owner, requested, condition)
    listed = _listed_by_number(requested)
    backend = ctx.backend
    stored = dict(await backend.run(backend.kv_scan, PARTITION, uploads.part_prefix(upload_id)))
    chosen = _chosen_parts(listed, {number: stored.get(_part_key(upload_id, number)) for number in listed})
    algorithm = record.get("checksum_algorithm")
    part_checksums: list[str] | None = [] if algorithm else None
    for i, want in enumerate(chosen):
        part = stored[_part_key(upload_id, want.number)]
        if i < len(chosen) - 1 and part["size"] < MIN_PART_SIZE:
            raise S3Error("EntityTooSmall", ProposedSize=str(part["size"]), MinSizeAllowed=str(MIN_PART_SIZE))
        # A checksum the client lists for a part must be the one the part was uploaded with.
        uploaded = dict([part["checksum"]]) if part.get("checksum") else {}
        for header, value in want.checksums.items():
            if uploaded.get(header) != value:
                raise S3Error(
                    "InvalidPart",
                    f"part {want.number} was not uploaded with {header.removeprefix(checksums.HEADER_PREFIX).upper()}"
                    f" {value}",
                    PartNumber=str(want.number),
                )
        if part_checksums is not None:
            # UploadPartCopy parts carry none: such an object gets no composite checksum.
            part_checksum = uploaded.get(checksums.HEADER_PREFIX + (algorithm or ""))
            part_checksums = [*part_checksums, part_checksum] if part_checksum else None
    await precheck_write_condition(
        ctx, ctx.request.bucket, record["branch"], record["key"], condition, own_address=record["address"]
    )
    infos = [PartInfo(part_number=p.number, etag=p.etag) for p in chosen]
    result = await backend.run(
        backend.adapter.complete_multipart_upload, record["namespace"], record["address"], record["block_id"], infos
    )
    entry = pb.Entry(
        physical_address=record["address"],
        size=result.size,
        etag=result.etag,
        last_modified=now_timestamp(),
        content_type=record["content_type"],
        metadata=record["metadata"],
    )
    sizes = [stored[_part_key(upload_id, p.number)]["size"] for p in chosen]
    entry.metadata[PART_SIZES] = encode_part_sizes(sizes)  # for GET/HEAD ?partNumber=
    checksum_xml = ""
    if algorithm and part_checksums:
        if algorithm in checksums.FULL_OBJECT_ONLY:
            value, kind = checksums.full_object_crc64nvme(list(zip(part_checksums, sizes, strict=True))), "FULL_OBJECT"
        else:
            value, kind = checksums.composite(algorithm, part_checksums), "COMPOSITE"
        entry.metadata.update(checksums.as_metadata((checksums.HEADER_PREFIX + algorithm, value)))
        element = _checksum_element(checksums.HEADER_PREFIX + algorithm)
        checksum_xml = f"<{element}>{value}</{element}><ChecksumType>{kind}</ChecksumType>"
    repository = ctx.request.bucket
    # What was composed, before it is staged: a retry after a failed staging cannot compose the
    # consumed parts again, and stages this same entry instead (see the module's docstring).
    composed = {
        "parts": [[p.number, p.etag] for p in requested],
        "entry": base64.b64encode(entry.SerializeToString()).decode(),
        "checksum_xml": checksum_xml,
    }
    record = {**record, "composed": composed}
    await backend.run(backend.kv_put, PARTITION, uploads.upload_key(repository, upload_id), record)
    return await _stage_composed(ctx, upload_id, record, owner, stored, requested, entry, checksum_xml, condition)


async def _complete_composed(
    ctx: Context,
    upload_id: str,
    record: dict,
    owner: RepositoryPlace,
    requested: list[RequestedPart],
    condition: WriteCondition,
) -> Response:
    """A retried Complete of an upload whose parts an earlier attempt composed: the same parts,
    the object still at the upload's address, and the same entry staged again."""
    backend = ctx.backend
    composed = record["composed"]
    if [[p.number, p.etag] for p in requested] != composed["parts"]:
        raise S3Error("InvalidPart", "the upload was completed with other parts", UploadId=upload_id)
    entry = pb.Entry.FromString(base64.b64decode(composed["entry"]))
    stored = dict(await backend.run(backend.kv_scan, PARTITION, uploads.part_prefix(upload_id)))
    try:
        stat = await backend.run(backend.adapter.stat, record["namespace"], record["address"])
    except NotFound:
        stat = None
    if stat is None or stat.size != entry.size:
        # Its bytes are gone (deleted when graveler certainly did not take the entry): the upload
        # can never complete.
        await _forget(ctx, ctx.request.bucket, upload_id, record, stored)
        raise S3Error("NoSuchUpload", "the upload's object is gone", UploadId=upload_id)
    await precheck_write_condition(
        ctx, ctx.request.bucket, record["branch"], record["key"], condition, own_address=record["address"]
    )
    entry.last_modified.CopyFrom(now_timestamp())
    return await _stage_composed(
        ctx, upload_id, record, owner, stored, requested, entry, composed["checksum_xml"], condition
    )


async def _stage_composed(
    ctx: Context,
    upload_id: str,
    record: dict,
    owner: RepositoryPlace,
    stored: dict,
    requested: list[RequestedPart],
    entry: pb.Entry,
    checksum_xml: str,
    condition: WriteCondition,
) -> Response:
    """Stage the composed object's entry; then the upload is done and its answer kept."""
    backend = ctx.backend
    repository = ctx.request.bucket
    try:
        # The upload's repository by its identity; one older than identities by the identity of
        # the repository its namespace was found to be (_upload): if that one is deleted before
        # the entry is staged, graveler refuses it as well.
        place = RepositoryPlace(record["namespace"], record.get("repository_id") or owner.repository_id)
        await stage_new_bytes(
            ctx, repository, record["branch"], record["key"], entry, place, condition, follow_replacement=False
        )
    except S3Error as exc:
        if exc.what == "repository" and getattr(exc, "not_applied", False):
            # The repository the upload was opened in was deleted (perhaps created again since):
            # the upload was aborted with it.
            await _forget(ctx, repository, upload_id, record, stored)
            raise S3Error("NoSuchUpload", "the upload's repository was deleted", UploadId=upload_id) from None
        # The parts were consumed into the object; with its bytes deleted, the upload can
        # never complete, so it is forgotten too (the client re-uploads after the 503).
        # Otherwise the entry may stand and the upload stays, its record saying what was
        # composed: a retried Complete with the same parts stages the same entry again, and
        # graveler takes the entry it finds as its own, which is success.
        if getattr(exc, "not_applied", False):
            await _forget(ctx, repository, upload_id, record, stored)
        raise
    answer = {
        "path": ctx.request.path,
        "parts": [[p.number, p.etag] for p in requested],
        "etag": entry.etag,
        "checksum_xml": checksum_xml,
        "completed_at": time.time(),
    }
    await backend.run(backend.kv_put, PARTITION, _completed_key(repository, upload_id), answer)
    await _forget(ctx, repository, upload_id, record, stored)
    await backend.run(_prune_completed, backend, repository)
    ctx.record(ev.WRITE, repository, record["branch"], record["key"], entry.size)
    return _complete_result(ctx, entry.etag, checksum_xml)


def _complete_result(ctx: Context, etag: str, checksum_xml: str) -> Response:
    repository = ctx.request.bucket
    return xml_response(
        f"<CompleteMultipartUploadResult {_XMLNS}><Location>/{x(repository)}/{x(ctx.request.path)}</Location>"
        f"<Bucket>{x(repository)}</Bucket><Key>{x(ctx.request.path)}</Key>"
        f"<ETag>{x(quoted_etag(etag))}</ETag>{checksum_xml}</CompleteMultipartUploadResult>"
    )


async def _replay_complete(ctx: Context, missing: S3Error) -> Response:
    """A retried Complete of an upload that completed: the same answer, for the same parts."""
    backend = ctx.backend
    upload_id = ctx.request.arg("uploadId") or ""
    answer = None
    if re.fullmatch(r"[0-9a-f]{32}", upload_id):
        answer = await backend.run(backend.kv_get, PARTITION, _completed_key(ctx.request.bucket, upload_id))
    if answer is None or answer["path"] != ctx.request.path:
        raise missing
    if time.time() - answer["completed_at"] > COMPLETED_REPLAY_SECONDS:
        raise missing
    requested = _requested_parts(await ctx.request.body.read_all())
    if [[p.number, p.etag] for p in requested] != answer["parts"]:
        raise missing
    return _complete_result(ctx, answer["etag"], answer["checksum_xml"])


def _prune_completed(backend: Backend, repository: str) -> None:
    """Forget a few expired completed-upload answers (bounded work per Complete)."""
    horizon = time.time() - COMPLETED_REPLAY_SECONDS
    prefix = f"c/{repository}/".encode()
    for entry in itertools.islice(scan_prefix(backend.kv, PARTITION, prefix), _PRUNE_BATCH):
        if json.loads(entry.value).get("completed_at", 0) < horizon:
            backend.kv_delete(PARTITION, entry.key)


def _part_checksum_xml(part: dict) -> str:
    if not part.get("checksum"):
        return ""
    header, value = part["checksum"]
    element = _checksum_element(header)
    return f"<{element}>{value}</{element}>"


async def _forget(ctx: Context, repository: str, upload_id: str, record: dict, parts: dict) -> None:
    backend = ctx.backend
    await backend.run(uploads.forget, backend.kv, repository, upload_id, record, list(parts))


async def abort(ctx: Context) -> Response:
    upload_id, record, _ = await _upload(ctx, WRITE_OBJECT, composed_ok=True)
    backend = ctx.backend
    # Once composed, the parts are an object an entry may name: left to garbage collection.
    if "composed" not in record:
        await backend.run(
            backend.adapter.abort_multipart_upload, record["namespace"], record["address"], record["block_id"]
        )
    stored = dict(await backend.run(backend.kv_scan, PARTITION, uploads.part_prefix(upload_id)))
    await _forget(ctx, ctx.request.bucket, upload_id, record, stored)
    return Response(204)


def _int_arg(ctx: Context, name: str, default: int) -> int:
    raw = ctx.request.arg(name)
    if raw is None or raw == "":
        return default
    value = decimal(raw)
    if value is None:
        raise S3Error("InvalidArgument", f"{name} must be a non-negative integer", ArgumentName=name)
    return value


async def list_parts(ctx: Context) -> Response:
    upload_id, _, _ = await _upload(ctx, READ_OBJECT, composed_ok=True)
    marker = _int_arg(ctx, "part-number-marker", 0)
    limit = min(_int_arg(ctx, "max-parts", 1000), 1000)
    backend = ctx.backend
    stored = await backend.run(backend.kv_scan, PARTITION, uploads.part_prefix(upload_id))
    parts = [(int(k.decode().rsplit("/", 1)[1]), v) for k, v in stored]
    parts = [p for p in parts if p[0] > marker]
    page, truncated = parts[:limit], len(parts) > limit
    body = "".join(
        f"<Part><PartNumber>{n}</PartNumber><LastModified>{iso_time(datetime.fromisoformat(p['last_modified']))}"
        f"</LastModified><ETag>{x(quoted_etag(p['etag']))}</ETag><Size>{p['size']}</Size>{_part_checksum_xml(p)}</Part>"
        for n, p in page
    )
    next_marker = page[-1][0] if page else marker
    return xml_response(
        f"<ListPartsResult {_XMLNS}><Bucket>{x(ctx.request.bucket)}</Bucket><Key>{x(ctx.request.path)}</Key>"
        f"<UploadId>{upload_id}</UploadId><PartNumberMarker>{marker}</PartNumberMarker>"
        f"<NextPartNumberMarker>{next_marker}</NextPartNumberMarker><MaxParts>{limit}</MaxParts>"
        f"<IsTruncated>{'true' if truncated else 'false'}</IsTruncated>{body}</ListPartsResult>"
    )


async def list_uploads(ctx: Context) -> Response:
    repository = ctx.request.bucket
    # The uploads' keys are listed unfiltered: every key of the repository must be readable.
    if not (await ctx.key_scope(READ_OBJECT, repository)).whole:
        raise S3Error("AccessDenied", f"{ctx.user_id} may not {READ_OBJECT} on every key of {repository}")
    place = await ctx.backend.place(repository)
    prefix = ctx.request.arg("prefix", "") or ""
    limit = min(_int_arg(ctx, "max-uploads", uploads.MAX_UPLOADS), uploads.MAX_UPLOADS)
    key_marker = ctx.request.arg("key-marker") or ""
    id_marker = ctx.request.arg("upload-id-marker") or ""
    delimiter = ctx.request.arg("delimiter") or ""
    encoding = ctx.request.arg("encoding-type")
    if encoding not in (None, "url"):
        raise S3Error("InvalidArgument", "encoding-type must be url", ArgumentName="encoding-type")

    def enc(value: str) -> str:
        return x(quote(value, safe="/") if encoding == "url" else value)

    backend = ctx.backend

    async def page_of(place: RepositoryPlace) -> uploads.UploadPage:
        # S3's order (by key, then by initiation time), read a page at a time from the index.
        return await backend.run(
            uploads.list_page,
            backend.kv,
            repository,
            prefix,
            delimiter,
            key_marker,
            # An upload id, or the marker of a page that stopped at an expired upload (uploads.py).
            id_marker if re.fullmatch(r"([0-9]{20})?[0-9a-f]{32}", id_marker) else "",
            limit,
            ctx.config.multipart_upload_max_age_seconds,
            uploads.MAX_SKIPPED_PER_PAGE,
            place,  # uploads of a repository deleted under this name are not listed
        )

    page = await page_of(place)
    if page.others:
        # Uploads of another repository of the name: this edge may remember one deleted since.
        backend.forget_namespace(repository)
        current = await backend.place(repository)
        if current != place:
            page = await page_of(current)
    truncated = page.truncated
    markers = ""
    if truncated:
        markers = (
            f"<NextKeyMarker>{enc(page.next_key_marker)}</NextKeyMarker>"
            f"<NextUploadIdMarker>{page.next_upload_id_marker}</NextUploadIdMarker>"
        )
    body = "".join(
        f"<Upload><Key>{enc(item.path)}</Key><UploadId>{item.upload_id}</UploadId>"
        f"<Initiator><ID>{x(item.initiator)}</ID></Initiator><Owner><ID>{x(item.initiator)}</ID></Owner>"
        f"<StorageClass>STANDARD</StorageClass><Initiated>{iso_time(datetime.fromisoformat(item.initiated))}</Initiated>"
        f"</Upload>"
        for item in page.items
        if isinstance(item, uploads.Upload)
    )
    prefixes = "".join(
        f"<CommonPrefixes><Prefix>{enc(item.prefix)}</Prefix></CommonPrefixes>"
        for item in page.items
        if isinstance(item, uploads.CommonPrefix)
    )
    extra = f"<Delimiter>{enc(delimiter)}</Delimiter>" if delimiter else ""
    extra += "<EncodingType>url</EncodingType>" if encoding == "url" else ""
    return xml_response(
        f"<ListMultipartUploadsResult {_XMLNS}><Bucket>{x(repository)}</Bucket><Prefix>{enc(prefix)}</Prefix>"
        f"<KeyMarker>{enc(key_marker)}</KeyMarker><UploadIdMarker>{x(id_marker)}</UploadIdMarker>{markers}{extra}"
        f"<MaxUploads>{limit}</MaxUploads><IsTruncated>{'true' if truncated else 'false'}</IsTruncated>"
        f"{body}{prefixes}</ListMultipartUploadsResult>"
    )


async def expire_uploads(backend: Backend, config: S3GatewayConfig) -> None:
    """Abort expired uploads now and every multipart_expiry_interval_seconds, until cancelled.

    Every gateway process runs it: the sweeps of replicas overlap harmlessly (each step is
    idempotent), and a deployment with any gateway running expires its uploads.
    """
    while True:
        try:
            while True:  # a full batch: more expired uploads may be waiting
                aborted = await backend.run(
                    uploads.expire, backend.kv, backend.adapter, config.multipart_upload_max_age_seconds
                )
                if aborted:
                    log.info("aborted %d expired multipart uploads", aborted)
                if aborted < uploads.EXPIRE_BATCH:
                    break
        except Exception:  # KV or store unavailable: the next sweep tries again
            log.warning("could not abort expired multipart uploads", exc_info=True)
        await asyncio.sleep(config.multipart_expiry_interval_seconds)
