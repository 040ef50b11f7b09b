"""One filtered page scanned: reading on past the keys a user may not read until a page is full,
the listing ends, or MAX_SCANNED listed items were read, whatever reads them (the edges over
graveler's gRPC, asynchronously; a Lua hook in graveler, synchronously).

Reading on past hidden keys until a page is full would let one request scan a whole repository,
so a scan stops at the cap: it answers what it found, says more follow, and names the last key
scanned, which may be hidden, for its caller to seal (the edges in an encrypted cursor, a hook
run in its own table), never to hand out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

# Listed items (shown or not) one request reads at most.
MAX_SCANNED = 10_000

T = TypeVar("T")


@dataclass(frozen=True)
class Scanned(Generic[T]):
    """A filtered page: the items shown, whether more follow, and, when the scan stopped at the
    cap rather than on a full page, the last key scanned."""

    items: list[T]
    has_more: bool
    stopped_at: str | None = None


class VisibleScan(Generic[T]):
    """The state of one scan for up to size items after `after` that shown keeps: its reader
    asks amount(page) items after `after`, hands each page to take(items, more) and stops at
    the first page that answers a Scanned."""

    def __init__(self, shown: Callable[[T], bool], key_of: Callable[[T], str], after: str, size: int, cap: int) -> None:
        self.shown = shown
        self.key_of = key_of
        self.after = after
        self.size = size
        self.cap = cap
        self.found: list[T] = []
        self.scanned = 0

    def amount(self, page: int) -> int:
        """How many items the next read asks for: a page, but never past the cap."""
        return max(1, min(page, self.cap - self.scanned))

    def take(self, items: Sequence[T], more: bool) -> Scanned[T] | None:
        """Take one page read after `after`: the scan's answer, or None to read on."""
        self.scanned += len(items)
        self.found += [item for item in items if self.shown(item)]
        if len(self.found) > self.size:
            return Scanned(self.found[: self.size], True)
        if not more or not items:
            return Scanned(self.found, False)
        self.after = self.key_of(items[-1])
        if self.scanned >= self.cap:
            return Scanned(self.found, True, self.after)
        return None
