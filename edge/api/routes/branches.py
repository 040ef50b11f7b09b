"""Branches: list, create, get, delete, commit, uncommitted changes, reset, revert, cherry-pick."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from lakefs_sdk.models import (
    BranchCreation,
    CherryPickCreation,
    CommitCreation,
    DiffList,
    ResetCreation,
    RevertCreation,
)

from edge.api import convert
from edge.api.bodies import SMALL_BODY_BYTES, json_body
from edge.api.context import Ctx
from edge.api.diff.visible import visible_diff_page
from edge.api.errors import ApiError, bad_request
from edge.api.filtered_pages import listing_of, next_offset, resume_after
from edge.api.paging import MAX_TOKEN, PrefixPageParams, pagination
from edge.api.refs.listing import Named, list_refs
from edge.api.refs.merge import commit_of, conflict_message, lakefs_call
from edge.api.responses import model_response, no_content, text_response
from silt.graveler.v1 import graveler_pb2 as api
from silt.iam_actions import (
    COMMIT_BRANCH,
    CREATE_BRANCH,
    DELETE_BRANCH,
    READ_BRANCH,
    READ_REFS,
    REVERT_BRANCH,
    branch_resource,
)

router = APIRouter()

BRANCHES = "/repositories/{repository}/branches"
BRANCH = BRANCHES + "/{branch}"


@router.get(BRANCHES)
async def list_branches(
    ctx: Ctx,
    repository: str,
    page: PrefixPageParams,
    show_hidden: bool = False,
) -> Response:
    await ctx.authorize(READ_REFS, repository)

    async def fetch(cursor: str, want: int) -> tuple[list[Named], bool]:
        request = api.ListBranchesRequest(repository=repository, after=cursor, amount=want)
        reply = await ctx.call(ctx.backend.graveler.ListBranches, request)
        return [Named(b.name, b.commit_id, b.hidden) for b in reply.branches], reply.has_more

    return model_response(await list_refs(fetch, page, show_hidden))


@router.post(BRANCHES, status_code=201)
async def create_branch(ctx: Ctx, request: Request, repository: str) -> Response:
    # The branch to authorize (lakeFS's fs:CreateBranch on the new one) is named in the body:
    # read it, kept small, first.
    body = await json_body(request, BranchCreation, cap=SMALL_BODY_BYTES)
    await ctx.authorize(CREATE_BRANCH, branch_resource(repository, body.name))
    # Made for the caller: its hooks read as the caller (engine/actions/read_access.py).
    created = api.CreateBranchRequest(
        repository=repository,
        name=body.name,
        source_ref=body.source,
        hidden=bool(body.hidden),
        user=ctx.caller.user_id,
    )
    info = await ctx.call(ctx.backend.graveler.CreateBranch, created)
    # lakeFS answers the new branch's commit id as text.
    return text_response(info.commit_id, 201)


@router.get(BRANCH)
async def get_branch(ctx: Ctx, repository: str, branch: str) -> Response:
    await ctx.authorize(READ_BRANCH, branch_resource(repository, branch))
    info = await ctx.call(ctx.backend.graveler.GetBranch, api.GetBranchRequest(repository=repository, name=branch))
    return model_response(convert.ref(info.name, info.commit_id))


@router.delete(BRANCH, status_code=204)
async def delete_branch(ctx: Ctx, repository: str, branch: str, force: bool = False) -> Response:
    await ctx.authorize(DELETE_BRANCH, branch_resource(repository, branch))
    request = api.DeleteBranchRequest(repository=repository, name=branch, user=ctx.caller.user_id)
    await ctx.call(ctx.backend.graveler.DeleteBranch, request)
    return no_content()


@router.post(BRANCH + "/commits", status_code=201)
async def commit(ctx: Ctx, request: Request, repository: str, branch: str) -> Response:
    await ctx.authorize(COMMIT_BRANCH, branch_resource(repository, branch))
    body = await json_body(request, CommitCreation)
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
    info = await lakefs_call(ctx.call(ctx.backend.graveler.Commit, created))
    return model_response(convert.commit(info, await ctx.backend.own_user_id()), 201)


@router.get(BRANCH + "/diff")
async def diff_branch(
    ctx: Ctx,
    repository: str,
    branch: str,
    page: PrefixPageParams,
    delimiter: Annotated[str, Query(max_length=MAX_TOKEN)] = "",
) -> Response:
    scope = await ctx.read_repo_scope(repository)
    size = page.size
    listing = listing_of(ctx, "diff-branch", repository, branch, page.prefix, delimiter)

    async def read(after: str, amount: int) -> api.DiffResponse:
        request = api.DiffBranchRequest(
            repository=repository, branch=branch, prefix=page.prefix, delimiter=delimiter, after=after, amount=amount
        )
        reply: api.DiffResponse = await ctx.call(ctx.backend.graveler.DiffBranch, request)
        return reply

    visible = await visible_diff_page(scope, read, resume_after(ctx, page.after, listing, scope, delimiter), size)
    items, has_more = visible.items, visible.has_more
    body = DiffList(
        pagination=pagination(
            has_more, next_offset(ctx, visible, listing, items[-1].key if items else ""), len(items), size
        ),
        results=[convert.diff(i, uncommitted=True) for i in items],
    )
    return model_response(body)


@router.put(BRANCH, status_code=204)
async def reset_branch(ctx: Ctx, request: Request, repository: str, branch: str) -> Response:
    await ctx.authorize(REVERT_BRANCH, branch_resource(repository, branch))
    body = await json_body(request, ResetCreation)
    # The keys a reset changes are checked against the caller's object-scoped policies by graveler.
    reset = api.ResetBranchRequest(repository=repository, branch=branch, user=ctx.caller.user_id)
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


@router.put(BRANCH + "/hard_reset", status_code=204)
async def hard_reset_branch(
    ctx: Ctx,
    repository: str,
    branch: str,
    ref: Annotated[str, Query(min_length=1, max_length=MAX_TOKEN)],
    force: bool = False,
) -> Response:
    """Point the branch at ref (lakeFS's fs:RevertBranch: RevertBranch here). Branch protection
    refuses it as lakeFS's does, force or not: lakeFS's `force` is for read-only repositories,
    which Silt does not have. Unlike lakeFS, which refuses a branch with a commit in flight and
    keeps what is staged on top of the new head, Silt drops the branch's uncommitted changes."""
    await ctx.authorize(REVERT_BRANCH, branch_resource(repository, branch))
    reset = api.ResetBranchRequest(repository=repository, branch=branch, hard_ref=ref, user=ctx.caller.user_id)
    await ctx.call(ctx.backend.graveler.ResetBranch, reset)
    return no_content()


@router.post(BRANCH + "/revert", status_code=204)
async def revert_branch(ctx: Ctx, request: Request, repository: str, branch: str) -> Response:
    await ctx.authorize(REVERT_BRANCH, branch_resource(repository, branch))
    body = await json_body(request, RevertCreation)
    # `force`, as everywhere in lakeFS, is for read-only repositories, which Silt does not have.
    target = await commit_of(ctx, repository, body.ref, body.parent_number, merge_needs=409)
    overrides = body.commit_overrides
    revert = api.RevertRequest(
        repository=repository,
        branch=branch,
        ref=target,
        parent_number=body.parent_number,
        # lakeFS's message names the ref as given; overrides replace message and metadata.
        message=(overrides.message if overrides and overrides.message else "") or f"Revert {body.ref}",
        metadata=(overrides.metadata if overrides and overrides.metadata is not None else {}),
        committer=ctx.caller.user_id,
        allow_empty=bool(body.allow_empty),
    )
    reply = await lakefs_call(ctx.call(ctx.backend.graveler.Revert, revert))
    if not reply.HasField("commit"):
        raise ApiError(409, conflict_message(reply))
    return no_content()


@router.post(BRANCH + "/cherry-pick", status_code=201)
async def cherry_pick(ctx: Ctx, request: Request, repository: str, branch: str) -> Response:
    await ctx.authorize(COMMIT_BRANCH, branch_resource(repository, branch))
    body = await json_body(request, CherryPickCreation)
    if body.parent_number is not None and body.parent_number < 1:
        raise bad_request("parent_number must be 1 or more")
    target = await commit_of(ctx, repository, body.ref, body.parent_number, merge_needs=400)
    overrides = body.commit_overrides
    pick = api.CherryPickRequest(
        repository=repository,
        branch=branch,
        ref=target,
        parent_number=body.parent_number or 0,
        committer=ctx.caller.user_id,
        # Overrides replace the message and are set over the picked commit's metadata.
        message=(overrides.message or "") if overrides else "",
        metadata=(overrides.metadata or {}) if overrides else {},
    )
    reply = await lakefs_call(ctx.call(ctx.backend.graveler.CherryPick, pick))
    if not reply.HasField("commit"):
        raise ApiError(409, conflict_message(reply))
    return model_response(convert.commit(reply.commit, await ctx.backend.own_user_id()), 201)
