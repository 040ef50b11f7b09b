"""`silt auth policies create` takes lakeFS's `condition` shape on each statement."""

from __future__ import annotations

import pytest

from cli.iam import _statements
from silt.auth.v1 import model_pb2 as pb
from silt.client_base import ClientError


def test_a_statement_s_condition_becomes_silt_s() -> None:
    (statement,) = _statements(
        '[{"effect": "allow", "actions": ["ReadRepo"], "resources": ["weather"],'
        ' "condition": {"NotIpAddress": {"SourceIp": ["10.0.0.0/8", "::1"]}}}]'
    )
    (condition,) = statement.conditions
    assert condition.operator == pb.CONDITION_OPERATOR_NOT_IP_ADDRESS
    assert (condition.field, list(condition.values)) == ("SourceIp", ["10.0.0.0/8", "::1"])
    assert not _statements('[{"effect": "allow", "actions": ["ReadRepo"]}]')[0].conditions


def test_an_unknown_operator_is_left_for_auth_to_refuse() -> None:
    (statement,) = _statements('[{"actions": ["ReadRepo"], "condition": {"StringLike": {"SourceIp": ["10.*"]}}}]')
    assert statement.conditions[0].operator == pb.CONDITION_OPERATOR_UNSPECIFIED


def test_a_condition_of_another_shape_is_a_usage_error() -> None:
    with pytest.raises(ClientError, match='"condition" is'):
        _statements('[{"actions": ["ReadRepo"], "condition": ["10.0.0.0/8"]}]')
