"""What a caller holds: pattern coverage and overlap, exact against brute force, and fast."""

from __future__ import annotations

import itertools
import re
import time

import pytest

from services.auth.grants import Holdings, covers, overlaps
from services.auth.policies import statement
from silt import iam_actions as a
from silt.auth.v1 import model_pb2 as pb


def _patterns(alphabet: str, longest: int) -> list[str]:
    return ["".join(p) for n in range(1, longest + 1) for p in itertools.product(alphabet, repeat=n)]


def _strings(alphabet: str, longest: int) -> list[str]:
    return ["".join(p) for n in range(longest + 1) for p in itertools.product(alphabet, repeat=n)]


def _language(pattern: str, strings: list[str]) -> set[str]:
    regex = re.compile(".*".join(re.escape(piece) for piece in pattern.split("*")), re.DOTALL)
    return {s for s in strings if regex.fullmatch(s)}


# Patterns over {a, b, *}; strings over {a, b, c}: `c` stands for every character a pattern
# does not name, which is what makes a bounded enumeration decide inclusion exactly (a
# counterexample fills each star of the inner pattern with one `c`; an overlap needs at most
# both patterns' literal characters).
PATTERNS = _patterns("ab*", 4)
STRINGS = _strings("abc", 6)
LANGUAGES = {p: _language(p, STRINGS) for p in PATTERNS}


def test_covers_is_language_inclusion() -> None:
    for outer, inner in itertools.product(PATTERNS, repeat=2):
        assert covers(outer, inner) == (LANGUAGES[inner] <= LANGUAGES[outer]), (outer, inner)


def test_overlaps_is_a_common_string() -> None:
    small = [p for p in PATTERNS if len(p) <= 3]
    for p, q in itertools.product(small, repeat=2):
        assert overlaps(p, q) == bool(LANGUAGES[p] & LANGUAGES[q]), (p, q)


def _holdings(*statements: pb.Statement) -> Holdings:
    return Holdings([pb.Policy(id="p", statements=list(statements))])


ALLOW, DENY = pb.EFFECT_ALLOW, pb.EFFECT_DENY


def test_an_administrator_holds_everything() -> None:
    admin = _holdings(statement(ALLOW, ["*"]))
    assert admin.first_not_held(statement(ALLOW, ["*"])) is None
    assert admin.first_not_held(statement(ALLOW, [a.CREATE_USER, "iam:*"], ["users/*", "x"])) is None


def test_a_delegate_holds_only_what_its_patterns_cover() -> None:
    delegate = _holdings(
        statement(ALLOW, [a.READ_REPO, a.WRITE_REPO], ["team-*"]),
        statement(ALLOW, [a.CREATE_POLICY, a.ATTACH_POLICY], ["policies/*", "users/*"]),
        statement(DENY, [a.WRITE_REPO], ["team-prod*"]),
    )
    held = delegate.first_not_held
    assert held(statement(ALLOW, [a.READ_REPO], ["team-a", "team-b*"])) is None
    assert held(statement(ALLOW, [a.READ_REPO, a.WRITE_REPO], ["team-dev"])) is None
    # Allow * * (the exploit), and anything wider than what the delegate holds.
    assert held(statement(ALLOW, ["*"], ["*"])) == ("*", "*")
    assert held(statement(ALLOW, [a.READ_REPO], ["*"])) == (a.READ_REPO, "*")
    assert held(statement(ALLOW, [a.READ_REPO], ["team*"])) == (a.READ_REPO, "team*")
    # A pattern is not expanded over today's actions: `*Repo` would grant CreateRepo too, and
    # `Read*` whatever reading action comes next.
    assert held(statement(ALLOW, ["Read*"], ["team-a"])) == ("Read*", "team-a")
    # Mixing what a statement's actions and resources hold separately is not holding the pair.
    assert held(statement(ALLOW, [a.READ_REPO, a.CREATE_POLICY], ["team-a"])) == (a.CREATE_POLICY, "team-a")
    # Its own Deny: WriteRepo on team-prod* is not held, nor anything that may reach it.
    assert held(statement(ALLOW, [a.WRITE_REPO], ["team-prod"])) == (a.WRITE_REPO, "team-prod")
    assert held(statement(ALLOW, [a.WRITE_REPO], ["team-*"])) == (a.WRITE_REPO, "team-*")
    assert held(statement(ALLOW, [a.READ_REPO], ["team-prod"])) is None


def test_verify_signature_is_held_only_literally() -> None:
    """Nobody grants auth:VerifySignature through `*`: an administrator cannot create or attach a
    policy naming it, nor add anyone to a group holding it; only a literal statement holds it."""
    graveler = a.audience_resource("graveler")
    verifier = statement(ALLOW, [a.VERIFY_SIGNATURE], [graveler])
    for wildcard in ("*", "auth:*", "auth:Verify*"):
        holder = _holdings(statement(ALLOW, [wildcard]))
        assert holder.first_not_held(verifier) == (a.VERIFY_SIGNATURE, graveler), wildcard
        # What the wildcard grants itself is held: it never allows the literal-only action.
        assert holder.first_not_held(statement(ALLOW, [wildcard])) is None
    literal = _holdings(statement(ALLOW, [a.VERIFY_SIGNATURE], ["audiences/*"]))
    assert literal.first_not_held(verifier) is None
    assert literal.first_not_held(statement(ALLOW, ["auth:*"], [graveler])) == ("auth:*", graveler)
    denied = _holdings(statement(ALLOW, [a.VERIFY_SIGNATURE], ["*"]), statement(DENY, ["auth:*"], [graveler]))
    assert denied.first_not_held(verifier) == (a.VERIFY_SIGNATURE, graveler)


def test_unrestricted_means_allow_all_and_no_deny() -> None:
    assert _holdings(statement(ALLOW, ["*"])).unrestricted
    assert not _holdings(statement(ALLOW, ["*"]), statement(DENY, [a.DELETE_REPO], ["x"])).unrestricted
    assert not _holdings(statement(ALLOW, ["*"], ["repo-*"])).unrestricted
    assert not _holdings(statement(ALLOW, ["iam:*", a.READ_REPO])).unrestricted


def test_nothing_is_held_without_policies() -> None:
    assert _holdings().first_not_held(statement(ALLOW, [a.READ_REPO], ["x"])) == (a.READ_REPO, "x")


@pytest.mark.timeout(10)
def test_a_huge_statement_is_checked_in_bounded_time() -> None:
    """Pairs with the same answer are checked once: 2,000 x 2,000 patterns is not 4 million checks."""
    delegate = _holdings(
        statement(ALLOW, [a.READ_REPO, a.WRITE_REPO], ["team-*"]),
        statement(DENY, [a.WRITE_REPO], ["team-prod*"]),
    )
    actions = [a.READ_REPO] * 2000
    resources = [f"team-{i}{'*' * (i % 3)}{'x' * 400}" for i in range(2000)]
    started = time.monotonic()
    assert delegate.first_not_held(statement(ALLOW, actions, resources)) is None
    assert time.monotonic() - started < 2.0
