"""The connection guarantees of edge/gateway/protocol.py, probed on any HTTP server over raw
sockets: what `make bench-http-front` (`--only limits`) reports per server beside its speed.

Each probe returns what it saw (a status line, seconds until a close, bytes taken before a
refusal), not a verdict: the servers differ in how they refuse (an S3 XML error, a bare status,
a close), and the page that quotes the table says which of those keep the guarantee.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

PIECE = b"a" * 65536


@contextlib.contextmanager
def connect(endpoint: str, timeout: float = 30) -> Iterator[socket.socket]:
    url = urlsplit(endpoint)
    assert url.hostname and url.port, endpoint
    with socket.create_connection((url.hostname, url.port), timeout=timeout) as sock:
        yield sock


def read_until_closed(sock: socket.socket, limit_s: float) -> tuple[bytes, float, bool]:
    """What arrives until the peer closes, the seconds that took, and whether it closed within limit_s."""
    started = time.monotonic()
    sock.settimeout(limit_s)
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except TimeoutError:
        return received, time.monotonic() - started, False
    except ConnectionResetError:
        pass
    return received, time.monotonic() - started, True


def status_line(answer: bytes) -> str:
    """The first line of an answer, or "(closed without an answer)"."""
    return answer.split(b"\r\n", 1)[0].decode("latin-1") or "(closed without an answer)"


def refusal_format(answer: bytes) -> str:
    """What kind of body a refusal carried: S3's XML error code, JSON, or nothing."""
    body = answer.partition(b"\r\n\r\n")[2]
    if b"<Code>" in body:
        return "S3 XML " + body.split(b"<Code>", 1)[1].split(b"</Code>", 1)[0].decode()
    return "JSON" if body.startswith(b"{") else ("empty" if not body else "text")


def huge_head(endpoint: str) -> dict[str, Any]:
    """A header value sent without end: how much the server takes before it refuses."""
    with connect(endpoint) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: ")
        sent = 0
        try:
            while sent < 16 * 1024 * 1024:
                sock.sendall(PIECE)
                sent += len(PIECE)
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            pass
        answer, _, closed = read_until_closed(sock, 10)
    return {"answer": status_line(answer), "body": refusal_format(answer), "sent_kib": sent // 1024, "closed": closed}


def long_header_line(endpoint: str) -> dict[str, Any]:
    """One 9,000-byte header line, over S3's 8 KiB."""
    with connect(endpoint) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Long: " + b"b" * 9000 + b"\r\nConnection: close\r\n\r\n")
        answer, _, _ = read_until_closed(sock, 10)
    return {"answer": status_line(answer), "body": refusal_format(answer)}


def silent_connection(endpoint: str, limit_s: float) -> dict[str, Any]:
    """A connection that sends nothing: closed after how long, with what."""
    with connect(endpoint) as sock:
        answer, waited, closed = read_until_closed(sock, limit_s)
    return {"answer": status_line(answer), "closed_after_s": round(waited, 1) if closed else None}


def slow_head(endpoint: str, limit_s: float) -> dict[str, Any]:
    """Slowloris: a head trickled one header byte every 0.2 s, never finished."""
    with connect(endpoint) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        started = time.monotonic()
        sock.settimeout(0.2)
        answer = b""
        closed = False
        while time.monotonic() - started < limit_s:
            try:
                sock.sendall(b"s")
                chunk = sock.recv(65536)
            except TimeoutError:
                continue
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            if not chunk:
                closed = True
                break
            answer += chunk
        waited = time.monotonic() - started
    return {"answer": status_line(answer), "closed_after_s": round(waited, 1) if closed else None}


def kept_alive_idle(endpoint: str, path: str, limit_s: float) -> dict[str, Any]:
    """A connection kept alive after one answer, then silent: closed after how long."""
    with connect(endpoint) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        first = _one_answer(sock)
        answer, waited, closed = read_until_closed(sock, limit_s)
    return {
        "first": status_line(first),
        "then": status_line(answer) if answer else "",
        "closed_after_s": round(waited, 1) if closed else None,
    }


def connections_from_one_address(endpoint: str, crowd: int, path: str) -> dict[str, Any]:
    """crowd silent connections from one address: how many the server refuses at once, and
    whether another address is still served meanwhile."""
    with contextlib.ExitStack() as held:
        socks = [held.enter_context(connect(endpoint)) for _ in range(crowd)]
        time.sleep(1.0)
        refused = 0  # answered (503) or closed by now; the others are still open
        for sock in socks:
            sock.settimeout(0.01)
            try:
                sock.recv(65536)
            except TimeoutError:
                continue
            except ConnectionResetError:
                pass
            refused += 1
        other = urlsplit(endpoint)
        served = ""
        with socket.create_connection((other.hostname, other.port), timeout=10, source_address=("127.0.0.2", 0)) as s:
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
            served = status_line(read_until_closed(s, 10)[0])
    return {"opened": crowd, "refused_at_once": refused, "other_address": served}


def pipelined(endpoint: str, path: str) -> dict[str, Any]:
    """Two requests in one write: two answers, in order."""
    with connect(endpoint) as sock:
        one = f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
        sock.sendall(one + one.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n"))
        answer, _, _ = read_until_closed(sock, 10)
    return {"answers": answer.count(b"HTTP/1.1 ")}


def expect_continue(endpoint: str, path: str) -> dict[str, Any]:
    """A PUT that waits for 100 Continue before its body."""
    with connect(endpoint) as sock:
        sock.sendall(f"PUT {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n".encode())
        sock.settimeout(3)
        try:
            interim = sock.recv(65536)
        except TimeoutError:
            interim = b""
    return {"interim": status_line(interim) if interim else "(none in 3 s)"}


def _one_answer(sock: socket.socket) -> bytes:
    received = b""
    while b"\r\n\r\n" not in received:
        chunk = sock.recv(65536)
        if not chunk:
            return received
        received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    length = next(
        (int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")),
        0,
    )
    while len(body) < length and (chunk := sock.recv(65536)):
        body += chunk
    return head + b"\r\n\r\n" + body


def body_overrun(endpoint: str, put_url: str, exists: Callable[[], bool]) -> dict[str, Any]:
    """A PUT whose bytes run past its Content-Length (not a valid next request): S3 stores nothing."""
    target = urlsplit(put_url)
    with connect(endpoint) as sock:
        head = f"PUT {target.path}?{target.query} HTTP/1.1\r\nHost: {target.netloc}\r\nContent-Length: 4\r\n\r\n"
        sock.sendall(head.encode() + b"abcdTHIS IS NOT HTTP\r\n\r\n")
        answer, _, _ = read_until_closed(sock, 10)
    return {"answer": status_line(answer), "body": refusal_format(answer), "stored": exists()}


def half_closed_body(endpoint: str, put_url: str, exists: Callable[[], bool]) -> dict[str, Any]:
    """A PUT whose client half-closes after 100 of its 4,096 bytes: S3 stores nothing."""
    target = urlsplit(put_url)
    with connect(endpoint) as sock:
        head = f"PUT {target.path}?{target.query} HTTP/1.1\r\nHost: {target.netloc}\r\nContent-Length: 4096\r\n\r\n"
        sock.sendall(head.encode() + b"x" * 100)
        sock.shutdown(socket.SHUT_WR)
        answer, _, _ = read_until_closed(sock, 10)
    return {"answer": status_line(answer), "body": refusal_format(answer), "stored": exists()}


def probe(endpoint: str, path: str, put_path: str, timeout_s: float, crowd: int) -> dict[str, dict[str, Any]]:
    """Every app-independent probe against the server at endpoint; path answers GET with 200,
    put_path takes a PUT. timeout_s: the head and idle timeouts the server was given."""
    limit = timeout_s + 5
    return {
        "huge_head": huge_head(endpoint),
        "long_header_line": long_header_line(endpoint),
        "silent_connection": silent_connection(endpoint, limit),
        "slow_head": slow_head(endpoint, limit),
        "kept_alive_idle": kept_alive_idle(endpoint, path, limit),
        "connections_from_one_address": connections_from_one_address(endpoint, crowd, path),
        "pipelined": pipelined(endpoint, path),
        "expect_continue": expect_continue(endpoint, put_path),
    }
