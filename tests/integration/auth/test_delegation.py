"""Delegated IAM cannot escalate: a caller grants only what it holds (services/auth/grants.py).

Through real auth and graveler servers: a helpdesk allowed to manage memberships cannot join
Admins, a delegate allowed to create and attach policies cannot hand itself "Allow * *", and
lifting a Deny or minting another user's key counts as granting too.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import grpc
import pytest
from pydantic import SecretStr

from services.auth import grants
from services.auth.setup import ADMINS, ANALYSTS, DEVELOPERS
from silt import iam_actions as a
from silt.auth.v1 import auth_pb2 as auth_api
from silt.auth.v1 import auth_pb2_grpc as auth_grpc
from silt.auth.v1 import model_pb2 as pb
from silt.rpc.signing import Credentials
from tests.integration.auth.support import Stack, code_of, details_of, remember, unique

DENIED = grpc.StatusCode.PERMISSION_DENIED
OK = grpc.StatusCode.OK

ALLOW_ALL = pb.Statement(effect=pb.EFFECT_ALLOW, actions=["*"], resources=["*"])


def _allow(actions: list[str], resources: list[str]) -> pb.Statement:
    return pb.Statement(effect=pb.EFFECT_ALLOW, actions=actions, resources=resources)


def _deny(actions: list[str], resources: list[str]) -> pb.Statement:
    return pb.Statement(effect=pb.EFFECT_DENY, actions=actions, resources=resources)


def _delegate(stack: Stack, prefix: str, *statements: pb.Statement) -> tuple[str, Credentials]:
    """A user holding exactly these statements, given by the admin."""
    user_id, creds = stack.new_user(prefix=prefix)
    policy_id = unique(f"{prefix}-rights")
    admin = stack.auth(stack.admin)
    admin.CreatePolicy(auth_api.CreatePolicyRequest(id=policy_id, statements=list(statements)))
    admin.AttachPolicy(auth_api.PolicyAttachmentRequest(policy_id=policy_id, user_id=user_id))
    return user_id, creds


def _is_admin(stack: Stack, creds: Credentials) -> bool:
    request = auth_api.CreateUserRequest(id=unique("probe"))
    return code_of(lambda: stack.auth(creds).CreateUser(request)) == OK


def _groups_of(stack: Stack, user_id: str) -> list[str]:
    reply = stack.auth(stack.admin).ListUserGroups(auth_api.ListUserGroupsRequest(user_id=user_id))
    return [g.id for g in reply.groups]


def test_helpdesk_with_add_member_on_every_group_cannot_join_admins(stack: Stack) -> None:
    """The finding's exploit: iam:AddGroupMember on groups/* was enough to add oneself to Admins."""
    helpdesk_id, helpdesk = _delegate(stack, "helpdesk", _allow([a.ADD_GROUP_MEMBER], ["groups/*"]))
    other_id, _ = stack.new_user(prefix="colleague")
    me = stack.auth(helpdesk)

    def join(group: str, user: str) -> object:
        return lambda: me.AddGroupMember(auth_api.GroupMemberRequest(group_id=group, user_id=user))

    # Both ends: the user is acted on too, and this helpdesk may act on no user.
    assert code_of(join(ADMINS, helpdesk_id)) == DENIED
    assert code_of(join(ADMINS, other_id)) == DENIED
    assert f"users/{helpdesk_id}" in details_of(join(ADMINS, helpdesk_id))
    assert ADMINS not in _groups_of(stack, helpdesk_id)
    assert not _is_admin(stack, helpdesk)


def test_helpdesk_on_both_ends_adds_only_to_groups_whose_rights_it_holds(stack: Stack) -> None:
    membership = [a.ADD_GROUP_MEMBER, a.REMOVE_GROUP_MEMBER]
    helpdesk_id, helpdesk = _delegate(
        stack, "helpdesk", _allow(membership, ["groups/*", "users/*"]), _allow([a.READ_REPO], ["*"])
    )
    other_id, _ = stack.new_user(prefix="colleague")
    me = stack.auth(helpdesk)

    def join(group: str, user: str) -> object:
        return lambda: me.AddGroupMember(auth_api.GroupMemberRequest(group_id=group, user_id=user))

    for group in (ADMINS, DEVELOPERS):
        for user in (helpdesk_id, other_id):
            assert code_of(join(group, user)) == DENIED, (group, user)
    refusal = details_of(join(ADMINS, helpdesk_id))
    assert "add members to group 'Admins'" in refusal and "does not hold" in refusal
    assert _groups_of(stack, helpdesk_id) == [] and _groups_of(stack, other_id) == []
    assert not _is_admin(stack, helpdesk)
    # Analysts hold ReadRepo on *, which the helpdesk holds itself: that membership it may give.
    assert code_of(join(ANALYSTS, other_id)) == OK
    assert _groups_of(stack, other_id) == [ANALYSTS]
    remove = auth_api.GroupMemberRequest(group_id=ANALYSTS, user_id=other_id)
    assert code_of(lambda: me.RemoveGroupMember(remove)) == OK


def test_membership_needs_the_action_on_the_user_too(stack: Stack) -> None:
    _, helpdesk = _delegate(
        stack,
        "helpdesk",
        _allow([a.ADD_GROUP_MEMBER], ["groups/*", "users/team-*"]),
        _allow([a.READ_REPO], ["*"]),
    )
    teammate_id, _ = stack.new_user(prefix="team")
    outsider_id, _ = stack.new_user(prefix="outsider")
    me = stack.auth(helpdesk)

    def join(user: str) -> object:
        return lambda: me.AddGroupMember(auth_api.GroupMemberRequest(group_id=ANALYSTS, user_id=user))

    assert code_of(join(teammate_id)) == OK
    assert code_of(join(outsider_id)) == DENIED
    assert f"users/{outsider_id}" in details_of(join(outsider_id))


def test_delegate_cannot_create_or_attach_allow_all(stack: Stack) -> None:
    """The finding's exploit: iam:CreatePolicy + iam:AttachPolicy, then "Allow * *" on oneself."""
    delegate_id, delegate = _delegate(
        stack,
        "delegate",
        _allow([a.CREATE_POLICY, a.ATTACH_POLICY], ["policies/*", "users/*"]),
        _allow([a.READ_REPO, a.WRITE_REPO], ["team-*"]),
    )
    me = stack.auth(delegate)

    def create(*statements: pb.Statement) -> tuple[str, object]:
        policy_id = unique("made")
        request = auth_api.CreatePolicyRequest(id=policy_id, statements=list(statements))
        return policy_id, lambda: me.CreatePolicy(request)

    def attach(policy_id: str) -> object:
        request = auth_api.PolicyAttachmentRequest(policy_id=policy_id, user_id=delegate_id)
        return lambda: me.AttachPolicy(request)

    _, create_everything = create(ALLOW_ALL)
    assert code_of(create_everything) == DENIED
    assert "'*' on '*'" in details_of(create_everything)
    # Nor anything wider than what it holds, hidden in a longer policy.
    for wider in (
        _allow([a.READ_REPO], ["*"]),
        _allow([a.CREATE_USER], ["users/*"]),
        _allow(["*Repo"], ["team-*"]),
        _allow([a.WRITE_REPO], ["team-*", "prod"]),
    ):
        _, call = create(_allow([a.READ_REPO], ["team-a"]), wider)
        assert code_of(call) == DENIED, wider
    # The preset policy "Allow * *" exists already: attaching it is refused the same way.
    assert code_of(attach("FullAccess")) == DENIED
    assert "FullAccess" in details_of(attach("FullAccess"))
    assert not _is_admin(stack, delegate)

    # What it holds, it may hand out; a Deny gives nothing and needs nothing.
    narrow, create_narrow = create(_allow([a.READ_REPO], ["team-a", "team-b*"]), _deny(["*"], ["*"]))
    assert code_of(create_narrow) == OK
    assert code_of(attach(narrow)) == OK
    admin_made = unique("admin-made")
    stack.auth(stack.admin).CreatePolicy(auth_api.CreatePolicyRequest(id=admin_made, statements=[ALLOW_ALL]))
    assert code_of(attach(admin_made)) == DENIED


def test_delegate_cannot_grant_through_a_group(stack: Stack) -> None:
    _, delegate = _delegate(
        stack,
        "delegate",
        _allow([a.ATTACH_POLICY], ["policies/*", "groups/*"]),
        _allow([a.READ_REPO], ["*"]),
    )
    group_id = unique("team")
    stack.auth(stack.admin).CreateGroup(auth_api.CreateGroupRequest(id=group_id))
    me = stack.auth(delegate)

    def attach(policy_id: str) -> object:
        return lambda: me.AttachPolicy(auth_api.PolicyAttachmentRequest(policy_id=policy_id, group_id=group_id))

    assert code_of(attach("RepoReadWriteAll")) == DENIED
    assert code_of(attach("FullAccess")) == DENIED
    assert code_of(attach("RepoReadAll")) == OK


def test_lifting_a_deny_is_granting_what_it_denied(stack: Stack) -> None:
    admin = stack.auth(stack.admin)
    fence = unique("no-prod-writes")
    admin.CreatePolicy(auth_api.CreatePolicyRequest(id=fence, statements=[_deny([a.WRITE_REPO], ["prod-*"])]))
    fenced_group = unique("fenced")
    admin.CreateGroup(auth_api.CreateGroupRequest(id=fenced_group))
    admin.AttachPolicy(auth_api.PolicyAttachmentRequest(policy_id=fence, group_id=fenced_group))
    # The delegate is fenced itself and manages IAM: it cannot take its own fence down.
    delegate_id, delegate = _delegate(
        stack,
        "delegate",
        _allow(
            [a.DETACH_POLICY, a.REMOVE_GROUP_MEMBER, a.DELETE_POLICY, a.DELETE_GROUP],
            ["policies/*", "groups/*", "users/*"],
        ),
        _allow([a.READ_REPO, a.WRITE_REPO], ["*"]),
    )
    admin.AddGroupMember(auth_api.GroupMemberRequest(group_id=fenced_group, user_id=delegate_id))
    me = stack.auth(delegate)
    detach = auth_api.PolicyAttachmentRequest(policy_id=fence, group_id=fenced_group)
    leave = auth_api.GroupMemberRequest(group_id=fenced_group, user_id=delegate_id)
    for call in (
        lambda: me.DetachPolicy(detach),
        lambda: me.RemoveGroupMember(leave),
        lambda: me.DeletePolicy(auth_api.DeletePolicyRequest(id=fence)),
        lambda: me.DeleteGroup(auth_api.DeleteGroupRequest(id=fenced_group)),
    ):
        assert code_of(call) == DENIED
    assert "lifts its denials" in details_of(lambda: me.DetachPolicy(detach))
    assert _groups_of(stack, delegate_id) == [fenced_group]
    # The administrator holds what the fence denies, so it may lift it.
    assert code_of(lambda: admin.RemoveGroupMember(leave)) == OK


def test_issuing_a_key_for_another_user_is_acting_as_that_user(stack: Stack) -> None:
    _, delegate = _delegate(stack, "keys", _allow([a.CREATE_CREDENTIALS], ["users/*"]), _allow([a.READ_REPO], ["*"]))
    me = stack.auth(delegate)
    analyst_id, _ = stack.new_user([ANALYSTS], prefix="analyst")
    developer_id, _ = stack.new_user([DEVELOPERS], prefix="developer")

    def issue(user_id: str) -> object:
        def call() -> object:
            return remember(me.CreateCredentials(auth_api.CreateCredentialsRequest(user_id=user_id)).secret_access_key)

        return call

    for user_id in ("admin", "svc-gateway", developer_id):
        assert code_of(issue(user_id)) == DENIED, user_id
    assert code_of(issue(analyst_id)) == OK


def test_nobody_grants_verifying_signatures_through_the_api(stack: Stack) -> None:
    """auth:VerifySignature (handing out keys that act as anyone toward a service) is held only
    through a statement naming it, and only setup writes one: the administrator's `*` cannot
    create or attach such a policy, nor add a user to a group holding it."""
    admin = stack.auth(stack.admin)
    user_id, _ = stack.new_user(prefix="would-verify")
    verifier = _allow([a.VERIFY_SIGNATURE], [a.audience_resource("graveler")])
    create = auth_api.CreatePolicyRequest(id=unique("verifier"), statements=[verifier])
    assert code_of(lambda: admin.CreatePolicy(create)) == DENIED
    assert a.VERIFY_SIGNATURE in details_of(lambda: admin.CreatePolicy(create))
    attach = auth_api.PolicyAttachmentRequest(policy_id="GravelerCallVerifier", user_id=user_id)
    assert code_of(lambda: admin.AttachPolicy(attach)) == DENIED
    # A group holding it (as setup would write it, straight to KV): joining it is granting it.
    group_id = unique("verifiers")
    admin.CreateGroup(auth_api.CreateGroupRequest(id=group_id))
    stack.model.attach_policy("GravelerCallVerifier", group_id=group_id)
    join = auth_api.GroupMemberRequest(group_id=group_id, user_id=user_id)
    assert code_of(lambda: admin.AddGroupMember(join)) == DENIED
    # Wider patterns are fine: they never allow the action (services/auth/policies.py).
    wide = auth_api.CreatePolicyRequest(id=unique("wide"), statements=[_allow(["auth:*"], ["audiences/*"])])
    assert code_of(lambda: admin.CreatePolicy(wide)) == OK
    attach_wide = auth_api.PolicyAttachmentRequest(policy_id=wide.id, user_id=user_id)
    assert code_of(lambda: admin.AttachPolicy(attach_wide)) == OK
    may = auth_api.AuthorizeRequest(
        user_id=user_id, action=a.VERIFY_SIGNATURE, resource=a.audience_resource("graveler")
    )
    assert not admin.Authorize(may).allowed


def test_only_an_unrestricted_administrator_rotates_a_verifier_services_key(stack: Stack) -> None:
    """A key of svc-graveler fetches graveler call keys of anyone: a caller allowed `*` but
    denied anything (here DeleteRepo) cannot mint one and delete repositories as the admin. An
    unrestricted administrator, who already may do everything that key could, can (rotation)."""
    _, partial = _delegate(stack, "almost-admin", ALLOW_ALL, _deny([a.DELETE_REPO], ["*"]))
    mint = auth_api.CreateCredentialsRequest(user_id="svc-graveler")
    assert code_of(lambda: stack.auth(partial).CreateCredentials(mint)) == DENIED
    issued = stack.auth(stack.admin).CreateCredentials(mint)
    remember(issued.secret_access_key)
    rotated = Credentials(issued.credential.access_key_id, SecretStr(issued.secret_access_key))
    today = datetime.now(UTC).strftime("%Y%m%d")
    request = auth_api.GetCallSigningKeyRequest(access_key_id=stack.admin.access_key_id, day=today, audience="graveler")
    assert stack.auth(rotated).GetCallSigningKey(request).user_id == "admin"


def _update(stub: auth_grpc.AuthServiceStub, policy_id: str, *statements: pb.Statement) -> Callable[[], object]:
    request = auth_api.UpdatePolicyRequest(id=policy_id, statements=list(statements))
    return lambda: stub.UpdatePolicy(request)


def test_editing_a_policy_needs_attach_rights_on_everyone_it_is_attached_to(stack: Stack) -> None:
    """The finding: a helpdesk scoped to team-* edited team-x, which an admin had attached to
    bob or to Admins, and so reached them; a Deny reaches them as surely as an Allow."""
    editing = [a.CREATE_POLICY, a.DELETE_POLICY, a.ATTACH_POLICY]
    team_policy, team_user = unique("team-x"), unique("team-u")
    _, helpdesk = _delegate(
        stack, "helpdesk", _allow(editing, ["policies/team-*", "users/team-*"]), _allow([a.READ_REPO], ["*"])
    )
    admin = stack.auth(stack.admin)
    admin.CreatePolicy(auth_api.CreatePolicyRequest(id=team_policy, statements=[_allow([a.READ_REPO], ["*"])]))
    admin.CreateUser(auth_api.CreateUserRequest(id=team_user))
    admin.AttachPolicy(auth_api.PolicyAttachmentRequest(policy_id=team_policy, user_id=team_user))
    me = stack.auth(helpdesk)
    lockout = _deny(["*"], ["*"])
    # Within its scope (attached only to a team-* user) the edit goes through.
    assert code_of(_update(me, team_policy, _allow([a.READ_REPO], ["r-*"]))) == OK

    bob_id, _ = stack.new_user(prefix="bob")
    admin.AttachPolicy(auth_api.PolicyAttachmentRequest(policy_id=team_policy, user_id=bob_id))
    assert code_of(_update(me, team_policy, lockout)) == DENIED
    assert f"users/{bob_id}" in details_of(_update(me, team_policy, lockout))
    admin.DetachPolicy(auth_api.PolicyAttachmentRequest(policy_id=team_policy, user_id=bob_id))

    admin.AttachPolicy(auth_api.PolicyAttachmentRequest(policy_id=team_policy, group_id=ADMINS))
    assert f"groups/{ADMINS}" in details_of(_update(me, team_policy, lockout))
    assert code_of(_update(me, team_policy, _allow([a.READ_REPO], ["*"]))) == DENIED
    assert list(admin.GetPolicy(auth_api.GetPolicyRequest(id=team_policy)).statements) == [
        _allow([a.READ_REPO], ["r-*"])
    ]
    assert _is_admin(stack, stack.admin)


def test_an_edit_checked_on_one_version_does_not_overwrite_another(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A concurrent edit landing between the grants checks and the write aborts the update, so
    its Deny is never lifted by a caller that was checked against the version before it."""
    policy_id = unique("raced")
    admin = stack.auth(stack.admin)
    admin.CreatePolicy(auth_api.CreatePolicyRequest(id=policy_id, statements=[_allow([a.READ_REPO], ["*"])]))
    concurrent = _deny([a.WRITE_REPO], ["*"])
    require = grants.Grants._require
    raced: list[bool] = []

    def racing(self: grants.Grants, *args: object, **kwargs: object) -> None:
        if not raced:
            raced.append(True)
            stack.model.update_policy(policy_id, [concurrent])  # another editor's write, meanwhile
        require(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(grants.Grants, "_require", racing)
    with pytest.raises(grpc.RpcError) as stale:
        _update(admin, policy_id, _allow([a.READ_REPO, a.WRITE_REPO], ["*"]))()
    assert stale.value.code() == grpc.StatusCode.ABORTED
    assert "changed meanwhile" in (stale.value.details() or "")
    assert list(admin.GetPolicy(auth_api.GetPolicyRequest(id=policy_id)).statements) == [concurrent]


def test_silt_s_own_policies_are_not_edited(stack: Stack) -> None:
    admin = stack.auth(stack.admin)
    for preset in ("FullAccess", "RepoReadAll", "ServiceAccess"):
        refused = _update(admin, preset, _allow([a.READ_REPO], ["r-*"]))
        assert code_of(refused) == grpc.StatusCode.FAILED_PRECONDITION
        assert "Silt's own" in details_of(refused) and "create a new policy" in details_of(refused)
    assert list(stack.model.get_policy("RepoReadAll").statements) == [_allow([a.READ_REPO], ["*"])]


def test_an_edit_without_a_description_keeps_the_policy_s(stack: Stack) -> None:
    """lakeFS's policy body has no description: an edit through the REST API sends none."""
    admin = stack.auth(stack.admin)
    policy_id = unique("described")
    admin.CreatePolicy(
        auth_api.CreatePolicyRequest(id=policy_id, description="readers", statements=[_allow([a.READ_REPO], ["*"])])
    )
    assert code_of(_update(admin, policy_id, _allow([a.READ_REPO], ["r-*"]))) == OK
    assert admin.GetPolicy(auth_api.GetPolicyRequest(id=policy_id)).description == "readers"
    renamed = auth_api.UpdatePolicyRequest(
        id=policy_id, description="r readers", statements=[_allow([a.READ_REPO], ["r-*"])]
    )
    assert admin.UpdatePolicy(renamed).description == "r readers"
