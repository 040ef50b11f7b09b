"""lakeFS's paging: `after` (exclusive), `amount` (default 100, at most 1000, as lakeFS's
schema says; more is refused), and a `Pagination` on every list."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query
from lakefs_sdk.models import Pagination

from silt.paging import DEFAULT_PAGE, MAX_PAGE

# Longest `after`, `prefix` or `search` accepted: names and keys are far shorter.
MAX_TOKEN = 1024

Amount = Annotated[int, Query(ge=-1, le=MAX_PAGE, description="how many items to return")]
After = Annotated[str, Query(max_length=MAX_TOKEN, description="return items after this value")]
Prefix = Annotated[str, Query(max_length=MAX_TOKEN, description="return items prefixed with this value")]


def page_size(amount: int) -> int:
    """-1 and 0 ask for the default page."""
    return amount if amount > 0 else DEFAULT_PAGE


def pagination(has_more: bool, next_offset: str, results: int, max_per_page: int) -> Pagination:
    return Pagination(
        has_more=has_more,
        next_offset=next_offset if has_more else "",
        results=results,
        max_per_page=max_per_page,
    )
