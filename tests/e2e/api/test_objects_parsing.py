"""The pieces of the objects endpoints that parse what clients send, on their own: Range headers,
multipart/form-data split anywhere across chunks, the upload size limit while streaming, and
lakeFS's metadata headers, what content types and metadata may be stored, and the pace and
length of upload bodies."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import urllib3
from starlette.datastructures import Headers
from starlette.requests import Request

from edge.api.backend import UploadLimits
from edge.api.errors import ApiError
from edge.api.objects.body import MultipartContent, RawBody, RawChunks, multipart_boundary
from edge.api.objects.write import header_metadata
from edge.core.object_reads import RangeNotSatisfiable, parse_byte_range
from silt.objects import content_type_problem, user_metadata_problem


@pytest.mark.parametrize(
    ("header", "size", "expected"),
    [
        ("bytes=0-9", 100, (0, 9)),
        ("bytes=90-200", 100, (90, 99)),
        ("bytes=95-", 100, (95, 99)),
        ("bytes=-10", 100, (90, 99)),
        ("bytes=-500", 100, (0, 99)),
        ("bytes=0-17", 9, (0, 8)),
    ],
)
def test_satisfiable_ranges(header: str, size: int, expected: tuple[int, int]) -> None:
    assert parse_byte_range(header, size) == expected


@pytest.mark.parametrize(
    "header",
    [
        "bytes=100-",
        "bytes=100-200",
        "bytes=5-1",
        "bytes=-0",
        "bytes=-",
        "bytes=0-1,5-6",
        "items=0-1",
        "bytes=٣-4",
        "bytes=+1-2",
    ],
)
def test_unsatisfiable_ranges(header: str) -> None:
    with pytest.raises(RangeNotSatisfiable):
        parse_byte_range(header, 100)


def test_an_empty_object_has_no_range() -> None:
    with pytest.raises(RangeNotSatisfiable):
        parse_byte_range("bytes=0-", 0)


PACE = UploadLimits()


def _request(chunks: list[bytes], headers: dict[str, str], delay: float = 0.0) -> Request:
    messages = [{"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)]

    async def receive() -> dict[str, Any]:
        await asyncio.sleep(delay)
        return messages.pop(0)

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/",
        "query_string": b"",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
    }
    return Request(scope, receive)


async def _read_all(source: Any, n: int) -> bytes:
    out = b""
    while data := await source.read(n):
        assert len(data) <= n
        out += data
    return out


@pytest.mark.parametrize("piece", [1, 7, 64, 100_000])
def test_multipart_content_split_anywhere(piece: int) -> None:
    content = bytes(range(256)) * 40
    fields: list[tuple[str, str | tuple[str, bytes, str]]] = [
        ("before", "x" * 300),
        ("content", ("data.bin", content, "application/x-test")),
        ("after", "ignored"),
    ]
    body, content_type = urllib3.encode_multipart_formdata(fields)
    chunks = [body[i : i + piece] for i in range(0, len(body), piece)]
    boundary = multipart_boundary(content_type)
    assert boundary is not None

    async def run() -> tuple[bytes, str]:
        form = MultipartContent(RawChunks(_request(chunks, {}), 1 << 20, PACE), boundary)
        await form.start()
        return await _read_all(form, 1000), form.content_type

    assert asyncio.run(run()) == (content, "application/x-test")


def test_streamed_body_over_the_limit() -> None:
    async def run() -> None:
        chunks = RawChunks(_request([b"a" * 600, b"b" * 600], {}), 1000, PACE)  # no Content-Length: chunked
        await _read_all(RawBody(chunks), 256)

    with pytest.raises(ApiError) as refused:
        asyncio.run(run())
    assert refused.value.status == 413


def test_declared_body_over_the_limit() -> None:
    with pytest.raises(ApiError) as refused:
        RawChunks(_request([b""], {"Content-Length": "1001"}), 1000, PACE)
    assert refused.value.status == 413


@pytest.mark.parametrize(
    ("pace", "message"),
    [
        # Idle longer than allowed between two chunks.
        (UploadLimits(idle_seconds=0.05, grace_seconds=10), "request body stalled: nothing received for 0.05 seconds"),
        # Chunks keep coming, but slower on average than the least rate once the grace is over.
        (
            UploadLimits(min_bytes_per_second=1000, grace_seconds=0.1),
            "request body too slow: under 1000 bytes a second",
        ),
    ],
)
def test_slow_bodies_are_ended(pace: UploadLimits, message: str) -> None:
    async def run() -> None:
        chunks = RawChunks(_request([b"a"] * 20, {}, delay=0.1), 1000, pace)
        await _read_all(RawBody(chunks), 256)

    with pytest.raises(ApiError) as refused:
        asyncio.run(run())
    assert (refused.value.status, refused.value.message) == (408, message)


def test_body_shorter_than_declared() -> None:
    async def run() -> bytes:
        chunks = RawChunks(_request([b"a" * 10, b"b" * 5], {"Content-Length": str(length)}), 1000, PACE)
        return await _read_all(RawBody(chunks), 256)

    length = 15
    assert asyncio.run(run()) == b"a" * 10 + b"b" * 5
    length = 16
    with pytest.raises(ApiError) as refused:
        asyncio.run(run())
    assert refused.value.status == 400 and "ended after 15 bytes of the 16" in refused.value.message


def test_multipart_needs_a_usable_boundary() -> None:
    assert multipart_boundary("application/octet-stream") is None
    for bad in ("multipart/form-data", "multipart/form-data; boundary=" + "b" * 71):
        with pytest.raises(ApiError):
            multipart_boundary(bad)


def test_lakefs_metadata_headers() -> None:
    headers = Headers({"X-Lakefs-Meta-Owner_Team": "a", "x-lakefs-meta-k": "b", "X-Amz-Meta-No": "c"})
    assert header_metadata(headers) == {"owner_team": "a", "k": "b"}
    with pytest.raises(ApiError):
        header_metadata(Headers({"X-Lakefs-Meta-Big": "v" * 3000}))
    # Header names are tokens already; values arrive as latin-1, obs-text included.
    assert header_metadata(Headers({"X-Lakefs-Meta-K": "caf\xe9"})) == {"k": "caf\xe9"}


@pytest.mark.parametrize(
    ("metadata", "valid"),
    [
        ({"Team_1": "a b\tc", "x.y~z": "caf\xe9"}, True),
        ({"": "v"}, False),
        ({"a b": "v"}, False),
        ({"a:b": "v"}, False),
        ({"a\r\nSet-Cookie: x": "v"}, False),
        ({"k": "x\ny"}, False),
        ({"k": "\x00"}, False),
        ({"k": "\x7f"}, False),
        ({"k": "\u65e5"}, False),  # outside latin-1: no header can carry it
    ],
)
def test_user_metadata_must_be_headers(metadata: dict[str, str], valid: bool) -> None:
    assert (user_metadata_problem(metadata) is None) == valid


@pytest.mark.parametrize(
    ("content_type", "valid"),
    [
        ("text/csv", True),
        ("text/plain; charset=utf-8", True),
        ("application/vnd.api+json", True),
        ("text", False),
        ("/x", False),
        ("a b/c", False),
        ("text/html\nX-Injected: yes", False),
        ("text/plain; q=\x01", False),
        ("text/plain; q=\xe9", False),
        ("a/" + "b" * 254, False),
    ],
)
def test_content_type_must_be_a_media_type(content_type: str, valid: bool) -> None:
    assert (content_type_problem(content_type) is None) == valid
