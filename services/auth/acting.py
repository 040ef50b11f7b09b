"""IAM calls made for an end user: the REST API signs every call to auth as its own service
user (svc-api), but an IAM change it makes on behalf of a user must be judged as that user's.

A call may name the user it is made for in the metadata header `x-silt-acting-user`. Auth
honors it only when:

* the call is an IAM call (ACTING_METHODS: users, groups, policies, memberships, attachments,
  credentials, external principals), never a decision, signature or session call;
* the signed caller holds `auth:ActForUser` on `users/<that id>`. The action is literal-only
  (silt.iam_actions.LITERAL_ONLY_ACTIONS), so `*` never allows it and an administrator's key does
  not; setup grants it to svc-api alone (policy `ApiActsForUsers`).

Any other use of the header is refused (PERMISSION_DENIED or INVALID_ARGUMENT), never silently
ignored: a caller that meant to act for a user and was not allowed to must not see its call run
under its own, possibly larger, rights.

When honored, the call runs as the named user, from the client address the signer reported
(x-silt-client-ip, signed with the call; unknown without one) for policy conditions: the
interceptor's rule is checked for that user,
and the handlers' grants check (services/auth/grants.py, "nobody grants what they do not hold")
uses that user's holdings, because both read `current_principal()` (its user and source). The principal
also keeps who signed the call (`ActingPrincipal.signed_by`) for the log lines.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from services.auth.keys import check_id
from services.auth.permissions import SERVICE
from silt.errors import InvalidArgument, PermissionDenied, Unauthenticated
from silt.iam_actions import ACT_FOR_USER, user_resource
from silt.rpc.interceptor import AuthInterceptor, Principal, Rule, current_principal
from silt.rpc.signing import ACTING_USER_HEADER

log = logging.getLogger(__name__)

# The end of auth's refusal of the header: the REST API tells it (its own fault, 503) from the
# end user's refusals (403) by it.
REFUSED_ACTING = "cannot make IAM calls for other users"

ACTING_METHODS = frozenset(
    f"/{SERVICE}/{method}"
    for method in (
        "CreateUser",
        "GetUser",
        "ListUsers",
        "DeleteUser",
        "CreateGroup",
        "GetGroup",
        "ListGroups",
        "DeleteGroup",
        "AddGroupMember",
        "RemoveGroupMember",
        "ListGroupMembers",
        "ListUserGroups",
        "CreatePolicy",
        "GetPolicy",
        "ListPolicies",
        "DeletePolicy",
        "UpdatePolicy",
        "AttachPolicy",
        "DetachPolicy",
        "ListUserPolicies",
        "ListGroupPolicies",
        "CreateCredentials",
        "ListCredentials",
        "DeleteCredentials",
        "RevokeSessions",
        "CreateUserExternalPrincipal",
        "DeleteUserExternalPrincipal",
        "GetExternalPrincipal",
        "ListUserExternalPrincipals",
    )
)


@dataclass(frozen=True)
class ActingPrincipal(Principal):
    """The user a call is made for (`user_id`), and the service user that signed it."""

    signed_by: str = ""


def acting_user(metadata: Sequence[Any] | None) -> str | None:
    """The user named by the header, None without one; more than one header is refused."""
    values = [m.value for m in metadata or () if m.key == ACTING_USER_HEADER]
    if not values:
        return None
    if len(values) > 1:
        raise InvalidArgument(f"{ACTING_USER_HEADER} given more than once")
    value = values[0]
    if not isinstance(value, str):
        raise InvalidArgument(f"{ACTING_USER_HEADER} must be text")
    return check_id("user", value)


def describe_caller() -> str:
    """Who made the current call, for log lines: 'alice' or 'alice' (through 'svc-api')."""
    try:
        principal = current_principal()
    except Unauthenticated:
        return "an unauthenticated caller"  # auth embedded without its interceptor (tests)
    if isinstance(principal, ActingPrincipal):
        return f"{principal.user_id!r} (through {principal.signed_by!r})"
    return repr(principal.user_id)


class ActingInterceptor(AuthInterceptor):
    """Auth's own interceptor: AuthInterceptor plus the acting-user header (module docstring)."""

    def _admit(
        self, method: str, metadata: Sequence[Any], request: Any, rule: Rule | None, peer_ip: str = ""
    ) -> Principal:
        principal = self._authenticate(method, metadata, request, peer_ip)
        try:
            acting = acting_user(metadata)
            if acting is not None:
                principal = self._act_for(method, principal, acting)
            self._authorize(rule, method, principal, request)
        except PermissionDenied as exc:
            log.info("denied %s: %s", method, exc)
            raise
        return principal

    def _act_for(self, method: str, signer: Principal, user_id: str) -> ActingPrincipal:
        if method not in ACTING_METHODS:
            raise PermissionDenied(f"{method} cannot be made for another user ({ACTING_USER_HEADER})")
        if not self.authority.allowed(signer.user_id, ACT_FOR_USER, user_resource(user_id), signer.source_ip):
            raise PermissionDenied(
                f"user {signer.user_id!r} may not {ACT_FOR_USER} on {user_resource(user_id)!r}: it {REFUSED_ACTING}"
            )
        # The user is judged from where its own request came, as the signer reported it (signed
        # with the call); the signer's address is not the user's, so without a report it is unknown.
        return ActingPrincipal(
            user_id,
            signer.access_key_id,
            source_ip=signer.reported_ip,
            reported_ip=signer.reported_ip,
            signed_by=signer.user_id,
        )
