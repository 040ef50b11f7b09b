"""Nobody grants what they do not hold: delegated IAM cannot escalate (docs/design/auth.md).

The interceptor's rules say whether a caller may use an IAM call at all (e.g. iam:AttachPolicy
on the user and on the policy). That alone lets a delegate with iam:CreatePolicy and
iam:AttachPolicy write "Allow * *" and attach it to itself, or one with iam:AddGroupMember join
Admins. So every IAM change that lets some principal do more is also checked against what
the caller itself may do:

* creating a policy: its Allow statements (once a policy exists, anyone allowed to attach it
  can hand it out);
* attaching a policy to a user or group: the policy's Allow statements;
* adding a user to a group: the Allow statements of every policy attached to the group;
* issuing an access key for another user: the Allow statements of that user's effective
  policies (whoever holds the key acts as that user);
* lifting a Deny, which frees what it denied: detaching a policy, deleting a policy, removing
  a member from a group, deleting a group, for the Deny statements of the policies involved;
* updating a policy in place: both the old Deny statements (lifted) and the new Allow
  statements (granted), on the very version the update then replaces.

A statement is granted as every pair (action pattern, resource pattern) of its actions x
resources, and the caller must *hold* each pair:

    the caller holds (A, R) when one of its Allow statements has an action pattern that
    covers A and a resource pattern that covers R, and none of its Deny statements has an
    action pattern that overlaps A together with a resource pattern that overlaps R.

`p` covers `q` when every string `q` matches is matched by `p` (so `*` covers everything,
`prod-*` covers `prod-a*` and `prod-x`, and `ReadRepo` covers only `ReadRepo`); `p` overlaps
`q` when some string matches both. Both are decided exactly for `*` patterns over arbitrary
strings, which is conservative for the strings Silt accepts as names; a `?` (one character, in
object resources) is handled conservatively (silt/wildcards.py). Coverage by a single
statement is also conservative: `prod-*` granted by a caller holding `prod-a*` and `prod-[^a]*`
through two statements is refused. Actions are matched as patterns, not expanded over today's
vocabulary, so `Read*` is not held through ReadRepo alone: it would grant actions added later.
Deny statements granted are never checked (a Deny cannot give anything). An administrator
(the Admins preset, Allow * * and no Deny) holds every pair but one kind:

**auth:VerifySignature is held only literally.** It is allowed only by a statement that names
it (silt.iam_actions.LITERAL_ONLY_ACTIONS, services/auth/policies.py), so it is held only through
an Allow statement naming `auth:VerifySignature` itself: `*` does not cover it here either.
Since only setup writes such statements (the verifier presets of Silt's service users,
straight to KV), nobody can create or attach a policy naming it, add a user to a group holding
it, or mint a key for a user holding it (whoever holds the key acts as that user). The one
exception is that last case for an *unrestricted* caller (an Allow of `*` on `*` and no Deny at
all), so that an administrator can rotate a service's key: such a caller already holds every
other action on every resource, so impersonating users toward graveler or the compactor gives it
nothing it could not do as itself (auth never hands out keys for calls to auth).

**Conditions (silt/policy_conditions.py).** What a caller holds is judged for the call's own
source address: its conditional statements count as they apply there (an unknown address: its
conditional Allows give nothing, its conditional Denies all take). And a conditional Allow of
the caller holds only statements granted under the very same conditions: an administrator let
in from 10.0.0.0/8 alone cannot write itself an Allow without that condition.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from services.auth.model import IamModel
from services.auth.policies import check_statements
from silt.auth.v1 import model_pb2 as pb
from silt.errors import PermissionDenied, Unauthenticated
from silt.iam_actions import LITERAL_ONLY_ACTIONS
from silt.policy_conditions import applies, compile_conditions
from silt.rpc.interceptor import current_principal
from silt.wildcards import covers, overlaps

__all__ = ["Grants", "Holdings", "covers", "overlaps"]


@dataclass(frozen=True)
class _Patterns:
    actions: tuple[str, ...]
    resources: tuple[str, ...]
    # The statement's conditions, serialized (b"" for none): what a granted statement must carry
    # to be held through it.
    conditions: bytes = b""


def _conditions_key(statement: pb.Statement) -> bytes:
    """The statement's conditions, whatever their order (each is length-prefixed: unambiguous)."""
    parts = sorted(c.SerializeToString(deterministic=True) for c in statement.conditions)
    return b"".join(len(p).to_bytes(4, "big") + p for p in parts)


def _applying(statements: Iterable[pb.Statement], source_ip: str) -> list[pb.Statement]:
    """The statements that apply to a call from source_ip (a corrupt condition fails closed)."""
    kept = []
    for statement in statements:
        deny = statement.effect == pb.EFFECT_DENY
        conditions = compile_conditions(statement.conditions)
        if conditions is None:
            if deny:
                kept.append(statement)
            continue
        if applies(conditions, deny, source_ip):
            kept.append(statement)
    return kept


def _by_effect(statements: Iterable[pb.Statement], effect: int) -> list[pb.Statement]:
    return [s for s in statements if s.effect == effect]


def _statements(policies: Iterable[pb.Policy], effect: int) -> list[pb.Statement]:
    return _by_effect((s for policy in policies for s in policy.statements), effect)


def _actions(patterns: _Patterns) -> tuple[str, ...]:
    return patterns.actions


def _resources(patterns: _Patterns) -> tuple[str, ...]:
    return patterns.resources


class Holdings:
    """What one principal holds, from its effective policies."""

    def __init__(self, policies: Iterable[pb.Policy], source_ip: str = "") -> None:
        """source_ip: where the caller's call came from ("" unknown), for conditional statements."""
        policies = list(policies)
        allows = _applying(_statements(policies, pb.EFFECT_ALLOW), source_ip)
        denies = _applying(_statements(policies, pb.EFFECT_DENY), source_ip)
        self._allows = [_Patterns(tuple(s.actions), tuple(s.resources), _conditions_key(s)) for s in allows]
        self._denies = [_Patterns(tuple(s.actions), tuple(s.resources)) for s in denies]

    @property
    def unrestricted(self) -> bool:
        """Allow * * without conditions and no Deny at all: every action on every resource, but
        the literal-only ones, from anywhere."""
        return not self._denies and any(
            "*" in held.actions and "*" in held.resources and not held.conditions for held in self._allows
        )

    def _held_under(self, statement: pb.Statement) -> int:
        """The Allow statements that may hold a granted statement, as bits: those without
        conditions, and those with exactly the statement's."""
        key = _conditions_key(statement)
        bits = 0
        for i, held in enumerate(self._allows):
            if not held.conditions or held.conditions == key:
                bits |= 1 << i
        return bits

    def _mask(self, pattern: str, side: Callable[[_Patterns], tuple[str, ...]]) -> tuple[int, int]:
        """Which Allow statements cover `pattern` and which Deny statements overlap it, as bits.
        A literal-only action is covered only by an Allow statement naming it."""
        literal = side is _actions and pattern in LITERAL_ONLY_ACTIONS
        allow = deny = 0
        for i, held in enumerate(self._allows):
            if pattern in side(held) if literal else any(covers(p, pattern) for p in side(held)):
                allow |= 1 << i
        for i, denied in enumerate(self._denies):
            if any(overlaps(p, pattern) for p in side(denied)):
                deny |= 1 << i
        return allow, deny

    def first_not_held(self, statement: pb.Statement) -> tuple[str, str] | None:
        """A pair (action, resource) of the statement this principal does not hold, if any.

        Patterns with the same bits are interchangeable, so only distinct bit patterns are
        paired: the work follows the statement's length and the caller's own statements, not
        the product of the statement's actions and resources.
        """
        actions: dict[tuple[int, int], str] = {}
        for action in statement.actions:
            actions.setdefault(self._mask(action, _actions), action)
        resources: dict[tuple[int, int], str] = {}
        for resource in statement.resources:
            resources.setdefault(self._mask(resource, _resources), resource)
        eligible = self._held_under(statement)
        for (action_allow, action_deny), action in actions.items():
            for (resource_allow, resource_deny), resource in resources.items():
                if not action_allow & resource_allow & eligible or action_deny & resource_deny:
                    return action, resource
        return None


def _caller_source() -> str:
    """The current call's source address ("" unknown, also outside a call: embedded use)."""
    try:
        return current_principal().source_ip
    except Unauthenticated:
        return ""


class Grants:
    """The checks of the module docstring, for the auth service's handlers (PermissionDenied)."""

    def __init__(self, model: IamModel) -> None:
        self.model = model

    def _require(
        self, caller: str, statements: Sequence[pb.Statement], doing: str, unrestricted_suffices: bool = False
    ) -> None:
        if not statements:
            return
        holdings = Holdings(self.model.effective_policies(caller), _caller_source())
        if unrestricted_suffices and holdings.unrestricted:
            return
        for statement in statements:
            missing = holdings.first_not_held(statement)
            if missing is not None:
                action, resource = missing
                raise PermissionDenied(
                    f"user {caller!r} may not {doing}: it grants {action!r} on {resource!r}, "
                    "which that user does not hold itself"
                )

    def create_policy(self, caller: str, statements: Sequence[pb.Statement]) -> None:
        check_statements(statements)  # bounded and well-formed before any matching
        self._require(caller, _by_effect(statements, pb.EFFECT_ALLOW), "create this policy")

    def attach_policy(self, caller: str, policy_id: str) -> None:
        policy = self.model.get_policy(policy_id)
        self._require(caller, _statements([policy], pb.EFFECT_ALLOW), f"attach policy {policy_id!r}")

    def add_member(self, caller: str, group_id: str) -> None:
        policies = self.model.group_policies(group_id)
        self._require(caller, _statements(policies, pb.EFFECT_ALLOW), f"add members to group {group_id!r}")

    def issue_key(self, caller: str, user_id: str) -> None:
        if user_id == caller:
            return  # a key of one's own gives nothing one does not have
        policies = self.model.effective_policies(user_id)
        # An unrestricted caller may rotate a service user's key (module docstring).
        self._require(
            caller,
            _statements(policies, pb.EFFECT_ALLOW),
            f"issue an access key for user {user_id!r}",
            unrestricted_suffices=True,
        )

    def detach_policy(self, caller: str, policy_id: str) -> None:
        policy = self.model.get_policy(policy_id)
        self._require(caller, _statements([policy], pb.EFFECT_DENY), f"detach policy {policy_id!r} (lifts its denials)")

    def delete_policy(self, caller: str, policy_id: str) -> None:
        policy = self.model.get_policy(policy_id)
        self._require(caller, _statements([policy], pb.EFFECT_DENY), f"delete policy {policy_id!r} (lifts its denials)")

    def update_policy(self, caller: str, current: pb.Policy, statements: Sequence[pb.Statement]) -> None:
        """Both ways, on the version read for the update: the old Deny statements are lifted (as
        deleting the policy would) and the new Allow statements granted (as creating it would).
        Who the policy reaches is the handler's check (services/auth/server.py UpdatePolicy)."""
        check_statements(statements)
        self._require(
            caller, _statements([current], pb.EFFECT_DENY), f"update policy {current.id!r} (lifts its denials)"
        )
        self._require(caller, _by_effect(statements, pb.EFFECT_ALLOW), f"update policy {current.id!r}")

    def remove_member(self, caller: str, group_id: str) -> None:
        policies = self.model.group_policies(group_id)
        self._require(
            caller, _statements(policies, pb.EFFECT_DENY), f"remove members of group {group_id!r} (lifts its denials)"
        )

    def delete_group(self, caller: str, group_id: str) -> None:
        policies = self.model.group_policies(group_id)
        self._require(caller, _statements(policies, pb.EFFECT_DENY), f"delete group {group_id!r} (lifts its denials)")
