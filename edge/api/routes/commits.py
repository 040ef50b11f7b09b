"""Commits: get one (by id, branch or tag) and the log of a ref."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query, Response
from lakefs_sdk.models import CommitList

from edge.api import convert
from edge.api.context import Ctx
from edge.api.paging import MAX_TOKEN, PageParams, pagination
from edge.api.responses import model_response
from silt.graveler.v1 import graveler_pb2 as api
from silt.iam_actions import READ_REFS

router = APIRouter()

# Paths a log may be filtered by, each at most MAX_TOKEN characters.
MAX_LOG_FILTERS = 1000
PathList = Annotated[list[str] | None, Query(max_length=MAX_LOG_FILTERS)]


@router.get("/repositories/{repository}/commits/{commit_id}")
async def get_commit(ctx: Ctx, repository: str, commit_id: str) -> Response:
    await ctx.authorize(READ_REFS, repository)
    # Any ref names a commit: resolve branches, tags and expressions first.
    resolved = await ctx.call(
        ctx.backend.graveler.ResolveRef, api.ResolveRefRequest(repository=repository, ref=commit_id)
    )
    request = api.GetCommitRequest(repository=repository, commit_id=resolved.commit_id)
    info = await ctx.call(ctx.backend.graveler.GetCommit, request)
    return model_response(convert.commit(info, await ctx.backend.own_user_id()))


@router.get("/repositories/{repository}/refs/{ref}/commits")
async def log_commits(
    ctx: Ctx,
    repository: str,
    ref: str,
    page: PageParams,
    objects: PathList = None,
    prefixes: PathList = None,
    limit: bool = False,
    first_parent: bool = False,
    since: datetime | None = None,
    stop_at: Annotated[str, Query(max_length=MAX_TOKEN)] = "",
) -> Response:
    if objects or prefixes:  # which commits changed a key tells of keys one may not read
        await ctx.authorize_every_key(repository)
    else:
        await ctx.authorize(READ_REFS, repository)
    size = page.size
    request = api.LogRequest(
        repository=repository,
        ref=ref,
        after=page.after,
        amount=size,
        objects=objects or [],
        prefixes=prefixes or [],
        first_parent=first_parent,
        # lakeFS's `limit` is a flag: stop after `amount` commits, with no further page.
        limit=size if limit else 0,
        stop_at=stop_at,
    )
    if since is not None:
        request.since.FromDatetime(since)
    reply = await ctx.call(ctx.backend.graveler.Log, request)
    commits = list(reply.commits)
    own = await ctx.backend.own_user_id()
    has_more = reply.has_more and not limit
    body = CommitList(
        pagination=pagination(has_more, reply.next_after, len(commits), size),
        results=[convert.commit(c, own) for c in commits],
    )
    return model_response(body)
