"""Policy statements: validation, wildcard matching and the decision rule.

A request (action, resource) is allowed when some statement of the principal's effective
policies allows it and none denies it: deny wins over allow, and no statement means deny.
Resources match as lakeFS's wildcards (`*` any run, `?` one character; silt/wildcards.py).
An object action on `<repository>/<key>` is decided by key_scope's rule (silt/key_scope.py):
the repository's action holds every key, and a Deny of either wins. ReadRefs (the repository
without its objects) is held through ReadRefs or ReadRepo, and a Deny of either takes it.
A branch action on `<repository>@<branch>` (silt/iam_actions.py BRANCH_ACTIONS) is held through
itself, WriteBranch on the branch (for the write ones) or the repository's action (WriteRepo; ReadRefs
or ReadRepo for ReadBranch), and a Deny of any of those takes it (branch_holders). A catalog action
(`catalog:ReadTable` on `arn:lakefs:catalog:::table/<repository>/...`) is held through itself or the
repository's action (ReadRepo for the reads, WriteRepo for the changes), and a Deny of either takes
it (catalog_holders). A staged write or
delete asks key_scope with the branch: a Deny of WriteBranch on it leaves no key, an Allow of it
every key of the branch.
An action of silt.iam_actions.LITERAL_ONLY_ACTIONS (auth:VerifySignature) is allowed only by a
statement that names it literally: `*` and `auth:*` never grant it, though they deny it.
A statement with conditions (silt/policy_conditions.py) takes part only in decisions about
requests it applies to: `compile_statements` keeps, for one request's source address, the
statements that apply to it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from silt.auth.v1 import model_pb2 as pb
from silt.errors import InvalidArgument
from silt.iam_actions import (
    ALL_ACTIONS,
    BRANCH_ACTIONS,
    BRANCH_MARK,
    BRANCH_WRITE_ACTIONS,
    CATALOG_ACTIONS,
    CATALOG_ARN,
    CATALOG_READ_ACTIONS,
    DELETE_OBJECT,
    LITERAL_ONLY_ACTIONS,
    MAX_RESOURCE_LENGTH,
    OBJECT_ACTION_REPO_ACTION,
    OBJECT_ACTIONS,
    READ_REFS,
    READ_REPO,
    WRITE_BRANCH,
    WRITE_OBJECT,
    WRITE_REPO,
    branch_resource,
)
from silt.key_scope import KeyScope
from silt.policy_conditions import applies, check_conditions, compile_conditions
from silt.wildcards import Matcher, compile_pattern, compile_wildcard, overlaps

MAX_STATEMENTS = 100
MAX_RESOURCE_CHARS = MAX_RESOURCE_LENGTH  # patterns, and the resources decisions are asked about
_ACTION_CHARS = re.compile(r"^[A-Za-z:*]+$")
_RESOURCE_FORBIDDEN = re.compile(r"[\x00-\x20\x7f]")


def check_resource(resource: str) -> str:
    """A resource a decision is asked about: never longer than a pattern may be (InvalidArgument)."""
    if len(resource) > MAX_RESOURCE_CHARS:
        raise InvalidArgument(
            f"resource {resource[:64]!r}... is {len(resource)} characters; at most {MAX_RESOURCE_CHARS} are allowed"
        )
    return resource


@dataclass(frozen=True)
class CompiledStatement:
    deny: bool
    actions: tuple[Matcher, ...]
    resources: tuple[Matcher, ...]
    # The actions the statement names without a wildcard: the only way to allow a literal-only one.
    literal_actions: frozenset[str] = frozenset()
    # The resource patterns as written: an object action's scope hands them to the edges.
    resource_patterns: tuple[str, ...] = ()

    def matches(self, action: str, resource: str) -> bool:
        if action in LITERAL_ONLY_ACTIONS and not self.deny:
            named = action in self.literal_actions
        else:
            named = any(m(action) for m in self.actions)
        return named and any(m(resource) for m in self.resources)


def compile_statements(policies: Iterable[pb.Policy], source_ip: str = "") -> tuple[CompiledStatement, ...]:
    """The statements of policies that apply to a request from source_ip ("" when unknown:
    an Allow with conditions then applies not, a Deny with conditions does)."""
    compiled = []
    for policy in policies:
        for statement in policy.statements:
            # An unspecified effect never passes validation; ignoring it keeps a corrupt record
            # from granting anything.
            if statement.effect not in (pb.EFFECT_ALLOW, pb.EFFECT_DENY):
                continue
            deny = statement.effect == pb.EFFECT_DENY
            conditions = compile_conditions(statement.conditions)
            # A condition that no longer validates (a corrupt record) fails closed.
            if conditions is None and not deny:
                continue
            if conditions and not applies(conditions, deny, source_ip):
                continue
            compiled.append(
                CompiledStatement(
                    deny=deny,
                    actions=tuple(compile_pattern(a) for a in statement.actions),
                    resources=tuple(compile_wildcard(r) for r in statement.resources),
                    literal_actions=frozenset(a for a in statement.actions if "*" not in a),
                    resource_patterns=tuple(statement.resources),
                )
            )
    return tuple(compiled)


def is_allowed(statements: Sequence[CompiledStatement], action: str, resource: str) -> bool:
    check_resource(resource)
    if action in OBJECT_ACTIONS:
        repository, slash, key = resource.partition("/")
        if not repository:
            return False
        scope = key_scope(statements, action, repository)
        # On a bare repository name: on every key of it (what graveler asks of its callers).
        return scope.allows(key) if slash else scope.whole
    if action == READ_REFS:
        held = (READ_REPO, READ_REFS)
        if any(s.deny and s.matches(x, resource) for s in statements for x in held):
            return False
        return any(s.matches(x, resource) for s in statements for x in held)
    if action in BRANCH_ACTIONS:
        repository, mark, branch = resource.partition(BRANCH_MARK)
        if not repository or not mark or not branch:
            return False
        return _held(statements, branch_holders(action, repository, branch))
    if action in CATALOG_ACTIONS:
        return _held(statements, catalog_holders(action, resource))
    return _matched(statements, action, resource)


def catalog_holders(action: str, resource: str) -> tuple[tuple[str, str], ...]:
    """The (action, resource) pairs any of which holds a catalog action: the action itself, and
    the repository's action (ReadRepo for the reads, WriteRepo for the changes) on the repository
    the catalog resource is in, as a table is files of that repository."""
    _kind, slash, rest = resource.removeprefix(CATALOG_ARN).partition("/")
    repository = rest.partition("/")[0]
    if not resource.startswith(CATALOG_ARN) or not slash or not repository:
        return ((action, resource),)
    repo_action = READ_REPO if action in CATALOG_READ_ACTIONS else WRITE_REPO
    return ((action, resource), (repo_action, repository))


def branch_holders(action: str, repository: str, branch: str) -> tuple[tuple[str, str], ...]:
    """The (action, resource) pairs any of which holds a branch action on one branch: the action
    itself and WriteBranch on the branch, the repository's action on the repository."""
    on_branch = branch_resource(repository, branch)
    if action in BRANCH_WRITE_ACTIONS:
        return ((action, on_branch), (WRITE_BRANCH, on_branch), (WRITE_REPO, repository))
    return ((action, on_branch), (READ_REFS, repository), (READ_REPO, repository))


def _held(statements: Sequence[CompiledStatement], holders: Iterable[tuple[str, str]]) -> bool:
    """Some statement allows one of the pairs and none denies any of them."""
    allowed = False
    for action, resource in dict.fromkeys(holders):
        for statement in statements:
            if statement.matches(action, resource):
                if statement.deny:
                    return False
                allowed = True
    return allowed


def _matched(statements: Sequence[CompiledStatement], action: str, resource: str) -> bool:
    """Some statement allows (action, resource) and none denies it."""
    return _held(statements, ((action, resource),))


def key_scope(statements: Sequence[CompiledStatement], action: str, repository: str, branch: str = "") -> KeyScope:
    """Which keys of repository the object action is allowed on (silt/key_scope.py's rule).

    Carries only the patterns that may match a key of this repository (`weather/raw/*`,
    `weath*`, `*`; not `gold/*` or `weather`), so its size follows the policies about this
    repository.

    branch: where a write or delete is staged. A Deny of WriteBranch on it leaves no key; an
    Allow of it (not denied on the repository) is every key, as the repository's action is."""
    check_resource(repository)
    check_resource(branch)
    repo_action = OBJECT_ACTION_REPO_ACTION[action]
    if "/" in repository or BRANCH_MARK in repository:
        return KeyScope(repository, every_key=False)
    if any(s.deny and s.matches(repo_action, repository) for s in statements):
        return KeyScope(repository, every_key=False)
    every_key = _matched(statements, repo_action, repository)
    if branch and action in (WRITE_OBJECT, DELETE_OBJECT):
        on_branch = branch_resource(repository, branch)
        if any(s.deny and s.matches(WRITE_BRANCH, on_branch) for s in statements):
            return KeyScope(repository, every_key=False)
        every_key = every_key or any(s.matches(WRITE_BRANCH, on_branch) for s in statements)
    below = repository + "/*"
    allow: dict[str, None] = {}
    deny: dict[str, None] = {}
    for statement in statements:
        if not any(m(action) for m in statement.actions):
            continue
        if not statement.deny and every_key:
            continue  # every key is allowed already
        for pattern in statement.resource_patterns:
            if overlaps(pattern, below):
                (deny if statement.deny else allow)[pattern] = None
    return KeyScope(repository, every_key=every_key, allow=tuple(allow), deny=tuple(deny))


def check_action_pattern(pattern: str) -> str:
    """A known action, or a `*` pattern matching at least one.

    Rejecting patterns that match nothing catches typos (`ReadRepos`) that would otherwise
    silently grant or deny nothing.
    """
    if not _ACTION_CHARS.match(pattern or ""):
        raise InvalidArgument(f"invalid action {pattern!r}: letters, ':' and '*' only")
    matcher = compile_pattern(pattern)
    if not any(matcher(action) for action in ALL_ACTIONS):
        raise InvalidArgument(f"action {pattern!r} matches no known action")
    return pattern


def check_resource_pattern(pattern: str) -> str:
    if not pattern or len(pattern) > MAX_RESOURCE_CHARS or _RESOURCE_FORBIDDEN.search(pattern):
        raise InvalidArgument(
            f"invalid resource {pattern[:64]!r}: "
            f"1 to {MAX_RESOURCE_CHARS} characters without spaces or control characters"
        )
    return pattern


def check_statements(statements: Sequence[pb.Statement]) -> None:
    if not statements:
        raise InvalidArgument("a policy needs at least one statement")
    if len(statements) > MAX_STATEMENTS:
        raise InvalidArgument(f"a policy has at most {MAX_STATEMENTS} statements")
    for n, statement in enumerate(statements, 1):
        if statement.effect not in (pb.EFFECT_ALLOW, pb.EFFECT_DENY):
            raise InvalidArgument(f"statement {n}: effect must be EFFECT_ALLOW or EFFECT_DENY")
        if not statement.actions:
            raise InvalidArgument(f"statement {n}: needs at least one action")
        if not statement.resources:
            raise InvalidArgument(f"statement {n}: needs at least one resource")
        for action in statement.actions:
            check_action_pattern(action)
        for resource in statement.resources:
            check_resource_pattern(resource)
        check_conditions(n, statement.conditions)


def statement(
    effect: int, actions: Iterable[str], resources: Iterable[str] = ("*",), conditions: Iterable[pb.Condition] = ()
) -> pb.Statement:
    return pb.Statement(
        effect=effect,  # type: ignore[arg-type]
        actions=list(actions),
        resources=list(resources),
        conditions=list(conditions),
    )
