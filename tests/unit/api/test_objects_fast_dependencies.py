"""A dependency added to a hot object route is honoured by the fast path (edge/api/
fast/objects.py): the fast path runs it as FastAPI does, or, when it cannot, leaves the route to
FastAPI; either way the answer is FastAPI's own. Each test app serves routes/objects.py's routes
with one more dependency, and every request is answered twice: through the fast path and by the
FastAPI app alone."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from types import SimpleNamespace
from typing import Annotated, Any

import pytest
from fastapi import Depends, FastAPI, Header, Query
from starlette.exceptions import HTTPException
from starlette.requests import Request

from edge.api.error_responses import HANDLERS
from edge.api.errors import ApiError
from edge.api.fast.objects import ObjectsFastPath
from edge.api.routes import objects
from edge.core.asgi import API_PREFIX
from tests.support.asgi import Answer, asgi_answer

LIST = API_PREFIX + "/repositories/repo-1/refs/main/objects/ls"
GET = API_PREFIX + "/repositories/repo-1/refs/main/objects"


def _app(dependency: Callable[..., Any], level: str) -> FastAPI:
    """routes/objects.py's routes, as create_app serves them, with the dependency added at
    the router's level (every route) or to listObjects' own route."""
    app = FastAPI()
    if level == "router":
        app.include_router(objects.router, prefix=API_PREFIX, dependencies=[Depends(dependency)])
    else:
        app.router.add_api_route(
            LIST.replace("repo-1", "{repository}").replace("/main/", "/{ref}/"),
            objects.list_objects,
            methods=["GET"],
            dependencies=[Depends(dependency)],
        )
        app.include_router(objects.router, prefix=API_PREFIX)
    for kind, handler in HANDLERS.items():
        app.add_exception_handler(kind, handler)
    # A backend nothing is asked of: requests carry no credentials, so the route's own
    # dependency (authentication) refuses them with a 401 after the added one ran.
    app.state.backend = SimpleNamespace()
    return app


def _answer(app: Any, path: str, query: bytes = b"", method: str = "GET") -> Answer:
    return asgi_answer(app, path, query, method)


def _both(app: FastAPI, path: str, query: bytes = b"", method: str = "GET") -> Answer:
    """The request answered through the fast path and by FastAPI alone: the same answer."""
    fast = _answer(ObjectsFastPath(app), path, query, method)
    assert fast == _answer(app, path, query, method)
    return fast


# What the dependencies below saw, in order (module-level functions: their annotations are
# looked up in this module's globals).
RAN: list[str] = []


@pytest.fixture
def ran() -> Iterator[list[str]]:
    RAN.clear()
    yield RAN
    RAN.clear()


async def _record(request: Request) -> str:
    RAN.append(request.url.path)
    return "recorded"


async def _uses_record(first: Annotated[str, Depends(_record)], again: Annotated[str, Depends(_record)]) -> None:
    RAN.append(f"{first} {again}")


def _tenant(tenant: Annotated[str, Query(max_length=3)] = "all") -> None:
    RAN.append(tenant)
    raise ApiError(403, f"tenant {tenant} may not list")


@pytest.mark.parametrize("level", ["router", "route"])
@pytest.mark.parametrize("asynchronous", [True, False])
def test_a_dependency_that_refuses_is_honoured(level: str, asynchronous: bool) -> None:
    def refuse() -> None:
        raise HTTPException(418, "no listing today")

    async def refuse_async() -> None:
        refuse()

    app = _app(refuse_async if asynchronous else refuse, level)
    status, _, body = _both(app, LIST, b"prefix=a/&amount=10")
    assert (status, json.loads(body)) == (418, {"message": "no listing today"})
    # The fast path ran it itself: the request was the fast path's, not FastAPI's.
    assert ObjectsFastPath(app).table.declined == {}


def test_a_dependency_runs_once_in_fastapis_order(ran: list[str]) -> None:
    app = _app(_uses_record, "router")
    status, _, body = _both(app, LIST)
    # Cached per request, as FastAPI does; then the route's own dependency refuses the caller.
    assert ran == [LIST, "recorded recorded"] * 2
    assert status == 401 and b"missing credentials" in body


def test_a_dependencys_query_parameter_is_read_and_checked(ran: list[str]) -> None:
    app = _app(_tenant, "route")
    fast = ObjectsFastPath(app)
    assert fast.plan(_scope_of(LIST, b"tenant=abc")) is not None
    assert _both(app, LIST, b"tenant=abc")[0] == 403
    assert _both(app, LIST)[0] == 403
    assert ran == ["abc", "abc", "all", "all"]
    # A value the dependency's parameter refuses is FastAPI's to answer (which skips the
    # dependency and, before reporting the value, runs the route's own: no credentials).
    assert fast.plan(_scope_of(LIST, b"tenant=abcd")) is None
    assert _both(app, LIST, b"tenant=abcd")[0] == 401
    assert ran == ["abc", "abc", "all", "all"]


def _scope_of(path: str, query: bytes) -> dict[str, Any]:
    return {"type": "http", "method": "GET", "path": path, "root_path": "", "query_string": query}


def _yields() -> Iterator[None]:
    yield


async def _yields_async() -> AsyncIterator[None]:
    yield


class _Callable:
    def __call__(self) -> None:
        pass


def _reads_a_header(x_tenant: Annotated[str | None, Header()] = None) -> None:
    if x_tenant is not None:
        raise ApiError(403, "tenants may not list")


@pytest.mark.parametrize(
    ("dependency", "reason"),
    [
        (_yields, "generator"),
        (_yields_async, "generator"),
        (_Callable(), "callable object"),
        (_reads_a_header, "header params"),
    ],
)
def test_a_dependency_the_fast_path_cannot_run_leaves_the_route_to_fastapi(
    dependency: Callable[..., Any], reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    app = _app(dependency, "router")
    with caplog.at_level(logging.WARNING, "edge.api.fast.objects"):
        fast = ObjectsFastPath(app)
    assert set(fast.table.declined) == {"get_object", "head_object", "list_objects", "upload_object"}
    assert all(reason in why for why in fast.table.declined.values()), fast.table.declined
    # Said at start-up: the routes are only slower, but not silently.
    assert any("leaves list_objects to FastAPI" in record.getMessage() for record in caplog.records)
    assert fast.plan(_scope_of(LIST, b"")) is None
    assert _both(app, LIST)[0] == 401
    assert _both(app, GET, b"path=x")[0] == 401


def test_while_a_dependency_is_overridden_fastapi_answers() -> None:
    async def allow() -> None:
        pass

    def refuse() -> None:
        raise ApiError(409, "overridden")

    app = _app(allow, "router")
    fast = ObjectsFastPath(app)
    assert fast.plan(_scope_of(LIST, b"")) is not None
    app.dependency_overrides[allow] = refuse
    assert fast.plan(_scope_of(LIST, b"")) is None
    status, _, body = _both(app, LIST)
    assert (status, json.loads(body)) == (409, {"message": "overridden"})
