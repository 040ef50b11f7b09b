"""Which requests the object fast path (edge/api/objects_fast.py) takes: exactly the plain
getObject, HEAD, uploadObject and listObjects, routed to the route function FastAPI itself would pick, and
nothing with a parameter it does not read. Whether both answer alike is
tests/integration/api/test_objects_fast_path.py's."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from fastapi import FastAPI

from edge.api.app import create_app
from edge.api.context import context
from edge.api.errors import ApiError
from edge.api.objects_fast import plain_request
from silt.config import Config

REF = "/api/v1/repositories/repo-1/refs/main/objects"
BRANCH = "/api/v1/repositories/repo-1/branches/main/objects"
LIST = REF + "/ls"


def _scope(method: str, path: str, query: bytes = b"path=a/b.txt", **extra: Any) -> dict[str, Any]:
    return {
        "type": "http",
        "method": method,
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": query,
        "headers": [],
        "scheme": "http",
        "server": ("test", 80),
        "client": ("test", 1),
        "http_version": "1.1",
        **extra,
    }


@pytest.fixture(scope="module")
def fastapi_app() -> FastAPI:
    app = create_app(Config(), fast_paths=False).app  # type: ignore[attr-defined]  # Observed wraps the FastAPI app
    assert isinstance(app, FastAPI)

    def stop() -> None:
        raise ApiError(418, "routed")  # the route is chosen; nothing else is needed of it

    app.dependency_overrides[context] = stop
    return app


def _routed_by_fastapi(app: FastAPI, scope: dict[str, Any]) -> tuple[str, dict[str, str]]:
    """The route function and path parameters FastAPI picks for the request."""

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Any) -> None:
        pass

    asyncio.run(app(scope, receive, send))
    return scope["endpoint"].__name__, scope["path_params"]


@pytest.mark.parametrize(
    ("method", "path", "query", "endpoint", "arguments"),
    [
        ("GET", REF, b"path=a/b.txt", "get_object", {"path": "a/b.txt"}),
        ("GET", REF, b"path=a%20b&presign=false", "get_object", {"path": "a b", "presign": False}),
        ("GET", REF, b"", "get_object", {}),  # the route itself says path is required
        ("GET", REF, b"path=", "get_object", {"path": ""}),
        ("HEAD", REF, b"path=x", "head_object", {"path": "x"}),
        ("POST", BRANCH, b"path=x", "upload_object", {"path": "x"}),
        ("POST", BRANCH, b"path=x&force=true", "upload_object", {"path": "x", "force": True}),
        ("POST", BRANCH, b"force=false&path=x", "upload_object", {"path": "x", "force": False}),
        ("GET", LIST, b"", "list_objects", {}),
        ("GET", LIST, b"amount=1000&after=a%2Fb", "list_objects", {"amount": 1000, "after": "a/b"}),
        (
            "GET",
            LIST,
            b"prefix=d%C3%BC/&delimiter=/&amount=-1&user_metadata=false&presign=false&after=",
            "list_objects",
            {"prefix": "dü/", "delimiter": "/", "amount": -1, "user_metadata": False, "presign": False, "after": ""},
        ),
        ("GET", LIST, b"amount=0&user_metadata=true", "list_objects", {"amount": 0, "user_metadata": True}),
        ("GET", LIST, b"prefix=" + b"p" * 1024, "list_objects", {"prefix": "p" * 1024}),
    ],
)
def test_plain_requests_go_where_fastapi_sends_them(
    fastapi_app: FastAPI, method: str, path: str, query: bytes, endpoint: str, arguments: dict[str, Any]
) -> None:
    plain = plain_request(_scope(method, path, query))
    assert plain is not None
    assert plain.endpoint.__name__ == endpoint
    assert plain.arguments == arguments
    assert _routed_by_fastapi(fastapi_app, _scope(method, path, query)) == (endpoint, plain.path_params)


@pytest.mark.parametrize(
    ("method", "path", "query"),
    [
        ("GET", REF, b"path=x&presign=true"),
        ("GET", REF, b"path=x&presign=1"),
        ("GET", REF, b"path=x&path=y"),
        ("GET", REF, b"path=x&other=1"),
        ("HEAD", REF, b"path=x&presign=false"),
        ("POST", BRANCH, b"path=x&storageClass=STANDARD"),
        ("POST", BRANCH, b"path=x&force=yes"),
        ("GET", REF + "/", b"path=x"),
        ("GET", REF + "/stat", b"path=x"),
        ("GET", "/api/v1/repositories//refs/main/objects", b"path=x"),
        ("GET", "/api/v1/repositories/repo-1/refs//objects", b"path=x"),
        ("GET", BRANCH, b"path=x"),
        ("POST", REF, b"path=x"),
        ("DELETE", BRANCH, b"path=x"),
        ("PUT", BRANCH, b"path=x"),
        ("GET", LIST, b"presign=true"),
        ("GET", LIST, b"path=x"),
        ("GET", LIST, b"amount=1001"),
        ("GET", LIST, b"amount=-2"),
        ("GET", LIST, b"amount=+5"),
        ("GET", LIST, b"amount=05"),
        ("GET", LIST, b"amount=ten"),
        ("GET", LIST, b"amount="),
        ("GET", LIST, b"amount=1&amount=2"),
        ("GET", LIST, b"user_metadata=1"),
        ("GET", LIST, b"after=" + b"a" * 1025),
        ("GET", LIST, b"prefix=" + b"p" * 1025),
        ("GET", LIST, b"delimiter=" + b"/" * 1025),
        ("HEAD", LIST, b""),
        ("GET", LIST + "/", b""),
        ("GET", REF + "/lsx", b""),
        ("GET", "/api/v1/repositories/repo-1/branches/main/objects/ls", b""),
    ],
)
def test_anything_else_falls_through(method: str, path: str, query: bytes) -> None:
    assert plain_request(_scope(method, path, query)) is None


def test_a_root_path_falls_through() -> None:
    assert plain_request(_scope("GET", REF, root_path="/prefix")) is None
