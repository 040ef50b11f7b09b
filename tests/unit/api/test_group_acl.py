"""Group ACL permissions as Silt statements (edge/api/iam/acl.py): each valid for auth, each
read back as itself, nothing else read back as an ACL."""

from __future__ import annotations

import pytest

from edge.api.errors import ApiError
from edge.api.iam import acl
from services.auth.policies import check_statements
from silt import iam_actions as a
from silt.auth.v1 import model_pb2 as pb


@pytest.mark.parametrize("permission", list(acl.ACTIONS))
def test_each_permission_is_a_valid_policy_that_reads_back_as_itself(permission: str) -> None:
    statements = acl.statements(permission)
    check_statements(statements)
    assert acl.permission_of(pb.Policy(id="ACL_-_g", statements=statements)) == permission


def test_permissions_grow_from_read_to_admin() -> None:
    held = [set(acl.ACTIONS[p]) for p in ("Read", "Write", "Super")]
    assert held[0] < held[1] < held[2]
    assert not held[2] & {a.SET_GC_RULES, a.DELETE_GC_RULES, a.SET_BRANCH_PROTECTION, *a.IAM_ACTIONS}
    assert acl.ACTIONS["Admin"] == ("*",)


@pytest.mark.parametrize("permission", ["read", "Owner", "", "Read "])
def test_other_permissions_are_refused(permission: str) -> None:
    with pytest.raises(ApiError) as refused:
        acl.statements(permission)
    assert refused.value.status == 400 and "Bad ACL permission" in refused.value.message


def test_other_statements_are_no_acl() -> None:
    narrowed = pb.Statement(effect=pb.EFFECT_ALLOW, actions=[a.READ_REPO], resources=["prod-*"])
    assert acl.permission_of(pb.Policy(statements=[narrowed])) is None
    doubled = acl.statements("Read") * 2
    assert acl.permission_of(pb.Policy(statements=doubled)) is None


def test_the_policy_id_fits_auths_ids() -> None:
    assert acl.policy_id("g" * acl.MAX_GROUP_ID) == "ACL_-_" + "g" * acl.MAX_GROUP_ID
    assert len(acl.settable_policy_id("g" * acl.MAX_GROUP_ID)) == 128
    assert acl.policy_id("g" * (acl.MAX_GROUP_ID + 1)) is None
    with pytest.raises(ApiError):
        acl.settable_policy_id("g" * (acl.MAX_GROUP_ID + 1))
