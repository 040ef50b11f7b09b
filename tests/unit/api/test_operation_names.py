"""The operation a request is recorded under (metrics label, access log; observe.py): the route's
name, so that an older lakeFS path answered by the same function as the current one keeps
lakeFS's name for it."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from edge.api.app import create_app
from edge.core.asgi import API_PREFIX
from silt.config import Config


def _recorded(method: str, path: str, caplog: pytest.LogCaptureFixture) -> tuple[int, str]:
    """(status, operation) the access log records for one request without credentials."""
    observed = create_app(Config(), fast_paths=False)
    observed.app.state.backend = object()  # type: ignore[attr-defined]  # never asked: refused 401 first
    scope = {
        "type": "http",
        "method": method,
        "path": API_PREFIX + path,
        "raw_path": (API_PREFIX + path).encode(),
        "query_string": b"",
        "headers": [],
        "scheme": "http",
        "server": ("test", 80),
        "client": ("test", 1),
        "http_version": "1.1",
    }

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        return None

    async def answer() -> None:
        await observed(scope, receive, send)

    caplog.clear()
    with caplog.at_level(logging.INFO, logger="silt.access"):
        asyncio.run(answer())
    (record,) = [r for r in caplog.records if r.name == "silt.access"]
    fields: dict[str, Any] = record.fields  # type: ignore[attr-defined]
    return fields["status"], fields["operation"]


@pytest.mark.parametrize(
    ("method", "path", "operation"),
    [
        ("GET", "/repositories/repo/settings/branch_protection", "get_branch_protection_rules"),
        ("GET", "/repositories/repo/branch_protection", "internal_get_branch_protection_rules"),
        ("GET", "/repositories/repo/settings/gc_rules", "get_gc_rules"),
        ("GET", "/repositories/repo/gc/rules", "internal_get_garbage_collection_rules"),
        ("PUT", "/repositories/repo/settings/gc_rules", "set_gc_rules"),
        ("POST", "/repositories/repo/gc/rules", "internal_set_garbage_collection_rules"),
        ("DELETE", "/repositories/repo/settings/gc_rules", "delete_gc_rules"),
        ("DELETE", "/repositories/repo/gc/rules", "internal_delete_garbage_collection_rules"),
        ("GET", "/repositories/repo/branches", "list_branches"),
        ("GET", "/auth/groups/g/acl", "get_group_acl"),
        ("GET", "/auth/external/principals", "get_external_principal"),
    ],
)
def test_a_request_is_recorded_under_its_routes_operation(
    method: str, path: str, operation: str, caplog: pytest.LogCaptureFixture
) -> None:
    assert _recorded(method, path, caplog) == (401, operation)


def test_an_operation_not_served_is_recorded_under_lakefs_name(caplog: pytest.LogCaptureFixture) -> None:
    assert _recorded("POST", "/sts/login", caplog) == (501, "sts_login")
    assert _recorded("POST", "/auth/external/principal/login", caplog) == (501, "external_principal_login")


def test_a_path_no_route_serves_is_recorded_as_unknown(caplog: pytest.LogCaptureFixture) -> None:
    assert _recorded("GET", "/no/such/route", caplog) == (404, "unknown")
