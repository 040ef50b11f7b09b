"""`silt auth policies create` sends lakeFS's statements to the REST API, from Silt's list of
{effect, actions, resources} or lakectl's statement document, each with lakeFS's `condition`."""

from __future__ import annotations

import pytest

from cli.iam import _statements
from silt.client_base import ClientError

CONDITION = {"NotIpAddress": {"SourceIp": ["10.0.0.0/8", "::1"]}}


def test_silt_s_statements_become_lakefs_s_one_per_resource_with_their_condition() -> None:
    statements = _statements(
        '[{"effect": "allow", "actions": ["ReadRepo"], "resources": ["weather", "prod-*"],'
        ' "condition": {"NotIpAddress": {"SourceIp": ["10.0.0.0/8", "::1"]}}}]'
    )
    assert statements == [
        {"effect": "allow", "action": ["ReadRepo"], "resource": "weather", "condition": CONDITION},
        {"effect": "allow", "action": ["ReadRepo"], "resource": "prod-*", "condition": CONDITION},
    ]
    assert _statements('[{"effect": "allow", "actions": ["ReadRepo"]}]') == [
        {"effect": "allow", "action": ["ReadRepo"], "resource": "*"}
    ]


def test_lakectl_s_statement_document_is_taken_as_it_is() -> None:
    document = '{"statement": [{"effect": "deny", "action": ["fs:*"], "resource": "arn:lakefs:fs:::repository/x"}]}'
    assert _statements(document) == [{"effect": "deny", "action": ["fs:*"], "resource": "arn:lakefs:fs:::repository/x"}]


def test_an_unknown_operator_is_left_for_the_server_to_refuse() -> None:
    (statement,) = _statements('[{"actions": ["ReadRepo"], "condition": {"StringLike": {"SourceIp": ["10.*"]}}}]')
    assert statement["condition"] == {"StringLike": {"SourceIp": ["10.*"]}}


@pytest.mark.parametrize(
    "text",
    ['[{"actions": ["ReadRepo"], "condition": ["10.0.0.0/8"]}]', '[{"effect": "maybe", "actions": ["ReadRepo"]}]'],
)
def test_a_statement_of_another_shape_is_a_usage_error(text: str) -> None:
    with pytest.raises(ClientError):
        _statements(text)
