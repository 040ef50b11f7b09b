"""Routes for the lakeFS operations not served (edge/api/not_served.py): each answers 501 with
lakeFS's JSON error naming the reason, to anyone (lakeFS serves them without credentials) and
without reading the request."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse

from edge.api.not_served import NOT_SERVED

router = APIRouter()


def _answer(reason: str) -> Callable[[], Awaitable[Response]]:
    async def not_implemented() -> Response:
        return JSONResponse({"message": reason}, status_code=501)

    return not_implemented


def _snake(operation_id: str) -> str:
    """lakeFS's operationId as the name other routes are recorded under (stsLogin: sts_login)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", operation_id).lower()


for _operation, _entry in NOT_SERVED.items():
    router.add_api_route(_entry.path, _answer(_entry.reason), methods=[_entry.method], name=_snake(_operation))
