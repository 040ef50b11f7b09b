"""The gateway's transport joins one loop turn's writes into one socket write, in order, and
never loses or reorders what a close or a later turn follows."""

from __future__ import annotations

import asyncio
import socket

from edge.gateway.coalescing import KEEP_AT_MOST, CoalescingTransport


class RecordingTransport:
    """What a socket transport was asked to do, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, bytes]] = []
        self.closing = False
        self.buffered = 0

    def write(self, data: bytes) -> None:
        assert not self.closing, "written after close"
        self.calls.append(("write", bytes(data)))

    def close(self) -> None:
        self.calls.append(("close", b""))
        self.closing = True

    def write_eof(self) -> None:
        self.calls.append(("write_eof", b""))

    def abort(self) -> None:
        self.calls.append(("abort", b""))
        self.closing = True

    def is_closing(self) -> bool:
        return self.closing

    def get_write_buffer_size(self) -> int:
        return self.buffered

    def get_extra_info(self, name: str) -> str:
        return f"info:{name}"


def test_one_turns_writes_reach_the_socket_as_one_write_in_order() -> None:
    async def scenario() -> RecordingTransport:
        inner = RecordingTransport()
        transport = CoalescingTransport(inner, asyncio.get_running_loop())  # type: ignore[arg-type]
        transport.write(b"HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\n")
        transport.write(b"")  # an empty body write adds nothing
        transport.write(memoryview(b"body"))
        assert inner.calls == []  # nothing before the turn ends
        assert transport.get_write_buffer_size() == 42
        await asyncio.sleep(0)
        assert inner.calls == [("write", b"HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\nbody")]
        # The next turn's writes are a write of their own, after the first.
        transport.writelines([b"a", b"b"])
        await asyncio.sleep(0)
        assert transport.get_extra_info("peername") == "info:peername"  # the rest is the socket's
        return inner

    inner = asyncio.run(scenario())
    assert inner.calls[1:] == [("write", b"ab")]


def test_a_close_sends_what_is_kept_first_and_nothing_follows_it() -> None:
    async def scenario() -> RecordingTransport:
        inner = RecordingTransport()
        transport = CoalescingTransport(inner, asyncio.get_running_loop())  # type: ignore[arg-type]
        transport.write(b"HTTP/1.1 400 Bad Request\r\n\r\n")
        transport.close()
        transport.write(b"late")  # a write after close is dropped, as the socket's own would be
        await asyncio.sleep(0)
        return inner

    inner = asyncio.run(scenario())
    assert inner.calls == [("write", b"HTTP/1.1 400 Bad Request\r\n\r\n"), ("close", b"")]


def test_a_client_reads_an_answer_written_in_pieces_whole_over_a_real_socket() -> None:
    """Over a real connection: many turns of pieces arrive complete and in order."""

    async def scenario() -> bytes:
        loop = asyncio.get_running_loop()
        left, right = socket.socketpair()
        right.setblocking(False)
        inner, _ = await loop.create_connection(asyncio.Protocol, sock=left)
        transport = CoalescingTransport(inner, loop)
        expected = b""
        for turn in range(50):
            for piece in range(turn % 4 + 1):
                data = f"{turn}.{piece};".encode()
                transport.write(data)
                expected += data
            await asyncio.sleep(0)
        transport.close()
        received = b""
        while len(received) < len(expected):
            received += await loop.sock_recv(right, 65536)
        right.close()
        assert received == expected
        return received

    assert asyncio.run(scenario()).startswith(b"0.0;1.0;1.1;")


def test_a_large_turn_is_handed_over_at_once_and_eof_and_abort_keep_their_meaning() -> None:
    async def scenario() -> RecordingTransport:
        inner = RecordingTransport()
        transport = CoalescingTransport(inner, asyncio.get_running_loop())  # type: ignore[arg-type]
        transport.write(b"h" * 100)
        transport.write(b"b" * KEEP_AT_MOST)  # past the bound: the socket's flow control sees it now
        assert inner.calls == [("write", b"h" * 100 + b"b" * KEEP_AT_MOST)]
        assert transport.get_write_buffer_size() == 0
        transport.write(b"end")
        transport.write_eof()  # what is kept goes before the end of the stream
        transport.write(b"dropped")
        transport.abort()  # an abort drops what is kept, as the socket's own buffer is dropped
        await asyncio.sleep(0)
        return inner

    inner = asyncio.run(scenario())
    assert inner.calls[1:] == [("write", b"end"), ("write_eof", b""), ("abort", b"")]


def test_a_write_that_fails_at_the_turns_end_closes_the_connection() -> None:
    class Refusing(RecordingTransport):
        def write(self, data: bytes) -> None:
            raise RuntimeError("cannot write")

    async def scenario() -> RecordingTransport:
        inner = Refusing()
        transport = CoalescingTransport(inner, asyncio.get_running_loop())  # type: ignore[arg-type]
        transport.write(b"answer")
        await asyncio.sleep(0)
        return inner

    assert asyncio.run(scenario()).calls == [("abort", b"")]
