"""External principals stored by auth, over gRPC: one user per principal, bounds, paging, who
may link one, and what deleting or re-creating a user leaves behind."""

from __future__ import annotations

import grpc
import pytest

from services.auth.principals import (
    MAX_PRINCIPAL_ID,
    MAX_PRINCIPALS_PER_USER,
    MAX_SETTING_VALUE,
    MAX_SETTINGS_ENTRIES,
    MAX_SETTINGS_MAPS,
)
from silt.auth.v1 import auth_pb2 as api
from silt.auth.v1 import model_pb2 as pb
from tests.integration.auth.support import Stack, code_of, details_of, unique


def _arn(name: str) -> str:
    return f"arn:aws:iam::123456789012:role/{unique(name)}"


def _link(stack: Stack, user_id: str, principal_id: str, settings: list[dict[str, str]] | None = None) -> object:
    request = api.CreateUserExternalPrincipalRequest(
        user_id=user_id,
        principal_id=principal_id,
        settings=[pb.PrincipalSettings(values=one) for one in settings or []],
    )
    return stack.auth(stack.admin).CreateUserExternalPrincipal(request)


def _listed(stack: Stack, user_id: str, after: str = "", amount: int = 0) -> api.ListUserExternalPrincipalsResponse:
    request = api.ListUserExternalPrincipalsRequest(user_id=user_id, after=after, amount=amount)
    return stack.auth(stack.admin).ListUserExternalPrincipals(request)


def _get(stack: Stack, principal_id: str) -> pb.ExternalPrincipal:
    return stack.auth(stack.admin).GetExternalPrincipal(api.GetExternalPrincipalRequest(principal_id=principal_id))


def test_a_principal_is_linked_read_listed_and_unlinked(stack: Stack) -> None:
    user_id, _ = stack.new_user(prefix="linked")
    role = _arn("reader")
    created = _link(stack, user_id, role, [{"region": "us-east-1"}, {"session": "x"}])
    assert isinstance(created, pb.ExternalPrincipal) and created.user_id == user_id
    found = _get(stack, role)
    assert (found.id, found.user_id) == (role, user_id)
    assert [dict(s.values) for s in found.settings] == [{"region": "us-east-1"}, {"session": "x"}]
    assert [p.id for p in _listed(stack, user_id).principals] == [role]

    admin = stack.auth(stack.admin)
    admin.DeleteUserExternalPrincipal(api.DeleteUserExternalPrincipalRequest(user_id=user_id, principal_id=role))
    assert code_of(lambda: _get(stack, role)) == grpc.StatusCode.NOT_FOUND
    assert not _listed(stack, user_id).principals
    again = api.DeleteUserExternalPrincipalRequest(user_id=user_id, principal_id=role)
    assert code_of(lambda: admin.DeleteUserExternalPrincipal(again)) == grpc.StatusCode.NOT_FOUND


def test_a_principal_belongs_to_one_user_at_most(stack: Stack) -> None:
    first, _ = stack.new_user(prefix="first")
    second, _ = stack.new_user(prefix="second")
    role = _arn("shared")
    _link(stack, first, role)
    assert code_of(lambda: _link(stack, second, role)) == grpc.StatusCode.ALREADY_EXISTS
    assert code_of(lambda: _link(stack, first, role)) == grpc.StatusCode.ALREADY_EXISTS
    # Unlinking it through the other user touches nothing.
    wrong = api.DeleteUserExternalPrincipalRequest(user_id=second, principal_id=role)
    assert code_of(lambda: stack.auth(stack.admin).DeleteUserExternalPrincipal(wrong)) == grpc.StatusCode.NOT_FOUND
    assert _get(stack, role).user_id == first
    assert not _listed(stack, second).principals


def test_unknown_users_and_principals_are_not_found(stack: Stack) -> None:
    missing = unique("nobody")
    assert code_of(lambda: _link(stack, missing, _arn("x"))) == grpc.StatusCode.NOT_FOUND
    assert code_of(lambda: _listed(stack, missing)) == grpc.StatusCode.NOT_FOUND
    assert code_of(lambda: _get(stack, _arn("never"))) == grpc.StatusCode.NOT_FOUND


def test_principals_are_paged_in_id_order(stack: Stack) -> None:
    user_id, _ = stack.new_user(prefix="paged")
    roles = sorted(f"arn:aws:iam::1:role/team/{n}" for n in "edcba")
    for role in roles:
        _link(stack, user_id, role)
    first = _listed(stack, user_id, amount=2)
    assert [p.id for p in first.principals] == roles[:2] and first.has_more
    rest = _listed(stack, user_id, after=roles[1], amount=10)
    assert [p.id for p in rest.principals] == roles[2:] and not rest.has_more


@pytest.mark.parametrize(
    ("principal_id", "settings", "text"),
    [
        ("", [], "principal id"),
        ("has space", [], "principal id"),
        ("r" * (MAX_PRINCIPAL_ID + 1), [], "principal id"),
        ("ok-role", [{"k": "v"}] * (MAX_SETTINGS_MAPS + 1), "settings maps"),
        ("ok-role", [{f"k{n}": "v" for n in range(MAX_SETTINGS_ENTRIES + 1)}], "entries"),
        ("ok-role", [{"": "v"}], "key"),
        ("ok-role", [{"k": "v" * (MAX_SETTING_VALUE + 1)}], "value"),
    ],
)
def test_principals_and_settings_are_bounded(
    stack: Stack, principal_id: str, settings: list[dict[str, str]], text: str
) -> None:
    user_id, _ = stack.new_user(prefix="bounded")
    call = lambda: _link(stack, user_id, principal_id, settings)  # noqa: E731
    assert code_of(call) == grpc.StatusCode.INVALID_ARGUMENT
    assert text in details_of(call)
    assert not _listed(stack, user_id).principals


def test_one_user_has_a_bounded_number_of_principals(stack: Stack) -> None:
    user_id, _ = stack.new_user(prefix="many")
    for n in range(MAX_PRINCIPALS_PER_USER):
        _link(stack, user_id, f"role-{user_id}-{n:03}")
    assert code_of(lambda: _link(stack, user_id, f"role-{user_id}-extra")) == grpc.StatusCode.FAILED_PRECONDITION
    assert len(_listed(stack, user_id, amount=1000).principals) == MAX_PRINCIPALS_PER_USER


def test_deleting_a_user_frees_its_principals_and_a_new_user_of_its_name_has_none(stack: Stack) -> None:
    user_id, _ = stack.new_user(prefix="leaver")
    role = _arn("leaver")
    _link(stack, user_id, role)
    admin = stack.auth(stack.admin)
    admin.DeleteUser(api.DeleteUserRequest(id=user_id))
    assert code_of(lambda: _get(stack, role)) == grpc.StatusCode.NOT_FOUND
    admin.CreateUser(api.CreateUserRequest(id=user_id))
    assert not _listed(stack, user_id).principals
    # The principal is free again, for anyone.
    other, _ = stack.new_user(prefix="joiner")
    _link(stack, other, role)
    assert _get(stack, role).user_id == other


def test_only_those_who_may_issue_the_users_keys_link_principals(stack: Stack) -> None:
    victim, _ = stack.new_user(["Admins"], prefix="admin-victim")
    _, developer = stack.new_user(["Developers"], prefix="dev")
    role = _arn("takeover")
    as_developer = stack.auth(developer)
    request = api.CreateUserExternalPrincipalRequest(user_id=victim, principal_id=role)
    assert code_of(lambda: as_developer.CreateUserExternalPrincipal(request)) == grpc.StatusCode.PERMISSION_DENIED
    get = api.GetExternalPrincipalRequest(principal_id=role)
    assert code_of(lambda: as_developer.GetExternalPrincipal(get)) == grpc.StatusCode.PERMISSION_DENIED
    assert code_of(lambda: _get(stack, role)) == grpc.StatusCode.NOT_FOUND


def test_linking_to_a_user_who_holds_more_than_the_caller_is_refused(stack: Stack) -> None:
    """Whoever may link principals to users still cannot link one to a user holding more than
    itself: a principal is a way in as that user, checked as issuing a key is."""
    helpdesk_id, helpdesk = stack.new_user(prefix="helpdesk")
    policy_id = unique("link-any")
    allow = pb.Statement(effect=pb.EFFECT_ALLOW, actions=["iam:CreateUserExternalPrincipal"], resources=["users/*"])
    admin = stack.auth(stack.admin)
    admin.CreatePolicy(api.CreatePolicyRequest(id=policy_id, statements=[allow]))
    admin.AttachPolicy(api.PolicyAttachmentRequest(policy_id=policy_id, user_id=helpdesk_id))
    stack.pass_cache_ttl()
    powerful, _ = stack.new_user(["Admins"], prefix="powerful")
    plain, _ = stack.new_user(prefix="plain")
    as_helpdesk = stack.auth(helpdesk)
    to_admin = api.CreateUserExternalPrincipalRequest(user_id=powerful, principal_id=_arn("escalate"))
    assert code_of(lambda: as_helpdesk.CreateUserExternalPrincipal(to_admin)) == grpc.StatusCode.PERMISSION_DENIED
    # A user holding nothing the helpdesk lacks can be linked.
    to_plain = api.CreateUserExternalPrincipalRequest(user_id=plain, principal_id=_arn("fine"))
    assert as_helpdesk.CreateUserExternalPrincipal(to_plain).user_id == plain
