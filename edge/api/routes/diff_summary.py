"""Silt's own diff summaries: a diff as a tree of "/"-delimited folders, one folder's direct
children a page at a time, each folder with its added/removed/changed counts and sizes, and the
totals (diff/tree.py, diff_summary.py)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Response
from fastapi.responses import JSONResponse

from edge.api.context import Ctx
from edge.api.diff.summary import SUMMARY_PAGE, Page, diff_page, summary_page, uncached_tree
from edge.api.diff.tree import CHANGE_TYPES, MAX_FILTER, DiffTree
from edge.api.errors import bad_request
from edge.api.paging import MAX_TOKEN, PrefixPageParams, PrefixPageQuery, pagination
from silt.graveler.v1 import graveler_pb2 as api

router = APIRouter()

Filter = Annotated[str, Query(max_length=MAX_FILTER, description="only paths containing this text")]


@router.get("/repositories/{repository}/refs/{leftRef}/diff/{rightRef}/summary")
async def summarize_diff(
    ctx: Ctx,
    repository: str,
    left_ref: Annotated[str, Path(alias="leftRef", max_length=MAX_TOKEN)],
    right_ref: Annotated[str, Path(alias="rightRef", max_length=MAX_TOKEN)],
    requested: PrefixPageParams,
    filter: Filter = "",
    type: Literal["two_dot", "three_dot"] = "three_dot",
) -> Response:
    # Summaries are cached per pair of commits for every reader: not filtered per caller.
    await ctx.authorize_every_key(repository)
    _check_prefix(requested.prefix)
    # Resolved first, so the cache key names immutable commits and the diff read is of them.
    left = await _resolve(ctx, repository, left_ref)
    right = await _resolve(ctx, repository, right_ref)

    async def read(cursor: str, want: int) -> Page:
        request = api.DiffSummaryRequest(
            repository=repository,
            left_ref=left,
            right_ref=right,
            three_dot=type == "three_dot",
            after=cursor,
            amount=want,
        )
        return summary_page(await ctx.call(ctx.backend.graveler.DiffSummary, request))

    tree = await ctx.backend.diff_summaries.tree((repository, left, right, type), read, filter, SUMMARY_PAGE)
    return _answer(tree, requested, {"left_commit": left, "right_commit": right})


@router.get("/repositories/{repository}/branches/{branch}/diff/summary")
async def summarize_uncommitted(
    ctx: Ctx,
    repository: str,
    branch: Annotated[str, Path(max_length=MAX_TOKEN)],
    requested: PrefixPageParams,
    filter: Filter = "",
) -> Response:
    await ctx.authorize_every_key(repository)
    _check_prefix(requested.prefix)

    async def read(cursor: str, want: int) -> Page:
        request = api.DiffBranchRequest(repository=repository, branch=branch, after=cursor, amount=want)
        return diff_page(await ctx.call(ctx.backend.graveler.DiffBranch, request))

    tree = await uncached_tree(read, filter)
    return _answer(tree, requested, {"branch": branch})


def _check_prefix(prefix: str) -> None:
    if prefix and not prefix.endswith("/"):
        raise bad_request("prefix must be empty or a folder ending with '/'")


async def _resolve(ctx: Ctx, repository: str, ref: str) -> str:
    reply = await ctx.call(ctx.backend.graveler.ResolveRef, api.ResolveRefRequest(repository=repository, ref=ref))
    commit_id: str = reply.commit_id
    return commit_id


def _answer(tree: DiffTree, requested: PrefixPageQuery, sides: dict[str, str]) -> Response:
    prefix, size = requested.prefix, requested.size
    children, has_more = tree.page(prefix, requested.after, size)
    results: list[dict[str, Any]] = []
    for child in children:
        if child.folder is not None:
            results.append(
                {
                    "path": child.path,
                    "path_type": "common_prefix",
                    "count": child.folder.total,
                    "stats": child.folder.as_json(),
                }
            )
        elif child.change is not None:
            results.append(
                {
                    "path": child.path,
                    "path_type": "object",
                    "type": CHANGE_TYPES[child.change.kind],
                    "size_bytes": child.change.size,
                }
            )
    folder = tree.folders.get(prefix)
    root = tree.folders[""]
    body = {
        **sides,
        "prefix": prefix,
        "totals": {"count": root.total, "stats": root.as_json()},
        "prefix_totals": {"count": folder.total if folder else 0, "stats": (folder or type(root)()).as_json()},
        "truncated": tree.truncated,
        "pagination": pagination(has_more, children[-1].path if children else "", len(children), size).to_dict(),
        "results": results,
    }
    return JSONResponse(body)
