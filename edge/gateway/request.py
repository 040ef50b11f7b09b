"""One S3 request as the operations see it, built from the ASGI scope, and its streamed body."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote_to_bytes

from edge.core.request_body import BodyEnd, body_end
from edge.gateway.errors import S3Error
from silt.source_address import asgi_client_address

Receive = Callable[[], Awaitable[dict[str, Any]]]


@dataclass
class _BodyIdleTimeout:
    seconds: float = 60.0


# Set per process from gateways.s3.body_idle_timeout_seconds (edge/gateway/server.py).
BODY_IDLE_TIMEOUT = _BodyIdleTimeout()


class Body:
    """The request body as it arrives: read in pieces, never collected whole unless asked.
    `end` is what the connection saw of it (edge/core/request_body.py)."""

    def __init__(self, receive: Receive, end: BodyEnd | None = None) -> None:
        self._receive = receive
        self._end = end or BodyEnd()
        self._buffer = bytearray()
        self._done = False
        self.received = 0  # bytes that arrived so far (for metrics and the access log)

    async def _more(self) -> bool:
        if self._done:
            return False
        try:
            # A client that stops sending mid-body must not hold the request (and its
            # connection) forever.
            async with asyncio.timeout(BODY_IDLE_TIMEOUT.seconds):
                message = await self._receive()
        except TimeoutError:
            raise S3Error("RequestTimeout", "no body bytes arrived within the idle timeout") from None
        if message["type"] == "http.disconnect":
            raise S3Error("IncompleteBody", "the client went away before sending the whole body")
        chunk = message.get("body", b"")
        self.received += len(chunk)
        self._buffer += chunk
        self._done = not message.get("more_body", False)
        if self._done and self._end.overrun:
            raise S3Error("IncompleteBody", "the body is longer than its Content-Length")
        return True

    @property
    def overrun(self) -> bool:
        """The client sent bytes past the end of this body (see edge/gateway/protocol.py)."""
        return self._end.overrun

    @property
    def finished(self) -> bool:
        return self._done and not self._buffer

    async def read(self, n: int) -> bytes:
        """Up to n bytes; fewer only at the end of the body, b"" after it."""
        while len(self._buffer) < n and await self._more():
            pass
        # One copy out of the buffer (a slice of a bytearray would be a second one).
        with memoryview(self._buffer) as view:
            data = bytes(view[:n])
        del self._buffer[:n]
        return data

    async def readline(self, limit: int = 8192) -> bytes:
        """Bytes up to and including the next CRLF (or the end of the body)."""
        while True:
            end = self._buffer.find(b"\r\n")
            if end > limit:
                raise S3Error("InvalidRequest", "malformed chunked body: a chunk header is too long")
            if end >= 0:
                return await self.read(end + 2)
            if len(self._buffer) > limit:
                raise S3Error("InvalidRequest", "malformed chunked body: a chunk header is too long")
            if not await self._more():
                return await self.read(len(self._buffer))

    async def read_all(self, limit: int = 4 * 1024 * 1024) -> bytes:
        """The whole body, for the small XML documents some operations take."""
        out = bytearray()
        while chunk := await self.read(64 * 1024):
            out += chunk
            if len(out) > limit:
                raise S3Error("MalformedXML", "the request body is too large")
        return bytes(out)


@dataclass
class Request:
    method: str
    raw_path: str  # percent-encoded, as the client sent it (signatures cover this form)
    query_string: str
    query: list[tuple[str, str]]  # decoded, in the order sent
    headers: dict[str, str]  # lower-case names; repeated headers joined with ","
    host: str
    body: Body
    request_id: str = field(default_factory=lambda: secrets.token_hex(8).upper())
    bucket: str = ""
    path: str = ""  # the decoded object path after the bucket: "<ref>/<key>"
    virtual_host: bool = False
    # A query that could not be decoded: raised by routing, inside the handler's error path,
    # so that the client gets an S3 error with a request id rather than a broken connection.
    malformed_query: S3Error | None = None
    # Header names the client sent more than once (their values are joined in `headers`).
    repeated: frozenset[str] = frozenset()
    # The client's address (silt/source_address.py; "" unknown), for policy conditions.
    source_ip: str = ""

    def arg(self, name: str, default: str | None = None) -> str | None:
        for key, value in self.query:
            if key == name:
                return value
        return default

    def has(self, name: str) -> bool:
        return any(key == name for key, _ in self.query)

    @property
    def resource(self) -> str:
        return "/" + self.bucket + ("/" + self.path if self.path else "") if self.bucket else "/"


# Past any size, count or position Silt handles: a longer digit string means the same.
DECIMAL_CAP = 1 << 62


def decimal(text: str) -> int | None:
    """A non-negative integer written in ASCII digits, capped at DECIMAL_CAP; None for anything else.

    Client text must not reach int() on the strength of str.isdigit(): that also takes "²"
    (which int() refuses) and "٣" (which int() reads as 3), and int() refuses more than 4,300
    digits. Each is a ValueError, a 500, where S3 answers a 4xx.
    """
    if not text or not text.isascii() or not text.isdigit():
        return None
    significant = text.lstrip("0") or "0"
    return DECIMAL_CAP if len(significant) > 18 else int(significant)


def decode_component(text: str) -> str:
    """Percent-decode a path or query component that must be UTF-8, refusing anything else.

    Never substitutes U+FFFD: two different invalid byte strings would then name the same key.
    The text arrives as latin-1 (one char per raw byte), so it is turned back into those bytes
    before decoding.
    """
    if "%" not in text and text.isascii():
        return text  # no escape, and ASCII is its own UTF-8: decoding would give it back
    try:
        raw = text.encode("latin-1")
    except UnicodeEncodeError:
        raw = text.encode("utf-8", "surrogatepass")
    try:
        return unquote_to_bytes(raw).decode("utf-8")
    except UnicodeDecodeError:
        raise S3Error("InvalidURI", "the request's path or query is not valid UTF-8") from None


def parse_query(query_string: str) -> list[tuple[str, str]]:
    pairs = []
    for part in query_string.split("&"):
        if not part:
            continue
        key, _, value = part.partition("=")
        pairs.append((decode_component(key), decode_component(value)))
    return pairs


def from_scope(scope: dict[str, Any], receive: Receive) -> Request:
    headers: dict[str, str] = {}
    repeated: set[str] = set()
    for raw_name, raw_value in scope["headers"]:
        name = raw_name.decode("latin-1").lower()
        value = raw_value.decode("latin-1")
        if name in headers:
            repeated.add(name)
            headers[name] = f"{headers[name]},{value}"
        else:
            headers[name] = value
    raw_path = (scope.get("raw_path") or scope["path"].encode()).decode("latin-1").split("?", 1)[0]
    query_string = scope.get("query_string", b"").decode("latin-1")
    malformed_query = None
    try:
        query = parse_query(query_string)
    except S3Error as exc:
        query, malformed_query = [], exc
    return Request(
        method=scope["method"],
        raw_path=raw_path,
        query_string=query_string,
        query=query,
        malformed_query=malformed_query,
        headers=headers,
        repeated=frozenset(repeated),
        host=headers.get("host", ""),
        body=Body(receive, body_end(scope)),
        source_ip=asgi_client_address(scope),
    )
