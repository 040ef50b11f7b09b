"""One HTTP port, several ASGI apps: the S3 gateway, the REST API and the web UI.

lakeFS users configure one endpoint for S3 and the API, so the gateway's port serves all three:
a request carrying an AWS signature (an `Authorization: AWS4-HMAC-SHA256 ...` or `AWS ...`
header, or presigned query parameters) is S3, unless it is a SigV4 header signature scoped to
`execute-api` under the Iceberg catalog's paths (its REST clients sign so; edge/core/sigv4.py);
otherwise a path under `/api/v1` goes to the API
(and those of the Iceberg REST catalog it serves, under `/iceberg/api` and
`/iceberg/relative_to/`), a path under `/ui` to the web UI (no bucket is called `ui`:
repository names have at least 3 characters), and an unsigned browser `GET /` (it accepts
text/html) to the UI, which redirects it to `/ui/`; a path under
`/_silt/presigned/` (the local blockstore's presigned URLs, signed and served by the API's app;
no bucket name has a `_`) goes to the API too; everything else stays S3.

Services never import each other: the apps are built by the edge process's composition root
(edge/app.py) and handed to the Dispatcher; this module only routes between them.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
# Loose on purpose: apps type their scope and callables each their own way.
ASGIApp = Callable[..., Awaitable[None]]

API_PREFIX = "/api/v1"
UI_PREFIX = "/ui"
PRESIGNED_PREFIX = "/_silt/presigned/"
# The Iceberg REST catalog, served by the API's app (no bucket is called `iceberg` with a key
# `api/...` that an unsigned request could reach: S3 requests are signed).
ICEBERG_PREFIX = "/iceberg/api"
ICEBERG_RELATIVE_PREFIX = "/iceberg/relative_to/"


# A SigV4 credential scoped to the catalog's service: `Credential=<key>/<day>/<region>/execute-api/...`.
_CATALOG_CREDENTIAL = re.compile(rb"AWS4-HMAC-SHA256\s+Credential=[^/,\s]+/[0-9]{8}/[^/,\s]+/execute-api/aws4_request,")


def _query_has(query: bytes, *names: bytes) -> bool:
    return any(pair.partition(b"=")[0] in names for pair in query.split(b"&"))


def is_s3_request(scope: Scope) -> bool:
    """Whether an HTTP request is signed the AWS way (header or presigned URL) for S3: not a
    signed catalog request (is_signed_catalog_request)."""
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            if value.startswith(b"AWS4-HMAC-SHA256") and is_signed_catalog_request(scope, value):
                return False
            return value.startswith((b"AWS4-HMAC-SHA256", b"AWS "))
    query = scope.get("query_string", b"")
    return bool(query) and _query_has(query, b"X-Amz-Algorithm", b"AWSAccessKeyId")


def is_signed_catalog_request(scope: Scope, authorization: bytes) -> bool:
    """A SigV4 header signature scoped to `execute-api` on a catalog path. S3's requests to a
    repository called `iceberg` are signed for `s3`, so they still reach the gateway."""
    return is_iceberg_path(scope.get("path", "")) and _CATALOG_CREDENTIAL.match(authorization) is not None


def is_api_path(path: str) -> bool:
    return path == API_PREFIX or path.startswith(API_PREFIX + "/")


def is_iceberg_path(path: str) -> bool:
    return path == ICEBERG_PREFIX or path.startswith((ICEBERG_PREFIX + "/", ICEBERG_RELATIVE_PREFIX))


def is_presigned_path(path: str) -> bool:
    return path.startswith(PRESIGNED_PREFIX)


def is_ui_path(path: str) -> bool:
    return path == UI_PREFIX or path.startswith(UI_PREFIX + "/")


def _header(scope: Scope, name: bytes) -> bytes:
    for key, value in scope.get("headers", ()):
        if key == name:
            return bytes(value)
    return b""


def is_browser_root(scope: Scope) -> bool:
    """A browser opening the endpoint itself: `GET /` asking for a page. S3's ListBuckets is
    also `GET /`, but its clients sign it and do not ask for text/html."""
    return (
        scope.get("method") in ("GET", "HEAD")
        and scope.get("path") == "/"
        and b"text/html" in _header(scope, b"accept").lower()
    )


class Dispatcher:
    """Routes each request to the S3 app, the API app or the UI app, and runs their lifespans."""

    def __init__(self, s3: ASGIApp, api: ASGIApp | None, ui: ASGIApp | None = None) -> None:
        self.s3 = s3
        self.api = api
        self.ui = ui

    def pick(self, scope: Scope) -> ASGIApp:
        if is_s3_request(scope):
            return self.s3
        path = scope.get("path", "")
        if self.api is not None and (is_api_path(path) or is_presigned_path(path) or is_iceberg_path(path)):
            return self.api
        if self.ui is not None and (is_ui_path(path) or is_browser_root(scope)):
            return self.ui
        return self.s3

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            apps = [app for app in (self.s3, self.api, self.ui) if app is not None]
            await Lifespans(apps).run(scope, receive, send)
            return
        await self.pick(scope)(scope, receive, send)


class _AppLifespan:
    """One app's lifespan protocol, driven by the dispatcher."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.inbox: asyncio.Queue[Message] = asyncio.Queue()
        self.outbox: asyncio.Queue[Message] = asyncio.Queue()
        self.task: asyncio.Task[None] | None = None

    def start(self, scope: Scope) -> None:
        async def run() -> None:
            await self.app(scope, self.inbox.get, self.outbox.put)

        self.task = asyncio.create_task(run())

    async def step(self, message: Message) -> Message:
        """Send one event; the app's answer (`*.complete` or `*.failed`)."""
        await self.inbox.put(message)
        assert self.task is not None
        answer = asyncio.ensure_future(self.outbox.get())
        done, _ = await asyncio.wait({answer, self.task}, return_when=asyncio.FIRST_COMPLETED)
        if answer in done:
            return answer.result()
        answer.cancel()
        error = self.task.exception()
        # An app that ends its lifespan without answering does not support it: that is fine.
        if error is None:
            return {"type": message["type"] + ".complete"}
        return {"type": message["type"] + ".failed", "message": repr(error)}


class Lifespans:
    """Fans one lifespan out to several apps, in order; shuts them down in reverse order."""

    def __init__(self, apps: list[ASGIApp]) -> None:
        self.apps = [_AppLifespan(app) for app in apps]

    async def run(self, scope: Scope, receive: Receive, send: Send) -> None:
        for app in self.apps:
            app.start(scope)
        started: list[_AppLifespan] = []
        while True:
            message = await receive()
            kind = message["type"]
            if kind == "lifespan.startup":
                for app in self.apps:
                    answer = await app.step(message)
                    if answer["type"].endswith(".failed"):
                        await send({"type": "lifespan.startup.failed", "message": answer.get("message", "")})
                        return
                    started.append(app)
                await send({"type": "lifespan.startup.complete"})
            elif kind == "lifespan.shutdown":
                failures = []
                for app in reversed(started):
                    answer = await app.step(message)
                    if answer["type"].endswith(".failed"):
                        failures.append(answer.get("message", ""))
                if failures:
                    await send({"type": "lifespan.shutdown.failed", "message": "; ".join(failures)})
                else:
                    await send({"type": "lifespan.shutdown.complete"})
                return
