"""Silt's extension of lakeFS's GC rules body: ``last_access_rules`` (docs/design/gc.md,
"Retention by last access").

lakeFS's clients ignore fields their model does not name (lakefs-sdk's ``from_dict`` reads only
``default_retention_days`` and ``branches``), so a GET may carry the extra list. A PUT without it
keeps the stored last-access rules: a lakeFS client that rewrites retention never drops them.
A PUT with it replaces them (an empty list removes them).
"""

from __future__ import annotations

from typing import Any

from pydantic.v1 import BaseModel, Extra, StrictInt, StrictStr

from edge.api.bodies import validate
from edge.api.errors import bad_request
from silt.graveler.v1 import model_pb2 as pb

FIELD = "last_access_rules"


class LastAccessRuleBody(BaseModel):
    branch: StrictStr
    prefixes: list[StrictStr]
    days: StrictInt

    class Config:
        extra = Extra.forbid


def rules_in_body(body: dict[str, Any]) -> list[pb.LastAccessRule] | None:
    """The body's last-access rules; None when it names none (keep the stored ones).
    Their bounds are graveler's to check (answered as 400)."""
    if FIELD not in body:
        return None
    items = body[FIELD]
    if not isinstance(items, list):
        raise bad_request(f"{FIELD} must be a list of {{branch, prefixes, days}}")
    rules = [validate(LastAccessRuleBody, item if isinstance(item, dict) else {}) for item in items]
    return [pb.LastAccessRule(branch=r.branch, prefixes=r.prefixes, days=r.days) for r in rules]


def rules_as_json(rules: pb.GCRules) -> list[dict[str, Any]]:
    return [{"branch": r.branch, "prefixes": list(r.prefixes), "days": r.days} for r in rules.last_access_rules]
