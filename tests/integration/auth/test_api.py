"""The auth API end to end over gRPC, as an administrator uses it."""

from __future__ import annotations

import grpc
from pydantic import SecretStr

from services.auth import setup as auth_setup
from services.auth.setup import ANALYSTS, API_ACTOR_POLICY, PRESET_GROUPS, SERVICES, service_user_id
from silt import iam_actions as a
from silt.auth.v1 import auth_pb2 as api
from silt.auth.v1 import model_pb2 as pb
from silt.iam_system import SYSTEM_ENTITY
from silt.rpc.signing import Credentials
from tests.integration.auth.support import Stack, code_of, details_of, remember, unique


def test_users_groups_and_members(stack: Stack) -> None:
    admin = stack.auth(stack.admin)
    tag = unique("t")
    users = [f"{tag}-{n}" for n in "dcba"]
    for user in users:
        admin.CreateUser(api.CreateUserRequest(id=user, description=f"user {user}"))
    assert code_of(lambda: admin.CreateUser(api.CreateUserRequest(id=users[0]))) == grpc.StatusCode.ALREADY_EXISTS
    assert code_of(lambda: admin.CreateUser(api.CreateUserRequest(id="bad/id"))) == grpc.StatusCode.INVALID_ARGUMENT

    seen, after = [], f"{tag}-"
    while True:
        page = admin.ListUsers(api.ListUsersRequest(after=after, amount=2))
        mine = [u.id for u in page.users if u.id.startswith(tag)]
        seen += mine
        if not page.has_more or len(mine) < len(page.users):
            break
        after = page.users[-1].id
    assert seen == sorted(users)

    group = unique("g")
    admin.CreateGroup(api.CreateGroupRequest(id=group, description="a team"))
    for user in users[:3]:
        admin.AddGroupMember(api.GroupMemberRequest(group_id=group, user_id=user))
    members = admin.ListGroupMembers(api.ListGroupMembersRequest(group_id=group, amount=2))
    assert [u.id for u in members.users] == sorted(users[:3])[:2] and members.has_more
    admin.DeleteUser(api.DeleteUserRequest(id=sorted(users[:3])[0]))
    members = admin.ListGroupMembers(api.ListGroupMembersRequest(group_id=group))
    assert [u.id for u in members.users] == sorted(users[:3])[1:]
    assert [g.id for g in admin.ListUserGroups(api.ListUserGroupsRequest(user_id=users[0])).groups] == [group]
    admin.RemoveGroupMember(api.GroupMemberRequest(group_id=group, user_id=users[0]))
    assert not admin.ListUserGroups(api.ListUserGroupsRequest(user_id=users[0])).groups
    admin.DeleteGroup(api.DeleteGroupRequest(id=group))
    assert code_of(lambda: admin.GetGroup(api.GetGroupRequest(id=group))) == grpc.StatusCode.NOT_FOUND
    assert not admin.ListUserGroups(api.ListUserGroupsRequest(user_id=users[1])).groups


def test_policies_attach_detach_and_effective(stack: Stack) -> None:
    admin = stack.auth(stack.admin)
    user, group, direct, shared = unique("u"), unique("g"), unique("direct"), unique("shared")
    admin.CreateUser(api.CreateUserRequest(id=user))
    admin.CreateGroup(api.CreateGroupRequest(id=group))
    admin.AddGroupMember(api.GroupMemberRequest(group_id=group, user_id=user))
    statement = pb.Statement(effect=pb.EFFECT_ALLOW, actions=["iam:Read*"], resources=["users/*"])
    for policy in (direct, shared):
        admin.CreatePolicy(api.CreatePolicyRequest(id=policy, statements=[statement]))
    assert admin.GetPolicy(api.GetPolicyRequest(id=direct)).statements[0].actions == ["iam:Read*"]
    admin.AttachPolicy(api.PolicyAttachmentRequest(policy_id=direct, user_id=user))
    admin.AttachPolicy(api.PolicyAttachmentRequest(policy_id=shared, group_id=group))

    def listed(effective: bool) -> list[str]:
        request = api.ListUserPoliciesRequest(user_id=user, effective=effective)
        return [p.id for p in admin.ListUserPolicies(request).policies]

    assert listed(False) == [direct]
    assert listed(True) == sorted([direct, shared])
    assert [p.id for p in admin.ListGroupPolicies(api.ListGroupPoliciesRequest(group_id=group)).policies] == [shared]
    for resource, allowed in (("users/x", True), ("groups/x", False), ("some-repo", False)):
        reply = admin.Authorize(api.AuthorizeRequest(user_id=user, action=a.READ_USER, resource=resource))
        assert reply.allowed is allowed, resource
    many = admin.AuthorizeMany(
        api.AuthorizeManyRequest(user_id=user, action=a.READ_USER, resources=["users/x", "groups/y", "users/z"])
    )
    assert list(many.allowed) == [True, False, True]

    admin.DetachPolicy(api.PolicyAttachmentRequest(policy_id=shared, group_id=group))
    assert listed(True) == [direct]
    admin.DeletePolicy(api.DeletePolicyRequest(id=direct))
    assert listed(True) == []
    bad = pb.Statement(effect=pb.EFFECT_ALLOW, actions=["ReadRepos"], resources=["*"])
    create_bad = lambda: admin.CreatePolicy(api.CreatePolicyRequest(id=unique("bad"), statements=[bad]))  # noqa: E731
    assert code_of(create_bad) == grpc.StatusCode.INVALID_ARGUMENT


def test_credentials_lifecycle(stack: Stack) -> None:
    admin = stack.auth(stack.admin)
    user = unique("u")
    admin.CreateUser(api.CreateUserRequest(id=user))
    issued = [admin.CreateCredentials(api.CreateCredentialsRequest(user_id=user)) for _ in range(2)]
    for reply in issued:
        remember(reply.secret_access_key)
        assert len(reply.credential.access_key_id) == 20 and len(reply.secret_access_key) == 40
    listed = admin.ListCredentials(api.ListCredentialsRequest(user_id=user)).credentials
    assert sorted(c.access_key_id for c in listed) == sorted(r.credential.access_key_id for r in issued)
    assert all(r.secret_access_key not in str(listed) for r in issued)
    key_id = issued[0].credential.access_key_id
    # The secret was shown once, above; what proves it stored is that it signs.
    key = Credentials(key_id, SecretStr(issued[0].secret_access_key))
    assert stack.auth(key).WhoAmI(api.WhoAmIRequest()).user.id == user
    admin.DeleteCredentials(api.DeleteCredentialsRequest(user_id=user, access_key_id=key_id))
    assert [c.access_key_id for c in admin.ListCredentials(api.ListCredentialsRequest(user_id=user)).credentials] == [
        issued[1].credential.access_key_id
    ]
    stack.pass_cache_ttl()
    assert code_of(lambda: stack.auth(key).WhoAmI(api.WhoAmIRequest())) == grpc.StatusCode.UNAUTHENTICATED


def test_what_setup_binds_again_at_every_start_cannot_be_detached_or_removed(stack: Stack) -> None:
    """Setup attaches each preset group's policy and each service user's rights again at every
    start: a detach or removal through the API would be silently undone (an Analysts group
    narrowed by detaching RepoReadAll reads every repository again after a restart), so auth
    refuses it; the same policy attached elsewhere detaches as any other."""
    admin = stack.auth(stack.admin)
    refused = grpc.StatusCode.FAILED_PRECONDITION
    kept = [
        api.PolicyAttachmentRequest(policy_id=PRESET_GROUPS[ANALYSTS][1], group_id=ANALYSTS),
        api.PolicyAttachmentRequest(policy_id=API_ACTOR_POLICY, user_id=service_user_id("api")),
    ]
    for attachment in kept:
        assert code_of(lambda: admin.DetachPolicy(attachment)) == refused  # noqa: B023
        assert SYSTEM_ENTITY in details_of(lambda: admin.DetachPolicy(attachment))  # noqa: B023
    membership = api.GroupMemberRequest(group_id=SERVICES, user_id=service_user_id("gateway"))
    assert code_of(lambda: admin.RemoveGroupMember(membership)) == refused
    analysts = admin.ListGroupPolicies(api.ListGroupPoliciesRequest(group_id=ANALYSTS)).policies
    assert PRESET_GROUPS[ANALYSTS][1] in [p.id for p in analysts]
    # Why: setup binds them again (here run on the model, as every start runs it).
    stack.model.detach_policy(PRESET_GROUPS[ANALYSTS][1], group_id=ANALYSTS)
    assert auth_setup.setup(stack.model) is None
    analysts = admin.ListGroupPolicies(api.ListGroupPoliciesRequest(group_id=ANALYSTS)).policies
    assert PRESET_GROUPS[ANALYSTS][1] in [p.id for p in analysts]
    # A system policy attached by an administrator detaches, and a member they added leaves.
    user = unique("u")
    admin.CreateUser(api.CreateUserRequest(id=user))
    mine = api.PolicyAttachmentRequest(policy_id=PRESET_GROUPS[ANALYSTS][1], user_id=user)
    admin.AttachPolicy(mine)
    admin.DetachPolicy(mine)
    admin.AddGroupMember(api.GroupMemberRequest(group_id=ANALYSTS, user_id=user))
    admin.RemoveGroupMember(api.GroupMemberRequest(group_id=ANALYSTS, user_id=user))
