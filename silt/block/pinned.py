"""Pinned reads of an imported source: bytes read only while the object is the one imported.

The object stores Silt imports from (S3, GCS, Azure) each answer `get_if_match` their own way; what
they share lives here: the one public signature (what SourceReader calls), the range check, and
the comparison of an object's current size and content ETag with the ones the import recorded.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import BinaryIO

from silt.block.adapter import BlockAdapter
from silt.block.rules import check_range, normalize_etag
from silt.errors import PredicateFailed


@dataclass(frozen=True)
class Pin:
    """What an import recorded of its source: the ETag (always), the size (when known) and the
    store's own version of the object ("" for an entry imported before versions were recorded)."""

    etag: str
    size: int | None
    version: str


class PinnedReadAdapter(BlockAdapter):
    """A block adapter that can read an object only as an import recorded it."""

    def get_if_match(
        self,
        namespace: str,
        key: str,
        etag: str,
        byte_range: tuple[int, int] | None = None,
        *,
        size: int | None = None,
        version: str = "",
    ) -> BinaryIO:
        """get (or get_range, `byte_range` inclusive) of an imported object only as it was
        imported. PredicateFailed when the object is not the one imported, NotFound when there is
        none."""
        if byte_range is not None:
            check_range(*byte_range)
        return self._read_pinned(namespace, key, Pin(etag=etag, size=size, version=version), byte_range)

    @abc.abstractmethod
    def _read_pinned(self, namespace: str, key: str, pin: Pin, byte_range: tuple[int, int] | None) -> BinaryIO:
        """get_if_match once the range is checked: how this store keeps the read to `pin`."""


def check_as_imported(what: str, pin: Pin, size: int, content_etag: str) -> None:
    """PredicateFailed unless an object's current `size` and `content_etag` (the ETag its store
    computed of its bytes, never one a writer can set) are the ones `pin` recorded."""
    if pin.size is not None and size != pin.size:
        raise PredicateFailed(f"{what}: its size is no longer {pin.size}")
    if content_etag != normalize_etag(pin.etag):
        raise PredicateFailed(f"{what}: its ETag is no longer {pin.etag}")
