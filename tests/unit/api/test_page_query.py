"""A list route's paging query parameters (prefix, after, amount) are refused as lakeFS's
schema says, whichever way the route declares them: a 400 whose message names the parameter,
from a validation error located at ("query", name). Nothing is asked of graveler or auth."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError

from edge.api.app import create_app
from edge.api.backend import Caller
from edge.api.context import Context, context
from edge.api.error_responses import invalid_parameters
from silt.config import Config
from tests.support.asgi import asgi_answer

CREDENTIALS = {"access_key_id": "AKIAIOSFODNN7EXAMPLE", "secret_access_key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}
LONG = "a" * 1025
LONGER = "a" * 2049  # `after` may be a filtered listing's cursor, longer than any key

# One list route of each kind: auth's id pages, refs, runs, the log, pull requests, diffs.
ROUTES = [
    "/api/v1/auth/users",
    "/api/v1/auth/groups/g/members",
    "/api/v1/repositories",
    "/api/v1/repositories/repo-1/branches",
    "/api/v1/repositories/repo-1/branches/main/diff",
    "/api/v1/repositories/repo-1/branches/main/diff/summary",
    "/api/v1/repositories/repo-1/tags",
    "/api/v1/repositories/repo-1/pulls",
    "/api/v1/repositories/repo-1/pulls/p/comments",
    "/api/v1/repositories/repo-1/actions/runs",
    "/api/v1/repositories/repo-1/actions/runs/r/hooks",
    "/api/v1/repositories/repo-1/refs/main/commits",
    "/api/v1/repositories/repo-1/refs/main/diff/dev",
    "/api/v1/repositories/repo-1/refs/main/diff/dev/summary",
]
WITH_PREFIX = {r for r in ROUTES if not r.endswith(("/actions/runs", "/hooks", "/comments", "/commits"))}


class _Backend:
    """Fails any call: a refused parameter must be answered before anything is asked."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the backend must not be used ({name})")


def _app(located: list[Any]) -> FastAPI:
    app = create_app(Config.model_validate({"api": {"credentials": CREDENTIALS}}), fast_paths=False).app  # type: ignore[attr-defined]
    assert isinstance(app, FastAPI)
    caller = Caller(user_id="admin", creation_date=0)
    app.dependency_overrides[context] = lambda: Context(_Backend(), caller)  # type: ignore[arg-type]

    async def recording(request: Request, exc: Exception) -> Any:
        assert isinstance(exc, RequestValidationError)
        located.extend(tuple(error["loc"]) for error in exc.errors())
        return await invalid_parameters(request, exc)

    app.add_exception_handler(RequestValidationError, recording)
    return app


def _get(app: FastAPI, path: str, query: str) -> tuple[int, dict[str, Any]]:
    status, _, body = asgi_answer(app, path, query.encode())
    return status, json.loads(body)


REFUSALS = [
    ("amount=1001", "amount", "amount: Input should be less than or equal to 1000"),
    ("amount=-2", "amount", "amount: Input should be greater than or equal to -1"),
    ("amount=ten", "amount", "amount: Input should be a valid integer, unable to parse string as an integer"),
    ("after=" + LONGER, "after", "after: String should have at most 2048 characters"),
    ("prefix=" + LONG, "prefix", "prefix: String should have at most 1024 characters"),
]


# Each route with each refusal of a parameter it takes (a route without a prefix ignores one, below).
CASES = [(path, *refusal) for path in ROUTES for refusal in REFUSALS if refusal[1] != "prefix" or path in WITH_PREFIX]


@pytest.mark.parametrize(("path", "query", "name", "message"), CASES)
def test_a_bad_paging_value_is_refused_naming_the_query_parameter(
    path: str, query: str, name: str, message: str
) -> None:
    located: list[Any] = []
    status, body = _get(_app(located), path, query)
    assert (status, body) == (400, {"message": "invalid parameters: " + message})
    assert located == [("query", name)]


@pytest.mark.parametrize("path", sorted(set(ROUTES) - WITH_PREFIX))
def test_a_route_without_a_prefix_ignores_one(path: str) -> None:
    """Unknown query parameters are ignored, so a long prefix is not refused where none is taken."""
    located: list[Any] = []
    status, body = _get(_app(located), path, "amount=1001&prefix=" + LONG)
    assert (status, body) == (
        400,
        {"message": "invalid parameters: amount: Input should be less than or equal to 1000"},
    )
    assert located == [("query", "amount")]
