"""Repository settings: branch protection rules and garbage-collection rules.

Both live in graveler (engine/features/protection.py, retention.py). Reading them needs
ReadRepo; changing them needs the administrative actions writers do not hold
(SetBranchProtection, SetGCRules, DeleteGCRules). The older lakeFS paths
(`/branch_protection`, `/gc/rules`) that lakectl and older clients call are served too.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import APIRouter, Header, Request, Response
from fastapi.responses import JSONResponse
from lakefs_sdk.models import GarbageCollectionRule, GarbageCollectionRules
from pydantic.v1 import BaseModel, StrictStr

from edge.api import last_access_rules as last_access
from edge.api.bodies import body_limit, json_object, validate
from edge.api.context import Ctx
from edge.api.errors import bad_request, not_found
from edge.api.pulls import protection
from edge.api.responses import model_response, no_content
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb
from silt.iam_actions import DELETE_GC_RULES, READ_REPO, SET_BRANCH_PROTECTION, SET_GC_RULES

router = APIRouter()

REPOSITORY = "/repositories/{repository}"
PROTECTION = REPOSITORY + "/settings/branch_protection"
OLD_PROTECTION = REPOSITORY + "/branch_protection"
GC_RULES = REPOSITORY + "/settings/gc_rules"
OLD_GC_RULES = REPOSITORY + "/gc/rules"
# The longest If-Match taken: an etag is 32 hex digits, quoted.
MAX_IF_MATCH = 256

IfMatch = Annotated[str | None, Header(alias="If-Match", max_length=MAX_IF_MATCH)]


def _older(path: str, method: str, endpoint: Callable[..., Awaitable[Response]], name: str, **route: Any) -> None:
    """The older lakeFS path of an operation, answered by the same function under lakeFS's name
    for it (the route's name: its operation in metrics and the access log, observe.py)."""
    router.add_api_route(path, endpoint, methods=[method], name=name, **route)


# --- branch protection --------------------------------------------------------------------


@router.get(PROTECTION)
async def get_branch_protection_rules(ctx: Ctx, repository: str) -> Response:
    await ctx.authorize(READ_REPO, repository)
    info = await protection.read(ctx, repository)
    return JSONResponse(protection.shown(list(info.rules)), headers={"ETag": protection.etag_header(info.etag)})


_older(OLD_PROTECTION, "GET", get_branch_protection_rules, "internal_get_branch_protection_rules")


@router.put(PROTECTION, status_code=204)
async def set_branch_protection_rules(
    ctx: Ctx, request: Request, repository: str, if_match: IfMatch = None
) -> Response:
    await ctx.authorize(SET_BRANCH_PROTECTION, repository)
    bodies = await protection.rule_list(request)
    patterns = [b.pattern for b in bodies]
    if len(set(patterns)) != len(patterns):
        raise bad_request("a branch protection pattern appears twice")

    def rewrite(current: protection.Rules) -> protection.Rules:
        return [protection.to_rule(body, current) for body in bodies]

    wanted = None if if_match is None else protection.parse_if_match(if_match)
    etag = await protection.change(ctx, repository, rewrite, wanted)
    return Response(status_code=204, headers={"ETag": protection.etag_header(etag)})


@router.post(OLD_PROTECTION, status_code=204)
async def internal_create_branch_protection_rule(ctx: Ctx, request: Request, repository: str) -> Response:
    await ctx.authorize(SET_BRANCH_PROTECTION, repository)
    body = validate(protection.RuleBody, await json_object(request, request.app.state.max_body_bytes))

    def rewrite(current: protection.Rules) -> protection.Rules:
        others = [r for r in current if r.pattern != body.pattern]
        return [*others, protection.to_rule(body, current)]

    await protection.change(ctx, repository, rewrite, None)
    return no_content()


class PatternBody(BaseModel):
    pattern: StrictStr


@router.delete(OLD_PROTECTION, status_code=204)
async def internal_delete_branch_protection_rule(ctx: Ctx, request: Request, repository: str) -> Response:
    await ctx.authorize(SET_BRANCH_PROTECTION, repository)
    body = validate(PatternBody, await json_object(request, request.app.state.max_body_bytes))

    def rewrite(current: protection.Rules) -> protection.Rules:
        if not any(r.pattern == body.pattern for r in current):
            raise not_found(f"no branch protection rule with pattern {body.pattern!r}")
        return [r for r in current if r.pattern != body.pattern]

    await protection.change(ctx, repository, rewrite, None)
    return no_content()


@router.get(OLD_PROTECTION + "/set_allowed", status_code=204)
async def create_branch_protection_rule_preflight(ctx: Ctx, repository: str) -> Response:
    await ctx.authorize(SET_BRANCH_PROTECTION, repository)
    await protection.read(ctx, repository)  # 404 for a repository that does not exist
    return no_content()


# --- garbage collection rules --------------------------------------------------------------


@router.get(GC_RULES)
async def get_gc_rules(ctx: Ctx, repository: str) -> Response:
    await ctx.authorize(READ_REPO, repository)
    info = await ctx.call(ctx.backend.graveler.GetGCRules, api.GetGCRulesRequest(repository=repository))
    if not info.is_set:
        # As lakeFS: a repository without rules answers 404 (GC then keeps everything).
        raise not_found(f"no garbage collection rules are set for repository {repository!r}")
    branches = [
        GarbageCollectionRule(branch_id=branch, retention_days=days)
        for branch, days in sorted(info.rules.branch_retention_days.items())
    ]
    rules = GarbageCollectionRules(default_retention_days=info.rules.default_retention_days, branches=branches)
    if not info.rules.last_access_rules:
        return model_response(rules)
    return JSONResponse(rules.to_dict() | {last_access.FIELD: last_access.rules_as_json(info.rules)})


_older(OLD_GC_RULES, "GET", get_gc_rules, "internal_get_garbage_collection_rules")


@router.put(GC_RULES, status_code=204)
async def set_gc_rules(ctx: Ctx, request: Request, repository: str) -> Response:
    await ctx.authorize(SET_GC_RULES, repository)
    raw = await json_object(request, body_limit(request))
    body = validate(GarbageCollectionRules, raw)
    per_branch: dict[str, int] = {}
    for rule in body.branches:
        if rule.branch_id in per_branch:
            raise bad_request(f"branch {rule.branch_id!r} has two retention rules")
        per_branch[rule.branch_id] = rule.retention_days
    expiring = last_access.rules_in_body(raw)
    rules = pb.GCRules(
        default_retention_days=body.default_retention_days,
        branch_retention_days=per_branch,
        last_access_rules=expiring or [],
    )
    change = api.SetGCRulesRequest(repository=repository, rules=rules, keep_last_access_rules=expiring is None)
    await ctx.call(ctx.backend.graveler.SetGCRules, change)
    return no_content()


_older(OLD_GC_RULES, "POST", set_gc_rules, "internal_set_garbage_collection_rules", status_code=204)


@router.delete(GC_RULES, status_code=204)
async def delete_gc_rules(ctx: Ctx, repository: str) -> Response:
    await ctx.authorize(DELETE_GC_RULES, repository)
    await ctx.call(ctx.backend.graveler.DeleteGCRules, api.DeleteGCRulesRequest(repository=repository))
    return no_content()


_older(OLD_GC_RULES, "DELETE", delete_gc_rules, "internal_delete_garbage_collection_rules", status_code=204)


@router.get(OLD_GC_RULES + "/set_allowed", status_code=204)
async def set_garbage_collection_rules_preflight(ctx: Ctx, repository: str) -> Response:
    await ctx.authorize(SET_GC_RULES, repository)
    await ctx.call(ctx.backend.graveler.GetGCRules, api.GetGCRulesRequest(repository=repository))
    return no_content()
