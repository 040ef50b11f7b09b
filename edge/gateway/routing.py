"""Which bucket and object a request names: path style, or virtual-host style under the configured domain."""

from __future__ import annotations

from edge.gateway.errors import S3Error
from edge.gateway.request import Request, decode_component
from silt.names import is_repository_name


def route(request: Request, domain_name: str) -> None:
    """Fill request.bucket and request.path from the Host header and the path."""
    if request.malformed_query is not None:
        raise request.malformed_query
    host = request.host.rsplit(":", 1)[0] if not request.host.endswith("]") else request.host
    host = host.lower()
    path = decode_component(request.raw_path)
    suffix = "." + domain_name.lower()
    if domain_name and host.endswith(suffix) and len(host) > len(suffix):
        request.bucket = host[: -len(suffix)]
        request.path = path[1:] if path.startswith("/") else path
        request.virtual_host = True
    else:
        bucket, _, rest = path.lstrip("/").partition("/") if path.startswith("/") else ("", "", "")
        request.bucket = bucket
        request.path = rest
    if request.bucket and not is_repository_name(request.bucket):
        raise S3Error(
            "InvalidBucketName", f"the bucket name {request.bucket!r} is not valid", BucketName=request.bucket
        )


def split_path(path: str) -> tuple[str, str]:
    """(ref, key) of an object path "<ref>/<key>"; the key is "" when only a ref is named."""
    ref, _, key = path.partition("/")
    return ref, key
