"""lakeFS's branch protection rules over graveler's richer ones.

A lakeFS rule is a pattern whose branches refuse direct writes and commits; graveler's rule
(engine/features/protection.py) is a pattern with `block_direct_writes` and
`required_approvals` and `required_checks`. The REST API shows every protecting rule as
`{pattern}` plus Silt's three fields (lakefs-sdk ignores fields it does not know), and reads them back the same way:

* a rule sent as `{pattern}` alone keeps what graveler already holds for that pattern when it
  protects (so a lakeFS client rewriting the list never drops required approvals), and is
  `block_direct_writes: true` otherwise;
* Silt's fields, when sent, are taken as they are; a rule that would protect nothing is refused.

Every change is a read, a rewrite and graveler's compare-and-set on the etag read
(`SetBranchProtection.if_match`): concurrent writers never lose each other's rules.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from fastapi import Request
from pydantic.v1 import BaseModel, StrictBool, StrictInt, constr

from edge.api.bodies import read_body, require_json, validate
from edge.api.context import Context
from edge.api.errors import ApiError, bad_request
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb

# What graveler says when if_match no longer names the rules (engine/features/protection.py).
ETAG_MISMATCH = "etag mismatch"
# A writer without If-Match retries its read-rewrite-set this many times when others win.
MAX_ATTEMPTS = 5

Rules = list[pb.BranchProtectionRule]


class RuleBody(BaseModel):
    """lakeFS's BranchProtectionRule (`pattern`, at least one character) and Silt's two fields."""

    pattern: constr(strict=True, min_length=1)  # type: ignore[valid-type]
    block_direct_writes: StrictBool | None = None
    required_approvals: StrictInt | None = None
    required_checks: list[constr(strict=True, min_length=1, max_length=512)] | None = None  # type: ignore[valid-type]


def protects(rule: pb.BranchProtectionRule) -> bool:
    return rule.block_direct_writes or rule.required_approvals > 0 or bool(rule.required_checks)


def shown(rules: Rules) -> list[dict[str, Any]]:
    return [
        {
            "pattern": r.pattern,
            "block_direct_writes": r.block_direct_writes,
            "required_approvals": r.required_approvals,
            "required_checks": list(r.required_checks),
        }
        for r in rules
        if protects(r)
    ]


def etag_header(etag: str) -> str:
    return f'"{etag}"'


def parse_if_match(value: str) -> str | None:
    """An entity tag as sent back: quoted or not, weak or not; None for `*` (any rules at all,
    and there always are some, if only none: the write is unconditional)."""
    value = value.strip()
    if value == "*":
        return None
    if value.startswith("W/"):
        value = value[2:]
    return value.strip('"')


# lakeFS's patterns also know `?` and `[...]`; graveler's globs have only `*`, and no branch name
# holds either character, so such a rule would silently protect nothing: refused instead.
UNSUPPORTED = ("?", "[")


def to_rule(body: RuleBody, current: Rules) -> pb.BranchProtectionRule:
    if any(c in body.pattern for c in UNSUPPORTED):
        raise bad_request(f"pattern {body.pattern[:256]!r}: only '*' is a wildcard ('?' and '[...]' are not supported)")
    old = next((r for r in current if r.pattern == body.pattern), None)
    if body.block_direct_writes is None and body.required_approvals is None and body.required_checks is None:
        if old is not None and protects(old):
            return old
        return pb.BranchProtectionRule(pattern=body.pattern, block_direct_writes=True)
    rule = pb.BranchProtectionRule(
        pattern=body.pattern,
        block_direct_writes=True if body.block_direct_writes is None else body.block_direct_writes,
        required_approvals=body.required_approvals or 0,
        required_checks=body.required_checks or [],
    )
    if not protects(rule):
        raise bad_request(
            f"rule {body.pattern!r} protects nothing: block direct writes, require approvals or require checks"
        )
    return rule


# Graveler's own limit (engine/features/protection.py MAX_RULES; services do not import each other).
MAX_RULES = 100


async def rule_list(request: Request) -> list[RuleBody]:
    """A JSON array of rules (the body of lakeFS's PUT settings/branch_protection)."""
    require_json(request)
    raw = await read_body(request, request.app.state.max_body_bytes)
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        raise bad_request("request body is not valid JSON") from None
    if not isinstance(data, list):
        raise bad_request("request body must be a JSON array of branch protection rules")
    if len(data) > MAX_RULES:
        # Graveler refuses more anyway; refused here before each is validated.
        raise bad_request(f"at most {MAX_RULES} branch protection rules are allowed, got {len(data)}")
    rules = []
    for item in data:
        if not isinstance(item, dict):
            raise bad_request("each branch protection rule must be a JSON object with a pattern")
        rules.append(validate(RuleBody, item))
    return rules


async def read(ctx: Context, repository: str) -> api.BranchProtectionInfo:
    request = api.GetBranchProtectionRequest(repository=repository)
    return await ctx.call(ctx.backend.graveler.GetBranchProtection, request)


def precondition_failed() -> ApiError:
    return ApiError(412, "branch protection rules changed since they were read (If-Match does not match the ETag)")


async def change(ctx: Context, repository: str, rewrite: Callable[[Rules], Rules], if_match: str | None) -> str:
    """Rewrite the rules atomically; the new etag.

    if_match None: retried on a lost race. "" (lakeFS: the header sent empty): only while no
    rule is set. Otherwise: only while the rules still have that etag (412 if not).
    """
    for _ in range(MAX_ATTEMPTS):
        current = await read(ctx, repository)
        if if_match == "" and any(protects(r) for r in current.rules):
            raise precondition_failed()
        if if_match and if_match != current.etag:
            raise precondition_failed()
        rules = rewrite(list(current.rules))
        request = api.SetBranchProtectionRequest(repository=repository, rules=rules, if_match=current.etag)
        try:
            info = await ctx.call(ctx.backend.graveler.SetBranchProtection, request)
        except ApiError as exc:
            if exc.status == 400 and ETAG_MISMATCH in exc.message:
                if if_match is not None:
                    raise precondition_failed() from None
                continue
            raise
        return str(info.etag)
    raise ApiError(503, "branch protection rules kept changing while being set; retry")
