"""A transport that joins the writes of one event-loop turn into one.

uvicorn writes an answer's head and its body with a write each. A small answer (a 4 KiB GET, an
error, a PUT's empty 200) is ready whole in one turn of the loop, so the two writes were two
`send` calls on the socket and two TCP segments for the client to read: one more system call
and one more wake-up on each side than the bytes need. This transport keeps what is written
during a turn and hands it to the socket once, at the end of that turn (a callback scheduled by
the turn's first write), in the order written. A streamed body still leaves chunk by chunk, a
turn late at most: the loop turns while the next chunk is read.

Closing (and `write_eof`) sends what is kept first; aborting drops it, as it drops the socket
transport's own buffer. Flow control is the socket transport's: it pauses the protocol once its
own buffer is full, and `get_write_buffer_size` counts the kept bytes too. A turn that writes
more than KEEP_AT_MOST bytes hands them over at once, so that the socket transport's flow
control sees a large answer as it is written. The protocol flushes when the client half-closes:
the socket transport then closes itself, and would drop what is still kept.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

log = logging.getLogger(__name__)

# What one turn may keep before handing it over: uvicorn's own high-water mark for a
# connection's write buffer.
KEEP_AT_MOST = 64 * 1024


class CoalescingTransport:
    """Wraps a socket transport: writing, ending, aborting and the buffer's size go through
    what is kept; everything else is the socket transport's own."""

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
        if self._kept_bytes > KEEP_AT_MOST:
            self.flush()

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
        if self._transport.is_closing():
            return
        try:
            self._transport.write(data)
        except Exception:
            # Outside the request's task, nobody else would see this: the answer is lost, so
            # the connection ends rather than leave its client waiting.
            log.exception("sending an answer failed; the connection is closed")
            self._transport.abort()

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def abort(self) -> None:
        self._kept = []
        self._kept_bytes = 0
        self._transport.abort()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + self._kept_bytes

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)
