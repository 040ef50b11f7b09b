"""lakeFS's GC preparation calls, for lakeFS's Spark GC client, over graveler's GC export.

* prepareGarbageCollectionCommits: graveler's PrepareGC with lakeFS's formats: besides Silt's
  Parquet export it writes lakeFS's ``commits.csv`` (engine/features/gc_lakefs.py) in the run's
  ``_silt/gc/<run id>/``; the answer names it as a full URI of the storage namespace, as lakeFS
  does, with a presigned URL when presigning is on.
* prepareGarbageCollectionCommitsAsync / Status: the same export as a background task of
  graveler, its record in the repository's KV partition (engine/features/gc_tasks.py), so any
  API replica, through any graveler, answers its status. An unknown id is 404.
* prepareGarbageCollectionUncommitted: the staged entries' addresses as lakeFS's Parquet
  (``physical_address``, ``creation_date``) under ``_silt/gc/<run id>/uncommitted/``, in one call:
  no continuation token is ever handed out, so any token sent back is refused (400).

A repository without GC rules answers 404 to the commits calls, as lakeFS does: its client then
keeps every commit. All of them need PrepareGC (lakeFS's retention:PrepareGarbageCollection*).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from lakefs_sdk.models import (
    Error,
    GarbageCollectionPrepareResponse,
    PrepareGarbageCollectionCommitsStatus,
    PrepareGCUncommittedRequest,
    PrepareGCUncommittedResponse,
    TaskInfo,
)

from edge.api.context import Ctx
from edge.api.errors import ApiError, bad_request, not_found
from edge.api.objects.presign import presigner
from edge.api.refs.merge import optional_body
from edge.api.responses import model_response
from silt.errors import SiltError
from silt.graveler.v1 import graveler_pb2 as api
from silt.iam_actions import PREPARE_GC
from silt.objects import full_address

router = APIRouter()

GC = "/repositories/{repository}/gc"
# Task ids are 20 hex digits; anything longer is no task of ours (answered 404 by graveler).
TaskId = Annotated[str, Query(min_length=1, max_length=64)]
# Where lakeFS's client may write its expired addresses: a folder of the run, unused by Silt.
ADDRESSES = "addresses/"


async def _require_rules(ctx: Ctx, repository: str) -> None:
    info = await ctx.call(ctx.backend.graveler.GetGCRules, api.GetGCRulesRequest(repository=repository))
    if not info.is_set:
        raise not_found(f"no garbage collection rules are set for repository {repository!r}")


async def _prepared(ctx: Ctx, request: Request, run: api.PrepareGCResponse) -> GarbageCollectionPrepareResponse:
    namespace = run.storage_namespace
    url = None
    signer = presigner(request)
    if signer.enabled:
        try:
            signed = await ctx.backend.run(
                signer.sign_key_read, request, namespace, run.lakefs_commits_location, "commits.csv"
            )
            url = signed.url
        except (ApiError, SiltError, OSError):
            url = None  # as lakeFS: the answer goes out without the URL (the run is written)
    return GarbageCollectionPrepareResponse(
        run_id=run.run_id,
        gc_commits_location=full_address(namespace, run.lakefs_commits_location),
        gc_addresses_location=full_address(namespace, run.location + ADDRESSES),
        gc_commits_presigned_url=url,
    )


@router.post(GC + "/prepare_commits", status_code=201)
async def prepare_garbage_collection_commits(ctx: Ctx, request: Request, repository: str) -> Response:
    await ctx.authorize(PREPARE_GC, repository)
    await _require_rules(ctx, repository)
    prepare = api.PrepareGCRequest(repository=repository, lakefs_formats=True)
    run = await ctx.call(ctx.backend.graveler.PrepareGC, prepare)
    return model_response(await _prepared(ctx, request, run), 201)


@router.post(GC + "/prepare_commits/async", status_code=202)
async def prepare_garbage_collection_commits_async(ctx: Ctx, repository: str) -> Response:
    await ctx.authorize(PREPARE_GC, repository)
    await _require_rules(ctx, repository)
    task = await ctx.call(ctx.backend.graveler.StartPrepareGC, api.StartPrepareGCRequest(repository=repository))
    return model_response(TaskInfo(id=task.task_id), 202)


@router.get(GC + "/prepare_commits/status")
async def prepare_garbage_collection_commits_status(
    ctx: Ctx,
    request: Request,
    repository: str,
    id: TaskId,  # id: lakeFS's name
) -> Response:
    await ctx.authorize(PREPARE_GC, repository)
    asked = api.GetPrepareGCTaskRequest(repository=repository, task_id=id)
    task = await ctx.call(ctx.backend.graveler.GetPrepareGCTask, asked)
    status = PrepareGarbageCollectionCommitsStatus(
        task_id=task.task_id,
        completed=task.completed,
        update_time=datetime.fromtimestamp(task.update_time.ToNanoseconds() / 1e9, tz=UTC),
        error=Error(message=task.error) if task.error else None,
    )
    if task.HasField("result"):
        status.result = await _prepared(ctx, request, task.result)
    # The model's own JSON: update_time is a date-time, which its to_dict leaves as an object.
    return Response(status.json(by_alias=True, exclude_none=True), media_type="application/json")


@router.post(GC + "/prepare_uncommited", status_code=201)  # sic: lakeFS's path
async def prepare_garbage_collection_uncommitted(ctx: Ctx, request: Request, repository: str) -> Response:
    await ctx.authorize(PREPARE_GC, repository)
    body = await optional_body(request, PrepareGCUncommittedRequest)
    if body.continuation_token:
        raise bad_request("invalid continuation token")
    asked = api.PrepareGCUncommittedRequest(repository=repository)
    run = await ctx.call(ctx.backend.graveler.PrepareGCUncommitted, asked)
    location = full_address(run.storage_namespace, run.location) if run.location else ""
    return model_response(PrepareGCUncommittedResponse(run_id=run.run_id, gc_uncommitted_location=location), 201)
