"""The raw streams block adapters hand out: read in pieces as large as the caller asks, whole
reads in CHUNK_SIZE pieces, and bodies that arrive as pieces of bytes; and the seekable ones that
keep their own position (an upload's source that the SDK seeks back in, a preview's file over
ranged reads)."""

from __future__ import annotations

import abc
import io
from typing import Any

from silt.block.adapter import CHUNK_SIZE


class ObjectStream(io.RawIOBase):
    """A readable raw stream whose whole read goes CHUNK_SIZE at a time (io's default reads
    8 KiB pieces, thousands of calls for one large object)."""

    def readable(self) -> bool:
        return True

    def readall(self) -> bytes:
        chunks = []
        while chunk := self.read(CHUNK_SIZE):
            chunks.append(chunk)
        return b"".join(chunks)


class PieceStream(ObjectStream):
    """A body that arrives as pieces of bytes, `_next_piece` fetching each (None at the end);
    reads copy out of the current piece, which is let go before the next one is fetched."""

    _piece = memoryview(b"")

    @abc.abstractmethod
    def _next_piece(self) -> bytes | memoryview | None:
        """The next piece of the body, or None at its end."""
        # io's C base does not enforce abstract methods on instantiation: fail loudly, never end
        # the body early, if a subclass forgot it.
        raise NotImplementedError

    def readinto(self, buffer: Any) -> int:
        while not self._piece:
            self._piece = memoryview(b"")
            piece = self._next_piece()
            if piece is None:
                return 0
            self._piece = memoryview(piece)
        view = memoryview(buffer).cast("B")
        count = min(len(view), len(self._piece))
        view[:count] = self._piece[:count]
        self._piece = self._piece[count:]
        return count

    def close(self) -> None:
        self._piece = memoryview(b"")
        super().close()


class SeekableStream(io.RawIOBase):
    """A readable, seekable raw stream that keeps its own position in `_position`: a subclass
    reads and seeks, and tell() is that position without a seek."""

    _position = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position
