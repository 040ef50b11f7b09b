"""lakeFS's IAM listings (`prefix`, `after`, `amount`) over auth's lists, which page by id only.

Auth lists in id order from an exclusive `after`; a prefix is applied here: the listing starts
just before the prefix, skips what does not carry it and stops at the first id past it. Work per
request is bounded (MAX_EXAMINED ids) as for branch listings (docs/design/api.md, Paging).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from lakefs_sdk.models import Pagination

from edge.api.paging import page_size, pagination
from silt.paging import MAX_PAGE

T = TypeVar("T")

# One page of auth's list from an exclusive cursor: (items, has_more).
Fetch = Callable[[str, int], Awaitable[tuple[Sequence[T], bool]]]

MAX_EXAMINED = 10 * MAX_PAGE


async def id_page(
    fetch: Fetch[T], id_of: Callable[[T], str], prefix: str, after: str, amount: int
) -> tuple[list[T], Pagination]:
    size = page_size(amount)
    cursor = max(after, prefix[:-1])
    found: list[T] = []
    examined = 0
    exhausted = False
    while len(found) <= size and examined < MAX_EXAMINED and not exhausted:
        items, more = await fetch(cursor, MAX_PAGE if prefix else min(size + 1, MAX_PAGE))
        exhausted = not more
        for item in items:
            name = id_of(item)
            if not name.startswith(prefix) and name > prefix:
                exhausted = True  # past every id with the prefix
                break
            # Every id seen moves the cursor, so the next fetch never repeats a page.
            examined += 1
            cursor = name
            if name.startswith(prefix):
                found.append(item)
        if not items:
            exhausted = True
    page = found[:size]
    has_more = len(found) > size or not exhausted
    next_offset = id_of(page[-1]) if len(found) > size else cursor
    return page, pagination(has_more, next_offset, len(page), size)
