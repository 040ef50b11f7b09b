"""Commits: get one (by id, branch or tag), the log of a ref, and a commit record written as given."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from google.protobuf.timestamp_pb2 import Timestamp
from lakefs_sdk.models import CommitList, CommitRecordCreation

from edge.api import convert
from edge.api.bodies import json_body
from edge.api.context import Ctx
from edge.api.paging import MAX_TOKEN, PageParams, pagination
from edge.api.responses import model_response, no_content
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb
from silt.iam_actions import READ_BRANCH, READ_REFS, RESTORE_REFS, branch_resource

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


@router.post("/repositories/{repository}/commits", status_code=204)
async def create_commit_record(ctx: Ctx, request: Request, repository: str) -> Response:
    """A commit record as given (lakeFS's internal CreateCommitRecord, for restore tools). Silt's
    commit ids are SHA-256 hashes of the whole record, so graveler stores only a record whose
    id is its own (400 otherwise: lakeFS checks its content address too), whose parents are
    there with lower generations and whose metarange is in the namespace. A record names any
    committer: RestoreRefs, an administrator's action (lakeFS asks fs:CreateCommit)."""
    await ctx.authorize(RESTORE_REFS, repository)
    body = await json_body(request, CommitRecordCreation)
    # `force`, as everywhere in lakeFS, is for read-only repositories, which Silt does not have.
    commit = pb.Commit(
        id=body.commit_id,
        version=body.version,
        committer=body.committer,
        message=body.message,
        metarange_id=body.metarange_id,
        creation_date=Timestamp(seconds=body.creation_date),
        parents=body.parents,
        metadata=body.metadata or {},
        generation=body.generation,
    )
    created = api.CreateCommitRecordRequest(repository=repository, commit=commit)
    await ctx.call(ctx.backend.graveler.CreateCommitRecord, created)
    return no_content()


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
        # lakeFS's fs:ReadBranch on the ref as given, and on the branch a ref expression starts
        # from (`main~2` is on main's log), so that a Deny of main holds whatever is appended.
        for named in dict.fromkeys((ref, re.split(r"[~^@]", ref, maxsplit=1)[0])):
            await ctx.authorize(READ_BRANCH, branch_resource(repository, named))
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
