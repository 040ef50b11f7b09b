"""Wildcards, the decision rule (deny wins, nothing means deny) and statement validation."""

from __future__ import annotations

import fnmatch

import pytest

from services.auth.policies import (
    MAX_RESOURCE_CHARS,
    check_action_pattern,
    check_statements,
    compile_pattern,
    compile_statements,
    is_allowed,
    statement,
)
from silt import iam_actions as a
from silt.auth.v1 import model_pb2 as pb
from silt.errors import InvalidArgument
from tests.support.thread_cpu import ThreadCpu

ALLOW, DENY = pb.EFFECT_ALLOW, pb.EFFECT_DENY


@pytest.mark.parametrize(
    ("pattern", "value", "matches"),
    [
        ("*", "anything/at all", True),
        ("*", "", True),
        ("ReadRepo", "ReadRepo", True),
        ("ReadRepo", "ReadRepository", False),
        ("Read*", "ReadRepo", True),
        ("*Repo", "WriteRepo", True),
        ("iam:*", "iam:CreateUser", True),
        ("iam:*", "ReadRepo", False),
        ("prod-*", "prod-", True),
        ("prod-*", "production", False),
        ("a*b*c", "a-x-b-y-c", True),
        ("a*b*c", "a-x-c", False),
        ("users/*", "users/", True),
        ("users/*", "groups/x", False),
        ("repo.x", "repoXx", False),  # regex characters are literal
        ("[ab]", "a", False),
    ],
)
def test_wildcards(pattern: str, value: str, matches: bool) -> None:
    assert compile_pattern(pattern)(value) is matches


def decide(statements: list[pb.Statement], action: str, resource: str) -> bool:
    return is_allowed(compile_statements([pb.Policy(id="p", statements=statements)]), action, resource)


def test_no_statement_means_deny() -> None:
    assert not decide([], a.READ_REPO, "r")
    assert not decide([statement(ALLOW, [a.WRITE_REPO])], a.READ_REPO, "r")
    assert not decide([statement(ALLOW, [a.READ_REPO], ["other"])], a.READ_REPO, "r")


def test_deny_wins_over_allow_in_any_order() -> None:
    allow = statement(ALLOW, ["*"])
    deny = statement(DENY, [a.WRITE_REPO], ["prod-*"])
    for statements in ([allow, deny], [deny, allow]):
        assert not decide(statements, a.WRITE_REPO, "prod-1")
        assert decide(statements, a.WRITE_REPO, "dev-1")
        assert decide(statements, a.READ_REPO, "prod-1")


def test_deny_across_policies() -> None:
    policies = [
        pb.Policy(id="a", statements=[statement(ALLOW, [a.READ_REPO])]),
        pb.Policy(id="b", statements=[statement(DENY, [a.READ_REPO], ["secret"])]),
    ]
    compiled = compile_statements(policies)
    assert is_allowed(compiled, a.READ_REPO, "public")
    assert not is_allowed(compiled, a.READ_REPO, "secret")


def test_statement_without_effect_grants_nothing() -> None:
    assert not decide([pb.Statement(actions=["*"], resources=["*"])], a.READ_REPO, "r")


def test_action_patterns() -> None:
    for good in ("*", "ReadRepo", "iam:*", "*Repo", "auth:VerifySignature"):
        assert check_action_pattern(good) == good
    # auth:ReadSecret is gone: no action reads a secret any more.
    for bad in ("ReadRepos", "", "iam:Nope*", "Read Repo", "fs:*", "auth:ReadSecret"):
        with pytest.raises(InvalidArgument):
            check_action_pattern(bad)


def test_a_stored_policy_naming_a_retired_action_still_decides() -> None:
    """Policies written by an older version may name auth:ReadSecret: it grants nothing and
    breaks no decision about the actions that exist."""
    old = [statement(ALLOW, [a.AUTHORIZE, "auth:ReadSecret", a.READ_REPO])]
    assert decide(old, a.READ_REPO, "r") and decide(old, a.AUTHORIZE, "users/x")
    assert not decide(old, a.VERIFY_SIGNATURE, "audiences/s3")


def test_verify_signature_is_allowed_only_by_a_statement_naming_it() -> None:
    """Verifying signatures is impersonation: "Allow *" (or auth:*, auth:Verify*) never allows
    it, though a wildcard Deny still denies it."""
    audience = a.audience_resource("graveler")
    for wildcard in ("*", "auth:*", "auth:Verify*", "*Signature"):
        assert not decide([statement(ALLOW, [wildcard])], a.VERIFY_SIGNATURE, audience), wildcard
        assert decide([statement(ALLOW, [wildcard])], a.AUTHORIZE, "users/x") is (wildcard in ("*", "auth:*"))
    named = statement(ALLOW, [a.READ_REPO, a.VERIFY_SIGNATURE], [audience])
    assert decide([named], a.VERIFY_SIGNATURE, audience)
    assert not decide([named], a.VERIFY_SIGNATURE, a.audience_resource("auth"))
    assert not decide([named, statement(DENY, ["*"])], a.VERIFY_SIGNATURE, audience)
    assert not decide([named, statement(DENY, ["auth:*"], ["audiences/*"])], a.VERIFY_SIGNATURE, audience)
    # The finding's policy: Allow * *, Deny iam:* *.
    power = [statement(ALLOW, ["*"]), statement(DENY, ["iam:*"])]
    assert not decide(power, a.VERIFY_SIGNATURE, a.audience_resource("auth"))
    assert decide(power, a.AUTHORIZE, "users/x") and not decide(power, a.ADD_GROUP_MEMBER, "groups/Admins")


def test_statement_validation_names_the_statement() -> None:
    with pytest.raises(InvalidArgument, match="statement 2"):
        check_statements([statement(ALLOW, ["*"]), pb.Statement(effect=ALLOW, actions=["*"])])
    with pytest.raises(InvalidArgument, match="at most"):
        check_statements([statement(ALLOW, ["*"])] * 101)


def test_every_action_is_known_to_check_action() -> None:
    for action in a.ALL_ACTIONS:
        assert a.check_action(action) == action
    with pytest.raises(InvalidArgument):
        a.check_action("Read*")


# --- hostile patterns: linear matching, bounded resources --------------------------------------


@pytest.mark.parametrize(
    ("pattern", "value", "matches"),
    [
        ("*a" * 500 + "*b", "a" * 1024, False),
        ("*a" * 500 + "*b", "a" * 1023 + "b", True),
        ("a*" * 300 + "c", "a" * 1024, False),
        ("*ab" * 300 + "*", "ab" * 299 + "a" * 426, False),
        ("*ab" * 300 + "*", "ab" * 300, True),
        ("x*y*z", "x" + "y" * 1000 + "z", True),
        ("*aa*", "a" * 1024, True),
        ("a*a", "a", False),  # the two literal ends may not overlap
        ("ab*ba", "aba", False),
        ("ab*ba", "abba", True),
    ],
)
def test_wildcards_match_in_linear_time(pattern: str, value: str, matches: bool) -> None:
    matcher = compile_pattern(pattern)
    with ThreadCpu() as cpu:
        for _ in range(10):
            assert matcher(value) is matches
    assert cpu.seconds < 0.1


def test_wildcards_agree_with_a_reference_on_small_cases() -> None:
    """Leftmost matching of the literal pieces is exact: compare with fnmatch over every small case."""
    alphabet = "ab"
    values = [""] + [
        a + b + c + d for a in alphabet for b in ["", *alphabet] for c in ["", *alphabet] for d in ["", "a"]
    ]
    patterns = {v[:i] + "*" + v[i:] for v in values for i in range(len(v) + 1)} | {"a*b*a", "*a*", "**", "b**a"}
    for pattern in patterns:
        matcher = compile_pattern(pattern)
        for value in values:
            assert matcher(value) is fnmatch.fnmatchcase(value, pattern), (pattern, value)


def test_decisions_refuse_resources_longer_than_patterns_may_be() -> None:
    statements = compile_statements([pb.Policy(id="p", statements=[statement(ALLOW, ["*"], ["*a*a*a*b"])])])
    assert not is_allowed(statements, a.READ_REPO, "a" * MAX_RESOURCE_CHARS)
    with pytest.raises(InvalidArgument, match="at most 1024"):
        is_allowed(statements, a.READ_REPO, "a" * (MAX_RESOURCE_CHARS + 1))
