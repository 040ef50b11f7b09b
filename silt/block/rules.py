"""Rules every block adapter applies the same way: names, part numbers, ranges, ETags.

A key one store accepts is accepted by all of them, so a repository can move between
stores. Key rules are stricter than S3's own:

* a key is a ``/``-separated path of non-empty components, at most 1024 UTF-8 bytes;
* no component is ``.`` or ``..`` (HTTP clients and proxies normalise those away, and on
  a local disk they would walk out of the namespace);
* no NUL bytes and no backslashes (a path separator on some systems and tools);
* no component starts with ``.silt-``: the local adapter keeps its temporary files, ETag
  records and multipart uploads under such names, so no key can ever reach them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Protocol
from urllib.parse import parse_qs, quote, urlsplit

from silt.errors import InvalidArgument

RESERVED_PREFIX = ".silt-"
MAX_KEY_BYTES = 1024  # S3's own limit
# SigV4's limit on a presigned URL's life, which every store's URLs keep to.
MAX_PRESIGN_SECONDS = 7 * 24 * 3600
# The header a write-once presigned PUT URL signs (blockstore.<s3|gs>.pre_signed_put_write_once)
# and the value its upload sends: S3's conditional create; GCS's "no live generation yet".
WRITE_ONCE_S3 = ("If-None-Match", "*")
WRITE_ONCE_GCS = ("x-goog-if-generation-match", "0")


def _shown(value: str) -> str:
    return repr(value if len(value) <= 80 else value[:77] + "...")


def _component_problem(component: str) -> str | None:
    if not component:
        return "empty path component (leading, trailing or doubled '/')"
    if component in (".", ".."):
        return f"relative path component {component!r}"
    if "\x00" in component:
        return "NUL byte"
    if "\\" in component:
        return "backslash"
    if component.startswith(RESERVED_PREFIX):
        return f"components starting with {RESERVED_PREFIX!r} are reserved"
    return None


def _check_encodable(value: str, what: str) -> bytes:
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgument(f"invalid {what} {_shown(value)}: not valid UTF-8 text") from None


def split_namespace(namespace: str, scheme: str) -> tuple[str, list[str]]:
    """Split ``<scheme>://<root>[/<prefix>]`` into the root name and the prefix components.

    The root is the bucket for s3:// and the top directory for local://.
    """
    if not isinstance(namespace, str):
        raise InvalidArgument(f"storage namespace must be a string, got {type(namespace).__name__}")
    head = f"{scheme}://"
    if not namespace.startswith(head):
        raise InvalidArgument(f"storage namespace {_shown(namespace)} is not a {head} namespace")
    _check_encodable(namespace, "storage namespace")
    rest = namespace[len(head) :]
    # "s3://bucket/prefix/" is a common way to spell a prefix; accept one trailing slash.
    if rest.endswith("/"):
        rest = rest[:-1]
    parts = rest.split("/")
    for part in parts:
        problem = _component_problem(part)
        if problem:
            raise InvalidArgument(f"invalid storage namespace {_shown(namespace)}: {problem}")
    return parts[0], parts[1:]


def split_key(key: str) -> list[str]:
    """Validate an object key and return its path components."""
    if not isinstance(key, str):
        raise InvalidArgument(f"object key must be a string, got {type(key).__name__}")
    if not key:
        raise InvalidArgument("object key must not be empty")
    if len(_check_encodable(key, "object key")) > MAX_KEY_BYTES:
        raise InvalidArgument(f"object key {_shown(key)} is longer than {MAX_KEY_BYTES} bytes")
    if key.startswith("/"):
        raise InvalidArgument(f"invalid object key {_shown(key)}: absolute paths are not keys")
    parts = key.split("/")
    for part in parts:
        problem = _component_problem(part)
        if problem:
            raise InvalidArgument(f"invalid object key {_shown(key)}: {problem}")
    return parts


def normalize_etag(etag: str) -> str:
    """ETags travel quoted in HTTP; compare and report them bare and lower-case."""
    return etag.strip().strip('"').lower()


MIN_PART_NUMBER = 1
MAX_PART_NUMBER = 10_000


def check_part_number(part_number: int) -> None:
    if isinstance(part_number, bool) or not isinstance(part_number, int):
        raise InvalidArgument(f"part number must be an integer, got {part_number!r}")
    if not MIN_PART_NUMBER <= part_number <= MAX_PART_NUMBER:
        raise InvalidArgument(f"part number {part_number} is outside {MIN_PART_NUMBER}..{MAX_PART_NUMBER}")


class NumberedPart(Protocol):
    """A part as a complete lists it (silt.block.adapter.PartInfo; this module is below the
    adapter interface, which checks its arguments with these rules)."""

    @property
    def part_number(self) -> int: ...


def check_parts_list(parts: Sequence[NumberedPart]) -> None:
    """The list given to complete: non-empty, valid numbers, strictly ascending."""
    if not parts:
        raise InvalidArgument("a multipart upload needs at least one part to complete")
    previous = 0
    for part in parts:
        check_part_number(part.part_number)
        if part.part_number <= previous:
            raise InvalidArgument(
                f"parts must be listed in ascending order without repeats: {part.part_number} after {previous}"
            )
        previous = part.part_number


def check_range(start: int, end: int) -> None:
    """What can be checked without knowing the object's size: an inclusive, ordered range."""
    for value in (start, end):
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidArgument(f"byte range bounds must be integers, got {value!r}")
    if start < 0 or end < start:
        raise InvalidArgument(f"invalid byte range {start}-{end}")


def multipart_etag(part_md5s: list[bytes]) -> str:
    """S3's ETag of a multipart object: MD5 of the concatenated binary part MD5s, "-", part count."""
    digest = hashlib.md5(b"".join(part_md5s), usedforsecurity=False).hexdigest()
    return f"{digest}-{len(part_md5s)}"


def attachment(filename: str) -> str:
    """A Content-Disposition that saves a download as `filename` (RFC 6266; the UTF-8 form for
    any name, a plain ASCII fallback with the characters that could break the header dropped)."""
    plain = "".join(c for c in filename if " " <= c <= "~" and c not in '"\\') or "download"
    return f"attachment; filename=\"{plain}\"; filename*=UTF-8''{quote(filename, safe='')}"


def signed_upload_headers(url: str) -> dict[str, str]:
    """The write-once headers a presigned PUT URL of S3 or GCS signs (its X-Amz-SignedHeaders or
    X-Goog-SignedHeaders name them), which an upload to it must send: {} for any other URL."""
    query = parse_qs(urlsplit(url).query)
    signed: set[str] = set()
    for field in ("X-Amz-SignedHeaders", "X-Goog-SignedHeaders"):
        for value in query.get(field, ()):
            signed.update(name.strip().lower() for name in value.split(";"))
    return {name: value for name, value in (WRITE_ONCE_S3, WRITE_ONCE_GCS) if name.lower() in signed}
