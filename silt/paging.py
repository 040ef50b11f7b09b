"""The paging policy of every collection a Silt API lists (repositories, branches, tags, commits,
users, groups, policies, credentials): ``amount`` 0 means DEFAULT_PAGE, anything larger than
MAX_PAGE is cut to it, a negative one is refused. Entry listings have their own, larger limits
(engine/core/paging.py): they page through millions of keys, these through thousands."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

from silt.errors import InvalidArgument

DEFAULT_PAGE = 100
MAX_PAGE = 1000

_T = TypeVar("_T")


def page_size(amount: int) -> int:
    """How many items a page asked for with `amount` holds."""
    if amount < 0:
        raise InvalidArgument(f"amount must not be negative, got {amount}")
    return min(amount or DEFAULT_PAGE, MAX_PAGE)


def take_page(items: Iterable[_T], amount: int) -> tuple[list[_T], bool]:
    """The first page of items and whether more follow (reads at most one item past the page)."""
    size = page_size(amount)
    page: list[_T] = []
    for item in items:
        if len(page) == size:
            return page, True
        page.append(item)
    return page, False
