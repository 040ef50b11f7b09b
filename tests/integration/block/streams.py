"""Streams and checksums for the block adapter tests."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterator
from typing import Any, BinaryIO, cast

MiB = 1024 * 1024


def pattern_chunks(size: int, seed: int = 0, chunk: int = 256 * 1024) -> Iterator[bytes]:
    """size bytes that vary along the stream, produced a chunk at a time."""
    # A block of odd length repeats out of step with every power-of-two part size, so
    # the parts of one object differ from each other.
    block = hashlib.sha256(str(seed).encode()).digest() * 31251 + bytes([seed % 256])
    offset = 0
    while offset < size:
        start = offset % len(block)
        piece = block[start : start + min(chunk, size - offset)]
        offset += len(piece)
        yield piece


class GeneratorStream(io.RawIOBase):
    """A read-only file object over an iterator of byte chunks; remembers what it gave out."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        super().__init__()
        self._chunks = chunks
        self._pending = b""
        self.md5 = hashlib.md5()
        self.size = 0

    def readable(self) -> bool:
        return True

    def binary(self) -> BinaryIO:
        """This stream as the adapters' signature names it (they only read())."""
        return cast(BinaryIO, self)

    def readinto(self, buffer: Any) -> int:
        if not self._pending:
            self._pending = next(self._chunks, b"")
        count = min(len(buffer), len(self._pending))
        buffer[:count] = self._pending[:count]
        self.md5.update(self._pending[:count])
        self.size += count
        self._pending = self._pending[count:]
        return count


def md5_hex(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def multipart_etag(parts: list[bytes]) -> str:
    """S3's ETag of an object uploaded in these parts, computed independently of silt."""
    return hashlib.md5(b"".join(hashlib.md5(p).digest() for p in parts)).hexdigest() + f"-{len(parts)}"
