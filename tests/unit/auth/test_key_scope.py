"""Object-scoped policies: lakeFS's wildcards (`*`, `?`), auth's key scope for one repository,
and the per-key rule the edges apply with it (silt/key_scope.py)."""

from __future__ import annotations

import itertools
import random
import re

import pytest

from services.auth.policies import check_statements, compile_statements, is_allowed, key_scope, statement
from silt import iam_actions as a
from silt.auth.v1 import model_pb2 as pb
from silt.key_scope import KeyScope
from silt.wildcards import compile_wildcard, covers, overlaps
from tests.support.thread_cpu import ThreadCpu

ALLOW, DENY = pb.EFFECT_ALLOW, pb.EFFECT_DENY


def _reference(pattern: str, value: str) -> bool:
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value, re.DOTALL) is not None


def _scope(*statements: pb.Statement, action: str = a.READ_OBJECT, repository: str = "weather") -> KeyScope:
    check_statements(statements)
    return key_scope(compile_statements([pb.Policy(id="p", statements=statements)]), action, repository)


def test_wildcards_match_as_lakefs_does() -> None:
    assert compile_wildcard("raw/day=??/*")("raw/day=01/x.csv")
    assert not compile_wildcard("raw/day=??/*")("raw/day=1/x.csv")
    assert compile_wildcard("a?c")("a/c")  # `?` is any one character, `/` too
    assert compile_wildcard("*?")("x") and not compile_wildcard("*?")("")
    rng = random.Random(7)
    for _ in range(5000):
        pattern = "".join(rng.choice("ab/*?") for _ in range(rng.randint(0, 8)))
        value = "".join(rng.choice("ab/") for _ in range(rng.randint(0, 9)))
        assert compile_wildcard(pattern)(value) == _reference(pattern, value), (pattern, value)


@pytest.mark.parametrize("pattern", ["?*" * 500, "*a" * 500, "*?a" * 340, "a?" * 512])
def test_no_pattern_takes_superlinear_time(pattern: str) -> None:
    """Patterns at the length bound against values at the length bound: milliseconds, where a
    backtracking matcher takes the age of the universe."""
    matcher = compile_wildcard(pattern)
    value = "a" * 1023 + "b"
    with ThreadCpu() as cpu:
        for _ in range(10):
            matcher(value)
    assert cpu.seconds / 10 < 0.02


def test_patterns_are_bounded() -> None:
    with pytest.raises(Exception, match="1 to 1024 characters"):
        check_statements([statement(ALLOW, [a.READ_OBJECT], ["weather/" + "a" * 1024])])


def test_covers_and_overlaps_stay_sound_with_question_marks() -> None:
    """True from covers and False from overlaps are promises, checked over every string up to a
    length: the delegation checks (services/auth/grants.py) rely on them."""
    alphabet = "ab"
    strings = ["".join(s) for n in range(6) for s in itertools.product(alphabet, repeat=n)]
    patterns = ["".join(p) for n in range(4) for p in itertools.product("a*?", repeat=n)]
    for p, q in itertools.product(patterns, repeat=2):
        p_set = {s for s in strings if _reference(p, s)}
        q_set = {s for s in strings if _reference(q, s)}
        if covers(p, q):
            assert q_set <= p_set, (p, q)
        if not overlaps(p, q):
            assert not p_set & q_set, (p, q)


def test_a_repository_action_is_the_whole_repository() -> None:
    scope = _scope(statement(ALLOW, [a.READ_REPO], ["weather"]))
    assert scope.whole and scope.allows("anything/at/all")
    # Nothing per key to carry: the edges do no work for it.
    assert (scope.allow, scope.deny) == ((), ())
    assert _scope(statement(ALLOW, [a.READ_REPO], ["other"])).nothing


def test_prefix_limited_reads() -> None:
    scope = _scope(statement(ALLOW, [a.READ_OBJECT], ["weather/raw/*"]))
    assert not scope.whole and not scope.nothing
    assert scope.allows("raw/a") and scope.allows("raw/sub/c")
    assert not scope.allows("gold/b") and not scope.allows("raw") and not scope.allows("rawx/a")
    # Patterns about other repositories are not carried.
    assert _scope(statement(ALLOW, [a.READ_OBJECT], ["weather/raw/*", "sales/*"])).allow == ("weather/raw/*",)
    # A repository pattern covers the keys of every repository it matches.
    assert _scope(statement(ALLOW, [a.READ_OBJECT], ["weath*"])).allows("gold/b")
    # Another action's statements do not count.
    assert _scope(statement(ALLOW, [a.WRITE_OBJECT], ["weather/raw/*"])).nothing


def test_deny_wins() -> None:
    whole_but_gold = _scope(
        statement(ALLOW, [a.READ_REPO], ["weather"]), statement(DENY, [a.READ_OBJECT], ["weather/gold/*"])
    )
    assert not whole_but_gold.whole
    assert whole_but_gold.allows("raw/a") and not whole_but_gold.allows("gold/b")
    # A Deny of the repository action takes every key, whatever the object Allow.
    denied = _scope(statement(ALLOW, [a.READ_OBJECT], ["weather/*"]), statement(DENY, [a.READ_REPO], ["weather"]))
    assert denied.nothing and not denied.allows("raw/a")
    # `*` denies too; an object Deny narrower than an object Allow.
    assert _scope(statement(ALLOW, [a.READ_OBJECT], ["weather/*"]), statement(DENY, ["*"], ["*"])).nothing
    narrowed = _scope(
        statement(ALLOW, [a.READ_OBJECT], ["weather/raw/*"]), statement(DENY, [a.READ_OBJECT], ["weather/raw/x?"])
    )
    assert narrowed.allows("raw/xyz") and not narrowed.allows("raw/x1")


def test_writes_and_deletes_are_held_through_write_repo() -> None:
    for action in (a.WRITE_OBJECT, a.DELETE_OBJECT):
        assert _scope(statement(ALLOW, [a.WRITE_REPO], ["weather"]), action=action).whole
        assert not _scope(statement(ALLOW, [a.READ_REPO], ["weather"]), action=action).allows("raw/a")
    writer = _scope(statement(ALLOW, [a.WRITE_OBJECT], ["weather/raw/*"]), action=a.WRITE_OBJECT)
    assert writer.allows("raw/new") and not writer.allows("gold/new")


def test_common_prefixes_shown_only_where_a_readable_key_may_lie() -> None:
    scope = _scope(statement(ALLOW, [a.READ_OBJECT], ["weather/raw/*"]))
    assert scope.may_allow_under("raw/") and scope.may_allow_under("r") and scope.may_allow_under("")
    assert not scope.may_allow_under("gold/") and not scope.may_allow_under("rax/")
    deep = _scope(statement(ALLOW, [a.READ_OBJECT], ["weather/*/public/*"]))
    assert deep.may_allow_under("gold/")  # a gold/x/public/ key may be readable
    but_gold = _scope(
        statement(ALLOW, [a.READ_REPO], ["weather"]), statement(DENY, [a.READ_OBJECT], ["weather/gold/*"])
    )
    assert not but_gold.may_allow_under("gold/") and but_gold.may_allow_under("raw/")
    assert but_gold.may_allow_under("g")  # a key such as "gx" lies below, readable


def test_read_refs_is_held_through_read_repo_and_denied_with_it() -> None:
    def may(*statements: pb.Statement, repository: str = "weather") -> bool:
        return is_allowed(compile_statements([pb.Policy(id="p", statements=statements)]), a.READ_REFS, repository)

    assert may(statement(ALLOW, [a.READ_REFS], ["weather"]))
    assert may(statement(ALLOW, [a.READ_REPO], ["weath*"]))
    assert not may(statement(ALLOW, [a.READ_OBJECT], ["weather/*"]))  # keys are not the repository
    assert not may(statement(ALLOW, [a.READ_REFS], ["*"]), statement(DENY, [a.READ_REPO], ["weather"]))
    assert not may(statement(ALLOW, [a.READ_REPO], ["*"]), statement(DENY, [a.READ_REFS], ["weather"]))
    # ReadRefs reads no key.
    refs_only = _scope(statement(ALLOW, [a.READ_REFS], ["weather"]))
    assert refs_only.nothing


def test_an_object_action_on_a_repository_name_is_every_key_of_it() -> None:
    """What graveler asks of callers that read or change entries by key."""

    def every_key(*statements: pb.Statement) -> bool:
        policies = [pb.Policy(id="p", statements=statements)]
        return is_allowed(compile_statements(policies), a.READ_OBJECT, "weather")

    assert every_key(statement(ALLOW, [a.READ_REPO], ["*"]))
    assert every_key(statement(ALLOW, [a.READ_OBJECT], ["weather/*"]))  # no key left out, though
    assert not every_key(statement(ALLOW, [a.READ_OBJECT], ["weather/raw/*"]))
    assert not every_key(statement(ALLOW, [a.READ_REPO], ["*"]), statement(DENY, [a.READ_OBJECT], ["weather/g*"]))


def test_authorize_on_an_object_resource_agrees_with_the_scope() -> None:
    policies = [
        pb.Policy(
            id="p",
            statements=[
                statement(ALLOW, [a.READ_OBJECT], ["weather/raw/*"]),
                statement(DENY, [a.READ_OBJECT], ["weather/raw/secret/*"]),
            ],
        )
    ]
    statements = compile_statements(policies)
    scope = key_scope(statements, a.READ_OBJECT, "weather")
    for key in ("raw/a", "raw/secret/k", "gold/b", "", "raw/"):
        assert is_allowed(statements, a.READ_OBJECT, a.object_resource("weather", key)) == scope.allows(key), key
    # The repository action itself is not held through object statements.
    assert not is_allowed(statements, a.READ_REPO, "weather")
