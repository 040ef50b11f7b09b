"""Policies in lakeFS's shape, stored in Silt's vocabulary.

A lakeFS policy statement is `{effect, action: [...], resource}`. Two vocabularies arrive:

* **Silt's own** (silt/iam_actions.py: `ReadRepo` on `foo`, `iam:*` on `users/x`, ...): stored as
  is; auth validates it like any policy.
* **lakeFS's** (`fs:ReadObject`, `auth:*`, `arn:lakefs:fs:::repository/foo/object/*`):
  translated into Silt statements, but only where the translation never allows more than the
  lakeFS statement does. Silt grants per whole repository (ReadRepo covers objects, branches,
  commits, tags, pull requests, GC and protection rules alike), so:
  - an **Allow** becomes Silt action X only when the statement's actions cover every lakeFS
    action X stands for (LAKEFS_EQUIVALENT) on resources covering whole repositories (`*`,
    `arn:lakefs:fs:::repository/<prefix>*`, or the lakeFS idiom of a pair of statements on
    `.../repository/<name>` and `.../repository/<name>/*`, each covering the actions), and
    every lakeFS action it names is then accounted for (part of such an X, or of a feature
    Silt does not have, NO_COUNTERPART). Anything else is refused (400) naming the action;
  - a **Deny** becomes every Silt action sharing any lakeFS action with it, on every
    repository the resource may touch: denying more than asked is safe.

  ReadRefs is the repository without its objects (fs:ReadRepository, fs:ReadBranch, ...): what
  lakeFS's readers of some keys are given beside their object statements. It is left out
  where ReadRepo, which holds it, is granted or denied; fs:ListObjects on the repository comes
  with it (a listing shows the keys ReadObject allows, so it gives nothing more).

  Statements on objects, `arn:lakefs:fs:::repository/<name>/object/<key pattern>` (lakeFS's
  wildcards, `*` and `?`, in the key pattern), translate exactly into Silt's object actions on
  `<name>/<key pattern>` (OBJECT_EQUIVALENT): lakeFS checks only its object actions against an
  object's resource, so the statement's other actions allow or deny nothing there and are
  accounted for. fs:ListObjects is checked on the repository in lakeFS; here a listing shows the
  keys the caller may read, so on an object resource it comes with fs:ReadObject. An Allow needs
  a literal repository name (a wildcard there could match across `/object/`); a Deny with one
  denies the object actions' repository actions on every repository it may touch, as above.

  Statements on branches, `arn:lakefs:fs:::repository/<name>/branch/<branch pattern>` (`*` and `?`
  in the pattern), translate into Silt's branch actions on `<name>@<branch pattern>`
  (BRANCH_EQUIVALENT: fs:CreateCommit is CommitBranch, fs:RevertBranch RevertBranch, and so on).
  lakeFS checks only those, and the halves of an import (fs:WriteObject, fs:ImportCancel), against
  a branch's resource, so a statement's other actions allow or deny nothing there. An **Allow** is
  exact: an import needs more than a branch's statements in lakeFS (the storage and the
  destination keys) and WriteRepo here, so fs:WriteObject and fs:ImportCancel allow nothing on
  a branch; staged writes are allowed by object statements in lakeFS, never by a branch's, so
  an Allow never becomes WriteBranch. A **Deny** of fs:WriteObject or fs:DeleteObject becomes a
  Deny of WriteBranch, refusing every change to the branch (staged writes through the S3
  gateway included, commits, merges into it, ...): wider than lakeFS's, which is safe, and what
  such a Deny is written for. As with objects, an Allow needs a literal repository name, and a
  Deny with a wildcard there denies on every repository it may touch.

lakeFS's catalog actions (`catalog:ReadTable`, ...) are Silt's own (silt/iam_actions.py), on the same
resources (`arn:lakefs:catalog:::table/<repository>/<namespace>/<table>`): on `*` or a catalog
resource they translate as they are; on any other resource lakeFS never checks them, so there
they allow and deny nothing (and alone are refused, as allowing nothing).

A statement's `condition` (lakeFS's `{"IpAddress": {"SourceIp": [...]}}`, or NotIpAddress) goes
unchanged onto every Silt statement it translates into (silt/policy_conditions.py), the branch
actions of a statement on a branch included: a Deny widened to more actions or repositories (or
to WriteBranch) is still denied only where its condition holds, and an Allow translates exactly.
The halves of a pair must carry the same condition to pair.

A policy read back is shown in Silt's vocabulary, whichever was sent: that is what is enforced.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from lakefs_sdk.models import Policy, Statement

from edge.api.errors import bad_request
from silt import iam_actions as a
from silt import policy_conditions as conditions
from silt.auth.v1 import model_pb2 as pb
from silt.errors import InvalidArgument
from silt.wildcards import compile_pattern, overlaps

# Bounds on a policy body, far above any real policy (lakeFS's own are a few statements of a
# few actions) yet keeping translation to milliseconds. Auth stores at most MAX_STATEMENTS too,
# and bounds a resource by the same length; the body as a whole is bounded by the route.
MAX_STATEMENTS = 100
MAX_ACTIONS = 50  # per statement (lakeFS's statement has one resource)
MAX_POLICY_ACTIONS = 1000  # over all statements
MAX_ACTION_LENGTH = 64  # the longest action, Silt's or lakeFS's, is under 50
MAX_ACTION_STARS = 4
MAX_RESOURCE_LENGTH = a.MAX_RESOURCE_LENGTH

REPOSITORY_ARN = "arn:lakefs:fs:::repository/"
LAKEFS_PREFIXES = ("fs:", "auth:", "ci:", "retention:", "branches:", "pr:", "catalog:")
REPO_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-")

# lakeFS's reads of a repository without its objects: its record, commits, branches and tags.
LAKEFS_REF_READS = frozenset(
    {
        "fs:ReadRepository",
        "fs:ReadCommit",
        "fs:ListCommits",
        "fs:ReadBranch",
        "fs:ListBranches",
        "fs:ReadTag",
        "fs:ListTags",
    }
)
# Silt action -> the lakeFS actions it allows (each Silt action is at most these together).
REPO_EQUIVALENT: dict[str, frozenset[str]] = {
    a.READ_REPO: LAKEFS_REF_READS
    | {
        "fs:ReadObject",
        "fs:ListObjects",
        "retention:GetGarbageCollectionRules",
        "branches:GetBranchProtectionRules",
        "pr:ReadPullRequest",
        "pr:ListPullRequests",
    },
    # The repository without its objects, as lakeFS's readers of some keys need it.
    a.READ_REFS: LAKEFS_REF_READS,
    a.WRITE_REPO: frozenset(
        {
            "fs:WriteObject",
            "fs:DeleteObject",
            "fs:CreateCommit",
            "fs:CreateBranch",
            "fs:DeleteBranch",
            "fs:RevertBranch",
            "fs:CreateTag",
            "fs:DeleteTag",
            "pr:WritePullRequest",
        }
    ),
    a.CREATE_REPO: frozenset({"fs:CreateRepository", "fs:AttachStorageNamespace"}),
    a.DELETE_REPO: frozenset({"fs:DeleteRepository"}),
    a.SET_GC_RULES: frozenset({"retention:SetGarbageCollectionRules"}),
    a.DELETE_GC_RULES: frozenset({"retention:SetGarbageCollectionRules"}),
    a.PREPARE_GC: frozenset(
        {"retention:PrepareGarbageCollectionCommits", "retention:PrepareGarbageCollectionUncommitted"}
    ),
    a.SET_BRANCH_PROTECTION: frozenset({"branches:SetBranchProtectionRules"}),
    # lakeFS's permission to read action runs; here runs and statuses are ReadRepo's, outputs this.
    a.READ_ACTION_OUTPUT: frozenset({"ci:ReadAction"}),
}
IAM_EQUIVALENT: dict[str, frozenset[str]] = {
    a.READ_USER: frozenset({"auth:ReadUser", "auth:ListUsers"}),
    a.CREATE_USER: frozenset({"auth:CreateUser"}),
    a.DELETE_USER: frozenset({"auth:DeleteUser"}),
    a.READ_GROUP: frozenset({"auth:ReadGroup", "auth:ListGroups"}),
    a.CREATE_GROUP: frozenset({"auth:CreateGroup"}),
    a.DELETE_GROUP: frozenset({"auth:DeleteGroup"}),
    a.ADD_GROUP_MEMBER: frozenset({"auth:AddGroupMember"}),
    a.REMOVE_GROUP_MEMBER: frozenset({"auth:RemoveGroupMember"}),
    a.READ_POLICY: frozenset({"auth:ReadPolicy", "auth:ListPolicies"}),
    a.CREATE_POLICY: frozenset({"auth:CreatePolicy"}),
    a.DELETE_POLICY: frozenset({"auth:DeletePolicy"}),
    a.ATTACH_POLICY: frozenset({"auth:AttachPolicy"}),
    a.DETACH_POLICY: frozenset({"auth:DetachPolicy"}),
    a.CREATE_CREDENTIALS: frozenset({"auth:CreateCredentials"}),
    a.READ_CREDENTIALS: frozenset({"auth:ReadCredentials", "auth:ListCredentials"}),
    a.DELETE_CREDENTIALS: frozenset({"auth:DeleteCredentials"}),
    a.CREATE_USER_EXTERNAL_PRINCIPAL: frozenset({"auth:CreateUserExternalPrincipal"}),
    a.DELETE_USER_EXTERNAL_PRINCIPAL: frozenset({"auth:DeleteUserExternalPrincipal"}),
    a.READ_EXTERNAL_PRINCIPAL: frozenset({"auth:ReadExternalPrincipal"}),
}
# lakeFS actions of features Silt does not have: allowing them allows nothing here.
NO_COUNTERPART = frozenset(
    {
        "fs:UpdateRepository",
        "fs:ImportFromStorage",
        "fs:ImportCancel",
        "fs:ListRepositories",
        "fs:ReadConfig",
        "auth:UpdatePolicy",
        "retention:PrepareGarbageCollectionUncommitted",
        "auth:CreateUserExternalPrincipal",
        "auth:DeleteUserExternalPrincipal",
        "auth:ReadExternalPrincipal",
    }
)
# Silt's object action -> the lakeFS action it is, on `.../repository/<name>/object/<key>`.
OBJECT_EQUIVALENT: dict[str, str] = {
    a.READ_OBJECT: "fs:ReadObject",
    a.WRITE_OBJECT: "fs:WriteObject",
    a.DELETE_OBJECT: "fs:DeleteObject",
}
OBJECT_MARK = "/object/"
# Silt's branch action -> the lakeFS action it is, on `.../repository/<name>/branch/<branch>`.
BRANCH_EQUIVALENT: dict[str, str] = {
    a.COMMIT_BRANCH: "fs:CreateCommit",
    a.REVERT_BRANCH: "fs:RevertBranch",
    a.CREATE_BRANCH: "fs:CreateBranch",
    a.DELETE_BRANCH: "fs:DeleteBranch",
    a.READ_BRANCH: "fs:ReadBranch",
}
# lakeFS's actions that, on a branch, are part of an import (which needs WriteRepo here): an Allow
# of them gives nothing; a Deny of them, or of fs:DeleteObject, denies WriteBranch.
BRANCH_IMPORT_ACTIONS = frozenset({"fs:WriteObject", "fs:ImportCancel"})
BRANCH_WRITE_DENIED_BY = frozenset({"fs:WriteObject", "fs:DeleteObject", "fs:ImportCancel"})
BRANCH_MARK = "/branch/"
EQUIVALENT = {**REPO_EQUIVALENT, **IAM_EQUIVALENT}
# A Silt action granted is left out when another granted one holds it.
HELD_THROUGH = {a.READ_REFS: a.READ_REPO}
# lakeFS actions that allow nothing more once a Silt action is granted: fs:ListObjects on a
# repository lists every key in lakeFS; here a listing shows the keys ReadObject allows, so
# beside ReadRefs it gives nothing.
ACCOUNTED_WITH = {a.READ_REFS: frozenset({"fs:ListObjects"})}
# lakeFS's catalog: actions are Silt's own too (_catalog_statements).
CATALOG_ACTIONS = frozenset(a.CATALOG_ACTIONS)
LAKEFS_ACTIONS = frozenset().union(*EQUIVALENT.values(), NO_COUNTERPART, CATALOG_ACTIONS)
LAKEFS_OBJECT_ACTIONS = frozenset(OBJECT_EQUIVALENT.values())
LAKEFS_BRANCH_ACTIONS = frozenset(BRANCH_EQUIVALENT.values())

_EFFECTS = {"allow": pb.EFFECT_ALLOW, "deny": pb.EFFECT_DENY}
_EFFECT_NAMES = {pb.EFFECT_ALLOW: "allow", pb.EFFECT_DENY: "deny"}


def glob(pattern: str, value: str) -> bool:
    """lakeFS's `*` (any run of characters): linear in the value."""
    return compile_pattern(pattern)(value)


def _is_lakefs_action(action: str) -> bool:
    # Silt's own service actions share the `auth:` prefix with lakeFS's IAM actions.
    return action.startswith(LAKEFS_PREFIXES) and action not in a.SERVICE_ACTIONS


def _is_lakefs(statement: Statement) -> bool:
    return statement.resource.startswith("arn:") or any(_is_lakefs_action(x) for x in statement.action)


def _check_bounds(policy: Policy) -> None:
    """Refuse (400) a policy over the bounds, before any translation work."""
    if len(policy.statement) > MAX_STATEMENTS:
        raise bad_request(f"a policy has at most {MAX_STATEMENTS} statements")
    total = sum(len(statement.action) for statement in policy.statement)
    if total > MAX_POLICY_ACTIONS:
        raise bad_request(f"a policy names at most {MAX_POLICY_ACTIONS} actions over all its statements")
    for n, statement in enumerate(policy.statement, 1):
        _check_shape(n, statement)


def _check_shape(n: int, statement: Statement) -> None:
    _conditions(n, statement)
    if len(statement.action) > MAX_ACTIONS:
        raise bad_request(f"statement {n}: at most {MAX_ACTIONS} actions")
    if not statement.resource or len(statement.resource) > MAX_RESOURCE_LENGTH:
        raise bad_request(f"statement {n}: resource must be 1 to {MAX_RESOURCE_LENGTH} characters")
    for action in statement.action:
        if not action or len(action) > MAX_ACTION_LENGTH:
            raise bad_request(f"statement {n}: an action is 1 to {MAX_ACTION_LENGTH} characters")
        if action.count("*") > MAX_ACTION_STARS:
            raise bad_request(f"statement {n}: an action has at most {MAX_ACTION_STARS} '*'")


def _conditions(n: int, statement: Statement) -> list[pb.Condition]:
    """A statement's lakeFS condition as Silt's (400 naming what is wrong): `{operator: {field:
    [values]}}`, operators IpAddress and NotIpAddress, field SourceIp, values addresses or CIDR
    blocks."""
    given = statement.condition or {}
    if len(given) > conditions.MAX_CONDITIONS:
        raise bad_request(f"statement {n}: at most {conditions.MAX_CONDITIONS} condition operators")
    out = []
    for name, fields in given.items():
        operator = conditions.OPERATORS.get(name)
        if operator is None:
            supported = " and ".join(conditions.OPERATORS)
            raise bad_request(f"statement {n}: condition operator {name[:64]!r} is not supported (only {supported})")
        if len(fields) != 1:
            raise bad_request(f"statement {n}: {name} names exactly one field, {conditions.SOURCE_IP!r}")
        ((field, values),) = fields.items()
        out.append(pb.Condition(operator=operator, field=field, values=list(values)))
    try:
        conditions.check_conditions(n, out)
    except InvalidArgument as exc:
        raise bad_request(str(exc)) from None
    return out


def _conditions_key(statement: Statement) -> tuple[bytes, ...]:
    """What tells two statements' conditions apart (() for none), whatever their order."""
    return tuple(sorted(c.SerializeToString(deterministic=True) for c in _conditions(0, statement)))


@functools.lru_cache(maxsize=4096)
def _named_one(pattern: str) -> frozenset[str]:
    """The concrete lakeFS actions one pattern matches. Cached: a policy repeats its patterns
    across statements, and so do policies (`fs:*`, `fs:Read*`)."""
    if "*" not in pattern:
        return frozenset({pattern}) & LAKEFS_ACTIONS
    return frozenset(x for x in LAKEFS_ACTIONS if glob(pattern, x))


def _named(patterns: Iterable[str]) -> frozenset[str]:
    """The concrete lakeFS actions some pattern matches."""
    return frozenset().union(*(_named_one(p) for p in patterns))


@dataclass(frozen=True)
class _Scope:
    """Where an Allow statement applies, in Silt's terms: a repository pattern, and whether it
    is every resource (so that IAM actions may be granted too)."""

    repository: str
    everything: bool


def _pair_name(resource: str) -> str | None:
    """The repository of `.../repository/<name>` or `.../repository/<name>/*`, else None."""
    if not resource.startswith(REPOSITORY_ARN):
        return None
    rest = resource[len(REPOSITORY_ARN) :]
    name = rest[: -len("/*")] if rest.endswith("/*") else rest
    if not name or not set(name) <= REPO_NAME_CHARS:
        return None
    return name


def _allow_scope(resource: str) -> _Scope | None:
    if resource == "*":
        return _Scope("*", everything=True)
    if resource.startswith(REPOSITORY_ARN) and resource.endswith("*"):
        prefix = resource[len(REPOSITORY_ARN) : -1]
        # `repository/foo*` matches every resource of every repository named foo...: exactly
        # Silt's pattern `foo*` over repository names (which never contain `/`).
        if set(prefix) <= REPO_NAME_CHARS:
            return _Scope(prefix + "*", everything=False)
    return None


@dataclass(frozen=True)
class _Pair:
    """The Allow statements on one repository's `.../repository/<name>` and `<name>/*`: what
    they all name (a Silt action needs all of them to cover it), and whether both forms occur."""

    covered: frozenset[str]
    both_forms: bool


_PairKey = tuple[str, tuple[bytes, ...]]  # a repository name, and the halves' conditions


def _pairs(statements: Sequence[Statement]) -> dict[_PairKey, _Pair]:
    """Each repository's pair, computed once for the policy, so each statement's translation
    costs the same whatever the number of its partners. Halves pair only under the same
    conditions: the whole repository is allowed only where both halves are."""
    covered: dict[_PairKey, frozenset[str]] = {}
    resources: dict[_PairKey, set[str]] = {}
    for statement in statements:
        name = _pair_name(statement.resource)
        if name is None or statement.effect != "allow":
            continue
        key = (name, _conditions_key(statement))
        named = _named(statement.action)
        covered[key] = covered[key] & named if key in covered else named
        resources.setdefault(key, set()).add(statement.resource)
    return {key: _Pair(covered[key], len(resources[key]) >= 2) for key in covered}


def _translate_allow(n: int, statement: Statement, pairs: dict[_PairKey, _Pair]) -> list[pb.Statement]:
    scope = _allow_scope(statement.resource)
    covered = _named(statement.action)
    if scope is None:
        name = _pair_name(statement.resource)
        pair = pairs.get((name or "", _conditions_key(statement)))
        if name is None or pair is None or not pair.both_forms:
            raise bad_request(_not_whole(n, statement))
        scope = _Scope(name, everything=False)
        covered = pair.covered
    candidates = EQUIVALENT if scope.everything else REPO_EQUIVALENT
    granted = [silt for silt, lakefs in candidates.items() if lakefs <= covered]
    granted = [x for x in granted if HELD_THROUGH.get(x) not in granted]
    # catalog: actions are translated beside (_catalog_statements), or allow nothing on a repository.
    accounted = set(NO_COUNTERPART | CATALOG_ACTIONS).union(*(EQUIVALENT[x] for x in granted))
    accounted = accounted.union(*(ACCOUNTED_WITH.get(x, frozenset()) for x in granted))
    if not scope.everything:
        # lakeFS checks its auth: actions on auth: resources only: on a repository they allow nothing.
        accounted = accounted.union(*IAM_EQUIVALENT.values())
    for action in statement.action:
        named = _named_one(action)
        if not named:
            raise bad_request(f"statement {n}: unknown lakeFS action {action!r}")
        missing = sorted(named - accounted)
        if missing:
            raise bad_request(_partial(n, missing[0], statement, scope))
    if not granted:
        raise bad_request(f"statement {n}: {', '.join(statement.action)} has no counterpart in Silt")
    repo_actions = [x for x in granted if x in REPO_EQUIVALENT]
    iam_actions = [x for x in granted if x in IAM_EQUIVALENT]
    out = []
    if repo_actions:
        out.append(_statement(pb.EFFECT_ALLOW, repo_actions, scope.repository))
    if iam_actions:
        out.append(_statement(pb.EFFECT_ALLOW, iam_actions, "*"))
    return out


def _not_whole(n: int, statement: Statement) -> str:
    doing = f"statement {n}: cannot allow {', '.join(statement.action)} on {statement.resource!r}"
    if any(x.startswith("auth:") for x in statement.action):
        return f"{doing}: lakeFS's auth: actions translate on resource '*' only; use Silt's iam: actions"
    return (
        f"{doing}: that is not a whole repository, and Silt grants per repository: use '*', "
        f"'{REPOSITORY_ARN}<name prefix>*', the pair '{REPOSITORY_ARN}<name>' and '{REPOSITORY_ARN}<name>/*', "
        "or Silt's own actions (ReadRepo on <name>)"
    )


def _partial(n: int, missing: str, statement: Statement, scope: _Scope) -> str:
    whole = [silt for silt, lakefs in EQUIVALENT.items() if missing in lakefs]
    if whole and (scope.everything or whole[0] in REPO_EQUIVALENT):
        needed = ", ".join(sorted(EQUIVALENT[whole[0]] - _named(statement.action)))
        return (
            f"statement {n}: lakeFS action {missing!r} cannot be allowed alone: Silt's {whole[0]} also allows "
            f"{needed}; allow those too, or use Silt's own actions"
        )
    return f"statement {n}: lakeFS action {missing!r} cannot be allowed on {statement.resource!r}"


def _deny_repository(resource: str) -> str:
    """Every repository a denied lakeFS resource may touch, as a Silt pattern (wider is safe)."""
    if not resource.startswith(REPOSITORY_ARN):
        return "*"
    name = resource[len(REPOSITORY_ARN) :].split("/", 1)[0]
    for wildcard in ("*", "?"):
        if wildcard in name:
            name = name[: name.index(wildcard)] + "*"
    return name or "*"


@dataclass(frozen=True)
class _InRepository:
    """`.../repository/<repository><mark><pattern>` of a lakeFS statement: a pattern of keys of
    the repository's objects (OBJECT_MARK) or of names of its branches (BRANCH_MARK)."""

    repository: str
    mark: str
    pattern: str

    @property
    def literal_repository(self) -> bool:
        return bool(self.repository) and set(self.repository) <= REPO_NAME_CHARS


def _in_repository(resource: str, mark: str) -> _InRepository | None:
    if not resource.startswith(REPOSITORY_ARN):
        return None
    repository, found, pattern = resource[len(REPOSITORY_ARN) :].partition(mark)
    if not found or "/" in repository:
        return None
    return _InRepository(repository, mark, pattern)


def _on_literal_repository(n: int, statement: Statement, resource: _InRepository, what: str, pattern: str) -> bool:
    """Whether the statement is about one repository, named without wildcards. A Deny about
    repositories a wildcard names is not (it is widened to them whole: _translate_deny); an
    Allow of one is refused (400), naming what the resource is and the pattern it has."""
    if resource.literal_repository:
        return True
    if _EFFECTS[statement.effect] == pb.EFFECT_DENY:
        return False
    raise bad_request(
        f"statement {n}: cannot allow on {statement.resource!r}: {what} needs a repository name "
        f"without wildcards, '{REPOSITORY_ARN}<name>{resource.mark}<{pattern}>'"
    )


def _lakefs_actions(n: int, statement: Statement, star: frozenset[str]) -> set[str]:
    """The concrete lakeFS actions a statement's action patterns name, `*` naming those of `star`
    (400 for a pattern that names none)."""
    named: set[str] = set()
    for action in statement.action:
        found = star if action == "*" else _named_one(action)
        if not found:
            raise bad_request(f"statement {n}: unknown lakeFS action {action!r}")
        named |= found
    return named


def _translate_object(n: int, statement: Statement, resource: _InRepository) -> list[pb.Statement]:
    if not _on_literal_repository(n, statement, resource, "an object resource", "key pattern"):
        return _translate_deny(n, statement)
    effect = _EFFECTS[statement.effect]
    named = _lakefs_actions(n, statement, LAKEFS_OBJECT_ACTIONS)
    actions = [silt for silt, lakefs in OBJECT_EQUIVALENT.items() if lakefs in named]
    if not actions:
        raise bad_request(
            f"statement {n}: {', '.join(statement.action)} on an object: lakeFS checks only fs:ReadObject, "
            "fs:WriteObject and fs:DeleteObject there (fs:ListObjects is checked on the repository; a listing "
            "here shows the keys fs:ReadObject allows)"
        )
    return [_statement(effect, actions, a.object_resource(resource.repository, resource.pattern))]


def _translate_branch(n: int, statement: Statement, resource: _InRepository) -> list[pb.Statement]:
    if not _on_literal_repository(n, statement, resource, "a branch resource", "branch pattern"):
        return _translate_deny(n, statement)
    effect = _EFFECTS[statement.effect]
    if not resource.pattern or "/" in resource.pattern:
        # Branch names have no '/': such a pattern matches no branch (and an empty one none).
        raise bad_request(f"statement {n}: {statement.resource!r} names no branch: a branch name has no '/'")
    named = _lakefs_actions(n, statement, LAKEFS_ACTIONS)
    actions = [silt for silt, lakefs in BRANCH_EQUIVALENT.items() if lakefs in named]
    if effect == pb.EFFECT_DENY and named & BRANCH_WRITE_DENIED_BY:
        actions.insert(0, a.WRITE_BRANCH)
    if not actions:
        checked = ", ".join(sorted(LAKEFS_BRANCH_ACTIONS | BRANCH_IMPORT_ACTIONS))
        raise bad_request(
            f"statement {n}: {', '.join(statement.action)} on a branch: lakeFS checks only {checked} there "
            "(an import's halves need WriteRepo here)"
        )
    return [_statement(effect, actions, a.branch_resource(resource.repository, resource.pattern))]


def _translate_deny(n: int, statement: Statement) -> list[pb.Statement]:
    repository = _deny_repository(statement.resource)
    if "*" in statement.action:
        return [_statement(pb.EFFECT_DENY, ["*"], repository)]
    named = _lakefs_actions(n, statement, LAKEFS_ACTIONS)  # no `*` here: denied whole above
    repo_actions = [x for x, lakefs in REPO_EQUIVALENT.items() if lakefs & named]
    # A Deny of ReadRepo takes ReadRefs too (services/auth/policies.py).
    repo_actions = [x for x in repo_actions if HELD_THROUGH.get(x) not in repo_actions]
    iam_actions = [x for x, lakefs in IAM_EQUIVALENT.items() if lakefs & named]
    out = []
    if repo_actions:
        out.append(_statement(pb.EFFECT_DENY, repo_actions, repository))
    if iam_actions:
        out.append(_statement(pb.EFFECT_DENY, iam_actions, "*"))
    return out


def _catalog_statements(statement: Statement) -> list[pb.Statement]:
    """A statement's catalog: actions, which are Silt's as they are: lakeFS checks them on its
    catalog resources only, so on a pattern that may match one they translate exactly, and on
    an fs: or auth: resource they allow and deny nothing."""
    resource = statement.resource
    # lakeFS's matcher and Silt's are the same glob, and the catalog resources the same strings:
    # any pattern that may match one (`*`, `arn:lakefs:*`, a catalog ARN) translates exactly.
    if not overlaps(resource, a.CATALOG_ARN + "*"):
        return []
    named = CATALOG_ACTIONS if "*" in statement.action else _named(statement.action) & CATALOG_ACTIONS
    if not named:
        return []
    actions = ["catalog:*"] if named == CATALOG_ACTIONS else [x for x in a.CATALOG_ACTIONS if x in named]
    return [_statement(_EFFECTS[statement.effect], actions, resource)]


def _translate_lakefs(n: int, statement: Statement, effect: int, pairs: dict[_PairKey, _Pair]) -> list[pb.Statement]:
    """A lakeFS statement's actions other than its catalog: ones."""
    on_object = _in_repository(statement.resource, OBJECT_MARK)
    on_branch = _in_repository(statement.resource, BRANCH_MARK)
    if on_object is not None:
        return _translate_object(n, statement, on_object)
    if on_branch is not None:
        return _translate_branch(n, statement, on_branch)
    if effect == pb.EFFECT_DENY:
        return _translate_deny(n, statement)
    if "?" in statement.resource:
        raise bad_request(
            f"statement {n}: '?' wildcards are supported in an object's key pattern or a branch pattern only"
        )
    return _translate_allow(n, statement, pairs)


def _statement(effect: int, actions: Sequence[str], resource: str) -> pb.Statement:
    return pb.Statement(effect=effect, actions=list(actions), resources=[resource])  # type: ignore[arg-type]


def to_silt(policy: Policy) -> list[pb.Statement]:
    """The statements auth stores for a lakeFS policy body (400 for what cannot be translated).

    Linear in the policy: each distinct action pattern is matched once against lakeFS's
    actions (_named_one), and each statement then costs a few set operations."""
    _check_bounds(policy)
    pairs = _pairs(policy.statement)
    out: list[pb.Statement] = []
    seen: set[bytes] = set()
    for n, statement in enumerate(policy.statement, 1):
        effect = _EFFECTS[statement.effect]
        if not _is_lakefs(statement):
            own = _statement(effect, statement.action, statement.resource)
            own.conditions.extend(_conditions(n, statement))
            out.append(own)
            continue
        silt_only = [x for x in statement.action if x != "*" and not _is_lakefs_action(x)]
        if silt_only:
            raise bad_request(f"statement {n}: {silt_only[0]!r} is Silt's vocabulary; do not mix it with lakeFS's")
        if any("?" in x for x in statement.action):
            raise bad_request(f"statement {n}: '?' wildcards are not supported in actions")
        catalog = _catalog_statements(statement)
        if statement.resource.startswith(a.CATALOG_ARN):
            if not catalog:
                raise bad_request(
                    f"statement {n}: {', '.join(statement.action)} on a catalog resource: lakeFS checks only "
                    "catalog: actions there"
                )
            translated = catalog
        elif not all(_named_one(x) and _named_one(x) <= CATALOG_ACTIONS for x in statement.action):
            # The catalog: actions a pattern names too (`*Table`) are the catalog statements beside.
            translated = [*_translate_lakefs(n, statement, effect, pairs), *catalog]
        elif catalog:
            translated = catalog
        else:
            raise bad_request(
                f"statement {n}: {', '.join(statement.action)} on {statement.resource!r}: lakeFS checks catalog: "
                "actions on its catalog resources only"
            )
        condition = _conditions(n, statement)
        for silt_statement in translated:
            silt_statement.conditions.extend(condition)
            key = silt_statement.SerializeToString(deterministic=True)
            if key not in seen:  # the two halves of a pair translate alike
                seen.add(key)
                out.append(silt_statement)
    if not out:
        raise bad_request("the policy allows or denies nothing Silt has")
    if len(out) > MAX_STATEMENTS:
        raise bad_request(f"the policy translates into {len(out)} Silt statements; at most {MAX_STATEMENTS} are stored")
    return out


def _lakefs_condition(statement: pb.Statement) -> dict[str, dict[str, list[str]]] | None:
    """Stored conditions in lakeFS's shape (one per operator, so nothing merges); None for none."""
    if not statement.conditions:
        return None
    return {
        conditions.OPERATOR_NAMES.get(c.operator, str(c.operator)): {c.field: list(c.values)}
        for c in statement.conditions
    }


def from_silt(policy: pb.Policy) -> Policy:
    """A stored policy as lakeFS's model: one lakeFS statement per Silt resource."""
    statements = [
        Statement(
            effect=_EFFECT_NAMES.get(s.effect, "deny"),
            action=list(s.actions),
            resource=resource,
            condition=_lakefs_condition(s),
        )
        for s in policy.statements
        for resource in s.resources
    ]
    return Policy(id=policy.id, creation_date=int(policy.creation_date.seconds), statement=statements)
