"""Dumping and restoring a repository's refs: lakeFS's dumpRefs / restoreRefs (synchronous) and
dumpSubmit / dumpStatus / restoreSubmit / restoreStatus (background tasks), over graveler's dump.

A Silt dump is one folder `_silt/refs/<id>/` in the repository's storage namespace (commits,
branches, tags, pull requests, protection rules), named by its manifest's key. lakeFS's RefsDump
names three metaranges instead; Silt answers its manifest's key in all three fields, and a restore
takes them back only when they name the same dump (docs/clients/lakefs.md, "Refs dump and
restore"). A task's status is a record graveler keeps in the repository's partition on KV, so any
API replica, asking any graveler replica, answers for a task another one started.

Dumping and restoring are administration (silt/iam_actions.py, DUMP_REFS and RESTORE_REFS): lakeFS
lets whoever may list (or create) tags, branches and commits do them; Silt asks for its own
administrative actions, which writers do not hold.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import JSONResponse
from lakefs_sdk.models import RefsDump, RefsRestore, RepositoryDumpStatus, RepositoryRestoreStatus, TaskInfo
from pydantic.v1 import BaseModel

from edge.api.bodies import json_body
from edge.api.context import Context, Ctx
from edge.api.errors import ApiError, bad_request, from_graveler
from edge.api.paging import MAX_TOKEN
from edge.api.responses import model_response
from silt.errors import FailedPrecondition, SiltError
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb
from silt.iam_actions import DUMP_REFS, RESTORE_REFS

router = APIRouter()

REPO = "/repositories/{repository}"
TaskId = Annotated[str, Query(min_length=1, max_length=MAX_TOKEN)]
# lakeFS's text when the target of a restore has refs already.
NOT_BARE = "can only restore into a bare repository"


def refs_dump(location: str) -> RefsDump:
    return RefsDump(commits_meta_range_id=location, tags_meta_range_id=location, branches_meta_range_id=location)


def dump_location(body: RefsRestore) -> str:
    """The manifest a RefsRestore names: its three fields, as a dump answered them, are one."""
    names = {body.commits_meta_range_id, body.tags_meta_range_id, body.branches_meta_range_id}
    if len(names) != 1:
        raise bad_request(
            "commits_meta_range_id, tags_meta_range_id and branches_meta_range_id must all name the same dump"
            " (a Silt dump answers its manifest's key in all three)"
        )
    return names.pop()


async def _restore_call(ctx: Context, method: Any, request: Any) -> Any:
    """A restore call whose refusal of a repository that is not bare is lakeFS's 400."""
    try:
        return await ctx.backend.graveler_call(method, request, ctx.deadline)
    except FailedPrecondition as exc:
        raise ApiError(400, NOT_BARE) from exc
    except SiltError as exc:
        raise from_graveler(exc, "graveler") from None


def _model_json(model: BaseModel, status: int = 200) -> JSONResponse:
    # The model's own JSON: update_time is a date-time, which its to_dict leaves as an object.
    return JSONResponse(json.loads(model.json(by_alias=True, exclude_none=True)), status_code=status)


def _updated(task: pb.RefsTaskRecord) -> datetime:
    return datetime.fromtimestamp(task.update_time.ToNanoseconds() / 1e9, tz=UTC)


@router.put(REPO + "/refs/dump", status_code=201)
async def dump_refs(ctx: Ctx, repository: str) -> Response:
    await ctx.authorize(DUMP_REFS, repository)
    dumped = await ctx.call(ctx.backend.graveler.DumpRefs, api.DumpRefsRequest(repository=repository))
    return model_response(refs_dump(dumped.location), 201)


@router.put(REPO + "/refs/restore")
async def restore_refs(ctx: Ctx, request: Request, repository: str) -> Response:
    await ctx.authorize(RESTORE_REFS, repository)
    body = await json_body(request, RefsRestore)
    # `force`, as everywhere in lakeFS, is for read-only repositories, which Silt does not have.
    restore = api.RestoreRefsRequest(repository=repository, location=dump_location(body))
    await _restore_call(ctx, ctx.backend.graveler.RestoreRefs, restore)
    return Response(status_code=200)  # lakeFS answers no body


@router.post(REPO + "/dump", status_code=202)
async def dump_submit(ctx: Ctx, repository: str) -> Response:
    await ctx.authorize(DUMP_REFS, repository)
    started = await ctx.call(ctx.backend.graveler.StartDump, api.StartDumpRequest(repository=repository))
    return model_response(TaskInfo(id=started.task.id), 202)


@router.get(REPO + "/dump")
async def dump_status(ctx: Ctx, repository: str, task_id: TaskId) -> Response:
    await ctx.authorize(DUMP_REFS, repository)
    request = api.GetDumpStatusRequest(repository=repository, id=task_id)
    info = await ctx.call(ctx.backend.graveler.GetDumpStatus, request)
    task = info.task
    status = RepositoryDumpStatus(
        id=task.id,
        done=task.done,
        update_time=_updated(task),
        error=task.error or None,
        refs=refs_dump(task.location) if task.done and not task.error else None,
    )
    return _model_json(status)


@router.post(REPO + "/restore", status_code=202)
async def restore_submit(ctx: Ctx, request: Request, repository: str) -> Response:
    await ctx.authorize(RESTORE_REFS, repository)
    body = await json_body(request, RefsRestore)
    restore = api.StartRestoreRequest(repository=repository, location=dump_location(body))
    started = await _restore_call(ctx, ctx.backend.graveler.StartRestore, restore)
    return model_response(TaskInfo(id=started.task.id), 202)


@router.get(REPO + "/restore")
async def restore_status(ctx: Ctx, repository: str, task_id: TaskId) -> Response:
    await ctx.authorize(RESTORE_REFS, repository)
    info = await ctx.call(
        ctx.backend.graveler.GetRestoreStatus, api.GetRestoreStatusRequest(repository=repository, id=task_id)
    )
    task = info.task
    status = RepositoryRestoreStatus(id=task.id, done=task.done, update_time=_updated(task), error=task.error or None)
    return _model_json(status)
