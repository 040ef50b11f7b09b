"""Last-access rules: their bounds, and how overlapping prefixes are listed once."""

from __future__ import annotations

import pytest

from engine.features.last_access_rules import (
    MAX_LAST_ACCESS_RULES,
    MAX_PREFIX_BYTES,
    MAX_PREFIXES_PER_RULE,
    covering_prefixes,
    describe,
    rules_of_branch,
    validate_last_access_rules,
)
from engine.features.retention import validate_rules
from silt.errors import InvalidArgument
from silt.graveler.v1 import model_pb2 as pb


def rule(branch: str = "main", prefixes: tuple[str, ...] = ("logs/",), days: int = 30) -> pb.LastAccessRule:
    return pb.LastAccessRule(branch=branch, prefixes=list(prefixes), days=days)


def test_rules_at_their_bounds_are_accepted() -> None:
    validate_last_access_rules([rule(days=1), rule(days=3650), rule(prefixes=("",))])
    validate_last_access_rules([rule(prefixes=("é" * (MAX_PREFIX_BYTES // 2),))])
    validate_last_access_rules([rule(prefixes=tuple(f"p{i}/" for i in range(MAX_PREFIXES_PER_RULE)))])
    validate_last_access_rules([rule()] * MAX_LAST_ACCESS_RULES)


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        ([rule(days=0)], "days must be 1..3650"),
        ([rule(days=3651)], "days must be 1..3650"),
        ([rule(days=-5)], "days must be 1..3650"),
        ([rule(branch="")], "invalid branch name"),
        ([rule(branch="b" * 257)], "invalid branch name"),
        ([rule(prefixes=())], "1..100 prefixes"),
        ([rule(prefixes=tuple(str(i) for i in range(MAX_PREFIXES_PER_RULE + 1)))], "1..100 prefixes"),
        ([rule(prefixes=("é" * (MAX_PREFIX_BYTES // 2 + 1),))], "longer than 1024 bytes"),
        ([rule()] * (MAX_LAST_ACCESS_RULES + 1), "at most 100 last-access rules"),
        ([rule(), rule(days=0)], "last-access rule 2"),
    ],
)
def test_rules_out_of_bounds_are_refused(rules: list[pb.LastAccessRule], message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        validate_last_access_rules(rules)


def test_gc_rules_validation_covers_last_access_rules() -> None:
    with pytest.raises(InvalidArgument, match="days must be"):
        validate_rules(pb.GCRules(default_retention_days=7, last_access_rules=[rule(days=0)]))


def test_overlapping_prefixes_are_listed_once() -> None:
    rules = [rule(prefixes=("logs/2024/", "tmp/")), rule(prefixes=("logs/", "tmp/"), days=5)]
    assert covering_prefixes(rules) == ["logs/", "tmp/"]
    assert covering_prefixes([rule(prefixes=("a/", "")), rule(prefixes=("b",))]) == [""]


def test_rules_of_a_branch_keep_their_order() -> None:
    stored = pb.GCRules(last_access_rules=[rule(days=3), rule(branch="dev"), rule(days=9)])
    assert [r.days for r in rules_of_branch(stored, "main")] == [3, 9]
    assert rules_of_branch(None, "main") == []


def test_a_rule_in_words_cuts_long_prefix_lists() -> None:
    text = describe(rule(prefixes=("a/", "b/", "c/", "d/", "e/"), days=12))
    assert text == "not read or written for 12 days under 'a/', 'b/', 'c/' and 2 more of branch 'main'"
