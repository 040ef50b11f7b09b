"""Tags: list, create, get, delete."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from lakefs_sdk.models import TagCreation

from edge.api import convert
from edge.api.bodies import json_body
from edge.api.context import Ctx
from edge.api.errors import ApiError
from edge.api.paging import PrefixPageParams
from edge.api.refs.listing import Named, list_refs
from edge.api.responses import model_response, no_content
from silt.graveler.v1 import graveler_pb2 as api
from silt.iam_actions import READ_REFS, WRITE_REPO

router = APIRouter()

TAGS = "/repositories/{repository}/tags"
TAG = TAGS + "/{tag}"
# lakeFS's text for an existing tag, which clients match on a 409.
TAG_EXISTS = "tag already exists"


@router.get(TAGS)
async def list_tags(ctx: Ctx, repository: str, page: PrefixPageParams) -> Response:
    await ctx.authorize(READ_REFS, repository)

    async def fetch(cursor: str, want: int) -> tuple[list[Named], bool]:
        reply = await ctx.call(
            ctx.backend.graveler.ListTags, api.ListTagsRequest(repository=repository, after=cursor, amount=want)
        )
        return [Named(t.id, t.commit_id) for t in reply.tags], reply.has_more

    return model_response(await list_refs(fetch, page))


@router.post(TAGS, status_code=201)
async def create_tag(ctx: Ctx, request: Request, repository: str) -> Response:
    # `force` lets lakeFS write to a read-only repository; Silt has none, so it changes nothing
    # (it never replaces an existing tag, in lakeFS either).
    await ctx.authorize(WRITE_REPO, repository)
    body = await json_body(request, TagCreation)
    await _refuse_branch_name(ctx, repository, body.id)
    # Made for the caller: its hooks read as the caller (engine/actions/read_access.py).
    created = api.CreateTagRequest(repository=repository, id=body.id, ref=body.ref, user=ctx.caller.user_id)
    try:
        info = await ctx.call(ctx.backend.graveler.CreateTag, created)
    except ApiError as exc:
        if exc.status == 409:
            raise ApiError(409, f"{TAG_EXISTS}: {exc.message}") from None
        raise
    return model_response(convert.ref(info.id, info.commit_id), 201)


async def _refuse_branch_name(ctx: Ctx, repository: str, name: str) -> None:
    """A tag named like a branch would make that name mean two refs: lakeFS refuses it (409)."""
    try:
        await ctx.call(ctx.backend.graveler.GetBranch, api.GetBranchRequest(repository=repository, name=name))
    except ApiError as exc:
        if exc.status == 404:
            return
        if exc.status == 400:
            return  # not a valid branch name; graveler judges it as a tag name next
        raise
    raise ApiError(409, f"conflict found: a branch is named {name!r}")


@router.get(TAG)
async def get_tag(ctx: Ctx, repository: str, tag: str) -> Response:
    await ctx.authorize(READ_REFS, repository)
    info = await ctx.call(ctx.backend.graveler.GetTag, api.GetTagRequest(repository=repository, id=tag))
    return model_response(convert.ref(info.id, info.commit_id))


@router.delete(TAG, status_code=204)
async def delete_tag(ctx: Ctx, repository: str, tag: str, force: bool = False) -> Response:
    # `force`: as on create, only meaningful for lakeFS's read-only repositories.
    await ctx.authorize(WRITE_REPO, repository)
    deletion = api.DeleteTagRequest(repository=repository, id=tag, user=ctx.caller.user_id)
    await ctx.call(ctx.backend.graveler.DeleteTag, deletion)
    return no_content()
