"""The envelope a journaled value is stored in: the logical timestamp of its write.

``MAGIC + 8-byte big-endian logical timestamp + value``. Graveler's values are protobuf
messages, and a serialized protobuf never starts with a zero byte (field number 0 does not
exist), so a stored value without the magic is one written before journaling: its
timestamp is 0 and it is returned as is.
"""

from __future__ import annotations

import struct

MAGIC = b"\x00SJ1"
TIMESTAMP = struct.Struct(">Q")
HEADER_SIZE = len(MAGIC) + TIMESTAMP.size


def wrap(logical_timestamp: int, value: bytes) -> bytes:
    """The stored form of value written at logical_timestamp."""
    return MAGIC + TIMESTAMP.pack(logical_timestamp) + value


def unwrap(stored: bytes) -> tuple[int, bytes]:
    """(logical timestamp, value) of a stored value; (0, stored) for a legacy value."""
    if len(stored) >= HEADER_SIZE and stored.startswith(MAGIC):
        return TIMESTAMP.unpack_from(stored, len(MAGIC))[0], stored[HEADER_SIZE:]
    return 0, stored
