"""Refs: the diff between two refs, merge into a branch, and the merge base of two refs."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query, Request, Response
from fastapi.responses import JSONResponse
from lakefs_sdk.models import DiffList, DiffObjectStat, FindMergeBaseResult, Merge, MergeResult

from edge.api import convert
from edge.api.context import Ctx
from edge.api.diff.visible import visible_diff_page
from edge.api.filtered_pages import listing_of, next_offset, resume_after
from edge.api.paging import MAX_TOKEN, PrefixPageParams, pagination
from edge.api.refs import table_merges
from edge.api.refs.conflicts import check_merge
from edge.api.refs.merge import (
    STRATEGY_LABELS,
    STRATEGY_METADATA_KEY,
    conflict_body,
    lakefs_call,
    optional_body,
    strategy_of,
)
from edge.api.responses import model_response
from silt.graveler.v1 import graveler_pb2 as api
from silt.iam_actions import COMMIT_BRANCH, READ_REFS, branch_resource

# The two ends of a merge, as lakeFS's paths name them (merge and its base).
SourceRef = Annotated[str, Path(alias="sourceRef", max_length=MAX_TOKEN)]
DestinationBranch = Annotated[str, Path(alias="destinationBranch", max_length=MAX_TOKEN)]

router = APIRouter()

REFS = "/repositories/{repository}/refs"
MERGE = REFS + "/{sourceRef}/merge/{destinationBranch}"


@router.get(REFS + "/{leftRef}/diff/{rightRef}")
async def diff_refs(
    ctx: Ctx,
    repository: str,
    left_ref: Annotated[str, Path(alias="leftRef", max_length=MAX_TOKEN)],
    right_ref: Annotated[str, Path(alias="rightRef", max_length=MAX_TOKEN)],
    page: PrefixPageParams,
    delimiter: Annotated[str, Query(max_length=MAX_TOKEN)] = "",
    type: Literal["two_dot", "three_dot"] = "three_dot",
    include_right_stats: bool = False,
) -> Response:
    scope = await ctx.read_repo_scope(repository)
    size = page.size
    listing = listing_of(ctx, "diff", repository, left_ref, right_ref, type, page.prefix, delimiter)

    async def read(after: str, amount: int) -> api.DiffResponse:
        request = api.DiffRequest(
            repository=repository,
            left_ref=left_ref,
            right_ref=right_ref,
            three_dot=type == "three_dot",
            prefix=page.prefix,
            delimiter=delimiter,
            after=after,
            amount=amount,
        )
        reply: api.DiffResponse = await ctx.call(ctx.backend.graveler.Diff, request)
        return reply

    visible = await visible_diff_page(scope, read, resume_after(ctx, page.after, listing, scope, delimiter), size)
    items, has_more = visible.items, visible.has_more
    results = []
    for item in items:
        diff = convert.diff(item)
        if include_right_stats and item.HasField("right") and item.type != api.DIFF_TYPE_PREFIX_CHANGED:
            diff.right = DiffObjectStat(
                checksum=item.right.etag,
                mtime=int(item.right.last_modified.seconds),
                content_type=item.right.content_type,
            )
        results.append(diff)
    body = DiffList(
        pagination=pagination(
            has_more, next_offset(ctx, visible, listing, items[-1].key if items else ""), len(items), size
        ),
        results=results,
    )
    return model_response(body)


@router.post(MERGE)
async def merge_into_branch(
    ctx: Ctx,
    request: Request,
    repository: str,
    source_ref: SourceRef,
    destination: DestinationBranch,
) -> Response:
    await ctx.authorize(COMMIT_BRANCH, branch_resource(repository, destination))
    body = await optional_body(request, Merge)
    strategy = strategy_of(body.strategy)
    metadata = {**(body.metadata or {}), STRATEGY_METADATA_KEY: STRATEGY_LABELS[body.strategy or ""]}

    async def run(resolutions: list[api.MergeResolution]) -> api.MergeResponse:
        merge = api.MergeRequest(
            repository=repository,
            source_ref=source_ref,
            destination_branch=destination,
            strategy=strategy,
            squash=bool(body.squash_merge),
            # lakeFS's `force` also lets a merge with nothing new through (and writes to read-only
            # repositories, which Silt does not have).
            allow_empty=bool(body.allow_empty or body.force),
            message=body.message or f"Merge '{source_ref}' into '{destination}'",
            metadata=metadata,
            committer=ctx.caller.user_id,
            resolutions=resolutions,
        )
        reply: api.MergeResponse = await lakefs_call(ctx.call(ctx.backend.graveler.Merge, merge))
        return reply

    answer = await table_merges.merge(ctx, repository, source_ref, destination, run)
    reply = answer.reply
    if not reply.HasField("commit"):
        # The schema names MergeResult for a 409 and lakeFS plans the Error model: both fit.
        return JSONResponse(conflict_body(reply, answer.tables), status_code=409)
    return model_response(MergeResult(reference=reply.commit.id))


@router.get(MERGE)
async def find_merge_base(
    ctx: Ctx,
    repository: str,
    source_ref: SourceRef,
    destination: DestinationBranch,
) -> Response:
    await ctx.authorize(READ_REFS, repository)
    # Resolved once, so the base is of exactly the two commits answered.
    source = await _resolve(ctx, repository, source_ref)
    dest = await _resolve(ctx, repository, destination)
    request = api.FindMergeBaseRequest(repository=repository, left_ref=source, right_ref=dest)
    base = await ctx.call(ctx.backend.graveler.FindMergeBase, request)
    result = FindMergeBaseResult(source_commit_id=source, destination_commit_id=dest, base_commit_id=base.commit_id)
    return model_response(result)


@router.get(MERGE + "/conflicts")
async def find_merge_conflicts(
    ctx: Ctx,
    repository: str,
    source_ref: SourceRef,
    destination: DestinationBranch,
) -> Response:
    """Silt's own: whether merging source into destination would conflict now, and where, without
    merging (edge/api/refs/conflicts.py). The conflicts are listed as a failed merge's 409 lists
    them; the commits compared are named, as findMergeBase names them."""
    # The answer names changed keys: only for a caller who may read every key.
    await ctx.authorize_every_key(repository)
    check = await check_merge(ctx, repository, source_ref, destination)
    return JSONResponse(check.body())


async def _resolve(ctx: Ctx, repository: str, ref: str) -> str:
    reply = await ctx.call(ctx.backend.graveler.ResolveRef, api.ResolveRefRequest(repository=repository, ref=ref))
    commit_id: str = reply.commit_id
    return commit_id
