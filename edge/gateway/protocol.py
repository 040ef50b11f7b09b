"""uvicorn's httptools protocol with the limits an Internet-facing S3 endpoint needs.

httptools buffers a request line or header of any length, and uvicorn waits forever for a
client that opens a connection and sends nothing: one unauthenticated client could stall the
event loop with a 128 MiB header or exhaust file descriptors with idle sockets. This protocol
counts the bytes of each request head *before* the parser buffers them, times the head out,
closes connections that stay silent (new, or kept alive after an answer), and caps the number
of open connections, in all and per client address, so that one client cannot take the
connections every other client needs. Refusals are S3 XML errors, then the connection closes.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from dataclasses import dataclass
from typing import Any

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from edge.core.asgi import is_api_path
from edge.core.request_body import BodyEnd, track_body
from edge.gateway.coalescing import CoalescingTransport
from edge.gateway.errors import S3Error, error_body
from silt.rpc.limits import peer_address


@dataclass
class ConnectionLimits:
    max_head_bytes: int = 64 * 1024  # request line plus all headers
    max_header_bytes: int = 8 * 1024  # one header line (S3's own limit)
    head_timeout_s: float = 20.0  # from connection (or request start) to the end of the head
    max_connections: int = 4096
    max_connections_per_client: int = 512  # 0: no cap per client
    idle_timeout_s: float = 15.0  # no byte of a request yet, on a new or a kept-alive connection


LIMITS = ConnectionLimits()
# Open connections of this process per client (see client_of); only those counted are here.
_PER_CLIENT: dict[str, int] = {}


def configure(limits: ConnectionLimits) -> None:
    """Set the limits for every connection of this process (the main one and each worker)."""
    global LIMITS
    LIMITS = limits


def client_of(client: tuple[str, int] | None) -> str:
    """Whom a connection counts against: its address without the port (one machine opens
    connections from as many ports as it likes), an IPv6 address as its /64, the rule the gRPC
    servers apply to their peers (silt/rpc/limits.py)."""
    if client is None:
        return "unix"
    host, port = client[0], client[1]
    return peer_address(f"ipv6:[{host}]:{port}" if ":" in host else f"ipv4:{host}:{port}")


def open_connections(client: str) -> int:
    return _PER_CLIENT.get(client, 0)


class _HeaderTooLarge(Exception):
    pass


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        # An answer's head and body leave as one write (coalescing.py).
        self._coalescing = CoalescingTransport(transport, self.loop)
        super().connection_made(self._coalescing)  # type: ignore[arg-type]
        self._head_bytes = 0
        self._in_head = True
        self._header_too_large = False
        self._head_timer: asyncio.TimerHandle | None = None
        self._idle_timer: asyncio.TimerHandle | None = None
        self._counted_as: str | None = None
        # The current request's, from its head on (edge/core/request_body.py).
        self._body_end: BodyEnd | None = None
        # A refusal of bytes that followed complete requests, sent once those are answered.
        self._refusal_in_turn: S3Error | None = None
        # uvicorn's own keep-alive timer closes a connection idle after an answer.
        self.timeout_keep_alive = LIMITS.idle_timeout_s  # type: ignore[assignment]
        if len(self.connections) > LIMITS.max_connections:
            self._refuse(S3Error("SlowDown", "too many open connections; retry later"), status=503)
            return
        client = client_of(self.client)
        if LIMITS.max_connections_per_client and open_connections(client) >= LIMITS.max_connections_per_client:
            self._refuse(S3Error("SlowDown", "too many open connections from this address; retry later"), status=503)
            return
        _PER_CLIENT[client] = open_connections(client) + 1
        self._counted_as = client
        self._arm_head_timer()
        self._idle_timer = self.loop.call_later(LIMITS.idle_timeout_s, self._idle_timed_out)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_timer()
        self._disarm_idle_timer()
        if self._counted_as is not None:
            left = open_connections(self._counted_as) - 1
            if left > 0:
                _PER_CLIENT[self._counted_as] = left
            else:
                # Dropped at zero, so that the table holds only clients with open connections.
                _PER_CLIENT.pop(self._counted_as, None)
            self._counted_as = None
        super().connection_lost(exc)

    def eof_received(self) -> bool | None:  # type: ignore[override]
        """A client that half-closes mid-body sent fewer bytes than its Content-Length: the
        body ends there, the operation answers IncompleteBody over the still-open write side,
        and the connection closes after that answer. Otherwise the transport closes as usual,
        after sending what was written before the end arrived: a client's end after a whole
        request is taken as its going away (a live feed's reader closing it), as uvicorn takes
        it, so an answer not written yet is not sent."""
        self._coalescing.flush()  # what a transport that closes itself must still send
        cycle = self.cycle
        if cycle is None or self._in_head or cycle.response_complete or not cycle.more_body:
            return None
        cycle.more_body = False
        cycle.keep_alive = False
        if self._body_end is not None:
            self._body_end.cut = True  # for a body with no Content-Length (chunked), the only sign
        cycle.message_event.set()
        return True

    def data_received(self, data: bytes) -> None:
        if self._refusal_in_turn is not None:
            return  # the parser has failed: nothing more is read, the refusal ends the connection
        self._disarm_idle_timer()  # from now on the head timer (and the body's own) apply
        if not self._in_head:
            # A body may be followed by a pipelined request the parser refuses: through _feed,
            # so that the refusal is an S3 error too (uvicorn's own is plain text).
            self._feed(data)
            return
        # Feed at most what the head may still take; if the head is still incomplete after
        # that, it is too large, whatever else the client has sent.
        room = LIMITS.max_head_bytes - self._head_bytes
        first, rest = data[:room], data[room:]
        self._head_bytes += len(first)
        if not self._feed(first):
            return
        if self._in_head and (rest or self._head_bytes >= LIMITS.max_head_bytes):
            self._refuse_in_turn(S3Error("RequestHeaderSectionTooLarge"))
            return
        if rest:
            self._feed(rest)

    def _feed(self, data: bytes) -> bool:
        """uvicorn's data_received, but a refusal is an S3 XML error, not a plain-text 400."""
        self._unset_keepalive_if_required()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._unsupported_upgrade_warning()  # S3 has no protocol upgrades
        except httptools.HttpParserError:
            # A callback's exception reaches here wrapped by httptools: tell ours by the flag.
            if self._header_too_large:
                self._refuse_in_turn(S3Error("RequestHeaderSectionTooLarge"))
            elif self._body_overrun():
                self._refuse(S3Error("IncompleteBody", "the body is longer than its Content-Length"))
            else:
                self._refuse_in_turn(S3Error("InvalidRequest"))
            return False
        return not self.transport.is_closing()

    def _refuse_in_turn(self, error: S3Error) -> None:
        """Refuse what the client sent after its complete requests only once those are answered:
        HTTP answers pipelined requests in order, so the refusal must not be read as the answer
        to a request that was whole (one sent with Content-Length 0 and then more bytes, say,
        which S3 answers and only then refuses the rest). Nothing more is read meanwhile."""
        cycle = self.cycle
        # A request whose body is still arriving is the one refused (its body is what broke).
        answering = cycle is not None and not cycle.response_complete and not cycle.more_body
        if not answering and not self.pipeline:
            self._refuse(error)
            return
        self._refusal_in_turn = error
        self.flow.pause_reading()

    def on_response_complete(self) -> None:
        if self._refusal_in_turn is None or self.pipeline:
            super().on_response_complete()
            return
        self.server_state.total_requests += 1
        error, self._refusal_in_turn = self._refusal_in_turn, None
        self._refuse(error)

    def _body_overrun(self) -> bool:
        """Bytes that are not HTTP arrived right after a body, before it was answered: the
        client sent more than its Content-Length. The request must not take effect either:
        its body reports the overrun when the operation reaches its end (request.Body)."""
        cycle = self.cycle
        if cycle is None or cycle.response_complete or cycle.more_body:
            return False
        if self._body_end is None or not self._body_end.declared:
            return False
        self._body_end.overrun = True
        return True

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._disarm_head_timer()
        declared = any(name.lower() == b"content-length" and value.strip() != b"0" for name, value in self.headers)
        self._body_end = track_body(self.scope, declared)  # type: ignore[arg-type]
        super().on_headers_complete()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._head_timer is None:  # a following request on a kept-alive connection
            self._arm_head_timer()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        # Whatever the client sends next is the head of its next request: counted again.
        self._in_head = True
        self._head_bytes = 0

    def on_url(self, url: bytes) -> None:
        if len(self.url) + len(url) > LIMITS.max_header_bytes:
            self._header_too_large = True
            raise _HeaderTooLarge
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        if len(name) + len(value) > LIMITS.max_header_bytes:
            self._header_too_large = True
            raise _HeaderTooLarge
        super().on_header(name, value)

    def _arm_head_timer(self) -> None:
        self._disarm_head_timer()
        self._head_timer = self.loop.call_later(LIMITS.head_timeout_s, self._head_timed_out)

    def _disarm_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _disarm_idle_timer(self) -> None:
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None

    def _idle_timed_out(self) -> None:
        """Closed without an answer, as after a kept-alive connection's idle time: a client
        that has not sent a request must not read an answer as the answer to its next one."""
        self._idle_timer = None
        if not self.transport.is_closing():
            self._disarm_head_timer()
            self.transport.close()

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self._in_head and not self.transport.is_closing():
            self._refuse(S3Error("RequestTimeout"))

    def _refuse(self, error: S3Error, status: int | None = None) -> None:
        """Answer with an error and close; nothing of the request reaches the app. The error is
        S3 XML, or lakeFS's JSON `{"message"}` when the request line named the REST API."""
        code = status or error.status
        if self._for_rest_api():
            body = json.dumps({"message": error.message or error.code}).encode()
            content_type = "application/json"
        else:
            body = error_body(error, "", secrets.token_hex(8).upper())
            content_type = "application/xml"
        head = (
            f"HTTP/1.1 {code} {_REASONS.get(code, 'Error')}\r\n"
            f"content-type: {content_type}\r\n"
            f"content-length: {len(body)}\r\n"
            "connection: close\r\n\r\n"
        ).encode()
        self._in_head = False
        self._disarm_head_timer()
        if not self.transport.is_closing():
            self.transport.write(head + body)
            self.transport.close()

    def _for_rest_api(self) -> bool:
        # uvicorn keeps the request target read so far in `url` (empty before the first byte).
        target = bytes(getattr(self, "url", b"") or b"").split(b"?", 1)[0]
        return is_api_path(target.decode("latin-1"))


_REASONS: dict[int, Any] = {400: "Bad Request", 503: "Service Unavailable"}
