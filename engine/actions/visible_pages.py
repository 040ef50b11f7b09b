"""Pages of a hook's listings and diffs with the keys its user may not read left out, as the
REST API pages them for that user (edge/core/filtered_scan.py), within the hook's deadline.

Reading on past hidden keys until a page is full would let one call scan the whole repository,
so one call scans at most MAX_SCANNED listed items, shown or not, as the edges do. A page stopped
there answers what it found, says there is more, and names where to go on with a *cursor*: the
position stopped at may be a hidden key, so it never reaches the script. It stays in graveler,
in the hook run's own table (HookCursors), and the script is handed a token for it that means
nothing outside that run and that listing. Any other `after` is a position the script names
itself, taken only where the user may read (KeyScope.may_start_after).
"""

from __future__ import annotations

import secrets
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TypeVar

from engine.core.deadline import Deadline
from silt.errors import InvalidArgument
from silt.key_scope import KeyScope
from silt.paging import MAX_PAGE
from silt.visible_scan import MAX_SCANNED, Scanned, VisibleScan

CURSOR_MARK = "~silt-hook-scan~"
# Cursors one hook run keeps; the oldest are forgotten past this.
MAX_CURSORS = 256

T = TypeVar("T")


def scan_visible(
    read: Callable[[str, int], tuple[Sequence[T], bool]],
    shown: Callable[[T], bool],
    key_of: Callable[[T], str],
    after: str,
    size: int,
    deadline: Deadline,
    cap: int | None = None,
) -> Scanned[T]:
    """Up to size items after `after` that shown keeps, reading pages (read(after, amount) ->
    (items, has_more)) until one more than asked is found, the listing ends, or cap items
    (MAX_SCANNED by default) were scanned."""
    cap = MAX_SCANNED if cap is None else cap
    scan = VisibleScan(shown, key_of, after, size, cap)
    while True:
        deadline.check("a Lua hook's filtered listing")
        items, more = read(scan.after, scan.amount(MAX_PAGE))
        if (answer := scan.take(items, more)) is not None:
            return answer


class HookCursors:
    """The positions one hook run's filtered listings stopped at, by the tokens handed out."""

    def __init__(self) -> None:
        self._positions: OrderedDict[str, tuple[tuple[str, ...], str]] = OrderedDict()

    def seal(self, position: str, listing: tuple[str, ...]) -> str:
        token = CURSOR_MARK + secrets.token_hex(8)
        self._positions[token] = (listing, position)
        while len(self._positions) > MAX_CURSORS:
            self._positions.popitem(last=False)
        return token

    def resume_after(self, scope: KeyScope, after: str, delimiter: str, listing: tuple[str, ...]) -> str:
        """Where a filtered listing asked to go on after `after` starts; InvalidArgument for a
        token this run did not hand out for this listing, or a position among hidden keys."""
        if scope.whole:
            return after
        if after.startswith(CURSOR_MARK):
            kept = self._positions.get(after)
            if kept is None or kept[0] != listing:
                raise InvalidArgument("after: not a position this hook was given for this listing")
            return kept[1]
        if not scope.may_start_after(after, delimiter):
            raise InvalidArgument("after: a position the hook's user may not list from")
        return after

    def next_offset(self, page: Scanned[T], listing: tuple[str, ...], last_shown: str) -> str:
        """The page's next_offset: a token when the scan stopped at the cap, else the last key
        shown ("" when nothing follows)."""
        if not page.has_more:
            return ""
        if page.stopped_at is not None:
            return self.seal(page.stopped_at, listing)
        return last_shown
