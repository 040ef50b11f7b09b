"""lakeFS's ObjectStats rows, and listObjects pages of them, written as JSON text: the one
serializer of an entry as a row, used by listings (presigned or not), uploads, stat and copy,
whichever way the request came in (fast/objects.py or FastAPI).

Why text: a page is up to 1,000 entries. Building a dict per entry and then json.dumps over the
page (or validating each through the lakefs-sdk model) was most of a page's time in the API
(4 to 5 ms a page, profiled, against under 2 ms for this), which left the REST listing well
behind ListObjectsV2.

What it writes is, byte for byte, what JSONResponse(ObjectStats(...).to_dict()) writes
(json.dumps with ensure_ascii=False and separators ",", ":"): the model's fields in the
model's order, strings escaped by json's own encoder. tests/unit/api/test_object_rows.py holds
the two to the same bytes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from json.encoder import encode_basestring
from typing import Any

from silt.block.adapter import PresignedURL
from silt.objects import DEFAULT_CONTENT_TYPE, USER_METADATA_PREFIX

# What a row says of the object's user metadata: the map (USER); an empty one (EMPTY: stat
# without user_metadata); nothing (OMITTED: lakeFS leaves the field out of listing rows unless
# asked for it).
USER, EMPTY, OMITTED = "user", "empty", "omitted"

_PREFIX_TAIL = ',"path_type":"common_prefix","physical_address":"","checksum":"","mtime":0}'
_DEFAULT_TYPE = encode_basestring(DEFAULT_CONTENT_TYPE)
_QUOTE = '"'
_EMPTY_METADATA = ',"metadata":{}'


def user_metadata_json(metadata: Mapping[str, str]) -> str:
    """silt.objects.user_metadata(metadata) as json.dumps(..., ensure_ascii=False,
    separators=(",", ":")) writes it (a map of strings: each name and value escaped by the same
    encoder), without building the dict."""
    escape, prefix, n = encode_basestring, USER_METADATA_PREFIX, len(USER_METADATA_PREFIX)
    return "{" + ",".join(f"{escape(k[n:])}:{escape(v)}" for k, v in metadata.items() if k.startswith(prefix)) + "}"


def namespace_base(namespace: str) -> str:
    """What a relative physical address is written under (objects.full_address's prefix):
    worked out once per page rather than per row."""
    return namespace.rstrip("/") + "/"


def object_row(key: str, entry: Any, base: str, metadata: str = USER, presigned: PresignedURL | None = None) -> str:
    """The ObjectStats row of an entry (a model_pb2.Entry) at key, as JSON text. base:
    namespace_base of the repository's namespace; presigned: a URL to read the bytes from,
    written in place of the physical address."""
    escape = encode_basestring
    if presigned is None:
        address = entry.physical_address
        where = escape(address if "://" in address else base + address)
    else:
        where = f'{escape(presigned.url)},"physical_address_expiry":{presigned.expires}'
    if metadata == OMITTED:
        user = ""
    else:
        # Without any metadata (the usual case) known without iterating the map.
        stored = entry.metadata
        user = f',"metadata":{user_metadata_json(stored)}' if stored and metadata == USER else _EMPTY_METADATA
    content_type = entry.content_type
    # One f-string per row: a single join, where concatenating piece by piece copies the row
    # again at each piece. An unset last_modified reads as 0 seconds, stats.mtime's
    # answer for it.
    return (
        f'{{"path":{escape(key)},"path_type":"object","physical_address":{where},'
        f'"checksum":{escape(entry.etag.strip(_QUOTE))},"size_bytes":{entry.size},'
        f'"mtime":{entry.last_modified.seconds}{user},'
        f'"content_type":{escape(content_type) if content_type else _DEFAULT_TYPE}}}'
    )


def common_prefix_row(key: str) -> str:
    """A common prefix as a listing row: the SDK requires these fields on every row, and lakeFS
    sends them empty for a prefix."""
    return '{"path":' + encode_basestring(key) + _PREFIX_TAIL


def listing_page(
    items: Sequence[Any],
    namespace: str,
    with_metadata: bool,
    has_more: bool,
    max_per_page: int,
    presigned: Sequence[PresignedURL | None] | None = None,
    next_offset: str | None = None,
) -> bytes:
    """The JSON body of a listing page of graveler's ListEntries items (common prefixes and
    entries), with its pagination (next_offset: the last key when there is more, unless given:
    a filtered scan's cursor). presigned: each item's URL to read its bytes from, when the page
    is presigned."""
    base = namespace_base(namespace)
    metadata = USER if with_metadata else OMITTED
    row = object_row
    if presigned is None:
        parts = [
            common_prefix_row(item.key) if item.common_prefix else row(item.key, item.entry, base, metadata)
            for item in items
        ]
    else:
        parts = [
            common_prefix_row(item.key) if item.common_prefix else row(item.key, item.entry, base, metadata, url)
            for item, url in zip(items, presigned, strict=True)
        ]
    if next_offset is None:
        has_more = has_more and bool(items)
        offset = encode_basestring(items[-1].key) if has_more else '""'
    else:
        offset = encode_basestring(next_offset if has_more else "")
    pagination = (
        '{"pagination":{"has_more":'
        + ("true" if has_more else "false")
        + ',"next_offset":'
        + offset
        + f',"results":{len(items)},"max_per_page":{max_per_page}}},"results":['
    )
    return (pagination + ",".join(parts) + "]}").encode()
