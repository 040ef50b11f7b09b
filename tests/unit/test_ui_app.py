"""edge/ui: index.html for every UI path (never cached), hashed assets cached for good, the
security headers on every answer, and a readable 503 when the bundle was not built."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from edge.core.asgi import ASGIApp
from edge.ui.app import IMMUTABLE, SECURITY_HEADERS, build_app

INDEX = b"<!doctype html><title>Silt</title><script type=module src=/ui/assets/main-ABC.js></script>"


def _get(app: ASGIApp, path: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    async def run() -> tuple[int, dict[str, str], bytes]:
        scope = {
            "type": "http",
            "method": method,
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "headers": [(b"host", b"localhost"), (b"accept", b"text/html")],
            "scheme": "http",
            "server": ("localhost", 80),
            "http_version": "1.1",
            "root_path": "",
        }
        received: list[dict[str, Any]] = []
        requested = False

        async def receive() -> dict[str, Any]:
            # The request once; then the client stays connected until the response ends.
            nonlocal requested
            if not requested:
                requested = True
                return {"type": "http.request", "body": b"", "more_body": False}
            await asyncio.Event().wait()
            raise AssertionError("unreachable")

        async def send(message: dict[str, Any]) -> None:
            received.append(message)

        await asyncio.wait_for(app(scope, receive, send), 10)
        start = received[0]
        headers = {k.decode().lower(): v.decode() for k, v in start["headers"]}
        body = b"".join(m.get("body", b"") for m in received[1:])
        return start["status"], headers, body

    return asyncio.run(run())


@pytest.fixture
def dist(tmp_path: Path) -> Path:
    (tmp_path / "assets").mkdir()
    (tmp_path / "index.html").write_bytes(INDEX)
    (tmp_path / "assets" / "main-ABC.js").write_bytes(b"console.log(1)")
    return tmp_path


def _has_security_headers(headers: dict[str, str]) -> None:
    for name, value in SECURITY_HEADERS.items():
        assert headers[name.lower()] == value


@pytest.mark.parametrize("path", ["/ui/", "/ui/repositories/r1/objects", "/ui/login", "/ui/a/%3Cimg%3E"])
def test_every_ui_path_is_the_index_never_cached(dist: Path, path: str) -> None:
    status, headers, body = _get(build_app(dist), path)
    assert status == 200 and body == INDEX
    assert headers["content-type"].startswith("text/html") and headers["cache-control"] == "no-cache"
    _has_security_headers(headers)
    assert "frame-ancestors 'none'" in headers["content-security-policy"]
    for directive in ("base-uri 'none'", "form-action 'self'", "object-src 'none'"):
        assert directive in headers["content-security-policy"]


def test_hashed_assets_are_immutable_and_missing_ones_404(dist: Path) -> None:
    app = build_app(dist)
    status, headers, body = _get(app, "/ui/assets/main-ABC.js")
    assert status == 200 and body == b"console.log(1)" and headers["cache-control"] == IMMUTABLE
    assert headers["content-type"].startswith(("text/javascript", "application/javascript"))
    _has_security_headers(headers)
    status, headers, _ = _get(app, "/ui/assets/main-OLD.js")
    assert status == 404 and "cache-control" not in headers
    _has_security_headers(headers)


@pytest.mark.parametrize("path", ["/", "/ui"])
def test_the_root_and_bare_prefix_redirect_to_the_ui(dist: Path, path: str) -> None:
    status, headers, _ = _get(build_app(dist), path)
    assert status == 302 and headers["location"] == "/ui/"


def test_an_unbuilt_bundle_says_to_run_make_ui(tmp_path: Path) -> None:
    app = build_app(tmp_path / "missing")
    status, headers, body = _get(app, "/ui/repositories")
    assert status == 503 and b"make ui" in body and headers["cache-control"] == "no-cache"
    _has_security_headers(headers)
    assert _get(app, "/ui/assets/main-ABC.js")[0] == 404


def test_writes_are_not_served(dist: Path) -> None:
    assert _get(build_app(dist), "/ui/login", method="POST")[0] == 405
