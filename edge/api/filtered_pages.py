"""REST pages of listings filtered per key (edge/core/filtered_scan.py): a page whose scan
stopped at MAX_SCANNED answers a cursor as `next_offset`, which the next request's `after`
brings back."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from edge.api.context import Context
from edge.api.errors import bad_request
from edge.core.filtered_scan import InvalidCursor, Scanned, is_cursor, raw_position_allowed
from silt.key_scope import KeyScope


def listing_of(ctx: Context, *parts: str) -> tuple[str, ...]:
    """What a cursor is bound to: the REST API, the caller and the listing's own parts."""
    return ("api", ctx.caller.user_id, *parts)


def resume_after(ctx: Context, after: str, listing: Sequence[str], scope: KeyScope, delimiter: str) -> str:
    """The position to list after: the position its cursor seals (400 for a cursor this listing
    was not given), or after itself (400 in a filtered scope unless the caller may read there)."""
    if not is_cursor(after):
        if not raw_position_allowed(scope, after, delimiter):
            raise bad_request(
                "after must be a key the caller may read or the previous page's next_offset, passed unchanged"
            )
        return after
    try:
        return ctx.backend.scan_cursors.open(after, listing)
    except InvalidCursor as exc:
        raise bad_request(
            f"after is not a continuation of this listing ({exc}): pass the previous page's next_offset unchanged"
        ) from None


def next_offset(ctx: Context, page: Scanned[Any], listing: Sequence[str], last_key: str) -> str:
    """The page's next_offset: a cursor where the scan stopped at its cap, else the last key
    shown when more follow."""
    if page.stopped_at is not None:
        return ctx.backend.scan_cursors.seal(page.stopped_at, listing)
    return last_key if page.has_more else ""
