"""Usage statistics: lakeFS's postStatsEvents and getUsageReportSummary.

Silt sends nothing anywhere (no phone-home), so the events clients post are checked as lakeFS
checks them and then dropped; and it keeps no per-installation usage records, so the usage
summary answers what lakeFS answers when it has none (404, no installation).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response
from lakefs_sdk.models import StatsEventsList

from edge.api.backend import Caller
from edge.api.bodies import json_body
from edge.api.context import authenticate
from edge.api.errors import bad_request, not_found
from edge.api.responses import no_content

router = APIRouter()

# A batch of client-side counters (the UI and lakectl send a few at a time): generously more
# than any real batch, and far less than a body that would cost anything to parse.
STATS_BODY_BYTES = 64 * 1024


@router.post("/statistics", status_code=204)
async def post_stats_events(request: Request, caller: Annotated[Caller, Depends(authenticate)]) -> Response:
    body = await json_body(request, StatsEventsList, STATS_BODY_BYTES)
    for event in body.events:
        if not event.var_class:
            raise bad_request("invalid value: class is required")
        if not event.name:
            raise bad_request("invalid value: name is required")
        if event.count < 0:
            raise bad_request("invalid value: count must be a non-negative integer")
    return no_content()


@router.get("/usage-report/summary")
async def get_usage_report_summary(caller: Annotated[Caller, Depends(authenticate)]) -> Response:
    # lakeFS asks only that the caller be authenticated, and answers this when its usage
    # reporter has no installation id. Silt's request counts live in Prometheus (per process,
    # since it started), not in monthly records an installation could report.
    raise not_found("installation not found: Silt keeps no usage report (its request metrics are in Prometheus)")
