"""Branches: list, create, get, delete, commit, uncommitted changes, reset."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from lakefs_sdk.models import BranchCreation, CommitCreation, DiffList, RefList, ResetCreation

from services.api import convert
from services.api.bodies import json_body
from services.api.context import Ctx
from services.api.errors import bad_request
from services.api.paging import MAX_TOKEN, After, Amount, Prefix, page_size, pagination
from services.api.responses import model_response, no_content, text_response
from silt.actions import READ_REPO, WRITE_REPO
from silt.graveler.v1 import graveler_pb2 as api
from silt.paging import MAX_PAGE

router = APIRouter()

BRANCHES = "/repositories/{repository}/branches"
BRANCH = BRANCHES + "/{branch}"
# A listing with a prefix stops after this many branches examined (bounded work per call).
MAX_EXAMINED = 10 * MAX_PAGE


@router.get(BRANCHES)
async def list_branches(
    ctx: Ctx, repository: str, prefix: Prefix = "", after: After = "", amount: Amount = 100
) -> Response:
    await ctx.authorize(READ_REPO, repository)
    size = page_size(amount)
    cursor = max(after, prefix[:-1])
    found: list[api.BranchInfo] = []
    examined = 0
    exhausted = False
    while len(found) <= size and examined < MAX_EXAMINED and not exhausted:
        # With a prefix, names before it are skipped: ask for full pages to pass them quickly.
        want = MAX_PAGE if prefix else size + 1
        request = api.ListBranchesRequest(repository=repository, after=cursor, amount=want)
        reply = await ctx.call(ctx.backend.graveler.ListBranches, request)
        exhausted = not reply.has_more
        for info in reply.branches:
            if not info.name.startswith(prefix) and info.name > prefix:
                exhausted = True  # past every name with the prefix
                break
            # Every name seen moves the cursor and counts, even one skipped before the prefix:
            # otherwise the next call would ask for the same page again, until the deadline.
            examined += 1
            cursor = info.name
            if info.name.startswith(prefix):
                found.append(info)
    page = found[:size]
    has_more = len(found) > size or not exhausted
    next_offset = page[-1].name if len(found) > size else cursor
    body = RefList(
        pagination=pagination(has_more, next_offset, len(page), size),
        results=[convert.ref(b.name, b.commit_id) for b in page],
    )
    return model_response(body)


@router.post(BRANCHES, status_code=201)
async def create_branch(ctx: Ctx, request: Request, repository: str) -> Response:
    body = await json_body(request, BranchCreation)
    await ctx.authorize(WRITE_REPO, repository)
    if body.hidden:
        raise bad_request("hidden branches are not supported")
    created = api.CreateBranchRequest(repository=repository, name=body.name, source_ref=body.source)
    info = await ctx.call(ctx.backend.graveler.CreateBranch, created)
    # lakeFS answers the new branch's commit id as text.
    return text_response(info.commit_id, 201)


@router.get(BRANCH)
async def get_branch(ctx: Ctx, repository: str, branch: str) -> Response:
    await ctx.authorize(READ_REPO, repository)
    info = await ctx.call(ctx.backend.graveler.GetBranch, api.GetBranchRequest(repository=repository, name=branch))
    return model_response(convert.ref(info.name, info.commit_id))


@router.delete(BRANCH, status_code=204)
async def delete_branch(ctx: Ctx, repository: str, branch: str, force: bool = False) -> Response:
    await ctx.authorize(WRITE_REPO, repository)
    request = api.DeleteBranchRequest(repository=repository, name=branch)
    await ctx.call(ctx.backend.graveler.DeleteBranch, request)
    return no_content()


@router.post(BRANCH + "/commits", status_code=201)
async def commit(ctx: Ctx, request: Request, repository: str, branch: str) -> Response:
    body = await json_body(request, CommitCreation)
    await ctx.authorize(WRITE_REPO, repository)
    if body.var_date is not None:
        raise bad_request("setting a commit's date is not supported")
    created = api.CommitRequest(
        repository=repository,
        branch=branch,
        message=body.message,
        metadata=body.metadata or {},
        committer=ctx.caller.user_id,
        allow_empty=bool(body.allow_empty),
    )
    info = await ctx.call(ctx.backend.graveler.Commit, created)
    return model_response(convert.commit(info, await ctx.backend.own_user_id()), 201)


@router.get(BRANCH + "/diff")
async def diff_branch(
    ctx: Ctx,
    repository: str,
    branch: str,
    after: After = "",
    amount: Amount = 100,
    prefix: Prefix = "",
    delimiter: Annotated[str, Query(max_length=MAX_TOKEN)] = "",
) -> Response:
    await ctx.authorize(READ_REPO, repository)
    size = page_size(amount)
    request = api.DiffBranchRequest(
        repository=repository, branch=branch, prefix=prefix, delimiter=delimiter, after=after, amount=size
    )
    reply = await ctx.call(ctx.backend.graveler.DiffBranch, request)
    items = list(reply.items)
    body = DiffList(
        pagination=pagination(reply.has_more, items[-1].key if items else "", len(items), size),
        results=[convert.diff(i) for i in items],
    )
    return model_response(body)


@router.put(BRANCH, status_code=204)
async def reset_branch(ctx: Ctx, request: Request, repository: str, branch: str) -> Response:
    body = await json_body(request, ResetCreation)
    await ctx.authorize(WRITE_REPO, repository)
    reset = api.ResetBranchRequest(repository=repository, branch=branch)
    if body.type == "reset":
        reset.all = True
    elif not body.path:
        raise bad_request(f"reset of type {body.type} needs a path")
    elif body.type == "object":
        reset.key = body.path
    else:
        reset.prefix = body.path
    await ctx.call(ctx.backend.graveler.ResetBranch, reset)
    return no_content()
