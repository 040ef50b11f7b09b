"""Actions runs (lakeFS's `actions` API): the runs of hooks, their hooks and each hook's output.

Runs and their hooks' statuses need ReadRepo; a hook's output needs ReadActionOutput too (the
REST API asks auth for its caller, and reads the output from graveler as itself).
Graveler keeps the runs (engine/actions/runs.py) and lists them newest first; a
listing filtered by branch or commit may take several graveler pages to fill one of ours, and
stops after a bounded number of calls with a cursor to go on from.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response
from fastapi.responses import JSONResponse
from google.protobuf.timestamp_pb2 import Timestamp

from edge.api.context import Ctx
from edge.api.errors import not_found
from edge.api.paging import PageParams, pagination
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb
from silt.iam_actions import READ_ACTION_OUTPUT, READ_REPO

router = APIRouter()

RUNS = "/repositories/{repository}/actions/runs"
RUN = RUNS + "/{run_id}"
MAX_CALLS = 10


def _time(stamp: Timestamp) -> str:
    return stamp.ToDatetime().strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _status(failed: bool) -> str:
    return "failed" if failed else "completed"


def run_json(run: pb.ActionRun) -> dict[str, Any]:
    shown: dict[str, Any] = {
        "run_id": run.run_id,
        "branch": run.branch,
        "start_time": _time(run.start_time),
        "event_type": run.event_type,
        "status": _status(run.failed),
        "commit_id": run.commit_id,
    }
    if run.HasField("end_time"):
        shown["end_time"] = _time(run.end_time)
    return shown


def hook_json(hook: pb.HookRun) -> dict[str, Any]:
    shown: dict[str, Any] = {
        "hook_run_id": hook.hook_run_id,
        "action": hook.action,
        "hook_id": hook.hook_id,
        # A hook skipped because an earlier one failed has never started: lakeFS shows its run's start.
        "start_time": _time(hook.start_time),
        "status": _status(hook.failed or hook.skipped),
    }
    if hook.HasField("end_time"):
        shown["end_time"] = _time(hook.end_time)
    return shown


async def _run(ctx: Ctx, repository: str, run_id: str) -> pb.ActionRun:
    reply: pb.ActionRun = await ctx.call(
        ctx.backend.graveler.GetActionRun, api.GetActionRunRequest(repository=repository, run_id=run_id)
    )
    return reply


@router.get(RUNS)
async def list_repository_runs(
    ctx: Ctx,
    repository: str,
    requested: PageParams,
    branch: Annotated[str, Query()] = "",
    commit: Annotated[str, Query()] = "",
) -> Response:
    await ctx.authorize(READ_REPO, repository)
    size = requested.size
    found: list[pb.ActionRun] = []
    cursor, more = requested.after, True
    for _ in range(MAX_CALLS):
        reply = await ctx.call(
            ctx.backend.graveler.ListActionRuns,
            api.ListActionRunsRequest(
                repository=repository, branch=branch, commit_id=commit, after=cursor, amount=size + 1 - len(found)
            ),
        )
        found.extend(reply.runs)
        more = reply.has_more or len(found) > size
        if len(found) > size or not reply.has_more:
            break
        cursor = reply.next_after
    page = found[:size]
    has_more = more or len(found) > size
    next_offset = page[-1].run_id if page and len(found) > size else cursor if has_more else ""
    shown = pagination(has_more, next_offset, len(page), size)
    return JSONResponse({"pagination": shown.to_dict(), "results": [run_json(r) for r in page]})


@router.get(RUN)
async def get_run(ctx: Ctx, repository: str, run_id: str) -> Response:
    await ctx.authorize(READ_REPO, repository)
    return JSONResponse(run_json(await _run(ctx, repository, run_id)))


@router.get(RUN + "/hooks")
async def list_run_hooks(ctx: Ctx, repository: str, run_id: str, requested: PageParams) -> Response:
    await ctx.authorize(READ_REPO, repository)
    size = requested.size
    hooks = [h for h in (await _run(ctx, repository, run_id)).hooks if h.hook_run_id > requested.after]
    page = hooks[:size]
    has_more = len(hooks) > size
    shown = pagination(has_more, page[-1].hook_run_id if has_more else "", len(page), size)
    return JSONResponse({"pagination": shown.to_dict(), "results": [hook_json(h) for h in page]})


@router.get(RUN + "/hooks/{hook_run_id}/output")
async def get_run_hook_output(ctx: Ctx, repository: str, run_id: str, hook_run_id: str) -> Response:
    # A webhook's answer may be a page of a service only the server reaches: its own permission.
    await ctx.authorize(READ_REPO, repository)
    await ctx.authorize(READ_ACTION_OUTPUT, repository)
    for hook in (await _run(ctx, repository, run_id)).hooks:
        if hook.hook_run_id == hook_run_id:
            return Response(hook.output.encode(), media_type="application/octet-stream")
    raise not_found(f"hook run {hook_run_id!r} not found in run {run_id!r}")
