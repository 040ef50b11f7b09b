"""A bare repository on exactly a live repository's storage namespace is an administrator's
restore: refused to whoever may only create repositories, allowed to who may restore refs,
and garbage collection then refuses to run on either. Through real, authenticated gRPC."""

from __future__ import annotations

import functools

import grpc
import pytest

from services.auth.setup import DEVELOPERS
from silt import iam_actions as a
from silt.auth.v1 import auth_pb2 as auth_api
from silt.auth.v1 import model_pb2 as pb
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as gpb
from silt.rpc.signing import Credentials
from tests.integration.auth.support import Stack, code_of, details_of, unique


def _creator(stack: Stack, groups: tuple[str, ...] = ()) -> Credentials:
    """A user who may create repositories (any name), and what its groups give."""
    user_id, creds = stack.new_user(groups, prefix="creator")
    admin = stack.auth(stack.admin)
    policy_id = unique("create-only")
    allow = pb.Statement(effect=pb.EFFECT_ALLOW, actions=[a.CREATE_REPO], resources=["*"])
    admin.CreatePolicy(auth_api.CreatePolicyRequest(id=policy_id, statements=[allow]))
    admin.AttachPolicy(auth_api.PolicyAttachmentRequest(policy_id=policy_id, user_id=user_id))
    return creds


@pytest.mark.parametrize("groups", [(), (DEVELOPERS,)], ids=["create-only", "developer-who-may-create"])
def test_only_who_may_restore_refs_shares_a_namespace(stack: Stack, groups: tuple[str, ...]) -> None:
    victim = stack.new_repo("victim")
    admin = stack.gv(stack.admin)
    namespace = admin.GetRepository(api.GetRepositoryRequest(name=victim)).storage_namespace
    dump = admin.DumpRefs(api.DumpRefsRequest(repository=victim))

    # Writing to the repository is not enough: restoring refs is an administrator's action.
    creds = _creator(stack, groups)
    squat = api.CreateRepositoryRequest(name=unique("squat"), storage_namespace=namespace, bare=True)
    assert code_of(lambda: stack.gv(creds).CreateRepository(squat)) == grpc.StatusCode.PERMISSION_DENIED
    details = details_of(lambda: stack.gv(creds).CreateRepository(squat))
    assert "overlaps an existing repository's" in details
    assert victim not in details and namespace not in details
    # The creator may create repositories, just not there.
    assert code_of(lambda: stack.gv(creds).CreateRepository(api.CreateRepositoryRequest(name=unique("own")))) == (
        grpc.StatusCode.OK
    )

    copy = unique("copy")
    admin.CreateRepository(api.CreateRepositoryRequest(name=copy, storage_namespace=namespace, bare=True))
    restored = admin.RestoreRefs(api.RestoreRefsRequest(repository=copy, location=dump.location))
    assert restored.branches == 1

    # Two live repositories now share the namespace: a GC run of either would sweep the other's objects.
    for repo in (victim, copy):
        admin.SetGCRules(api.SetGCRulesRequest(repository=repo, rules=gpb.GCRules(default_retention_days=1)))
        prepare = functools.partial(admin.PrepareGC, api.PrepareGCRequest(repository=repo))
        assert code_of(prepare) == grpc.StatusCode.FAILED_PRECONDITION
        details = details_of(prepare)
        assert "overlaps another repository's" in details
        other = copy if repo == victim else victim
        assert other not in details and namespace not in details

    admin.DeleteRepository(api.DeleteRepositoryRequest(name=copy))
    assert admin.PrepareGC(api.PrepareGCRequest(repository=victim)).run_id
