"""One page of repository records (pull requests, action runs) that a filter may thin out.

A filter may skip many records before it keeps enough for a page, so one call examines at most
`max_examined` of them and then answers what it found, with the id to go on after: a short page,
even an empty one, that still has more. Callers continue from that id, not from the last one
they were given.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from engine.core.deadline import Deadline
from silt.kv import Store

_T = TypeVar("_T")


def filtered_page(
    kv: Store,
    partition: bytes,
    prefix: bytes,
    start: bytes,
    wanted: int,
    max_examined: int,
    deadline: Deadline,
    what: str,
    parse: Callable[[bytes], _T],
    id_of: Callable[[_T], str],
    keep: Callable[[_T], bool],
) -> tuple[list[_T], bool, str]:
    """(page, has_more, next_after) of the records under prefix from start on, in key order."""
    page: list[_T] = []
    last = ""
    for examined, entry in enumerate(kv.scan(partition, start)):
        if not entry.key.startswith(prefix):
            return page, False, ""
        if len(page) == wanted or examined == max_examined:
            return page, True, last
        if examined % 256 == 255:
            deadline.check(what)
        record = parse(entry.value)
        last = id_of(record)
        if keep(record):
            page.append(record)
    return page, False, ""
