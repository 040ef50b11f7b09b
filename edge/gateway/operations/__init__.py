"""Which S3 operation a request is, by method, bucket/key and sub-resources, and its handler."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from edge.gateway.errors import S3Error
from edge.gateway.operations import buckets, listing, multipart, objects
from edge.gateway.operations.common import NEUTRAL_MARKER, Context, Response, parse_neutral

Handler = Callable[[Context], Awaitable[Response]]

# Sub-resources of features Silt does not have: answered NotImplemented, never a wrong success.
UNSUPPORTED = frozenset(
    (
        "acl",
        "accelerate",
        "analytics",
        "cors",
        "encryption",
        "intelligent-tiering",
        "inventory",
        "legal-hold",
        "lifecycle",
        "logging",
        "metrics",
        "notification",
        "object-lock",
        "ownershipControls",
        "policy",
        "policyStatus",
        "publicAccessBlock",
        "replication",
        "requestPayment",
        "restore",
        "retention",
        "select",
        "tagging",
        "torrent",
        "versionId",
        "versions",
        "website",
        "attributes",
    )
)


def _not_implemented(what: str) -> Handler:
    async def handle(_: Context) -> Response:
        raise S3Error("NotImplemented", f"{what} is not implemented by Silt")

    return handle


def dispatch(ctx: Context) -> Handler:
    request = ctx.request
    method = request.method
    for name, _ in request.query:
        if name in UNSUPPORTED:
            return _not_implemented(f"the {name!r} sub-resource")
    if not request.bucket:
        if method == "GET":
            return buckets.list_buckets
        raise S3Error("MethodNotAllowed")
    if not request.path:
        if method == "GET":
            if request.has("location"):
                return buckets.get_bucket_location
            if request.has("versioning"):
                return buckets.get_bucket_versioning
            if request.has("uploads"):
                return multipart.list_uploads
            return lambda c: listing.list_objects(c, v2=request.arg("list-type") == "2")
        if method == "HEAD":
            return buckets.head_bucket
        if method == "PUT":
            if request.query:
                return _not_implemented("this bucket configuration")
            return buckets.create_bucket
        if method == "DELETE":
            return buckets.delete_bucket
        if method == "POST" and request.has("delete"):
            return objects.delete_objects
        raise S3Error("MethodNotAllowed")
    if request.path.startswith(NEUTRAL_MARKER):
        # A ref-neutral address: reads by the key alone; everything else acts on the branch as
        # `<branch>/<key>` would, a write also recording the key (docs/clients/s3.md, "Ref-neutral addresses").
        branch, key = parse_neutral(request.path)
        if method in ("GET", "HEAD") and not request.has("uploadId"):
            return lambda c: objects.get_neutral_object(c, head=method == "HEAD")
        ctx.neutral = True
        request.path = f"{branch}/{key}"
    if method in ("GET", "HEAD"):
        if request.has("uploadId") and method == "GET":
            return multipart.list_parts
        return lambda c: objects.get_object(c, head=method == "HEAD")
    if method == "PUT":
        if request.has("uploadId"):
            return multipart.upload_part
        return objects.put_object
    if method == "POST":
        if request.has("uploads"):
            return multipart.create
        if request.has("uploadId"):
            return multipart.complete
        raise S3Error("MethodNotAllowed")
    if method == "DELETE":
        if request.has("uploadId"):
            return multipart.abort
        return objects.delete_object
    raise S3Error("MethodNotAllowed")
