"""One HTTP request through an ASGI app in the test's own process, with no server and no HTTP
client library: the answer's status, headers and body."""

from __future__ import annotations

import asyncio
from typing import Any

Answer = tuple[int, dict[str, str], bytes]


def http_scope(method: str, path: str, query: bytes, headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    """The scope of a plain HTTP/1.1 request to the test server."""
    return {
        "type": "http",
        "method": method,
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": query,
        "headers": headers,
        "scheme": "http",
        "server": ("test", 80),
        "client": ("test", 1),
        "http_version": "1.1",
    }


def asgi_answer(
    app: Any,
    path: str,
    query: bytes = b"",
    method: str = "GET",
    body: bytes = b"",
    headers: list[tuple[bytes, bytes]] | None = None,
) -> Answer:
    scope = http_scope(method, path, query, [(b"host", b"test")] if headers is None else headers)
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    answered = {k.decode(): v.decode() for k, v in start["headers"]}
    return start["status"], answered, b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
