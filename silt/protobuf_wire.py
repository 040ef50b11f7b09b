"""Pieces of protobuf's wire format, for answers and requests written as bytes rather than
built as messages field by field (graveler's listings, the span export process's OTLP
requests): building a message per item costs more in Python than writing its bytes."""

from __future__ import annotations


def varint(value: int) -> bytes:
    """value (non-negative) as a protobuf base-128 varint."""
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


# The varints of every length below 16 KiB (one or two bytes each), looked up rather than
# computed: keys, entries, attributes and spans are almost always shorter.
SHORT_VARINTS = [varint(n) for n in range(1 << 14)]


def length_varint(n: int) -> bytes:
    """varint(n), looked up for the usual short lengths."""
    return SHORT_VARINTS[n] if n < 1 << 14 else varint(n)
