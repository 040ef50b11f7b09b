"""Last-access rules: "objects under these prefixes of this branch not read or written for N
days are expired" (docs/design/gc.md, "Retention by last access").

They are part of a repository's GC rules record (``gc/rules``), so setting and deleting them
needs the same administrative actions as retention does, and they are bounded like it.
"""

from __future__ import annotations

from collections.abc import Sequence

from silt.errors import InvalidArgument
from silt.graveler.v1 import model_pb2 as pb

MAX_LAST_ACCESS_RULES = 100
MAX_PREFIXES_PER_RULE = 100
MAX_PREFIX_BYTES = 1024
MIN_LAST_ACCESS_DAYS = 1
MAX_LAST_ACCESS_DAYS = 3650
_MAX_BRANCH_NAME = 256


def validate_last_access_rules(rules: Sequence[pb.LastAccessRule]) -> None:
    if len(rules) > MAX_LAST_ACCESS_RULES:
        raise InvalidArgument(f"at most {MAX_LAST_ACCESS_RULES} last-access rules, got {len(rules)}")
    for number, rule in enumerate(rules, start=1):
        where = f"last-access rule {number}"
        if not rule.branch or len(rule.branch) > _MAX_BRANCH_NAME:
            raise InvalidArgument(f"{where}: invalid branch name {rule.branch[:64]!r}")
        if not MIN_LAST_ACCESS_DAYS <= rule.days <= MAX_LAST_ACCESS_DAYS:
            raise InvalidArgument(f"{where}: days must be {MIN_LAST_ACCESS_DAYS}..{MAX_LAST_ACCESS_DAYS}")
        # No prefix would be a rule that matches nothing; the whole branch is said with "".
        if not 1 <= len(rule.prefixes) <= MAX_PREFIXES_PER_RULE:
            raise InvalidArgument(f'{where}: 1..{MAX_PREFIXES_PER_RULE} prefixes ("" for the whole branch)')
        for prefix in rule.prefixes:
            if len(prefix.encode()) > MAX_PREFIX_BYTES:
                raise InvalidArgument(f"{where}: a prefix is longer than {MAX_PREFIX_BYTES} bytes")


def rules_of_branch(rules: pb.GCRules | None, branch: str) -> list[pb.LastAccessRule]:
    return [rule for rule in (rules.last_access_rules if rules else []) if rule.branch == branch]


def covering_prefixes(rules: Sequence[pb.LastAccessRule]) -> list[str]:
    """The rules' prefixes without those another one already covers, sorted: each key is
    listed once even when rules overlap."""
    kept: list[str] = []
    for prefix in sorted({p for rule in rules for p in rule.prefixes}):
        if not any(prefix.startswith(outer) for outer in kept):
            kept.append(prefix)
    return kept


def describe(rule: pb.LastAccessRule) -> str:
    """A rule in a line, for commit messages: long prefix lists are cut."""
    shown = ", ".join(repr(p) for p in list(rule.prefixes)[:3])
    more = f" and {len(rule.prefixes) - 3} more" if len(rule.prefixes) > 3 else ""
    return f"not read or written for {rule.days} days under {shown}{more} of branch {rule.branch!r}"
