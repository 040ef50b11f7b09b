"""Pull requests (lakeFS's `pulls` API) and, under Silt's own paths, their reviews and comments.

Graveler keeps them (engine/features/pulls.py); the author of a pull request, review or
comment and the committer of a merge is the caller this API authenticated, named to graveler
through `auth:ActForUser`, which only the API's service user holds.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import JSONResponse
from lakefs_sdk.models import MergeResult, PullRequestBasic, PullRequestCreation, PullRequestCreationResponse
from pydantic.v1 import BaseModel, StrictStr

from edge.api.bodies import json_body, json_object, validate
from edge.api.context import Ctx
from edge.api.errors import ApiError, bad_request
from edge.api.paging import PageParams, PrefixPageParams, pagination
from edge.api.pulls import convert
from edge.api.refs import table_merges
from edge.api.refs.merge import optional_body, strategy_of
from edge.api.responses import model_response, no_content
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb
from silt.iam_actions import COMMIT_BRANCH, READ_REPO, WRITE_REPO, branch_resource
from silt.paging import MAX_PAGE

router = APIRouter()

PULLS = "/repositories/{repository}/pulls"
PULL = PULLS + "/{pull_request}"
# A listing that filters (by prefix, or "closed" = closed or merged) stops after this many pull
# requests examined and says where to go on: bounded work per request.
MAX_EXAMINED = 10 * MAX_PAGE
MAX_CALLS = 10  # graveler's filter may answer empty pages with more to come: bound those too
# Conflicting keys named in a 409's message; the rest are counted.
MAX_CONFLICTS_SHOWN = 10

# lakeFS: open, closed (closed or merged), all; Silt adds merged (merged only).
StatusFilter = Literal["open", "closed", "merged", "all"]
_GRAVELER_FILTER: dict[str, int] = {
    "open": pb.PULL_REQUEST_STATUS_OPEN,
    "merged": pb.PULL_REQUEST_STATUS_MERGED,
    "closed": pb.PULL_REQUEST_STATUS_UNSPECIFIED,  # closed and merged: filtered here
    "all": pb.PULL_REQUEST_STATUS_UNSPECIFIED,
}


def _wanted(status: str, info: api.PullRequestInfo) -> bool:
    if status == "closed":
        return info.pull_request.status in (pb.PULL_REQUEST_STATUS_CLOSED, pb.PULL_REQUEST_STATUS_MERGED)
    return True


@router.get(PULLS)
async def list_pull_requests(
    ctx: Ctx,
    repository: str,
    requested: PrefixPageParams,
    status: Annotated[StatusFilter, Query()] = "all",
) -> Response:
    await ctx.authorize(READ_REPO, repository)
    prefix, size = requested.prefix, requested.size
    # Graveler lists ids strictly after its cursor; every id with the prefix is after prefix[:-1].
    cursor = max(requested.after, prefix[:-1])
    found: list[api.PullRequestInfo] = []
    examined = 0
    exhausted = False
    filtering = bool(prefix) or status == "closed"
    calls = 0
    while len(found) <= size and examined < MAX_EXAMINED and calls < MAX_CALLS and not exhausted:
        calls += 1
        request = api.ListPullRequestsRequest(
            repository=repository,
            status=_GRAVELER_FILTER[status],  # type: ignore[arg-type]
            after=cursor,
            amount=MAX_PAGE if filtering else size + 1,
        )
        reply = await ctx.call(ctx.backend.graveler.ListPullRequests, request)
        exhausted = not reply.has_more
        for info in reply.pull_requests:
            pull_id = info.pull_request.id
            if prefix and not pull_id.startswith(prefix) and pull_id > prefix:
                exhausted = True  # past every id with the prefix
                break
            examined += 1
            cursor = pull_id
            if pull_id.startswith(prefix) and _wanted(status, info):
                found.append(info)
        else:
            # Graveler's own status filter may have read past records it did not return.
            if reply.has_more and reply.next_after > cursor:
                cursor = reply.next_after
    page = found[:size]
    has_more = len(found) > size or not exhausted
    next_offset = page[-1].pull_request.id if len(found) > size else cursor
    body = {
        "pagination": pagination(has_more, next_offset, len(page), size).to_dict(),
        "results": [convert.pull_request(info) for info in page],
    }
    return JSONResponse(body)


@router.post(PULLS, status_code=201)
async def create_pull_request(ctx: Ctx, request: Request, repository: str) -> Response:
    await ctx.authorize(WRITE_REPO, repository)
    body = await json_body(request, PullRequestCreation)
    created = api.CreatePullRequestRequest(
        repository=repository,
        title=body.title,
        description=body.description or "",
        source_branch=body.source_branch,
        destination_branch=body.destination_branch,
        author=ctx.caller.user_id,
    )
    info = await ctx.call(ctx.backend.graveler.CreatePullRequest, created)
    return model_response(PullRequestCreationResponse(id=info.pull_request.id), 201)


@router.get(PULL)
async def get_pull_request(ctx: Ctx, repository: str, pull_request: str) -> Response:
    await ctx.authorize(READ_REPO, repository)
    info = await ctx.call(
        ctx.backend.graveler.GetPullRequest, api.GetPullRequestRequest(repository=repository, id=pull_request)
    )
    return JSONResponse(convert.pull_request(info))


@router.patch(PULL, status_code=204)
async def update_pull_request(ctx: Ctx, request: Request, repository: str, pull_request: str) -> Response:
    await ctx.authorize(WRITE_REPO, repository)
    body = await json_body(request, PullRequestBasic)
    update = api.UpdatePullRequestRequest(repository=repository, id=pull_request)
    if body.title is not None:
        update.title = body.title
    if body.description is not None:
        update.description = body.description
    if body.status == "merged":
        raise bad_request("a pull request is merged by PUT .../pulls/{id}/merge, not by setting its status")
    if body.status is not None:
        update.status = convert.STATUSES[body.status]
    await ctx.call(ctx.backend.graveler.UpdatePullRequest, update)
    # lakeFS's server answers 204 (its schema says 200 with no body; the SDK reads neither).
    return no_content()


def _conflicts(merge: api.MergeResponse) -> str:
    keys = [c.key for c in merge.conflicts[:MAX_CONFLICTS_SHOWN]]
    more = len(merge.conflicts) - len(keys)
    text = "conflict found: " + ", ".join(keys)
    if more > 0 or merge.conflicts_truncated:
        text += f" and {more if more > 0 else 'more'} other(s)"
    return text


class PullRequestMergeOptions(BaseModel):
    """Silt's optional body of a pull request's merge (lakeFS's has none): the strategy, by
    the names of a direct merge's `Merge.strategy`."""

    strategy: StrictStr | None = None


@router.put(PULL + "/merge")
async def merge_pull_request(ctx: Ctx, request: Request, repository: str, pull_request: str) -> Response:
    await ctx.authorize(WRITE_REPO, repository)
    # The merge commits on the destination (fixed when the pull request was opened), as lakeFS
    # asks fs:CreateCommit on it: a Deny of committing there holds for this merge too.
    opened = await ctx.call(
        ctx.backend.graveler.GetPullRequest, api.GetPullRequestRequest(repository=repository, id=pull_request)
    )
    await ctx.authorize(COMMIT_BRANCH, branch_resource(repository, opened.pull_request.destination_branch))
    options = await optional_body(request, PullRequestMergeOptions)
    strategy = strategy_of(options.strategy)

    async def run(resolutions: list[api.MergeResolution]) -> api.MergeResponse:
        merge = api.MergePullRequestRequest(
            repository=repository,
            id=pull_request,
            strategy=strategy,
            committer=ctx.caller.user_id,
            resolutions=resolutions,
        )
        reply: api.MergePullRequestResponse = await ctx.call(ctx.backend.graveler.MergePullRequest, merge)
        return reply.merge

    pulled = opened.pull_request
    answer = await table_merges.merge(ctx, repository, pulled.source_branch, pulled.destination_branch, run)
    if not answer.reply.HasField("commit"):
        # lakeFS's schema names MergeResult for 409 and says it becomes Error: this body is both.
        message = "; ".join([_conflicts(answer.reply), *(table.text() for table in answer.tables)])
        body = {"message": message, "reference": "", "tables": [table.body() for table in answer.tables]}
        return JSONResponse(body, status_code=409)
    return model_response(MergeResult(reference=answer.reply.commit.id))


# --- Silt's own: reviews, comments and checks (lakeFS has none) ----------------------------


class CheckRerun(BaseModel):
    name: StrictStr


@router.post(PULL + "/checks/rerun", status_code=202)
async def rerun_pull_request_check(ctx: Ctx, request: Request, repository: str, pull_request: str) -> Response:
    """Run one check again on the source's current head; it runs in the background."""
    await ctx.authorize(WRITE_REPO, repository)
    body = validate(CheckRerun, await json_object(request, request.app.state.max_body_bytes))
    rerun = api.RerunPullRequestCheckRequest(repository=repository, id=pull_request, name=body.name)
    info = await ctx.call(ctx.backend.graveler.RerunPullRequestCheck, rerun)
    return JSONResponse(convert.pull_request(info), status_code=202)


class ReviewCreation(BaseModel):
    verdict: Literal["approve", "request_changes"]
    body: StrictStr = ""


class CommentCreation(BaseModel):
    body: StrictStr


async def _source_head(ctx: Ctx, repository: str, branch: str) -> str:
    """The source branch's head, which reviews must be of to count; "" once it is deleted."""
    try:
        info = await ctx.call(ctx.backend.graveler.GetBranch, api.GetBranchRequest(repository=repository, name=branch))
    except ApiError as exc:
        if exc.status == 404:
            return ""
        raise
    return str(info.commit_id)


@router.get(PULL + "/reviews")
async def list_pull_request_reviews(ctx: Ctx, repository: str, pull_request: str) -> Response:
    await ctx.authorize(READ_REPO, repository)
    got = api.GetPullRequestRequest(repository=repository, id=pull_request)
    info = await ctx.call(ctx.backend.graveler.GetPullRequest, got)
    head = await _source_head(ctx, repository, info.pull_request.source_branch)
    reviews = [convert.review(r, head) for r in info.pull_request.reviews]
    return JSONResponse(
        {"results": reviews, "approvals": info.approvals, "required_approvals": info.required_approvals}
    )


@router.post(PULL + "/reviews", status_code=201)
async def submit_pull_request_review(ctx: Ctx, request: Request, repository: str, pull_request: str) -> Response:
    await ctx.authorize(WRITE_REPO, repository)
    body = validate(ReviewCreation, await json_object(request, request.app.state.max_body_bytes))
    submitted = api.SubmitPullRequestReviewRequest(
        repository=repository,
        id=pull_request,
        verdict=convert.VERDICTS[body.verdict],
        body=body.body,
        author=ctx.caller.user_id,
    )
    info = await ctx.call(ctx.backend.graveler.SubmitPullRequestReview, submitted)
    return JSONResponse(convert.pull_request(info), status_code=201)


@router.get(PULL + "/comments")
async def list_pull_request_comments(ctx: Ctx, repository: str, pull_request: str, page: PageParams) -> Response:
    await ctx.authorize(READ_REPO, repository)
    size = page.size
    listed = api.ListPullRequestCommentsRequest(repository=repository, id=pull_request, after=page.after, amount=size)
    reply = await ctx.call(ctx.backend.graveler.ListPullRequestComments, listed)
    comments = list(reply.comments)
    next_offset = comments[-1].id if comments else ""
    body: dict[str, Any] = {
        "pagination": pagination(reply.has_more, next_offset, len(comments), size).to_dict(),
        "results": [convert.comment(c) for c in comments],
    }
    return JSONResponse(body)


@router.post(PULL + "/comments", status_code=201)
async def add_pull_request_comment(ctx: Ctx, request: Request, repository: str, pull_request: str) -> Response:
    await ctx.authorize(WRITE_REPO, repository)
    body = validate(CommentCreation, await json_object(request, request.app.state.max_body_bytes))
    added = api.AddPullRequestCommentRequest(
        repository=repository, id=pull_request, body=body.body, author=ctx.caller.user_id
    )
    comment = await ctx.call(ctx.backend.graveler.AddPullRequestComment, added)
    return JSONResponse(convert.comment(comment), status_code=201)
