"""What of a diff a caller may see, when its reads are limited to some keys (silt/key_scope.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from edge.core.filtered_scan import Scanned, scan_visible
from silt.graveler.v1 import graveler_pb2 as api
from silt.key_scope import KeyScope
from silt.paging import MAX_PAGE


def is_visible(scope: KeyScope, item: api.DiffItem) -> bool:
    """A changed key the caller may read, or a changed prefix below which such a key may lie."""
    if item.type == api.DIFF_TYPE_PREFIX_CHANGED:
        return scope.may_allow_under(item.key)
    return scope.allows(item.key)


async def visible_diff_page(
    scope: KeyScope, read: Callable[[str, int], Awaitable[api.DiffResponse]], after: str, size: int
) -> Scanned[api.DiffItem]:
    """Up to size items of a diff from after on that scope lets the caller see, and whether more
    follow. read(after, amount) is one page of graveler's Diff or DiffBranch. A whole scope reads one page, as before;
    otherwise pages are read on past the hidden changes until one more visible item than asked
    is found, the diff ends or MAX_SCANNED changes were read (edge/core/filtered_scan.py), so
    that the page's next_offset and has_more name only what the caller may see."""
    if scope.whole:
        page = await read(after, size)
        return Scanned(list(page.items), page.has_more)

    async def items(cursor: str, amount: int) -> tuple[list[api.DiffItem], bool]:
        page = await read(cursor, amount)
        return list(page.items), page.has_more

    return await scan_visible(items, lambda item: is_visible(scope, item), _key_of, after, size, MAX_PAGE)


def _key_of(item: api.DiffItem) -> str:
    return item.key
