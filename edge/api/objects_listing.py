"""A listObjects page's JSON written as text, without building rows or a model.

Why: a page is up to 1,000 entries. Building a dict per entry (objects_stats.object_row) and
then json.dumps over the page was most of a page's time in the API (4 to 5 ms a page, profiled,
against under 2 ms for this), which left the REST listing well behind ListObjectsV2.

What it writes is, byte for byte, what JSONResponse({"pagination": ..., "results": [rows]})
writes (json.dumps with ensure_ascii=False and separators ",", ":"): the same fields in the
same order, strings escaped by json's own encoder. tests/unit/api/test_object_rows.py holds the
two to the same bytes. Presigned pages keep the rows (their URLs are signed row by row anyway).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from json.encoder import encode_basestring
from typing import Any

from silt.objects import DEFAULT_CONTENT_TYPE, user_metadata

# JSONResponse.render's own settings, for the few values written through json.dumps.
_DUMPS: dict[str, Any] = {"ensure_ascii": False, "allow_nan": False, "separators": (",", ":")}
_PREFIX_TAIL = ',"path_type":"common_prefix","physical_address":"","checksum":"","mtime":0}'
_DEFAULT_TYPE = encode_basestring(DEFAULT_CONTENT_TYPE)
_QUOTE = '"'
_NO_METADATA = ',"metadata":{}'


def _user_metadata(metadata: Any) -> str:
    """The user metadata in an entry's metadata map, as JSON."""
    return json.dumps(user_metadata(metadata), **_DUMPS)


def listing_page(items: Sequence[Any], namespace: str, with_metadata: bool, has_more: bool, max_per_page: int) -> bytes:
    """The JSON body of a listing page of graveler's ListEntries items (common prefixes and
    entries), with its pagination (next_offset: the last key when there is more)."""
    escape = encode_basestring
    parts: list[str] = []
    append = parts.append
    # full_address, with the namespace's part worked out once per page.
    base = namespace.rstrip("/") + "/"
    for item in items:
        key = escape(item.key)
        if item.common_prefix:
            append('{"path":' + key + _PREFIX_TAIL)
            continue
        entry = item.entry
        address = entry.physical_address
        address = address if "://" in address else base + address
        content_type = entry.content_type
        # One f-string per row: a single join, where concatenating piece by piece copies the row
        # again at each piece. An unset last_modified reads as 0 seconds, objects_stats.mtime's
        # answer for it.
        if with_metadata:
            # Without any metadata (the usual case) known without iterating the map.
            stored = entry.metadata
            metadata = f',"metadata":{_user_metadata(stored)}' if stored else _NO_METADATA
        else:
            metadata = ""
        append(
            f'{{"path":{key},"path_type":"object","physical_address":{escape(address)},'
            f'"checksum":{escape(entry.etag.strip(_QUOTE))},"size_bytes":{entry.size},'
            f'"mtime":{entry.last_modified.seconds}{metadata},'
            f'"content_type":{escape(content_type) if content_type else _DEFAULT_TYPE}}}'
        )
    has_more = has_more and bool(items)
    next_offset = escape(items[-1].key) if has_more else '""'
    pagination = (
        '{"pagination":{"has_more":'
        + ("true" if has_more else "false")
        + ',"next_offset":'
        + next_offset
        + f',"results":{len(items)},"max_per_page":{max_per_page}}},"results":['
    )
    return (pagination + ",".join(parts) + "]}").encode()
