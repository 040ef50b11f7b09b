"""Graveler's entries as lakeFS's ObjectStats, and the HTTP headers of an object."""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import format_datetime

from lakefs_sdk.models import ObjectStats

from silt.graveler.v1 import model_pb2 as pb
from silt.objects import DEFAULT_CONTENT_TYPE, content_type_problem, full_address, user_metadata

# Objects are served on the origin of the cookie-authenticated API and web UI: a browser must
# never sniff a type or run an uploaded page's scripts with that origin's rights.
ACTIVE_CONTENT_GUARDS = {"X-Content-Type-Options": "nosniff", "Content-Security-Policy": "sandbox"}


def mtime(entry: pb.Entry) -> int:
    return int(entry.last_modified.seconds) if entry.HasField("last_modified") else 0


def object_stats(path: str, entry: pb.Entry, namespace: str, with_metadata: bool = True) -> ObjectStats:
    return ObjectStats(
        path=path,
        path_type="object",
        physical_address=full_address(namespace, entry.physical_address),
        physical_address_expiry=None,
        checksum=entry.etag.strip('"'),
        size_bytes=int(entry.size),
        mtime=mtime(entry),
        metadata=user_metadata(entry.metadata) if with_metadata else {},
        content_type=entry.content_type or DEFAULT_CONTENT_TYPE,
    )


def object_headers(entry: pb.Entry) -> dict[str, str]:
    when = (
        entry.last_modified.ToDatetime(tzinfo=UTC)
        if entry.HasField("last_modified")
        else datetime.fromtimestamp(0, UTC)
    )
    content_type = entry.content_type or DEFAULT_CONTENT_TYPE
    if content_type_problem(content_type) is not None:
        # Stored before writes were checked (or by another writer): served as bytes rather
        # than failing every read of the object.
        content_type = DEFAULT_CONTENT_TYPE
    return {
        "ETag": '"' + entry.etag.strip('"') + '"',
        "Last-Modified": format_datetime(when, usegmt=True),
        "Content-Type": content_type,
        "Accept-Ranges": "bytes",
        # Private data: neither the browser nor a proxy keeps a copy (lakeFS does the same).
        "Cache-Control": "no-store, must-revalidate",
        **ACTIVE_CONTENT_GUARDS,
    }
