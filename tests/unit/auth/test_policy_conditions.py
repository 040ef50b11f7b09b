"""Policy conditions (IpAddress / NotIpAddress on SourceIp): validation, evaluation, and how they
take part in decisions, key scopes, delegation and the decision caches."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from services.auth.grants import Holdings
from services.auth.policies import check_statements, compile_statements, is_allowed, key_scope, statement
from services.auth.server import _source
from silt import iam_actions as a
from silt.auth.v1 import model_pb2 as pb
from silt.errors import InvalidArgument
from silt.policy_conditions import MAX_VALUES, applies, check_conditions, compile_conditions, parse_block
from silt.rpc.authority import CachedAuthority

ALLOW, DENY = pb.EFFECT_ALLOW, pb.EFFECT_DENY
IP, NOT_IP = pb.CONDITION_OPERATOR_IP_ADDRESS, pb.CONDITION_OPERATOR_NOT_IP_ADDRESS


def _condition(operator: int, *values: str, field: str = "SourceIp") -> pb.Condition:
    return pb.Condition(operator=operator, field=field, values=list(values))  # type: ignore[arg-type]


def _decide(statements: Sequence[pb.Statement], source: str, action: str = a.READ_REPO, resource: str = "r") -> bool:
    return is_allowed(compile_statements([pb.Policy(id="p", statements=list(statements))], source), action, resource)


# --- validation ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "block"),
    [
        ("10.0.0.0/8", "10.0.0.0/8"),
        ("10.1.2.3/8", "10.0.0.0/8"),  # host bits past the prefix, as lakeFS and AWS take them
        ("127.0.0.2", "127.0.0.2/32"),
        ("2001:db8::/32", "2001:db8::/32"),
        ("::1", "::1/128"),
        ("::ffff:10.0.0.0/104", "10.0.0.0/8"),  # a dual-stack socket's way of writing 10.0.0.0/8
    ],
)
def test_blocks_are_addresses_or_cidrs_of_either_version(value: str, block: str) -> None:
    assert str(parse_block(value)) == block


@pytest.mark.parametrize(
    "value", ["", "10.0.0.0/33", "300.1.1.1", "10.0.0", "example.com", " 10.0.0.1", "fe80::1%eth0", "1.2.3.4/x"]
)
def test_anything_else_is_no_block(value: str) -> None:
    assert parse_block(value) is None


@pytest.mark.parametrize(
    ("conditions", "message"),
    [
        ([_condition(IP, "10.0.0.0/33")], "'10.0.0.0/33' is not an IPv4 or IPv6 address or CIDR block"),
        ([_condition(pb.CONDITION_OPERATOR_UNSPECIFIED, "10.0.0.0/8")], "operator must be IpAddress or NotIpAddress"),
        ([_condition(IP, "10.0.0.0/8", field="VpcId")], "supports the field 'SourceIp' only"),
        ([_condition(IP)], "needs at least one address"),
        ([_condition(IP, "10.0.0.1"), _condition(IP, "10.0.0.2")], "IpAddress given more than once"),
        ([_condition(NOT_IP, *(f"10.0.0.{n}" for n in range(MAX_VALUES + 1)))], f"at most {MAX_VALUES}"),
        ([_condition(IP, "1.1.1.1")] * 3, "at most 2 conditions"),
    ],
)
def test_validation_names_the_fault(conditions: list[pb.Condition], message: str) -> None:
    with pytest.raises(InvalidArgument, match="statement 1: .*" + message.replace("(", r"\(")):
        check_conditions(1, conditions)


def test_stored_statements_are_checked_with_their_conditions() -> None:
    good = statement(ALLOW, [a.READ_REPO], ["*"], [_condition(IP, "10.0.0.0/8"), _condition(NOT_IP, "10.9.0.0/16")])
    check_statements([good])
    bad = statement(DENY, [a.READ_REPO], ["*"], [_condition(NOT_IP, "10.0.0.0/8", "nope")])
    with pytest.raises(InvalidArgument, match="statement 2: NotIpAddress value 'nope'"):
        check_statements([good, bad])


# --- evaluation ---------------------------------------------------------------------------

ALLOW_FROM_2 = statement(ALLOW, [a.READ_REPO], ["*"], [_condition(IP, "127.0.0.2/32")])
ALLOW_EXCEPT_2 = statement(ALLOW, [a.READ_REPO], ["*"], [_condition(NOT_IP, "127.0.0.2")])
ALLOW_ALL = statement(ALLOW, [a.READ_REPO], ["*"])
DENY_FROM_2 = statement(DENY, [a.READ_REPO], ["*"], [_condition(IP, "127.0.0.2")])
DENY_OUTSIDE_10 = statement(DENY, ["*"], ["*"], [_condition(NOT_IP, "10.0.0.0/8", "2001:db8::/32")])


@pytest.mark.parametrize(
    ("statements", "source", "allowed"),
    [
        ([ALLOW_FROM_2], "127.0.0.2", True),
        ([ALLOW_FROM_2], "127.0.0.1", False),
        ([ALLOW_FROM_2], "::ffff:127.0.0.2", True),  # an IPv4 client seen by a dual-stack socket
        ([ALLOW_FROM_2], "::1", False),
        ([ALLOW_EXCEPT_2], "127.0.0.1", True),
        ([ALLOW_EXCEPT_2], "127.0.0.2", False),
        ([ALLOW_ALL, DENY_FROM_2], "127.0.0.2", False),
        ([ALLOW_ALL, DENY_FROM_2], "127.0.0.3", True),
        ([ALLOW_ALL, DENY_OUTSIDE_10], "10.200.0.1", True),
        ([ALLOW_ALL, DENY_OUTSIDE_10], "2001:db8::7", True),
        ([ALLOW_ALL, DENY_OUTSIDE_10], "11.0.0.1", False),
        ([ALLOW_ALL, DENY_OUTSIDE_10], "2001:db9::7", False),
    ],
)
def test_a_statement_applies_where_its_conditions_hold(
    statements: list[pb.Statement], source: str, allowed: bool
) -> None:
    assert _decide(statements, source) is allowed


@pytest.mark.parametrize("unknown", ["", "unix", "not-an-address"])
def test_an_unknown_address_meets_no_allow_condition_and_every_deny_condition(unknown: str) -> None:
    assert not _decide([ALLOW_FROM_2], unknown)
    assert not _decide([ALLOW_EXCEPT_2], unknown)  # NotIpAddress too: nothing is known to be outside
    assert not _decide([ALLOW_ALL, DENY_FROM_2], unknown)
    assert not _decide([ALLOW_ALL, DENY_OUTSIDE_10], unknown)
    assert _decide([ALLOW_ALL], unknown)  # statements without conditions do not care


def test_all_conditions_of_a_statement_must_hold() -> None:
    both = statement(ALLOW, [a.READ_REPO], ["*"], [_condition(IP, "10.0.0.0/8"), _condition(NOT_IP, "10.9.0.0/16")])
    assert _decide([both], "10.1.0.1")
    assert not _decide([both], "10.9.0.1")
    assert not _decide([both], "11.0.0.1")


def test_a_corrupt_stored_condition_fails_closed() -> None:
    corrupt = [_condition(IP, "not-a-block")]
    assert compile_conditions(corrupt) is None
    assert not _decide([statement(ALLOW, [a.READ_REPO], ["*"], corrupt)], "127.0.0.2")
    # A Deny whose condition no longer reads denies everywhere rather than nowhere.
    assert not _decide([ALLOW_ALL, statement(DENY, [a.READ_REPO], ["*"], corrupt)], "127.0.0.2")


def test_applies_directly() -> None:
    compiled = compile_conditions([_condition(IP, "192.0.2.0/24")])
    assert compiled is not None
    assert applies(compiled, deny=False, source="192.0.2.9")
    assert not applies(compiled, deny=False, source="")
    assert applies(compiled, deny=True, source="")
    assert applies((), deny=False, source="")


def test_object_scopes_follow_the_address() -> None:
    raw = statement(ALLOW, [a.READ_OBJECT], ["weather/raw/*"], [_condition(IP, "127.0.0.2")])
    policies = [pb.Policy(id="p", statements=[raw])]
    inside = key_scope(compile_statements(policies, "127.0.0.2"), a.READ_OBJECT, "weather")
    outside = key_scope(compile_statements(policies, "127.0.0.1"), a.READ_OBJECT, "weather")
    assert inside.allows("raw/a") and not inside.allows("gold/b")
    assert outside.nothing


# --- delegation: what a caller holds --------------------------------------------------------


def test_a_conditional_allow_holds_only_statements_granted_under_the_same_condition() -> None:
    limited = [_condition(IP, "10.0.0.0/8")]
    admin_from_10 = Holdings([pb.Policy(id="p", statements=[statement(ALLOW, ["*"], ["*"], limited)])], "10.1.1.1")
    # Writing itself (or anyone) an Allow without the condition would escape it.
    assert admin_from_10.first_not_held(statement(ALLOW, [a.READ_REPO], ["r"])) == (a.READ_REPO, "r")
    assert admin_from_10.first_not_held(statement(ALLOW, [a.READ_REPO], ["r"], limited)) is None
    assert not admin_from_10.unrestricted
    # From elsewhere (or an unknown address) the Allow gives nothing to grant.
    elsewhere = Holdings([pb.Policy(id="p", statements=[statement(ALLOW, ["*"], ["*"], limited)])], "11.0.0.1")
    assert elsewhere.first_not_held(statement(ALLOW, [a.READ_REPO], ["r"], limited)) == (a.READ_REPO, "r")


def test_a_conditional_deny_takes_holdings_where_it_applies() -> None:
    policies = [pb.Policy(id="p", statements=[statement(ALLOW, ["*"]), DENY_OUTSIDE_10])]
    granted = statement(ALLOW, [a.READ_REPO], ["r"])
    assert Holdings(policies, "10.0.0.5").first_not_held(granted) is None
    assert Holdings(policies, "11.0.0.5").first_not_held(granted) is not None
    assert Holdings(policies, "").first_not_held(granted) is not None


# --- caching --------------------------------------------------------------------------------


class _CountingAuthority:
    """Allows ReadRepo from 127.0.0.2 only, counting the questions."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def call_key(self, access_key_id: str, day: str, audience: str) -> object:
        raise AssertionError("not asked")

    def allowed_many(self, user_id: str, action: str, resources: Sequence[str], source_ip: str = "") -> list[bool]:
        self.asked.append(source_ip)
        return [source_ip == "127.0.0.2" for _ in resources]


def test_cached_decisions_are_kept_per_source_address() -> None:
    inner = _CountingAuthority()
    cached = CachedAuthority(inner, ttl=60)  # type: ignore[arg-type]
    assert cached.allowed("u", a.READ_REPO, "r", "127.0.0.2")
    assert not cached.allowed("u", a.READ_REPO, "r", "127.0.0.1")
    assert not cached.allowed("u", a.READ_REPO, "r", "")
    assert cached.allowed("u", a.READ_REPO, "r", "127.0.0.2")
    assert inner.asked == ["127.0.0.2", "127.0.0.1", ""]


def test_decision_requests_name_an_address_or_none() -> None:
    assert _source("") == ""
    assert _source("2001:DB8::1") == "2001:db8::1"
    with pytest.raises(InvalidArgument, match="source_ip 'here' is not an IPv4 or IPv6 address"):
        _source("here")
