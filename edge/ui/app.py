"""The web UI as an ASGI app: the bundle `make ui` builds (webui/ -> static/dist/) under /ui/.

Every page is the same index.html (the app routes on the client), never cached, so a new build
is picked up at once; the assets it names carry a content hash and are cached for good. Every
answer carries the UI's security headers: scripts and styles only from this origin, no framing.
"""

from __future__ import annotations

from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import Receive, Scope, Send

from edge.core.asgi import UI_PREFIX, ASGIApp
from edge.core.middleware import HttpMiddleware
from silt.config import Config

DIST = Path(__file__).parent / "static" / "dist"

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; "
        "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'; object-src 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}
IMMUTABLE = "public, max-age=31536000, immutable"
NO_CACHE = "no-cache"

NOT_BUILT = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Silt: web UI not built</title></head>
<body><h1>The web UI is not built</h1>
<p>Run <code>make ui</code> (or <code>make run</code>, which runs it) to build it, then reload.</p>
</body></html>
"""


class _ImmutableAssets(StaticFiles):
    """Hashed bundle files: a name never changes content, so browsers may keep them forever."""

    async def check_config(self) -> None:
        # A bundle not built yet is not a configuration error: its assets are simply not found
        # (and the pages say to run `make ui`).
        return

    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        if response.status_code == 200:
            response.headers["Cache-Control"] = IMMUTABLE
        return response


class _SecurityHeaders(HttpMiddleware):
    """Adds SECURITY_HEADERS to every response of the wrapped app."""

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def with_headers(message: dict[str, object]) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))  # type: ignore[call-overload]
                present = {name.lower() for name, _ in headers}
                for name, value in SECURITY_HEADERS.items():
                    if name.lower().encode() not in present:
                        headers.append((name.lower().encode(), value.encode()))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, with_headers)


def _index(dist: Path) -> Response:
    index = dist / "index.html"
    if not index.is_file():
        return HTMLResponse(NOT_BUILT, status_code=503, headers={"Cache-Control": NO_CACHE, "Retry-After": "60"})
    return FileResponse(index, media_type="text/html; charset=utf-8", headers={"Cache-Control": NO_CACHE})


def build_app(dist: Path = DIST) -> ASGIApp:
    """The UI over the bundle in `dist` (tests point it elsewhere)."""

    async def page(request: Request) -> Response:
        return _index(dist)

    async def to_ui(request: Request) -> Response:
        return RedirectResponse(UI_PREFIX + "/", status_code=302)

    routes = [
        Route("/", to_ui, methods=["GET", "HEAD"]),
        Route(UI_PREFIX, to_ui, methods=["GET", "HEAD"]),
        Mount(UI_PREFIX + "/assets", app=_ImmutableAssets(directory=dist / "assets", check_dir=False)),
        Route(UI_PREFIX + "/{page:path}", page, methods=["GET", "HEAD"]),
    ]
    return _SecurityHeaders(Starlette(routes=routes))


def create_app(config: Config) -> ASGIApp:
    """The UI app as the edge process builds it (edge/app.py); it needs nothing from the configuration."""
    del config
    return build_app()
