"""How an object's bytes and description are laid out, for every front end that writes or
reads objects (the S3 gateway and the REST API): where new bytes go in a repository's storage
namespace, and how an entry's metadata holds the user's own metadata beside Silt's."""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping

from silt.namespaces import split_store_uri

# S3's limit on user-defined metadata: the bytes of every name (without the prefix) and value,
# added up. Entries carry it into every listing page and commit.
MAX_USER_METADATA_BYTES = 2048
# User metadata is kept in an entry's metadata under S3's header names, so that what one front
# end stored the other shows: `x-amz-meta-<name>` over S3 is `<name>` in the REST API.
USER_METADATA_PREFIX = "x-amz-meta-"
# An object stored without a content type is served as this, by either front end.
DEFAULT_CONTENT_TYPE = "application/octet-stream"
# The S3 checksums the gateway verified as an object was written (`x-silt-checksum-crc32`, ...),
# kept beside the user metadata and never shown as it. They describe how the bytes were
# checked in transit, not what the object is: graveler leaves them out of an entry's identity,
# so the same bytes written with and without a checksum are no change.
CHECKSUM_METADATA_PREFIX = "x-silt-checksum-"
# An imported local file's modification time (ns) when it was imported, in its entry's metadata:
# reads compare the file with it (silt/block/external.py). Not last_modified, which a copy resets.
# A time, like last_modified: graveler leaves it out of an entry's identity too.
SOURCE_MTIME_KEY = "x-silt-source-mtime-ns"
# The version the store itself gave an imported object when it was imported (GCS: its
# generation; Azure: its ETag; S3: its VersionId in a versioned bucket), in its entry's metadata:
# reads of the source ask for exactly that version (silt/block/external.py). An object a client
# uploaded itself and linked (linkPhysicalAddress) records it the same way.
SOURCE_VERSION_KEY = "x-silt-source-version"
# The addresses getPhysicalAddress hands out (edge/api/objects/link_addresses.py): the only places in
# a namespace whose bytes a client writes itself (with a presigned URL of the store's own, which
# stays usable until it expires), so the only ones read pinned to what the link checked.
# One spelling per address: no leading zero in the time (the signature covers its value).
LINK_ADDRESS = re.compile(r"data/[0-9a-f]{32}\.(?:0|[1-9][0-9]{0,11})\.[A-Za-z0-9_-]{43}")


def new_physical_address() -> str:
    # Never reused: an object's bytes are immutable once staged, so readers of older commits keep theirs.
    return f"data/{uuid.uuid4().hex}"


def is_link_address(physical_address: str) -> bool:
    """Whether an entry's address is one getPhysicalAddress handed out (relative to the namespace)."""
    return LINK_ADDRESS.fullmatch(physical_address) is not None


def split_address(namespace: str, physical_address: str) -> tuple[str, str]:
    """(namespace, key) for the block adapter: addresses are relative to the namespace unless a full URI."""
    if "://" in physical_address:
        return split_store_uri(physical_address)
    return namespace, physical_address


def full_address(namespace: str, physical_address: str) -> str:
    """The object's address as a URI of the object store (`local://ns/data/...`, `s3://bucket/...`)."""
    if "://" in physical_address:
        return physical_address
    return namespace.rstrip("/") + "/" + physical_address


def user_metadata(metadata: Mapping[str, str]) -> dict[str, str]:
    """The user's own metadata in an entry's metadata, by the names the user gave (without the prefix)."""
    n = len(USER_METADATA_PREFIX)
    return {k[n:]: v for k, v in metadata.items() if k.startswith(USER_METADATA_PREFIX)}


def user_metadata_size(user: Mapping[str, str]) -> int:
    """What counts against MAX_USER_METADATA_BYTES: names and values in bytes."""
    return sum(len(k.encode()) + len(v.encode()) for k, v in user.items())


def with_user_metadata(metadata: Mapping[str, str], user: Mapping[str, str]) -> dict[str, str]:
    """An entry's metadata with its user metadata replaced by `user`; what Silt keeps for itself
    (checksums, part layout, stored headers) stays."""
    kept = {k: v for k, v in metadata.items() if not k.startswith(USER_METADATA_PREFIX)}
    return {**kept, **{USER_METADATA_PREFIX + k: v for k, v in user.items()}}


# What an entry's content type and user metadata may hold: both are sent back as HTTP headers
# (Content-Type, x-amz-meta-<name>) by every front end, so a stored CR, LF or other control
# character would make the object unreadable, or split a response on a laxer server.
MAX_CONTENT_TYPE_BYTES = 255
_TOKEN = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _field_value_ok(value: str) -> bool:
    """RFC 9110 field-value: visible ASCII, space, tab and obs-text (the rest of latin-1, which
    is how header bytes are read and written); no control characters."""
    return all(c == "\t" or " " <= c <= "~" or "\x80" <= c <= "\xff" for c in value)


def content_type_problem(value: str) -> str | None:
    """Why `value` cannot be stored as an object's content type (`type/subtype[; params]`),
    None when it can."""
    if len(value.encode("utf-8", "surrogatepass")) > MAX_CONTENT_TYPE_BYTES:
        return f"content type is longer than {MAX_CONTENT_TYPE_BYTES} bytes"
    media_type, _, params = value.partition(";")
    kind, slash, subtype = media_type.strip().partition("/")
    if not slash or not kind or not subtype or not set(kind + subtype) <= _TOKEN:
        return "content type must be type/subtype, each an HTTP token"
    if not all(" " <= c <= "~" or c == "\t" for c in params):
        return "content type parameters must be visible ASCII"
    return None


def user_metadata_problem(user: Mapping[str, str]) -> str | None:
    """Why user metadata cannot be stored (names must be HTTP header-name tokens, values HTTP
    field values), None when it can."""
    for name, value in user.items():
        if not name or not set(name) <= _TOKEN:
            return f"user metadata name {name!r} is not an HTTP header name (letters, digits and !#$%&'*+-.^_`|~)"
        if not _field_value_ok(value):
            return f"user metadata value of {name!r} holds a control character or a character outside latin-1"
    return None
