"""A transport that joins the writes of one event-loop turn into one.

uvicorn writes an answer's head and its body with a write each. A small answer (a 4 KiB GET, an
error, a PUT's empty 200) is ready whole in one turn of the loop, so the two writes were two
`send` calls on the socket and two TCP segments for the client to read: one more system call
and one more wake-up on each side than the bytes need. This transport keeps what is written
during a turn and hands it to the socket once, at the end of that turn (a callback scheduled by
the turn's first write), in the order written. A streamed body still leaves chunk by chunk, a
turn late at most: the loop turns while the next chunk is read.

Closing sends what is kept first. Flow control is the socket transport's: it pauses the
protocol once its own buffer is full, and `get_write_buffer_size` counts the kept bytes too.
"""

from __future__ import annotations

import asyncio
from typing import Any


class CoalescingTransport:
    """Wraps a socket transport; everything but write, close and the buffer size is its own."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._kept: list[bytes] = []
        self._kept_bytes = 0

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        if not self._kept:
            self._loop.call_soon(self.flush)
        self._kept.append(bytes(data))
        self._kept_bytes += len(data)

    def writelines(self, chunks: Any) -> None:
        for data in chunks:
            self.write(data)

    def flush(self) -> None:
        """Hand what is kept to the socket transport now (the turn's end does it anyway)."""
        if not self._kept:
            return
        data = self._kept[0] if len(self._kept) == 1 else b"".join(self._kept)
        self._kept = []
        self._kept_bytes = 0
        if not self._transport.is_closing():
            self._transport.write(data)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + self._kept_bytes

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)
