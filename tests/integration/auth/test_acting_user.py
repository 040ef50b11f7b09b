"""IAM calls made for an end user (services/auth/acting.py), through a real auth server.

svc-api signs the call and names the end user in `x-silt-acting-user`: the call is judged as
that user's, the rule and the grants check alike. Nobody without the literal auth:ActForUser
(not even an administrator) can use the header, and it works on IAM calls only.
"""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from services.auth.setup import ADMINS
from silt import iam_actions as a
from silt.auth.v1 import auth_pb2 as auth_api
from silt.auth.v1 import auth_pb2_grpc as auth_grpc
from silt.auth.v1 import model_pb2 as pb
from silt.rpc.signing import ACTING_USER_HEADER, SigningInterceptor
from tests.integration.auth.conftest import _Recorder
from tests.integration.auth.support import Stack, code_of, details_of, unique

DENIED = grpc.StatusCode.PERMISSION_DENIED


def _for(user_id: str) -> tuple[tuple[str, str]]:
    return ((ACTING_USER_HEADER, user_id),)


def _exists(stack: Stack, user_id: str) -> bool:
    request = auth_api.GetUserRequest(id=user_id)
    return code_of(lambda: stack.auth(stack.admin).GetUser(request)) == grpc.StatusCode.OK


def test_the_api_acting_for_an_admin_may_do_what_the_admin_may(stack: Stack, log_watch: _Recorder) -> None:
    api = stack.auth(stack.services["api"])
    new_id = unique("made-for-admin")
    api.CreateUser(auth_api.CreateUserRequest(id=new_id), metadata=_for("admin"))
    assert _exists(stack, new_id)
    # The audit line names the user the call was made for and the service that made it.
    assert any(f"user {new_id!r} created by 'admin' (through 'svc-api')" in line for line in log_watch.lines)


def test_the_api_acting_for_a_plain_user_has_that_users_rights_only(stack: Stack) -> None:
    user_id, _ = stack.new_user(prefix="plain")
    api = stack.auth(stack.services["api"])
    new_id = unique("not-made")
    message = details_of(lambda: api.CreateUser(auth_api.CreateUserRequest(id=new_id), metadata=_for(user_id)))
    assert f"user {user_id!r} may not {a.CREATE_USER}" in message
    assert not _exists(stack, new_id)
    # A user reads about itself without any policy: the empty id is the acting user.
    me = api.GetUser(auth_api.GetUserRequest(id=""), metadata=_for(user_id))
    assert me.id == user_id


def test_a_delegate_cannot_escalate_through_the_api(stack: Stack) -> None:
    """The grants check runs for the acting user: svc-api's own standing changes nothing."""
    delegate_id, _ = stack.new_user(prefix="delegate")
    rights = unique("delegate-rights")
    admin = stack.auth(stack.admin)
    admin.CreatePolicy(
        auth_api.CreatePolicyRequest(
            id=rights,
            statements=[
                pb.Statement(
                    effect=pb.EFFECT_ALLOW,
                    actions=[a.CREATE_POLICY, a.ATTACH_POLICY, a.ADD_GROUP_MEMBER],
                    resources=["policies/*", f"users/{delegate_id}", "groups/*"],
                ),
                pb.Statement(effect=pb.EFFECT_ALLOW, actions=[a.READ_REPO], resources=["*"]),
            ],
        )
    )
    admin.AttachPolicy(auth_api.PolicyAttachmentRequest(policy_id=rights, user_id=delegate_id))
    api = stack.auth(stack.services["api"])
    allow_all = pb.Statement(effect=pb.EFFECT_ALLOW, actions=["*"], resources=["*"])
    escalation = auth_api.CreatePolicyRequest(id=unique("allow-all"), statements=[allow_all])
    message = details_of(lambda: api.CreatePolicy(escalation, metadata=_for(delegate_id)))
    assert "which that user does not hold itself" in message
    joining = auth_api.GroupMemberRequest(group_id=ADMINS, user_id=delegate_id)
    assert code_of(lambda: api.AddGroupMember(joining, metadata=_for(delegate_id))) == DENIED
    # What it does hold, it may hand out.
    reading = pb.Statement(effect=pb.EFFECT_ALLOW, actions=[a.READ_REPO], resources=["*"])
    api.CreatePolicy(auth_api.CreatePolicyRequest(id=unique("read"), statements=[reading]), metadata=_for(delegate_id))
    groups = admin.ListUserGroups(auth_api.ListUserGroupsRequest(user_id=delegate_id))
    assert ADMINS not in [g.id for g in groups.groups]


def test_an_admin_without_act_for_user_is_refused(stack: Stack) -> None:
    """`*` does not allow auth:ActForUser: an admin's key cannot make calls under other names."""
    user_id, _ = stack.new_user(prefix="victim")
    new_id = unique("admin-as-other")
    admin = stack.auth(stack.admin)
    message = details_of(lambda: admin.CreateUser(auth_api.CreateUserRequest(id=new_id), metadata=_for(user_id)))
    assert a.ACT_FOR_USER in message
    # Refused, not ignored: the admin's own rights would have created the user.
    assert not _exists(stack, new_id)


def test_another_service_user_is_refused(stack: Stack) -> None:
    gateway = stack.auth(stack.services["gateway"])
    request = auth_api.ListUsersRequest()
    assert code_of(lambda: gateway.ListUsers(request, metadata=_for("admin"))) == DENIED


def test_the_header_works_on_iam_calls_only(stack: Stack) -> None:
    api = stack.auth(stack.services["api"])
    decision = auth_api.AuthorizeRequest(user_id="admin", action=a.READ_REPO, resource="anything")
    message = details_of(lambda: api.Authorize(decision, metadata=_for("admin")))
    assert "cannot be made for another user" in message
    assert code_of(lambda: api.WhoAmI(auth_api.WhoAmIRequest(), metadata=_for("admin"))) == DENIED


def test_a_malformed_or_repeated_header_is_refused(stack: Stack) -> None:
    api = stack.auth(stack.services["api"])
    request = auth_api.ListUsersRequest()
    bad = (("x" * 200), "../admin", "")
    for value in bad:
        assert code_of(lambda v=value: api.ListUsers(request, metadata=_for(v))) == grpc.StatusCode.INVALID_ARGUMENT
    twice = ((ACTING_USER_HEADER, "admin"), (ACTING_USER_HEADER, "admin"))
    assert code_of(lambda: api.ListUsers(request, metadata=twice)) == grpc.StatusCode.INVALID_ARGUMENT


class _AddedAfterSigning(grpc.UnaryUnaryClientInterceptor):
    """Sits between the signer and the wire, as someone on the way would: sets the acting header
    on a call signed without it, or changes the one it was signed with."""

    def __init__(self, user_id: str) -> None:
        self.user_id = user_id

    def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        metadata = [(k, v) for k, v in (details.metadata or ()) if k != ACTING_USER_HEADER]
        metadata.append((ACTING_USER_HEADER, self.user_id))
        return continuation(details._replace(metadata=metadata), request)


@pytest.mark.parametrize("signed_for", [None, "plain"], ids=["added", "changed"])
def test_the_acting_user_is_part_of_the_signature(stack: Stack, signed_for: str | None) -> None:
    """svc-api's call for a plain user (or for nobody) made into one for the admin on the way."""
    plain_id, _ = stack.new_user(prefix="signed-for")
    signer = SigningInterceptor(stack.services["api"])
    channel = grpc.intercept_channel(grpc.insecure_channel(stack.auth_address), signer, _AddedAfterSigning("admin"))
    new_id = unique("tampered")
    metadata = _for(plain_id) if signed_for else None
    with channel:
        api = auth_grpc.AuthServiceStub(channel)

        def call() -> object:
            return api.CreateUser(auth_api.CreateUserRequest(id=new_id), metadata=metadata)

        assert code_of(call) == grpc.StatusCode.UNAUTHENTICATED
        assert "signature does not match" in details_of(call)
    assert not _exists(stack, new_id)
