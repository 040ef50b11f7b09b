"""Branch-scoped policies: auth's decision for a branch action on `<repository>@<branch>`
(held through the repository's action and WriteBranch, a Deny of any holder wins), and the key
scope of a staged write or delete on a branch (services/auth/policies.py)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from services.auth.policies import check_statements, compile_statements, is_allowed, key_scope, statement
from silt import iam_actions as a
from silt.auth.v1 import model_pb2 as pb
from silt.key_scope import KeyScope

ALLOW, DENY = pb.EFFECT_ALLOW, pb.EFFECT_DENY
WRITES = (a.COMMIT_BRANCH, a.REVERT_BRANCH, a.CREATE_BRANCH, a.DELETE_BRANCH, a.WRITE_BRANCH)


def _may(*statements: pb.Statement) -> Callable[[str, str], bool]:
    check_statements(statements)
    compiled = compile_statements([pb.Policy(id="p", statements=statements)])
    return lambda action, resource: is_allowed(compiled, action, resource)


def _scope(*statements: pb.Statement, action: str = a.WRITE_OBJECT, branch: str = "main") -> KeyScope:
    check_statements(statements)
    return key_scope(compile_statements([pb.Policy(id="p", statements=statements)]), action, "w", branch)


def test_the_repository_action_holds_every_branch() -> None:
    may = _may(statement(ALLOW, [a.READ_REPO, a.WRITE_REPO], ["w"]))
    for action in WRITES:
        assert may(action, "w@main") and may(action, "w@dev-1")
        assert not may(action, "other@main")
    assert may(a.READ_BRANCH, "w@main")
    # ReadRefs, the repository without its objects, holds ReadBranch; WriteRepo does not.
    assert _may(statement(ALLOW, [a.READ_REFS], ["w"]))(a.READ_BRANCH, "w@x")
    assert not _may(statement(ALLOW, [a.WRITE_REPO], ["w"]))(a.READ_BRANCH, "w@x")


def test_a_branch_allow_reaches_only_its_branches() -> None:
    may = _may(statement(ALLOW, [a.COMMIT_BRANCH], ["w@dev-*"]))
    assert may(a.COMMIT_BRANCH, "w@dev-1")
    assert not may(a.COMMIT_BRANCH, "w@main")
    assert not may(a.COMMIT_BRANCH, "wx@dev-1")
    assert not may(a.REVERT_BRANCH, "w@dev-1")
    assert not may(a.WRITE_REPO, "w")
    # WriteBranch holds every write action on its branches, not reading them.
    writer = _may(statement(ALLOW, [a.WRITE_BRANCH], ["w@dev-*"]))
    for action in WRITES:
        assert writer(action, "w@dev-1") and not writer(action, "w@main")
    assert not writer(a.READ_BRANCH, "w@dev-1")


@pytest.mark.parametrize(
    "denied",
    [
        statement(DENY, [a.COMMIT_BRANCH], ["w@main"]),
        statement(DENY, [a.WRITE_BRANCH], ["w@main"]),
        statement(DENY, [a.WRITE_REPO], ["w"]),
        statement(DENY, ["*"], ["w@m*"]),
        statement(DENY, ["*Branch"], ["*"]),
    ],
)
def test_a_deny_of_any_holder_wins(denied: pb.Statement) -> None:
    may = _may(statement(ALLOW, ["*"], ["*"]), denied)
    assert not may(a.COMMIT_BRANCH, "w@main")


def test_a_deny_on_one_branch_leaves_the_others() -> None:
    may = _may(statement(ALLOW, [a.WRITE_REPO], ["w"]), statement(DENY, [a.WRITE_BRANCH], ["w@main"]))
    for action in WRITES:
        assert not may(action, "w@main") and may(action, "w@dev")
    only_commits = _may(statement(ALLOW, [a.WRITE_REPO], ["w"]), statement(DENY, [a.COMMIT_BRANCH], ["w@main"]))
    assert not only_commits(a.COMMIT_BRANCH, "w@main") and only_commits(a.REVERT_BRANCH, "w@main")


def test_a_branch_resource_needs_both_halves() -> None:
    may = _may(statement(ALLOW, ["*"], ["*"]))
    assert not may(a.COMMIT_BRANCH, "w") and not may(a.COMMIT_BRANCH, "w@") and not may(a.COMMIT_BRANCH, "@main")


def test_staged_writes_follow_write_branch() -> None:
    repo_writer = statement(ALLOW, [a.WRITE_REPO], ["w"])
    assert _scope(repo_writer).whole
    # A Deny of WriteBranch on the branch: no key there, every key elsewhere.
    denied = statement(DENY, [a.WRITE_BRANCH], ["w@main"])
    assert _scope(repo_writer, denied).nothing
    assert _scope(repo_writer, denied, action=a.DELETE_OBJECT).nothing
    assert _scope(repo_writer, denied, branch="dev").whole
    # A Deny of committing only leaves staged writes alone (lakeFS's fs:CreateCommit).
    assert _scope(repo_writer, statement(DENY, [a.COMMIT_BRANCH], ["w@main"])).whole
    # Reads are not staged on a branch: WriteBranch says nothing of them.
    reader = statement(ALLOW, [a.READ_REPO], ["w"])
    assert _scope(reader, denied, action=a.READ_OBJECT).whole
    # An Allow of WriteBranch: every key of its branches, those an object Deny names excepted.
    branch_writer = statement(ALLOW, [a.WRITE_BRANCH], ["w@dev-*"])
    assert _scope(branch_writer, branch="dev-1").whole
    assert _scope(branch_writer, branch="main").nothing
    assert _scope(branch_writer).nothing
    gold = statement(DENY, [a.WRITE_OBJECT], ["w/gold/*"])
    scope = _scope(branch_writer, gold, branch="dev-1")
    assert scope.allows("raw/a") and not scope.allows("gold/b")
    # Asked without a branch (a probe such as HeadBucket): branch statements do not count.
    assert key_scope(compile_statements([pb.Policy(id="p", statements=[branch_writer])]), a.WRITE_OBJECT, "w").nothing


def test_object_allows_still_hold_on_branches_without_statements() -> None:
    """lakeFS's object statements reach every branch: a writer of `raw/*` writes there on any
    branch no Deny names."""
    raw = statement(ALLOW, [a.WRITE_OBJECT], ["w/raw/*"])
    for branch in ("main", "dev"):
        scope = _scope(raw, branch=branch)
        assert scope.allows("raw/a") and not scope.allows("gold/a")
    assert _scope(raw, statement(DENY, [a.WRITE_BRANCH], ["w@main"])).nothing
