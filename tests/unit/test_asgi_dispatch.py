"""edge/core/asgi.py: which app a request goes to, and lifespans run for every app."""

from __future__ import annotations

import asyncio
from collections.abc import MutableMapping
from typing import Any

import pytest

from edge.api.iceberg.app import relative_path
from edge.core.asgi import Dispatcher, is_browser_root, is_s3_request


def _scope(path: str, headers: list[tuple[bytes, bytes]] | None = None, query: bytes = b"") -> dict[str, Any]:
    return {"type": "http", "path": path, "headers": headers or [], "query_string": query}


@pytest.mark.parametrize(
    ("scope", "s3"),
    [
        (_scope("/api/v1/repositories", [(b"authorization", b"AWS4-HMAC-SHA256 Credential=x")]), True),
        (_scope("/api/v1/repositories", [(b"authorization", b"AWS key:sig")]), True),
        (_scope("/api/v1/x", query=b"X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=1"), True),
        (_scope("/api/v1/x", query=b"AWSAccessKeyId=a&Signature=b&Expires=1"), True),
        (_scope("/api/v1/repositories", [(b"authorization", b"Basic YTpi")]), False),
        (_scope("/api/v1/repositories", [(b"authorization", b"Bearer t")]), False),
        (_scope("/api/v1/x", query=b"amount=5&after=X-Amz-Algorithm"), False),
    ],
)
def test_an_aws_signature_makes_a_request_s3(scope: dict[str, Any], s3: bool) -> None:
    assert is_s3_request(scope) is s3


class _Recorder:
    def __init__(self, name: str, events: list[str]) -> None:
        self.name = name
        self.events = events

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                self.events.append(f"{self.name} {message['type']}")
                await send({"type": message["type"] + ".complete"})
                if message["type"] == "lifespan.shutdown":
                    return
        self.events.append(f"{self.name} {scope['path']}")


def test_requests_are_routed_and_both_lifespans_run() -> None:
    events: list[str] = []
    dispatcher = Dispatcher(_Recorder("s3", events), _Recorder("api", events))

    async def run() -> list[str]:
        inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        sent: list[str] = []
        started = asyncio.Event()

        async def send(message: MutableMapping[str, Any]) -> None:
            sent.append(message["type"])
            started.set()

        lifespan = asyncio.create_task(dispatcher({"type": "lifespan"}, inbox.get, send))
        await inbox.put({"type": "lifespan.startup"})
        await asyncio.wait_for(started.wait(), 5)
        for path in ("/api/v1/user", "/bucket/key", "/api/v10", "/api/v1"):
            await dispatcher(_scope(path), inbox.get, send)
        await inbox.put({"type": "lifespan.shutdown"})
        await asyncio.wait_for(lifespan, 5)
        return sent

    sent = asyncio.run(run())
    assert sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert events == [
        "s3 lifespan.startup",
        "api lifespan.startup",
        "api /api/v1/user",
        "s3 /bucket/key",
        "s3 /api/v10",
        "api /api/v1",
        "api lifespan.shutdown",
        "s3 lifespan.shutdown",
    ]


def _browser(
    path: str, method: str = "GET", accept: bytes = b"text/html,application/xhtml+xml,*/*;q=0.8"
) -> dict[str, Any]:
    return {**_scope(path, [(b"accept", accept)]), "method": method}


@pytest.mark.parametrize(
    ("scope", "browser"),
    [
        (_browser("/"), True),
        (_browser("/", method="HEAD"), True),
        (_browser("/", accept=b"*/*"), False),  # an S3 client's ListBuckets (if unsigned)
        (_browser("/", method="PUT"), False),
        (_browser("/bucket"), False),
        ({**_scope("/"), "method": "GET"}, False),
    ],
)
def test_a_browser_root_is_get_slash_asking_for_a_page(scope: dict[str, Any], browser: bool) -> None:
    assert is_browser_root(scope) is browser


def test_ui_paths_and_browser_root_go_to_the_ui_signed_requests_stay_s3() -> None:
    events: list[str] = []
    dispatcher = Dispatcher(_Recorder("s3", events), _Recorder("api", events), _Recorder("ui", events))
    signed = [(b"authorization", b"AWS4-HMAC-SHA256 Credential=x"), (b"accept", b"text/html")]
    scopes = [
        _browser("/ui/repositories/x"),
        _browser("/ui"),
        _browser("/"),
        {**_scope("/", signed), "method": "GET"},
        {**_scope("/ui/x", signed), "method": "GET"},
        _browser("/uix"),
        _browser("/bucket/ui/key"),
        _browser("/api/v1/user"),
    ]

    async def run() -> None:
        for scope in scopes:
            await dispatcher(scope, _never, _never)

    asyncio.run(run())
    assert events == [
        "ui /ui/repositories/x",
        "ui /ui",
        "ui /",
        "s3 /",
        "s3 /ui/x",
        "s3 /uix",
        "s3 /bucket/ui/key",
        "api /api/v1/user",
    ]


async def _never(*args: Any) -> Any:
    raise AssertionError("the recorder neither receives nor sends")


def _v4(service: str) -> list[tuple[bytes, bytes]]:
    credential = f"Credential=AKIAIOSFODNN7EXAMPLE/20250101/us-east-1/{service}/aws4_request"
    return [(b"authorization", f"AWS4-HMAC-SHA256 {credential}, SignedHeaders=host, Signature=00".encode())]


def test_the_iceberg_catalog_goes_to_the_api_unless_signed_for_s3() -> None:
    """Signed for S3 (a repository called `iceberg`), a request is the gateway's; signed for
    the catalog's service (execute-api), the catalog's, on its paths only."""
    events: list[str] = []
    dispatcher = Dispatcher(_Recorder("s3", events), _Recorder("api", events), _Recorder("ui", events))
    signed = [(b"authorization", b"AWS4-HMAC-SHA256 Credential=x")]
    scopes = [
        {**_scope("/iceberg/api/v1/config"), "method": "GET"},
        {**_scope("/iceberg/api/v1/config", signed), "method": "GET"},
        {**_scope("/iceberg/apix"), "method": "GET"},
        {**_scope("/iceberg/relative_to/r.main/api/v1/config"), "method": "GET"},
        {**_scope("/iceberg/api/v1/config", _v4("s3")), "method": "GET"},
        {**_scope("/iceberg/api/v1/namespaces", _v4("execute-api")), "method": "POST"},
        {**_scope("/iceberg/relative_to/r.main/api/v1/config", _v4("execute-api")), "method": "GET"},
        {**_scope("/repo/iceberg/api/v1/config", _v4("execute-api")), "method": "GET"},
        {**_scope("/iceberg/api/v1/config", _v4("execute-apix")), "method": "GET"},
    ]

    async def run() -> None:
        for scope in scopes:
            await dispatcher(scope, _never, _never)

    asyncio.run(run())
    assert events == [
        "api /iceberg/api/v1/config",
        "s3 /iceberg/api/v1/config",
        "s3 /iceberg/apix",
        "api /iceberg/relative_to/r.main/api/v1/config",
        "s3 /iceberg/api/v1/config",
        "api /iceberg/api/v1/namespaces",
        "api /iceberg/relative_to/r.main/api/v1/config",
        "s3 /repo/iceberg/api/v1/config",
        "s3 /iceberg/api/v1/config",
    ]


@pytest.mark.parametrize(
    ("path", "catalog_path"),
    [
        ("/iceberg/relative_to/repo.main/api/v1/config", "/iceberg/api/v1/config"),
        ("/iceberg/relative_to/repo.main/api/v1/oauth/tokens", "/iceberg/api/v1/oauth/tokens"),
        (
            "/iceberg/relative_to/repo.main/api/v1/namespaces/db/tables",
            "/iceberg/api/v1/repo.main/namespaces/db/tables",
        ),
        ("/iceberg/relative_to/repo.main/v1/config", None),
        ("/iceberg/api/v1/config", None),
    ],
)
def test_lakefs_relative_form_is_the_prefix_form(path: str, catalog_path: str | None) -> None:
    assert relative_path(path) == catalog_path
