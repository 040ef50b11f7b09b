"""ListObjects (v1) and ListObjectsV2: a repository's refs at its root, a ref's objects below it.

A bucket key is `<ref>/<key>`. A prefix naming a ref (`main/...`) lists that ref through
graveler; a prefix without `/` is at the repository root, where the branches are listed one
after another, each collapsing into a common prefix when the delimiter occurs in `<ref>/`
(with delimiter `/`, every branch is the common prefix `<ref>/`). A prefix `@<branch>/...` (a
ref-neutral address) lists that branch, its keys named under the prefix as asked.

A caller who may read only some keys (silt/key_scope.py) sees only those: objects it may not
read are left out, and a common prefix is shown only when a key it may read can lie below. Such
a listing reads at most MAX_SCANNED entries per request; one stopped there is truncated, and its
NextContinuationToken (v2) or NextMarker (v1) is a sealed cursor (edge/core/filtered_scan.py),
taken back as the continuation token or marker.
"""

from __future__ import annotations

import base64
import binascii

from edge.core.filtered_scan import MAX_SCANNED, InvalidCursor, Scanned, is_cursor, raw_position_allowed
from edge.gateway.errors import S3Error
from edge.gateway.operations.common import NEUTRAL_MARKER, Context, Response, parse_neutral, x, xml_response
from edge.gateway.operations.listing_xml import TimeFormat, etag_texts, url_text, url_texts, xml_text, xml_texts
from edge.gateway.request import decimal
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb
from silt.iam_actions import READ_OBJECT
from silt.key_scope import KeyScope

MAX_KEYS = 1000
GRAVELER_MAX_PAGE = 10000
MAX_DELIMITER = 1024  # bytes, as graveler's paging accepts


# A key and its entry, None for a common prefix. A plain tuple: a page makes a thousand, and
# a frozen dataclass's constructor costs four times as much.
Item = tuple[str, pb.Entry | None]


async def branches(ctx: Context, repository: str) -> list[str]:
    backend = ctx.backend
    names: list[str] = []
    after = ""
    while True:
        page = await backend.call(
            backend.graveler.ListBranches,
            api.ListBranchesRequest(repository=repository, after=after, amount=1000),
            "NoSuchBucket",
        )
        names += [b.name for b in page.branches]
        if not page.has_more or not page.branches:
            return names
        after = page.branches[-1].name


def _visible(scope: KeyScope, bucket_key: str, entry: pb.Entry | None) -> bool:
    """Whether a listed item (`<ref>/<key>`, or a common prefix) is one the caller may see."""
    key = bucket_key.partition("/")[2]
    return scope.allows(key) if entry is not None else scope.may_allow_under(key)


async def collect(
    ctx: Context, repository: str, prefix: str, delimiter: str, after: str, limit: int, scope: KeyScope
) -> Scanned[Item]:
    """Up to `limit` items strictly after `after` that scope lets the caller see, and whether
    more follow. Filtered, the listing reads at most MAX_SCANNED entries; stopped there, it says
    where (edge/core/filtered_scan.py)."""
    if limit <= 0:
        return Scanned([], False)
    # A segment is a ref listed through graveler (with an inner prefix), or None for a common
    # prefix that a whole ref collapses into.
    segments: list[tuple[str, str, str | None]]
    if "/" in prefix:
        ref, inner = prefix.split("/", 1)
        segments = [(ref, inner, None)]
    else:
        # At the root, every key of ref r is r + "/" + inner key. If the delimiter occurs in r + "/"
        # at or after len(prefix), all of them roll up into the same common prefix, listed whether
        # or not the ref holds any key (a ref is a "directory" of the bucket). Otherwise the
        # delimiter can only occur in the inner key, and graveler finds it there with the inner
        # prefix "". Not handled exactly: a delimiter of several characters that starts inside
        # r + "/" and ends inside the inner key (say "n/a" with "main/abc"); such keys are listed
        # as they are rather than rolled up into "main/a".
        refs = sorted((b for b in await branches(ctx, repository) if b.startswith(prefix)), key=lambda b: b + "/")
        segments = []
        for b in refs:
            cut = (b + "/").find(delimiter, len(prefix)) if delimiter else -1
            segments.append((b, "", None if cut < 0 else (b + "/")[: cut + len(delimiter)]))
    items: list[Item] = []
    backend = ctx.backend
    scanned, last_scanned = 0, ""
    for ref, inner, collapsed in segments:
        if collapsed is not None:
            # Refs collapsing into one common prefix are neighbours in key order: report it once.
            visible = _visible(scope, collapsed, None)
            if visible and collapsed > after and not (items and items[-1][0] == collapsed):
                items.append((collapsed, None))
            if len(items) > limit:
                break
            continue
        base = ref + "/"
        if after.startswith(base):
            inner_after = after[len(base) :]
        elif after > base:
            continue  # every key of this ref sorts before the marker
        else:
            inner_after = ""
        while len(items) <= limit:
            if scanned >= MAX_SCANNED:  # only ever filtered: a whole scope stops at limit + 1 items
                return Scanned(items[:limit], True, last_scanned)
            # Filtered per key, a page may keep few of its items: ask for more at a time.
            wanted = limit + 1 - len(items) if scope.whole else min(max(limit + 1, 1000), MAX_SCANNED - scanned)
            request = api.ListEntriesRequest(
                repository=repository,
                # `@<branch>/...` lists the branch (Iceberg's orphan-file removal and S3A's
                # directory probes list a table's location), its keys under the prefix asked.
                ref=parse_neutral(ref)[0] if ref.startswith(NEUTRAL_MARKER) else ref,
                prefix=inner,
                delimiter=delimiter,
                after=inner_after,
                amount=min(wanted, GRAVELER_MAX_PAGE),
            )
            try:
                page = await backend.list_entries(request)
            except S3Error as exc:
                if exc.code == "NoSuchKey":  # no such ref: nothing under this prefix
                    break
                raise
            listed: list[Item] = [(base + i.key, None if i.common_prefix else i.entry) for i in page.items]
            if scope.whole:
                items += listed
            else:
                items += [item for item in listed if _visible(scope, *item)]
                scanned += len(listed)
                if listed:
                    last_scanned = listed[-1][0]
            if not page.has_more or not page.items:
                break
            inner_after = page.items[-1].key
        if len(items) > limit:
            break
    return Scanned(items[:limit], len(items) > limit)


def _max_keys(ctx: Context) -> int:
    # ASCII digits only: int() would also take "٣", " 5" and "1_0".
    value = decimal(ctx.request.arg("max-keys", str(MAX_KEYS)) or "")
    if value is None:
        raise S3Error("InvalidArgument", "max-keys must be a non-negative integer", ArgumentName="max-keys")
    return min(value, MAX_KEYS)


def encode_token(key: str) -> str:
    return base64.urlsafe_b64encode(key.encode()).decode()


def decode_token(token: str) -> str:
    try:
        return base64.urlsafe_b64decode(token.encode()).decode()
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise S3Error("InvalidArgument", "The continuation token provided is incorrect") from None


def _resumed(ctx: Context, value: str, listing: tuple[str, ...], argument: str) -> str:
    """The position a marker or continuation token that is a filtered scan's cursor seals
    (InvalidArgument unless this listing was given it)."""
    try:
        return ctx.backend.scan_cursors.open(value, listing)
    except InvalidCursor:
        raise S3Error("InvalidArgument", f"The {argument} provided is incorrect", ArgumentName=argument) from None


def _named(scope: KeyScope, position: str, delimiter: str, argument: str) -> str:
    """A position the client named (no cursor, `<ref>/<key>`): InvalidArgument where the caller
    may not read (edge/core/filtered_scan.py raw_position_allowed). A position with no `/` lies
    between refs' keys, never among them."""
    if not raw_position_allowed(scope, position.partition("/")[2], delimiter):
        raise S3Error("InvalidArgument", f"The {argument} provided is incorrect", ArgumentName=argument)
    return position


async def list_objects(ctx: Context, v2: bool) -> Response:
    request = ctx.request
    repository = request.bucket
    scope = await ctx.key_scope(READ_OBJECT, repository)
    await ctx.backend.namespace(repository)
    prefix = request.arg("prefix", "") or ""
    delimiter = request.arg("delimiter", "") or ""
    if len(delimiter.encode()) > MAX_DELIMITER:
        raise S3Error(
            "InvalidArgument", f"the delimiter must be at most {MAX_DELIMITER} bytes", ArgumentName="delimiter"
        )
    encoding = request.arg("encoding-type")
    if encoding not in (None, "url"):
        raise S3Error("InvalidArgument", "encoding-type must be url", ArgumentName="encoding-type")
    limit = _max_keys(ctx)
    token = request.arg("continuation-token")
    start_after = request.arg("start-after", "") or ""
    marker = request.arg("marker", "") or ""
    # A cursor is bound to the listing it continues: the caller, the repository, prefix and delimiter.
    listing = ("s3", ctx.user_id, repository, prefix, delimiter)
    if v2:
        if token and is_cursor(token):
            after = _resumed(ctx, token, listing, "continuation-token")
        elif token:
            after = _named(scope, decode_token(token), delimiter, "continuation-token")
        else:
            after = _named(scope, start_after, delimiter, "start-after")
    else:
        after = (
            _resumed(ctx, marker, listing, "marker")
            if is_cursor(marker)
            else _named(scope, marker, delimiter, "marker")
        )
    collected = await collect(ctx, repository, prefix, delimiter, after, limit, scope)
    items, truncated = collected.items, collected.has_more
    # Where a filtered scan stopped may be a key the caller may not read: only ever sealed.
    cursor = None if collected.stopped_at is None else ctx.backend.scan_cursors.seal(collected.stopped_at, listing)

    enc = url_text if encoding == "url" else xml_text

    owner = f"<Owner><ID>{x(ctx.user_id)}</ID><DisplayName>{x(ctx.user_id)}</DisplayName></Owner>"
    with_owner = not v2 or request.arg("fetch-owner") == "true"
    parts = [f'<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>{x(repository)}</Name>']
    # S3 URL-encodes the echoed prefix under encoding-type=url in V2 only; V1 echoes it as sent
    # (as XML text, control characters as references), and SDKs decode it accordingly.
    parts.append(f"<Prefix>{enc(prefix) if v2 else xml_text(prefix)}</Prefix>")
    if v2:
        parts.append(f"<KeyCount>{len(items)}</KeyCount>")
        if token is not None:  # echoed even when empty, as S3 does
            parts.append(f"<ContinuationToken>{x(token)}</ContinuationToken>")
        if start_after:
            parts.append(f"<StartAfter>{enc(start_after)}</StartAfter>")
        if cursor is not None:
            parts.append(f"<NextContinuationToken>{cursor}</NextContinuationToken>")
        elif truncated and items:
            parts.append(f"<NextContinuationToken>{encode_token(items[-1][0])}</NextContinuationToken>")
    else:
        parts.append(f"<Marker>{enc(marker)}</Marker>")
        if cursor is not None:
            parts.append(f"<NextMarker>{cursor}</NextMarker>")
        elif truncated and items:
            parts.append(f"<NextMarker>{enc(items[-1][0])}</NextMarker>")
    parts.append(f"<MaxKeys>{limit}</MaxKeys>")
    if delimiter:
        parts.append(f"<Delimiter>{enc(delimiter)}</Delimiter>")
    if encoding:
        parts.append("<EncodingType>url</EncodingType>")
    parts.append(f"<IsTruncated>{'true' if truncated else 'false'}</IsTruncated>")
    times = TimeFormat()
    tail = f"{owner if with_owner else ''}<StorageClass>STANDARD</StorageClass></Contents>"
    texts = (url_texts if encoding == "url" else xml_texts)([key for key, _ in items])
    entries = [entry for _, entry in items]
    etags = etag_texts([entry.etag if entry is not None else "" for entry in entries])
    for text, etag, modified, entry in zip(texts, etags, times.texts(entries), entries, strict=True):
        if entry is None:
            parts.append(f"<CommonPrefixes><Prefix>{text}</Prefix></CommonPrefixes>")
            continue
        parts.append(
            f"<Contents><Key>{text}</Key><LastModified>{modified}</LastModified>"
            f"<ETag>{etag}</ETag><Size>{entry.size}</Size>{tail}"
        )
    parts.append("</ListBucketResult>")
    return xml_response("".join(parts))
