"""The bytes of an upload, streamed from the request to the block adapter, never held whole.

Two shapes arrive (lakeFS's uploadObject): a raw body (`application/octet-stream` or any other
type, often chunked with no Content-Length), and `multipart/form-data` whose part named
`content` is the object. Both are read chunk by chunk under one size limit and a least pace;
the edge's core streams them to the block adapter (edge/core/object_writes.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Protocol

from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.requests import ClientDisconnect, Request

from edge.api.backend import UploadLimits
from edge.api.errors import ApiError, bad_request
from edge.core.request_body import body_end

# S3's limit on one PUT: bigger objects go through S3 multipart uploads.
MAX_UPLOAD_BYTES = 5 * 1024**3
# A multipart/form-data part's headers: a few short lines each.
MAX_PART_HEADERS = 16
MAX_PART_HEADER_BYTES = 8 * 1024


def too_large(limit: int) -> ApiError:
    return ApiError(413, f"request body is larger than {limit} bytes")


class Source(Protocol):
    async def read(self, n: int) -> bytes:
        """Up to n bytes of the object; b"" at its end."""
        ...


class RawChunks:
    """The request body as it arrives, within the size limit and the upload's pace (idle time
    between chunks, least average rate; see UploadLimits). A body that ends short of its
    declared Content-Length is an error, never an object."""

    def __init__(self, request: Request, limit: int, pace: UploadLimits) -> None:
        header = request.headers.get("content-length")
        self.declared = int(header) if header is not None and header.isdigit() else None
        if self.declared is not None and self.declared > limit:
            raise too_large(limit)
        self._stream: AsyncIterator[bytes] = request.stream().__aiter__()
        # Marked by the connection protocol when the client half-closed inside the body.
        self._end = body_end(request.scope)
        self._limit = limit
        self._pace = pace
        self._started = time.monotonic()
        self.received = 0

    def _wait(self) -> tuple[float, bool]:
        """How long the next chunk may take, and whether the rate (not idleness) sets that."""
        pace = self._pace
        # The moment the average rate since the grace period falls under the least allowed.
        behind_at = self._started + pace.grace_seconds + self.received / pace.min_bytes_per_second
        by_rate = behind_at - time.monotonic()
        return (by_rate, True) if by_rate < pace.idle_seconds else (pace.idle_seconds, False)

    async def next(self) -> bytes | None:
        """The next chunk of the body, None at its end."""
        while True:
            wait, by_rate = self._wait()
            try:
                if wait <= 0:
                    raise TimeoutError
                chunk = await asyncio.wait_for(self._stream.__anext__(), wait)
            except StopAsyncIteration:
                self._check_complete()
                return None
            except ClientDisconnect:
                raise bad_request(self._short_message()) from None
            except TimeoutError:
                if by_rate:
                    rate = int(self._pace.min_bytes_per_second)
                    raise ApiError(408, f"request body too slow: under {rate} bytes a second") from None
                idle = self._pace.idle_seconds
                raise ApiError(408, f"request body stalled: nothing received for {idle:g} seconds") from None
            self.received += len(chunk)
            if self.received > self._limit:
                raise too_large(self._limit)
            if chunk:
                return chunk

    def _check_complete(self) -> None:
        if self._end.cut or (self.declared is not None and self.received != self.declared):
            raise bad_request(self._short_message())

    def _short_message(self) -> str:
        declared = "" if self.declared is None else f" of the {self.declared} its Content-Length declares"
        return f"incomplete body: the request ended after {self.received} bytes{declared}"


class RawBody:
    """A raw upload: the whole body is the object."""

    def __init__(self, chunks: RawChunks) -> None:
        self._chunks = chunks
        self._pending = b""
        self._ended = False

    async def read(self, n: int) -> bytes:
        while not self._pending and not self._ended:
            chunk = await self._chunks.next()
            if chunk is None:
                self._ended = True
            else:
                self._pending = chunk
        data, self._pending = self._pending[:n], self._pending[n:]
        return data


def multipart_boundary(content_type: str) -> bytes | None:
    """The boundary of a multipart/form-data body, None for any other type."""
    media_type, options = parse_options_header(content_type)
    if media_type.lower() != b"multipart/form-data":
        return None
    boundary = options.get(b"boundary")
    if not boundary or len(boundary) > 70:  # RFC 2046: 1 to 70 characters
        raise bad_request("multipart/form-data needs a boundary of 1 to 70 characters")
    return boundary


class MultipartContent:
    """The part named `content` of a multipart/form-data body, as it is parsed. Other parts
    are skipped; once `content` ends, the rest of the body is not read (as lakeFS does)."""

    def __init__(self, chunks: RawChunks, boundary: bytes) -> None:
        self._chunks = chunks
        self._pending: list[bytes] = []
        self._in_content = False
        self._content_seen = False
        self._content_done = False
        self._ended = False
        self._header_field = b""
        self._header_value = b""
        self._headers: dict[bytes, bytes] = {}
        self._header_bytes = 0
        self.content_type = ""
        self._parser = MultipartParser(
            boundary,
            {
                "on_part_begin": self._part_begin,
                "on_header_field": self._header_field_data,
                "on_header_value": self._header_value_data,
                "on_header_end": self._header_end,
                "on_headers_finished": self._headers_finished,
                "on_part_data": self._part_data,
                "on_part_end": self._part_end,
            },
            max_header_count=MAX_PART_HEADERS,
            max_header_size=MAX_PART_HEADER_BYTES,
        )

    # --- parser callbacks (synchronous, inside parser.write) ------------------------------

    def _part_begin(self) -> None:
        self._headers = {}
        self._header_bytes = 0

    def _header_field_data(self, data: bytes, start: int, end: int) -> None:
        self._header_field += data[start:end]
        self._count_header(end - start)

    def _header_value_data(self, data: bytes, start: int, end: int) -> None:
        self._header_value += data[start:end]
        self._count_header(end - start)

    def _count_header(self, size: int) -> None:
        self._header_bytes += size
        if self._header_bytes > MAX_PART_HEADERS * MAX_PART_HEADER_BYTES:
            raise bad_request("the headers of a multipart/form-data part are too long")

    def _header_end(self) -> None:
        self._headers[self._header_field.strip().lower()] = self._header_value.strip()
        self._header_field = self._header_value = b""

    def _headers_finished(self) -> None:
        _, options = parse_options_header(self._headers.get(b"content-disposition", b""))
        if options.get(b"name") == b"content" and not self._content_seen:
            self._in_content = self._content_seen = True
            self.content_type = self._headers.get(b"content-type", b"").decode("latin-1")

    def _part_data(self, data: bytes, start: int, end: int) -> None:
        if self._in_content and end > start:
            self._pending.append(data[start:end])

    def _part_end(self) -> None:
        if self._in_content:
            self._in_content = False
            self._content_done = True

    # --- the object's bytes ---------------------------------------------------------------

    async def start(self) -> None:
        """Read until the `content` part's headers are parsed (its content type is then known)."""
        while not self._content_seen and not self._ended:
            await self._feed()
        if not self._content_seen:
            raise bad_request("multipart/form-data body has no part named 'content'")

    async def _feed(self) -> None:
        chunk = await self._chunks.next()
        try:
            if chunk is None:
                self._ended = True
                self._parser.finalize()
            else:
                self._parser.write(chunk)
        except MultipartParseError as exc:
            raise bad_request(f"malformed multipart/form-data body: {exc}") from None
        if self._ended and self._content_seen and not self._content_done:
            raise bad_request("malformed multipart/form-data body: it ends inside the 'content' part")

    async def read(self, n: int) -> bytes:
        while not self._pending and not self._content_done and not self._ended:
            await self._feed()
        if not self._pending:
            return b""
        first = self._pending[0]
        if len(first) <= n:
            self._pending.pop(0)
            return first
        self._pending[0] = first[n:]
        return first[:n]
