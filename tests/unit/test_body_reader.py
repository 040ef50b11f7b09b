"""BodyReader (the edge core's): a worker thread reads an async body, one piece ahead, never past the declared size."""

from __future__ import annotations

import asyncio

from edge.core.object_writes import BodyReader
from silt.block.adapter import PutResult


class Pieces:
    """An async source over bytes that records every read it is asked for."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.asked: list[int] = []

    stall_seconds = 5.0
    content_type: str | None = None

    async def start(self) -> None:
        return None

    @property
    def declared(self) -> int | None:
        return None

    async def read(self, n: int) -> bytes:
        self.asked.append(n)
        out, self.data = self.data[:n], self.data[n:]
        return out

    async def finish(self, written: PutResult) -> dict[str, str]:
        return {}


async def _drain(reader: BodyReader, piece: int) -> bytes:
    def in_thread() -> bytes:
        out = b""
        while chunk := reader.read(piece):
            out += chunk
            if reader.size >= 10:
                break
        return out

    return await asyncio.to_thread(in_thread)


def test_the_read_ahead_stops_at_the_declared_size() -> None:
    async def run() -> tuple[bytes, Pieces, bytes]:
        source = Pieces(b"0123456789OVERRUN")
        reader = BodyReader(source, asyncio.get_running_loop(), declared=10)
        got = await _drain(reader, 4)
        reader.close()
        return got, source, await source.read(100)

    got, source, rest = asyncio.run(run())
    assert got == b"0123456789"
    assert sum(source.asked[:-1]) == 10  # the last ask is the check for bytes past the end
    assert rest == b"OVERRUN"  # left in the source for the caller's overrun check


def test_a_read_smaller_than_the_read_ahead_keeps_the_rest() -> None:
    async def run() -> list[bytes]:
        reader = BodyReader(Pieces(b"abcdefghij"), asyncio.get_running_loop(), declared=10)

        def in_thread() -> list[bytes]:
            return [reader.read(4), reader.read(2), reader.read(2), reader.read(4), reader.read(4)]

        return await asyncio.to_thread(in_thread)

    assert asyncio.run(run()) == [b"abcd", b"ef", b"gh", b"ij", b""]


def test_without_a_declared_size_nothing_is_read_ahead() -> None:
    async def run() -> Pieces:
        source = Pieces(b"abcdef")
        reader = BodyReader(source, asyncio.get_running_loop())
        await asyncio.to_thread(reader.read, 3)
        return source

    assert asyncio.run(run()).asked == [3]
