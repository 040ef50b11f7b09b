"""lakeFS's statement `condition` through the REST API's translation (edge/api/iam/policies.py):
carried onto every Silt statement a lakeFS one becomes, read back in lakeFS's shape, refused (400)
when it is not IpAddress / NotIpAddress on SourceIp with addresses or CIDR blocks."""

from __future__ import annotations

from typing import Any

import pytest
from lakefs_sdk.models import Policy, Statement

from edge.api.errors import ApiError
from edge.api.iam.policies import from_silt, to_silt
from silt.auth.v1 import model_pb2 as pb

REPO = "arn:lakefs:fs:::repository/"
FROM_2 = {"IpAddress": {"SourceIp": ["127.0.0.2/32"]}}
# lakeFS's actions for all of a repository (fs:* alone leaves out pull requests and the rules).
REPOSITORY = ["fs:*", "pr:*", "retention:*", "branches:*"]
OUTSIDE_10 = {"NotIpAddress": {"SourceIp": ["10.0.0.0/8", "2001:db8::/32"]}}


def _policy(*statements: dict[str, Any]) -> Policy:
    return Policy.from_dict({"id": "p", "statement": list(statements)})


def _refusal(*statements: dict[str, Any]) -> str:
    with pytest.raises(ApiError) as caught:
        to_silt(_policy(*statements))
    assert caught.value.status == 400
    return caught.value.message


def _conditions(statement: pb.Statement) -> list[tuple[int, str, list[str]]]:
    return [(c.operator, c.field, list(c.values)) for c in statement.conditions]


def test_a_condition_goes_onto_every_statement_it_translates_into() -> None:
    stored = to_silt(
        _policy({"effect": "allow", "action": [*REPOSITORY, "auth:*"], "resource": "*", "condition": FROM_2})
    )
    assert len(stored) == 2  # repository actions, and IAM actions on '*'
    for statement in stored:
        assert _conditions(statement) == [(pb.CONDITION_OPERATOR_IP_ADDRESS, "SourceIp", ["127.0.0.2/32"])]


def test_a_widened_deny_keeps_its_condition() -> None:
    (denied,) = to_silt(
        _policy(
            {"effect": "deny", "action": ["fs:ReadObject"], "resource": f"{REPO}w*/object/x", "condition": OUTSIDE_10}
        )
    )
    assert denied.effect == pb.EFFECT_DENY
    assert list(denied.resources) == ["w*"]
    assert _conditions(denied) == [(pb.CONDITION_OPERATOR_NOT_IP_ADDRESS, "SourceIp", ["10.0.0.0/8", "2001:db8::/32"])]


def test_silt_vocabulary_keeps_its_condition_and_reads_back_in_lakefs_shape() -> None:
    stored = to_silt(_policy({"effect": "allow", "action": ["ReadRepo"], "resource": "weather", "condition": FROM_2}))
    back = from_silt(pb.Policy(id="p", statements=stored))
    assert back.statement[0].to_dict()["condition"] == FROM_2
    unconditional = from_silt(
        pb.Policy(id="p", statements=to_silt(_policy({"effect": "allow", "action": ["ReadRepo"], "resource": "w"})))
    )
    assert unconditional.statement[0].condition is None


def test_pair_halves_pair_only_under_the_same_condition() -> None:
    actions = REPOSITORY
    same = to_silt(
        _policy(
            {"effect": "allow", "action": actions, "resource": f"{REPO}weather", "condition": FROM_2},
            {"effect": "allow", "action": actions, "resource": f"{REPO}weather/*", "condition": FROM_2},
        )
    )
    assert {tuple(s.resources) for s in same} == {("weather",)}
    assert all(_conditions(s) for s in same)
    message = _refusal(
        {"effect": "allow", "action": actions, "resource": f"{REPO}weather", "condition": FROM_2},
        {"effect": "allow", "action": actions, "resource": f"{REPO}weather/*"},
    )
    assert "not a whole repository" in message


@pytest.mark.parametrize(
    ("condition", "message"),
    [
        ({"IpAddress": {"SourceIp": ["10.0.0.0/33"]}}, "statement 1: IpAddress value '10.0.0.0/33' is not an IPv4"),
        ({"IpAddress": {"SourceIp": ["not-an-ip"]}}, "'not-an-ip' is not an IPv4 or IPv6 address or CIDR block"),
        ({"StringLike": {"SourceIp": ["10.*"]}}, "condition operator 'StringLike' is not supported"),
        ({"IpAddress": {"VpcId": ["10.0.0.0/8"]}}, "supports the field 'SourceIp' only"),
        ({"IpAddress": {}}, "names exactly one field"),
        ({"IpAddress": {"SourceIp": []}}, "needs at least one address"),
    ],
)
def test_bad_conditions_are_refused(condition: dict[str, Any], message: str) -> None:
    assert message in _refusal({"effect": "allow", "action": ["fs:*"], "resource": "*", "condition": condition})


def test_statements_without_a_condition_are_unchanged() -> None:
    (stored,) = to_silt(_policy({"effect": "allow", "action": ["ReadRepo"], "resource": "w", "condition": {}}))
    assert not stored.conditions
    assert Statement.from_dict({"effect": "allow", "action": ["x"], "resource": "y"}).condition is None
