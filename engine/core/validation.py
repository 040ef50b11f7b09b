"""Names graveler accepts: repositories as S3 buckets, branches and tags as git refs, UTF-8 keys."""

from __future__ import annotations

import re

from silt.errors import InvalidArgument
from silt.names import validate_repository_name as validate_repository_name  # graveler's rule is the shared one

MAX_KEY_BYTES = 1024
# An entry is its metadata, never object bytes: S3's 2 KiB of user metadata, checksums, the
# part layout of a multipart object and the address fit many times over. Every listing page
# and commit carries entries, so one oversized entry must not be able to poison them.
MAX_ENTRY_BYTES = 64 * 1024

# Git's check-ref-format rules for one path component, plus: no "/" at all, since the ref is
# the first path element of an S3 key (`s3://repo/<ref>/<key>`) and must not swallow a key segment.
_REF_FORBIDDEN = re.compile(r"[\x00-\x20\x7f~^:?*\[\\/]")
_COMMIT_ID_LIKE = re.compile(r"^[0-9a-f]{64}$")


def validate_ref_name(name: str, kind: str = "branch") -> str:
    """Branch and tag names follow git's rules (git check-ref-format), without '/'."""
    problem = None
    if not name:
        problem = "it is empty"
    elif len(name.encode()) > 256:
        problem = "it is longer than 256 bytes"
    elif _REF_FORBIDDEN.search(name):
        problem = "it contains a space, a control character, '/' or one of ~^:?*[\\"
    elif name.startswith(("-", ".")):
        problem = "it starts with '-' or '.'"
    elif name.endswith((".", ".lock")):
        problem = "it ends with '.' or '.lock'"
    elif ".." in name or "@{" in name or name == "@" or "@" in name:
        problem = "it contains '..', or '@' (which marks a committed-only ref)"
    elif _COMMIT_ID_LIKE.match(name):
        problem = "it looks like a commit id"
    if problem:
        raise InvalidArgument(f"invalid {kind} name {name!r}: {problem}")
    return name


def validate_key(key: str) -> bytes:
    """Object keys are non-empty UTF-8 strings of at most 1,024 bytes (S3's limit)."""
    if not key:
        raise InvalidArgument("object key must not be empty")
    try:
        encoded = key.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgument("object key must be valid UTF-8") from None
    if len(encoded) > MAX_KEY_BYTES:
        raise InvalidArgument(f"object key is {len(encoded)} bytes; at most {MAX_KEY_BYTES} are allowed")
    return encoded


def validate_prefix(prefix: str) -> bytes:
    """A key prefix (possibly empty): at most as long as a key."""
    encoded = prefix.encode()
    if len(encoded) > MAX_KEY_BYTES:
        raise InvalidArgument(f"prefix is {len(encoded)} bytes; at most {MAX_KEY_BYTES} are allowed")
    return encoded


def validate_entry_size(size: int) -> None:
    if size > MAX_ENTRY_BYTES:
        raise InvalidArgument(f"entry is {size} bytes; at most {MAX_ENTRY_BYTES} are allowed")
