"""What of a diff a caller may see, when its reads are limited to some keys (silt/key_scope.py)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from silt.graveler.v1 import graveler_pb2 as api
from silt.key_scope import KeyScope


def visible_changes(scope: KeyScope, items: Iterable[api.DiffItem]) -> Iterator[api.DiffItem]:
    """The items of a diff page the scope lets the caller see: changed keys it may read, changed
    prefixes below which such a key may lie. A page may so shrink, even to nothing; its
    pagination still names the last key read, so the next page goes on from there."""
    for item in items:
        if scope.whole:
            yield item
        elif item.type == api.DIFF_TYPE_PREFIX_CHANGED:
            if scope.may_allow_under(item.key):
                yield item
        elif scope.allows(item.key):
            yield item
