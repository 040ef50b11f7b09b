"""Decisions cost a bounded amount whatever the caller sends: linear wildcard matching, capped
resources, and names no service accepts refused before auth is asked."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import grpc
import pytest

from silt import iam_actions as a
from silt.auth.v1 import auth_pb2 as auth_api
from silt.auth.v1 import model_pb2 as auth_pb
from silt.compactor.v1 import compactor_pb2 as compactor_api
from silt.graveler.v1 import graveler_pb2 as api
from silt.rpc.interceptor import AuthInterceptor
from tests.integration.auth.support import Stack, code_of, unique

MIB = 1024 * 1024
HOSTILE_PATTERN = "*a" * 500 + "*b"  # 1,001 characters: a valid policy resource


def hostile_user(stack: Stack) -> str:
    user_id, _ = stack.new_user()
    policy_id = unique("hostile")
    admin = stack.auth(stack.admin)
    allow = auth_pb.Statement(effect=auth_pb.EFFECT_ALLOW, actions=[a.READ_REPO], resources=[HOSTILE_PATTERN])
    admin.CreatePolicy(auth_api.CreatePolicyRequest(id=policy_id, statements=[allow]))
    admin.AttachPolicy(auth_api.PolicyAttachmentRequest(policy_id=policy_id, user_id=user_id))
    return user_id


def test_a_hostile_policy_pattern_is_decided_in_linear_time(stack: Stack) -> None:
    user_id = hostile_user(stack)
    admin = stack.auth(stack.admin)
    resources = ["a" * 1024] * 999 + ["a" * 1023 + "b"]
    started = time.monotonic()
    answer = admin.AuthorizeMany(
        auth_api.AuthorizeManyRequest(user_id=user_id, action=a.READ_REPO, resources=resources), timeout=10
    )
    assert time.monotonic() - started < 2.0
    assert list(answer.allowed) == [False] * 999 + [True]


@pytest.mark.parametrize("length", [1025, MIB])
def test_auth_refuses_to_decide_about_overlong_resources(stack: Stack, length: int) -> None:
    user_id = hostile_user(stack)
    admin = stack.auth(stack.admin)
    resource = "a" * length
    one = auth_api.AuthorizeRequest(user_id=user_id, action=a.READ_REPO, resource=resource)
    many = auth_api.AuthorizeManyRequest(user_id=user_id, action=a.READ_REPO, resources=["ok", resource])
    assert code_of(lambda: admin.Authorize(one)) == grpc.StatusCode.INVALID_ARGUMENT
    assert code_of(lambda: admin.AuthorizeMany(many)) == grpc.StatusCode.INVALID_ARGUMENT
    # Auth's own calls name users, groups and policies the same way.
    get_user = auth_api.GetUserRequest(id="u" * length)
    assert code_of(lambda: admin.GetUser(get_user)) == grpc.StatusCode.INVALID_ARGUMENT


class _Asked:
    """Counts the decisions an interceptor asks its authority for."""

    def __init__(self, interceptor: AuthInterceptor, monkeypatch: pytest.MonkeyPatch) -> None:
        self.resources: list[str] = []
        authority = interceptor.authority
        allowed: Callable[[str, str, str, str], bool] = authority.allowed

        def counting(user_id: str, action: str, resource: str, source_ip: str = "") -> bool:
            self.resources.append(resource)
            return allowed(user_id, action, resource, source_ip)

        monkeypatch.setattr(authority, "allowed", counting)


def graveler_interceptor(stack: Stack) -> AuthInterceptor:
    return stack._interceptors[1]


@pytest.mark.parametrize("length", [64, 1025, MIB])
def test_a_repository_name_no_repository_can_have_is_refused_before_auth_is_asked(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, length: int
) -> None:
    asked = _Asked(graveler_interceptor(stack), monkeypatch)
    _, credentials = stack.new_user(["Admins"])
    graveler = stack.gv(credentials)
    name = "r" * length
    requests: Sequence[tuple[Callable[..., Any], Any]] = [
        (graveler.ListBranches, api.ListBranchesRequest(repository=name)),
        (graveler.GetRepository, api.GetRepositoryRequest(name=name)),
        (graveler.Log, api.LogRequest(repository=name, ref="main")),
        (graveler.CreateRepository, api.CreateRepositoryRequest(name=name, storage_namespace="local://x")),
    ]
    for call, request in requests:
        with pytest.raises(grpc.RpcError) as err:
            call(request, timeout=10)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "invalid repository name" in (err.value.details() or "")
    assert asked.resources == []

    # A valid name is still asked about, and answered.
    repo = stack.new_repo()
    asked.resources.clear()
    graveler.ListBranches(api.ListBranchesRequest(repository=repo))
    assert asked.resources == [repo]


def test_compactor_rules_validate_repository_names_too() -> None:
    from services.compactor.permissions import RULES
    from silt.errors import InvalidArgument
    from silt.rpc.interceptor import Require

    request = compactor_api.CompactRequest(repository="r" * MIB, branch="main")
    for method, rule in RULES.items():
        assert isinstance(rule, Require), method
        with pytest.raises(InvalidArgument):
            rule.resource(request)
