"""The REST API's hot object routes — getObject, its HEAD, uploadObject and listObjects —
answered before FastAPI's routing, for their plain form.

Why: for a 4 KiB object most of a request's time in the API was FastAPI's own (matching the
path against every route's pattern, solving the dependencies, validating the query parameters),
which left the API well behind the S3 gateway's raw ASGI answer to the same GET or PUT (and,
with the page's JSON written as text, a listing page behind ListObjectsV2's).

What does not change: the answer comes from the very route functions of routes/objects.py, run
as FastAPI runs them. Which requests are theirs, their parameters and their dependencies are
read from the app's own routes when the app is composed (fast/table.py): a route's path, the
limits of its query parameters and the dependencies it declares (the `Ctx` one: authentication,
the session cookie's cross-site check, the context) are the route's, and a dependency the fast
path cannot run as FastAPI would makes it leave that route to FastAPI. Failures become
responses through the app's own exception handlers (error_responses.py). So authentication,
authorization, validation, limits, history events, headers and bodies are the route's. A request
with a query parameter the route does not declare, a repeated one, or a value the route's
parameter refuses falls through to FastAPI, which answers it as before — falling through is
always safe. Telemetry (observe.py) wraps both.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI
from starlette.requests import Request

from edge.api.error_responses import error_response, unexpected
from edge.api.fast.table import FastTable, Plan
from edge.api.routes import objects
from edge.core.asgi import Receive, Scope, Send

log = logging.getLogger(__name__)

# The routes worth answering before FastAPI: the object reads, writes and listings.
HOT = (objects.get_object, objects.head_object, objects.upload_object, objects.list_objects)


class ObjectsFastPath:
    """ASGI middleware in front of the FastAPI app: answers the plain requests of its hot routes
    itself and passes everything else (and the lifespan) to the app."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app
        # Built once, from the routes as the app was composed.
        self.table = FastTable.from_app(app, HOT)
        for name, reason in self.table.declined.items():
            # Correct, only slower: said once, so that a change to a route is not a silent cost.
            log.warning("the object fast path leaves %s to FastAPI: %s", name, reason)

    def plan(self, scope: Scope) -> Plan | None:
        return self.table.plan(scope) if scope["type"] == "http" else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        plan = self.plan(scope)
        if plan is None:
            await self.app(scope, receive, send)
            return
        # What FastAPI's app and router would have put in the scope: the app (whose state holds
        # the backend), the route and its function (observe.py's operation label) and the path
        # parameters.
        scope["app"] = self.app
        scope["route"] = plan.route.route
        scope["endpoint"] = plan.endpoint
        scope["path_params"] = plan.path_params
        request = Request(scope, receive, send)
        try:
            response = await plan.respond(request)
        except Exception as exc:
            response = await error_response(request, exc)
        try:
            await response(scope, receive, send)
        except Exception as exc:
            # A body that fails once under way: logged as the app logs it, then ended by observe.py.
            await unexpected(request, exc)
            raise
