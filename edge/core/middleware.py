"""The shape every edge ASGI middleware shares: it wraps one app and acts on HTTP requests only."""

from __future__ import annotations

from edge.core.asgi import ASGIApp, Receive, Scope, Send


class HttpMiddleware:
    """Wraps app; an HTTP request goes to `http`, anything else (lifespan, websocket) straight to
    the wrapped app, untouched."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self.http(scope, receive, send)

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        raise NotImplementedError
