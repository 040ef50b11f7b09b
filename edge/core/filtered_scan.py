"""Listings filtered per key (silt/key_scope.py), with a bounded scan per request.

A caller allowed only some keys of a repository sees a listing (REST objects and diffs, S3
ListObjects) with the other keys left out. Reading on past hidden keys until a page is full
would let a caller allowed one narrow prefix make one request scan the whole repository, so one
request scans at most MAX_SCANNED listed items, shown or not. When the scan stops there with
fewer items than asked, the page answers what it found, says there is more, and continues with a
*cursor* naming where the scan stopped.

The last item scanned may be a key the caller may not read, so a cursor never shows it: it is
the position encrypted and authenticated (AES-256-GCM under a key derived from the edge's
service secret) with the listing it continues (front end, caller, repository, ref, prefix,
delimiter) as associated data. Clients hand it back unchanged (lakeFS clients pass `next_offset`
as the next `after`; S3 clients the continuation token or marker). A value that starts like a
cursor but does not open (forged, altered, cut, or from another listing or caller) is refused,
never read as a position. A cursor's sealed position is padded to one size, so that its length
says nothing of the key. Any other value is a key the client names itself: in a filtered scope
it is accepted only where the caller may read (raw_position_allowed), never among hidden keys.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
import struct
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from silt.key_scope import KeyScope
from silt.visible_scan import MAX_SCANNED as MAX_SCANNED
from silt.visible_scan import Scanned as Scanned
from silt.visible_scan import VisibleScan

# Listed items (shown or not) one filtered listing request reads at most: ten of the largest
# pages a client may ask for (1,000 items). docs/security.md, "Policies on objects".
# How a cursor starts: `~` sorts after every letter and digit, and no key is expected to begin so.
CURSOR_MARK = "~silt-scan~"
_KEY_LABEL = b"silt edge scan cursor v1"
_NONCE = 12
# Sealed positions are padded to a multiple of this: the length frame and the longest key
# (engine/core/validation.py MAX_KEY_BYTES) with a common prefix's delimiter after it.
_PADDED = 4 + 1024 + 256

T = TypeVar("T")


class InvalidCursor(ValueError):
    """A value that starts as a cursor does, but is no cursor this edge gave for this listing."""


def is_cursor(value: str) -> bool:
    return value.startswith(CURSOR_MARK)


class ScanCursors:
    """Seals a scan position into a cursor bound to one listing, and opens it again."""

    def __init__(self, key: bytes) -> None:
        self._aead = AESGCM(key)

    @classmethod
    def from_secret(cls, secret: str) -> ScanCursors:
        """The edge's cursors, keyed by its service secret: every replica of one installation
        opens the others' cursors, and rotating the secret ends the old ones (refused)."""
        key = hmac.new(secret.encode("utf-8", "surrogatepass"), _KEY_LABEL, hashlib.sha256).digest()
        return cls(key)

    def seal(self, position: str, listing: Sequence[str]) -> str:
        nonce = os.urandom(_NONCE)
        sealed = self._aead.encrypt(nonce, _padded(position.encode("utf-8", "surrogatepass")), _bound(listing))
        return CURSOR_MARK + base64.urlsafe_b64encode(nonce + sealed).decode("ascii").rstrip("=")

    def open(self, cursor: str, listing: Sequence[str]) -> str:
        """The position sealed in cursor; InvalidCursor unless this edge sealed it for listing."""
        if not is_cursor(cursor):
            raise InvalidCursor("not a cursor")
        text = cursor[len(CURSOR_MARK) :]
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        except (binascii.Error, ValueError):
            raise InvalidCursor("malformed cursor") from None
        if len(raw) <= _NONCE:
            raise InvalidCursor("malformed cursor")
        try:
            plain = self._aead.decrypt(raw[:_NONCE], raw[_NONCE:], _bound(listing))
        except InvalidTag:
            raise InvalidCursor("the cursor was not given for this listing") from None
        return _unpadded(plain).decode("utf-8", "surrogatepass")


def _padded(position: bytes) -> bytes:
    """position, its length first, padded to a multiple of _PADDED (one block for any key), so
    that a cursor's length says nothing of the key it seals."""
    framed = struct.pack(">I", len(position)) + position
    return framed + bytes(-len(framed) % _PADDED)


def _unpadded(plain: bytes) -> bytes:
    if len(plain) < 4 or (length := struct.unpack(">I", plain[:4])[0]) > len(plain) - 4:
        raise InvalidCursor("malformed cursor")
    return plain[4 : 4 + length]


def raw_position_allowed(scope: KeyScope, after: str, delimiter: str) -> bool:
    """Whether a listing may start after a position the client named itself (no cursor): the
    rule every filtered listing keeps, hooks' included (KeyScope.may_start_after)."""
    return scope.may_start_after(after, delimiter)


def _bound(listing: Sequence[str]) -> bytes:
    return json.dumps(list(listing), ensure_ascii=True).encode("ascii")


async def scan_visible(
    read: Callable[[str, int], Awaitable[tuple[Sequence[T], bool]]],
    shown: Callable[[T], bool],
    key_of: Callable[[T], str],
    after: str,
    size: int,
    page: int,
    cap: int = MAX_SCANNED,
) -> Scanned[T]:
    """Up to size items after `after` that shown keeps, reading pages of up to `page` items
    (read(after, amount) -> (items, has_more)) until one more than asked is found, the listing
    ends, or cap items were scanned."""
    scan = VisibleScan(shown, key_of, after, size, cap)
    while True:
        items, more = await read(scan.after, scan.amount(page))
        if (answer := scan.take(items, more)) is not None:
            return answer
