"""The KV records of the S3 gateway's multipart uploads: by id, in S3's listing order, and by age.

Shared library, not the gateway's alone: graveler's repository deletion aborts a deleted
repository's open uploads with `abort_repository`, whichever front end deleted it, and the REST
API records its presigned multipart uploads here too (`origin` PRESIGNED_ORIGIN, no part
records: their parts go straight to the store), so that the same expiry and deletion abort them.

Partition `gateway-multipart`:

    u/<repository>/<upload id>                                the upload (JSON)
    l/<repository>/<path>\\0\\0<initiated ns:020d>/<upload id>  listing index: by key, then initiation
    t/<initiated ns:020d>/<repository>/<upload id>            age index: oldest first (the whole record)
    p/<upload id>/<part number:05d>                           one part (JSON)

In `l/`, a NUL inside the path is written `\\0\\xff` and the path ends with `\\0\\0`, so the
byte order of the index is S3's order of the paths, and every path under a prefix follows
`l/<repository>/<prefix>`. ListMultipartUploads therefore reads one page (and one item past
it) from where its markers point, never every upload of the repository. The age index lets
the expiry sweep read only uploads that are too old, and holds what aborting the upload in
the block adapter needs even when the other records are gone.

Records are keyed by the repository's name, and each carries the repository's identity
(`repository_id`, graveler's RepositoryInfo.unique_id) when it was opened: an upload belongs to
that incarnation of the name only. One opened before the repository was deleted and created
again is unknown to the new one (`belongs`, and listing skips it), and its bytes lie in the old
storage namespace; the deletion aborts it. A record without an identity (written by a gateway
older than identities) is judged by the storage namespace it carries: it belongs to the
repository of that name whose namespace its bytes lie in, and the deletion of a repository
aborts the identity-less uploads of its namespace.

Writes are ordered so that a crash leaves nothing the sweep cannot find: an upload is
written age index first, record last, and forgotten record first, age index last.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, NamedTuple

from silt.block import BlockAdapter
from silt.errors import NotFound
from silt.kv.store import Store, scan_prefix
from silt.repository_place import RepositoryPlace

log = logging.getLogger(__name__)

PARTITION = b"gateway-multipart"
# The `origin` of a record of the REST API's presigned multipart uploads, whose parts go straight
# to the store (edge/api/routes/presigned_multipart.py); the gateway's own records have none.
PRESIGNED_ORIGIN = "api-presigned"
MAX_UPLOADS = 1000  # S3's cap on max-uploads
EXPIRE_BATCH = 1000  # uploads one expiry step aborts
# Expired uploads the sweep has not removed yet that one listing page skips before it stops
# with a truncated page: a prefix full of them costs each page this many reads, not all.
MAX_SKIPPED_PER_PAGE = 1000
# The NextUploadIdMarker of a page that stopped at an expired upload: its initiation (20
# digits) and id, so that the next page starts right after it even once the sweep removed it.
SKIP_MARKER_LENGTH = 20 + 32
_END = b"\x00\x00"  # ends an escaped path; below every escaped byte that can follow it


def _escaped(path: str) -> bytes:
    return path.encode().replace(b"\x00", b"\x00\xff")


def upload_key(repository: str, upload_id: str) -> bytes:
    return f"u/{repository}/{upload_id}".encode()


def part_prefix(upload_id: str) -> bytes:
    return f"p/{upload_id}/".encode()


def _listing_base(repository: str) -> bytes:
    return f"l/{repository}/".encode()


def _listing_key(repository: str, path: str, initiated_ns: int, upload_id: str) -> bytes:
    return _listing_base(repository) + _escaped(path) + _END + f"{initiated_ns:020d}/{upload_id}".encode()


def _age_key(initiated_ns: int, repository: str, upload_id: str) -> bytes:
    return f"t/{initiated_ns:020d}/{repository}/{upload_id}".encode()


def _successor(prefix: bytes) -> bytes:
    """The smallest key greater than every key starting with prefix."""
    trimmed = prefix.rstrip(b"\xff")
    if not trimmed:
        return b"\xff" * (len(prefix) + 1)
    return trimmed[:-1] + bytes([trimmed[-1] + 1])


def _put(kv: Store, key: bytes, value: dict[str, Any]) -> None:
    kv.set(PARTITION, key, json.dumps(value).encode())


def _delete(kv: Store, key: bytes) -> None:
    with contextlib.suppress(NotFound):
        kv.delete(PARTITION, key)


def belongs(record: dict[str, Any], place: RepositoryPlace) -> bool:
    """Whether an upload's record is one of the repository at place: the same identity, or, for a
    record older than identities, the same storage namespace (where the upload's bytes lie)."""
    if "repository_id" in record:
        return bool(record["repository_id"] == place.repository_id)
    return bool(record.get("namespace") == place.namespace)


def _listed_belongs(kv: Store, repository: str, listed: dict[str, Any], upload_id: str, place: RepositoryPlace) -> bool:
    """belongs() for a listing entry: those older than identities carry no namespace, their
    upload's record does (gone: the upload is being forgotten, not listed)."""
    if "repository_id" in listed:
        return belongs(listed, place)
    try:
        record = json.loads(kv.get(PARTITION, upload_key(repository, upload_id)).value)
    except NotFound:
        return False
    return belongs(record, place)


def new_record(
    path: str, branch: str, key: str, place: RepositoryPlace, address: str, block_id: str, initiator: str
) -> dict[str, Any]:
    """What every new upload's record holds, whichever front end opened it, initiated now: the
    object's path (ref/key) and its parts, where its bytes go, and whose repository it is in."""
    initiated_ns = time.time_ns()
    return {
        "path": path,
        "branch": branch,
        "key": key,
        "namespace": place.namespace,
        # The repository's identity: the upload is this repository's only, not that of one
        # created again under its name.
        "repository_id": place.repository_id,
        "address": address,
        "block_id": block_id,
        "initiated": datetime.fromtimestamp(initiated_ns / 1e9, UTC).isoformat(),
        "initiated_ns": initiated_ns,
        "initiator": initiator,
    }


def save(kv: Store, repository: str, upload_id: str, record: dict[str, Any]) -> None:
    """Store a new upload; `record` holds at least path, initiated (ISO), initiated_ns, the
    repository's identity (repository_id) and the adapter's namespace, address and block_id."""
    initiated_ns = record["initiated_ns"]
    _put(kv, _age_key(initiated_ns, repository, upload_id), {**record, "repository": repository, "id": upload_id})
    listed = {"path": record["path"], "initiated": record["initiated"], "initiator": record["initiator"]}
    if "repository_id" in record:
        listed["repository_id"] = record["repository_id"]
    _put(kv, _listing_key(repository, record["path"], initiated_ns, upload_id), listed)
    _put(kv, upload_key(repository, upload_id), record)


def forget(kv: Store, repository: str, upload_id: str, record: dict[str, Any], part_keys: list[bytes]) -> None:
    """Remove every record of an upload (its bytes in the block adapter are the caller's)."""
    _delete(kv, upload_key(repository, upload_id))
    for key in part_keys:
        _delete(kv, key)
    initiated_ns = record.get("initiated_ns")
    if initiated_ns is not None:  # uploads started before the indexes existed have none
        _delete(kv, _listing_key(repository, record["path"], initiated_ns, upload_id))
        _delete(kv, _age_key(initiated_ns, repository, upload_id))


def is_expired(record: dict[str, Any], max_age_seconds: float, now: float | None = None) -> bool:
    initiated_ns = record.get("initiated_ns")
    if initiated_ns is None:
        return False
    return (time.time() if now is None else now) - initiated_ns / 1e9 > max_age_seconds


# --- listing ----------------------------------------------------------------------------------


class Upload(NamedTuple):
    path: str
    upload_id: str
    initiated: str  # ISO 8601
    initiator: str


class CommonPrefix(NamedTuple):
    prefix: str


class UploadPage(NamedTuple):
    items: list[Upload | CommonPrefix]
    truncated: bool
    # Where the next page starts (NextKeyMarker, NextUploadIdMarker), set when truncated: the
    # last item listed, or the last expired upload skipped when a page stopped at the scan cap.
    next_key_marker: str = ""
    next_upload_id_marker: str = ""
    # Uploads skipped as another repository's (of the same name): a caller that judged with a
    # remembered repository looks it up again when there are any.
    others: int = 0


def _start(kv: Store, repository: str, prefix: str, key_marker: str, id_marker: str, delimiter: str) -> bytes:
    """Where a page starts: after the markers (S3's semantics), and never before the prefix."""
    base = _listing_base(repository)
    start = base + _escaped(prefix)
    if not key_marker:
        return start
    if len(id_marker) == SKIP_MARKER_LENGTH:
        # Our own marker after a skipped expired upload: its place, exactly, with no lookup
        # (also inside what would be a common prefix: that is listed if a live upload follows).
        initiated_ns, skipped_id = int(id_marker[:20]), id_marker[20:]
        return max(start, _listing_key(repository, key_marker, initiated_ns, skipped_id) + b"\x00")
    cut = key_marker.find(delimiter, len(prefix)) if delimiter else -1
    if cut >= 0 and cut + len(delimiter) == len(key_marker):
        # A page that ended on a common prefix continues after everything under it.
        return max(start, _successor(base + _escaped(key_marker)))
    after_key = base + _escaped(key_marker) + b"\x00\x01"  # after every upload of the marker's key
    if id_marker:
        # With an upload-id marker, later uploads of the marker's own key follow too.
        try:
            record = json.loads(kv.get(PARTITION, upload_key(repository, id_marker)).value)
        except NotFound:
            record = None
        if record is not None and record["path"] == key_marker and "initiated_ns" in record:
            after_key = _listing_key(repository, key_marker, record["initiated_ns"], id_marker) + b"\x00"
    return max(start, after_key)


def initiated_ns_text(listing_key: bytes) -> str:
    """The 20 digits of initiation time in a listing index key."""
    return listing_key[-(20 + 1 + 32) : -(1 + 32)].decode()


def list_page(
    kv: Store,
    repository: str,
    prefix: str,
    delimiter: str,
    key_marker: str,
    id_marker: str,
    limit: int,
    max_age_seconds: float,
    max_skipped: int = MAX_SKIPPED_PER_PAGE,
    place: RepositoryPlace | None = None,
) -> UploadPage:
    """One page of ListMultipartUploads: at most `limit` uploads and common prefixes.

    Reads the page and one item past it, plus expired uploads the sweep has not removed yet
    (skipped: they are as good as aborted), at most `max_skipped` of those: past that the page
    ends there, truncated, with markers after the last one skipped (possibly with no item).
    Uploads of another repository of the same name (not `belongs` to place, when given) are
    skipped the same way, and counted (`others`): the deletion of their repository aborts them.
    """
    base = _listing_base(repository)
    under = base + _escaped(prefix)
    limit = min(max(limit, 0), MAX_UPLOADS)
    items: list[Upload | CommonPrefix] = []
    horizon_ns = int((time.time() - max_age_seconds) * 1e9)
    skipped = others = 0

    def entries(start: bytes) -> Iterator[tuple[bytes, dict[str, Any]]]:
        for entry in kv.scan(PARTITION, start):
            if not entry.key.startswith(under):
                return
            yield entry.key, json.loads(entry.value)

    def truncated_after_items() -> UploadPage:
        if not items:  # limit 0: nothing was asked for, the markers stay
            return UploadPage(items, True, key_marker, id_marker, others)
        last = items[-1]
        if isinstance(last, Upload):
            return UploadPage(items, True, last.path, last.upload_id, others)
        return UploadPage(items, True, last.prefix, "", others)

    walk = entries(_start(kv, repository, prefix, key_marker, id_marker, delimiter))
    while True:
        found = next(walk, None)
        if found is None:
            return UploadPage(items, False, others=others)
        key, listed = found
        path = listed["path"]
        other = place is not None and not _listed_belongs(kv, repository, listed, key[-32:].decode(), place)
        others += other
        if other or int(initiated_ns_text(key)) < horizon_ns:
            if skipped < max_skipped:
                skipped += 1
                continue
            if len(items) == limit:
                return truncated_after_items()
            # The scan cap: the page ends here, and the next one right after this upload.
            return UploadPage(items, True, path, initiated_ns_text(key) + key[-32:].decode(), others)
        if len(items) == limit:
            return truncated_after_items()
        cut = path.find(delimiter, len(prefix)) if delimiter else -1
        if cut < 0:
            items.append(Upload(path, key[-32:].decode(), listed["initiated"], listed["initiator"]))
            continue
        common = path[: cut + len(delimiter)]
        items.append(CommonPrefix(common))
        walk = entries(_successor(base + _escaped(common)))


# --- expiry -----------------------------------------------------------------------------------


def expire(kv: Store, adapter: BlockAdapter, max_age_seconds: float, batch: int = EXPIRE_BATCH) -> int:
    """Abort up to `batch` uploads older than max_age_seconds, oldest first; return how many."""
    horizon_ns = int((time.time() - max_age_seconds) * 1e9)
    aborted = 0
    for entry in scan_prefix(kv, PARTITION, b"t/"):
        if aborted >= batch or int(entry.key[2:22]) >= horizon_ns:
            break
        record = json.loads(entry.value)
        # Unknown to clients first, so that no part is added while the bytes go.
        _delete(kv, upload_key(record["repository"], record["id"]))
        with contextlib.suppress(NotFound):  # completed or aborted meanwhile
            adapter.abort_multipart_upload(record["namespace"], record["address"], record["block_id"])
        parts = [part.key for part in scan_prefix(kv, PARTITION, part_prefix(record["id"]))]
        forget(kv, record["repository"], record["id"], record, parts)
        aborted += 1
    return aborted


# --- a deleted repository's uploads --------------------------------------------------------


def abort_repository(
    kv: Store, adapter: BlockAdapter, repository: str, deleted: RepositoryPlace, limit: int | None = None
) -> int:
    """Abort the open uploads of the deleted repository `repository` at place `deleted`: those
    with its identity, and those older than identities in its storage namespace (`belongs`).
    Forget their records, and abort them in the block adapter (best effort: bytes left behind
    are the uncommitted sweep's). Uploads of another repository of that name are left alone.
    At most `limit` uploads (all without one); return how many were aborted: fewer than limit
    means none is left. A KV failure propagates (the caller retries)."""
    chosen: list[tuple[bytes, dict[str, Any]]] = []
    for entry in scan_prefix(kv, PARTITION, f"u/{repository}/".encode()):
        if limit is not None and len(chosen) >= limit:
            break
        record = json.loads(entry.value)
        if belongs(record, deleted):
            chosen.append((entry.key, record))
    aborted = 0
    for key, record in chosen:  # not while scanning: the scan would walk over its own deletions
        upload_id = key.decode().rsplit("/", 1)[1]
        # Unknown to clients first, so that no part is added while the bytes go.
        _delete(kv, key)
        try:
            adapter.abort_multipart_upload(record["namespace"], record["address"], record["block_id"])
        except Exception:  # gone already, or the store is down: the bytes are garbage either way
            log.warning("could not abort multipart upload %s of deleted repository %s", upload_id, repository)
        parts = [part.key for part in scan_prefix(kv, PARTITION, part_prefix(upload_id))]
        forget(kv, repository, upload_id, record, parts)
        aborted += 1
    return aborted
