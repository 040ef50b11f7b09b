"""Users, groups, memberships and policies, from the source's lakeFS API to the target's.

Both sides are lakeFS's auth API (the target's is Silt's, which takes lakeFS's policy language).
Secrets cannot come across (lakeFS never shows one again), so users arrive without access keys:
each needs a new one in Silt. What exists already (a second run, or one of Silt's preset groups
of the same name) is kept, never overwritten, and reported when it differs; a policy the target
refuses is reported, not fatal: the rest of the migration does not depend on it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

PAGE = 1000
_CONFLICT = 409


@dataclass
class IamReport:
    users: int = 0
    groups: int = 0
    policies: int = 0
    memberships: int = 0
    attachments: int = 0
    refused: list[str] = field(default_factory=list)  # "policy NAME: why", and memberships, attachments
    kept: list[str] = field(default_factory=list)  # the target's own policy of a source policy's name


def _paged(list_page: Callable[..., Any], *args: str) -> Iterator[Any]:
    after = ""
    while True:
        page = list_page(*args, after=after, amount=PAGE)
        yield from page.results
        if not page.pagination.has_more:
            return
        after = page.pagination.next_offset


def _body(exc: Any) -> str:
    body = exc.body.decode(errors="replace") if isinstance(exc.body, bytes) else str(exc.body or exc.reason)
    return body.strip()[:300]


def copy_iam(source: Any, target: Any) -> IamReport:
    """source, target: lakefs_sdk.AuthApi of each side."""
    from lakefs_sdk import GroupCreation, Policy, UserCreation
    from lakefs_sdk.exceptions import ApiException

    report = IamReport()
    refused_policies: set[str] = set()

    def create(fn: Callable[..., Any], *args: Any) -> bool:
        """fn(*args); False if what it creates was there already."""
        try:
            fn(*args)
        except ApiException as exc:
            if exc.status == _CONFLICT:
                return False
            raise
        return True

    def link(what: str, fn: Callable[..., Any], *args: Any) -> bool:
        """A membership or an attachment: one the target refuses (the caller may not grant
        what it holds, say) is reported and the rest goes on."""
        try:
            return create(fn, *args)
        except ApiException as exc:
            report.refused.append(f"{what}: {exc.status} {_body(exc)}")
            return False

    existing = {policy.id: policy for policy in _paged(target.list_policies)}
    for policy in _paged(source.list_policies):
        statements = [statement.to_dict() for statement in policy.statement]
        if policy.id in existing:
            # The target's own (its presets, a policy of the same name): kept, never overwritten.
            kept = [statement.to_dict() for statement in existing[policy.id].statement]
            if kept != statements:
                report.kept.append(f"policy {policy.id}: the target has its own of that name, kept")
            continue
        try:
            report.policies += create(
                target.create_policy, Policy.from_dict({"id": policy.id, "statement": statements})
            )
        except ApiException as exc:
            refused_policies.add(policy.id)
            report.refused.append(f"policy {policy.id}: {exc.status} {_body(exc)}")
    # Users before groups: a membership names both.
    for user in _paged(source.list_users):
        report.users += create(target.create_user, UserCreation.from_dict({"id": user.id}))
        attached = {policy.id for policy in _paged(target.list_user_policies, user.id)}
        for policy in _paged(source.list_user_policies, user.id):
            if policy.id not in refused_policies and policy.id not in attached:
                attach = f"policy {policy.id} on user {user.id}"
                report.attachments += link(attach, target.attach_policy_to_user, user.id, policy.id)
    for group in _paged(source.list_groups):
        report.groups += create(target.create_group, GroupCreation(id=group.id))
        members = {member.id for member in _paged(target.list_group_members, group.id)}
        attached = {policy.id for policy in _paged(target.list_group_policies, group.id)}
        for member in _paged(source.list_group_members, group.id):
            if member.id in members:
                continue
            joins = f"user {member.id} in group {group.id}"
            report.memberships += link(joins, target.add_group_membership, group.id, member.id)
        for policy in _paged(source.list_group_policies, group.id):
            if policy.id not in refused_policies and policy.id not in attached:
                attach = f"policy {policy.id} on group {group.id}"
                report.attachments += link(attach, target.attach_policy_to_group, group.id, policy.id)
    return report
