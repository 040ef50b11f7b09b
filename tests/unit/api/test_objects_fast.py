"""Which requests the object fast path (edge/api/fast/objects.py) takes: exactly the plain
getObject, HEAD, uploadObject and listObjects, routed to the route function FastAPI itself would pick,
with the arguments FastAPI's own parameter reading gives, and nothing with a parameter the route does
not declare or a value it refuses. Whether both answer alike is
tests/e2e/api/test_objects_fast_path.py's; dependencies added to a route are
test_objects_fast_dependencies.py's."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import parse_qsl

import pytest
from fastapi import FastAPI
from fastapi.dependencies.utils import request_params_to_args
from fastapi.routing import iter_route_contexts
from starlette.datastructures import QueryParams

from edge.api.app import create_app
from edge.api.context import context
from edge.api.errors import ApiError
from edge.api.fast.objects import ObjectsFastPath
from edge.api.fast.table import Plan, query_pairs
from edge.api.paging import MAX_AFTER
from silt.config import Config
from tests.support.asgi import http_scope

REF = "/api/v1/repositories/repo-1/refs/main/objects"
BRANCH = "/api/v1/repositories/repo-1/branches/main/objects"
LIST = REF + "/ls"


def _scope(method: str, path: str, query: bytes = b"path=a/b.txt", **extra: Any) -> dict[str, Any]:
    return {**http_scope(method, path, query, []), **extra}


@pytest.fixture(scope="module")
def fast() -> ObjectsFastPath:
    middleware = create_app(Config()).app  # type: ignore[attr-defined]  # Observed wraps the fast path
    assert isinstance(middleware, ObjectsFastPath)
    assert middleware.table.declined == {}  # every hot route is the fast path's
    return middleware


def plain_request(fast: ObjectsFastPath, scope: dict[str, Any]) -> Plan | None:
    return fast.plan(scope)


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


def _fastapi_arguments(app: FastAPI, endpoint: str, path_params: dict[str, str], query: bytes) -> dict[str, Any]:
    """The path and query arguments FastAPI's own parameter reading gives the route function."""
    route = next(r for r in iter_route_contexts(app.router.routes) if getattr(r.endpoint, "__name__", None) == endpoint)
    path_values, path_errors = request_params_to_args(route.dependant.path_params, path_params)
    query_values, query_errors = request_params_to_args(route.dependant.query_params, QueryParams(query))
    assert not path_errors and not query_errors
    return {**path_values, **query_values}


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
        # Whatever the route's parameters accept is read as FastAPI reads it.
        ("GET", REF, b"path=x&presign=true", "get_object", {"path": "x", "presign": True}),
        ("GET", REF, b"path=x&presign=1", "get_object", {"path": "x", "presign": True}),
        ("POST", BRANCH, b"path=x&storageClass=STANDARD", "upload_object", {"path": "x", "storage_class": "STANDARD"}),
        ("POST", BRANCH, b"path=x&force=yes", "upload_object", {"path": "x", "force": True}),
        ("GET", LIST, b"presign=true", "list_objects", {"presign": True}),
        ("GET", LIST, b"amount=+5", "list_objects", {"amount": 5}),
        ("GET", LIST, b"amount=05", "list_objects", {"amount": 5}),
        ("GET", LIST, b"user_metadata=1", "list_objects", {"user_metadata": True}),
        ("GET", LIST, b"prefix=a+b%2Bc%zz&after=%E2%82%AC", "list_objects", {"prefix": "a b+c%zz", "after": "€"}),
    ],
)
def test_plain_requests_go_where_fastapi_sends_them(
    fast: ObjectsFastPath,
    fastapi_app: FastAPI,
    method: str,
    path: str,
    query: bytes,
    endpoint: str,
    arguments: dict[str, Any],
) -> None:
    plain = plain_request(fast, _scope(method, path, query))
    assert plain is not None
    assert plain.endpoint.__name__ == endpoint
    assert _routed_by_fastapi(fastapi_app, _scope(method, path, query)) == (endpoint, plain.path_params)
    expected = _fastapi_arguments(fastapi_app, endpoint, plain.path_params, query)
    assert plain.arguments == expected
    assert {name: expected[name] for name in arguments} == arguments


@pytest.mark.parametrize(
    ("method", "path", "query"),
    [
        ("GET", REF, b"path=x&presign=maybe"),
        ("GET", REF, b"path=x&path=y"),
        ("GET", REF, b"path=x&other=1"),
        ("HEAD", REF, b"path=x&presign=false"),
        ("POST", BRANCH, b"path=x&storageClass=" + b"S" * 65),
        ("POST", BRANCH, b"path=x&storage_class=STANDARD"),
        ("POST", BRANCH, b"path=x&force=perhaps"),
        ("GET", REF + "/", b"path=x"),
        ("GET", REF + "/stat", b"path=x"),
        ("GET", "/api/v1/repositories//refs/main/objects", b"path=x"),
        ("GET", "/api/v1/repositories/repo-1/refs//objects", b"path=x"),
        ("GET", BRANCH, b"path=x"),
        ("POST", REF, b"path=x"),
        ("DELETE", BRANCH, b"path=x"),
        ("PUT", BRANCH, b"path=x"),
        ("GET", LIST, b"path=x"),
        ("GET", LIST, b"amount=1001"),
        ("GET", LIST, b"amount=-2"),
        ("GET", LIST, b"amount=ten"),
        ("GET", LIST, b"amount="),
        ("GET", LIST, b"amount=1&amount=2"),
        ("GET", LIST, b"user_metadata=2"),
        ("GET", LIST, b"after=" + b"a" * (MAX_AFTER + 1)),
        ("GET", LIST, b"prefix=" + b"p" * 1025),
        ("GET", LIST, b"delimiter=" + b"/" * 1025),
        ("HEAD", LIST, b""),
        ("GET", LIST + "/", b""),
        ("GET", REF + "/lsx", b""),
        ("GET", "/api/v1/repositories/repo-1/branches/main/objects/ls", b""),
    ],
)
def test_anything_else_falls_through(fast: ObjectsFastPath, method: str, path: str, query: bytes) -> None:
    assert plain_request(fast, _scope(method, path, query)) is None


def test_a_root_path_falls_through(fast: ObjectsFastPath) -> None:
    assert plain_request(fast, _scope("GET", REF, root_path="/prefix")) is None


@pytest.mark.parametrize(
    "query",
    [
        b"",
        b"a=1",
        b"a=1&b=2&&c",
        b"&a&=x&b==y=",
        b"k%20ey=v%2Fal+ue&plus=a+b%2B",
        b"bad=%zz%4&trail=%",
        b"utf=%C3%BC%E6%95%B0&broken=%C3%28&raw=\xc3\xbc",
        b"a;b=c&d=e",
        b"+=+&%26=%3D",
    ],
)
def test_query_pairs_are_starlettes(query: bytes) -> None:
    assert query_pairs(query) == parse_qsl(query.decode("latin-1"), keep_blank_values=True)
    assert query_pairs(query) == QueryParams(query).multi_items()
