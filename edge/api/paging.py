"""lakeFS's paging: `after` (exclusive), `amount` (default 100, at most 1000, as lakeFS's
schema says; more is refused), and a `Pagination` on every list."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Query
from lakefs_sdk.models import Pagination

from silt.paging import DEFAULT_PAGE, MAX_PAGE

# Longest `after`, `prefix` or `search` accepted: names and keys are far shorter.
MAX_TOKEN = 1024

Amount = Annotated[int, Query(ge=-1, le=MAX_PAGE, description="how many items to return")]
# `after` may also be a filtered listing's cursor (edge/core/filtered_scan.py), which seals a
# position padded to the longest key: about 1,800 characters.
MAX_AFTER = 2 * MAX_TOKEN
After = Annotated[str, Query(max_length=MAX_AFTER, description="return items after this value")]
Prefix = Annotated[str, Query(max_length=MAX_TOKEN, description="return items prefixed with this value")]


def page_size(amount: int) -> int:
    """-1 and 0 ask for the default page."""
    return amount if amount > 0 else DEFAULT_PAGE


@dataclass(frozen=True)
class PageQuery:
    """A list request's page, read from its query as one value: the items after `after`, at
    most `amount` of them. FastAPI validates each field as the query parameter of its name."""

    after: After = ""
    amount: Amount = 100

    @property
    def size(self) -> int:
        return page_size(self.amount)


@dataclass(frozen=True)
class PrefixPageQuery(PageQuery):
    """A page of the items whose names start with `prefix`."""

    prefix: Prefix = ""


# What a list route declares to take its page's query parameters.
PageParams = Annotated[PageQuery, Depends()]
PrefixPageParams = Annotated[PrefixPageQuery, Depends()]


def pagination(has_more: bool, next_offset: str, results: int, max_per_page: int) -> Pagination:
    return Pagination(
        has_more=has_more,
        next_offset=next_offset if has_more else "",
        results=results,
        max_per_page=max_per_page,
    )
