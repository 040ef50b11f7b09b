"""Paged listings of named refs (branches, tags) with lakeFS's `prefix`, over graveler listings
that take only `after` and `amount`: bounded work per request, and a cursor that always moves."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import NamedTuple

from lakefs_sdk.models import RefList

from edge.api import convert
from edge.api.paging import PrefixPageQuery, pagination
from silt.paging import MAX_PAGE

# A listing with a prefix stops after this many names examined (bounded work per call).
MAX_EXAMINED = 10 * MAX_PAGE


class Named(NamedTuple):
    name: str
    commit_id: str
    hidden: bool = False


# (after, amount) -> (names in order, whether more follow)
Fetch = Callable[[str, int], Awaitable[tuple[Sequence[Named], bool]]]


async def list_refs(fetch: Fetch, requested: PrefixPageQuery, show_hidden: bool = False) -> RefList:
    """The page of names requested: starting with its `prefix`, after its `after` (exclusive);
    hidden ones only when asked for."""
    prefix, size = requested.prefix, requested.size
    cursor = max(requested.after, prefix[:-1])
    found: list[Named] = []
    examined = 0
    exhausted = False
    while len(found) <= size and examined < MAX_EXAMINED and not exhausted:
        # With a prefix, names before it are skipped: ask for full pages to pass them quickly.
        names, has_more = await fetch(cursor, MAX_PAGE if prefix else size + 1)
        exhausted = not has_more
        if not names:
            break  # nothing came back: never ask again from the same cursor
        for named in names:
            if not named.name.startswith(prefix) and named.name > prefix:
                exhausted = True  # past every name with the prefix
                break
            # Every name seen moves the cursor and counts, even one skipped before the prefix:
            # otherwise the next call would ask for the same page again, until the deadline.
            examined += 1
            cursor = named.name
            if named.name.startswith(prefix) and (show_hidden or not named.hidden):
                found.append(named)
    page = found[:size]
    has_more = len(found) > size or not exhausted
    next_offset = page[-1].name if len(found) > size else cursor
    return RefList(
        pagination=pagination(has_more, next_offset, len(page), size),
        results=[convert.ref(n.name, n.commit_id) for n in page],
    )
