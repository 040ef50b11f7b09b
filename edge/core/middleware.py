"""The shape every edge ASGI middleware shares: it wraps one app and acts on HTTP requests only."""

from __future__ import annotations

import abc

from edge.core.asgi import ASGIApp, Receive, Scope, Send


class HttpMiddleware(abc.ABC):
    """Wraps app; an HTTP request goes to `http`, anything else (lifespan, websocket) straight to
    the wrapped app, untouched."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self.http(scope, receive, send)

    @abc.abstractmethod
    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        """What the middleware does with an HTTP request (passing it on to self.app or not)."""
