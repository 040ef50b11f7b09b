"""Branch protection: per-repository rules, and the check every write to a branch passes.

The rules live in the repository's partition under ``settings/branch_protection`` (one
BranchProtectionRules record: deleted, dumped and restored with the repository). A rule names
branches by a glob (engine/core/committed/globs.py: RE2, linear time, bounded length)
and protects them in one or both ways:

* ``block_direct_writes``: no staging write or delete, commit, reset, revert, cherry-pick or
  deletion of the branch; merging into it stays allowed (lakeFS's protected branches);
* ``required_approvals`` N > 0: nothing changes the branch but merging a pull request with at
  least N approvals and no outstanding request for changes (engine/features/pulls.py) — a
  direct merge is refused too, and so is every direct write;
* ``required_checks``: likewise, and the named pull request checks must have passed on the
  source's head commit (engine/actions/checks.py).

Several matching rules add up: the strictest of each kind applies. Refusals are
ProtectedBranch (PERMISSION_DENIED) with "cannot write to protected branch" in the text, which
lakeFS clients match on.

Every staging write reads the rules, so they are cached per repository partition for a short
time (the branch cache's TTL); a change made through this process is seen at once, one made
through another graveler replica within that TTL. A write already past its check when a rule is
set may still land, as with any permission change.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from engine.core.committed.globs import Glob, glob_regex
from engine.core.deadline import Clock, Deadline
from engine.core.refs import RepoHandle
from engine.core.updater import BranchUpdater
from silt.errors import (
    PROTECTED_BRANCH,
    PROTECTED_BRANCH_COMMIT,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    ProtectedBranch,
    direct_write_refusal,
)
from silt.graveler.v1 import model_pb2 as pb
from silt.kv import Predicate, Store
from silt.kv.conditional import replace

PROTECTION_KEY = b"settings/branch_protection"
MAX_RULES = 100
MAX_PATTERN_BYTES = 256  # a branch name's limit (validation.validate_ref_name)
MAX_REQUIRED_APPROVALS = 100  # pulls.MAX_REVIEWERS: more could never be met
MAX_REQUIRED_CHECKS = 32
MAX_CHECK_NAME_BYTES = 512  # "<action name>/<hook id>": 256 bytes each
PROTECTED = PROTECTED_BRANCH
# The action named by a commit: lakeFS refuses it with its own sentence.
COMMIT = "commit"


@dataclass(frozen=True)
class BranchPolicy:
    """What the rules matching one branch require, combined."""

    block_direct_writes: bool = False
    required_approvals: int = 0
    patterns: tuple[str, ...] = ()
    required_checks: tuple[str, ...] = ()

    @property
    def through_pulls_only(self) -> bool:
        """Whether only a pull request's merge may change the branch (approvals or checks required)."""
        return self.required_approvals > 0 or bool(self.required_checks)

    @property
    def blocks_direct_writes(self) -> bool:
        return self.block_direct_writes or self.through_pulls_only


UNPROTECTED = BranchPolicy()


def validate_rules(rules: Sequence[pb.BranchProtectionRule]) -> list[tuple[Glob, pb.BranchProtectionRule]]:
    if len(rules) > MAX_RULES:
        raise InvalidArgument(f"at most {MAX_RULES} branch protection rules are allowed, got {len(rules)}")
    compiled = []
    seen: set[str] = set()
    for rule in rules:
        if len(rule.pattern.encode()) > MAX_PATTERN_BYTES:
            raise InvalidArgument(f"branch protection pattern is longer than {MAX_PATTERN_BYTES} bytes")
        if rule.pattern in seen:
            raise InvalidArgument(f"branch protection pattern {rule.pattern!r} appears twice")
        seen.add(rule.pattern)
        if not 0 <= rule.required_approvals <= MAX_REQUIRED_APPROVALS:
            raise InvalidArgument(f"required_approvals must be 0..{MAX_REQUIRED_APPROVALS}")
        if len(rule.required_checks) > MAX_REQUIRED_CHECKS or any(
            not name or len(name.encode()) > MAX_CHECK_NAME_BYTES for name in rule.required_checks
        ):
            raise InvalidArgument(
                f"a rule requires at most {MAX_REQUIRED_CHECKS} checks, each named by 1..{MAX_CHECK_NAME_BYTES} bytes"
            )
        compiled.append((glob_regex(rule.pattern, "branch protection pattern"), rule))
    return compiled


def etag_of(record: pb.BranchProtectionRules) -> str:
    """The version as clients see it: changes with every set, even one writing the same rules."""
    return hashlib.sha256(record.SerializeToString(deterministic=True)).hexdigest()[:32]


@dataclass(frozen=True)
class _Compiled:
    read_at: float
    etag: str
    rules: list[tuple[Glob, pb.BranchProtectionRule]]


class Protection:
    def __init__(self, kv: Store, updater: BranchUpdater, cache_seconds: float, clock: Clock = time.monotonic) -> None:
        self._kv = kv
        self._updater = updater
        self._ttl = cache_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._cache: dict[bytes, _Compiled] = {}

    # --- rules ---------------------------------------------------------------------------

    def _read(self, repo: RepoHandle) -> tuple[pb.BranchProtectionRules, Predicate | None]:
        try:
            got = self._kv.get(repo.partition, PROTECTION_KEY)
        except NotFound:
            return pb.BranchProtectionRules(), None
        record = pb.BranchProtectionRules()
        record.ParseFromString(got.value)
        return record, got.predicate

    def get(self, repo: RepoHandle) -> tuple[pb.BranchProtectionRules, str]:
        record, _ = self._read(repo)
        return record, etag_of(record)

    def set(
        self, repo: RepoHandle, rules: Sequence[pb.BranchProtectionRule], if_match: str, deadline: Deadline
    ) -> tuple[pb.BranchProtectionRules, str]:
        """Replace every rule; with if_match, only if the rules are still those of that etag."""
        compiled = validate_rules(rules)

        def attempt(_: int) -> pb.BranchProtectionRules:
            current, predicate = self._read(repo)
            if if_match and if_match != etag_of(current):
                raise FailedPrecondition("branch protection rules changed since they were read (etag mismatch)")
            updated = pb.BranchProtectionRules(rules=rules, version=current.version + 1)
            # A lost race re-reads; with if_match, the re-read sees the new etag and refuses.
            self._kv.set_if(repo.partition, PROTECTION_KEY, updated.SerializeToString(), predicate)
            return updated

        updated = self._updater.retry(attempt, f"setting branch protection of {repo.name!r}", deadline)
        etag = etag_of(updated)
        with self._lock:
            self._cache[repo.partition] = _Compiled(self._clock(), etag, compiled)
        return updated, etag

    def restore(self, repo: RepoHandle, record: pb.BranchProtectionRules) -> None:
        validate_rules(record.rules)
        # A compare-and-set like set's, never a plain write over a key set_if guards.
        replace(self._kv, repo.partition, PROTECTION_KEY, record.SerializeToString())
        with self._lock:
            self._cache.pop(repo.partition, None)

    # --- checks --------------------------------------------------------------------------

    def _compiled(self, repo: RepoHandle) -> list[tuple[Glob, pb.BranchProtectionRule]]:
        with self._lock:
            hit = self._cache.get(repo.partition)
        if hit is not None and self._clock() - hit.read_at <= self._ttl:
            return hit.rules
        record, _ = self._read(repo)
        etag = etag_of(record)
        # Compiling is only for rules not seen before: a busy branch re-reads them every TTL.
        compiled = hit.rules if hit is not None and hit.etag == etag else validate_rules(record.rules)
        with self._lock:
            self._cache[repo.partition] = _Compiled(self._clock(), etag, compiled)
        return compiled

    def policy(self, repo: RepoHandle, branch: str) -> BranchPolicy:
        rules = self._compiled(repo)
        if not rules:
            return UNPROTECTED
        name = branch.encode()
        matching = [rule for glob, rule in rules if glob.fullmatch(name)]
        if not matching:
            return UNPROTECTED
        return BranchPolicy(
            block_direct_writes=any(r.block_direct_writes for r in matching),
            required_approvals=max(r.required_approvals for r in matching),
            patterns=tuple(r.pattern for r in matching),
            required_checks=tuple(dict.fromkeys(name for r in matching for name in r.required_checks)),
        )

    def check_direct_write(self, repo: RepoHandle, branch: str, action: str) -> None:
        """Refuse a change of branch other than a merge (staging, commit, reset, revert, ...)."""
        policy = self.policy(repo, branch)
        if policy.blocks_direct_writes:
            sentence = PROTECTED_BRANCH_COMMIT if action == COMMIT else PROTECTED
            detail = f"{branch!r}, {action} is not allowed ({_why(policy)})"
            raise ProtectedBranch(direct_write_refusal(sentence, detail), branch=branch, rules=policy.patterns)

    def check_direct_merge(self, repo: RepoHandle, branch: str) -> None:
        """Refuse a merge that is not a pull request's into a branch that requires approvals."""
        policy = self.policy(repo, branch)
        if policy.through_pulls_only:
            needs = []
            if policy.required_approvals:
                needs.append(f"{policy.required_approvals} approval(s)")
            if policy.required_checks:
                needs.append(f"passing check(s) {', '.join(policy.required_checks)}")
            raise ProtectedBranch(
                f"{PROTECTED} {branch!r}: merge through a pull request with {' and '.join(needs)} ({_why(policy)})",
                branch=branch,
                rules=policy.patterns,
            )


def _why(policy: BranchPolicy) -> str:
    kinds = []
    if policy.block_direct_writes:
        kinds.append("direct writes are blocked")
    if policy.required_approvals:
        kinds.append(f"{policy.required_approvals} approval(s) required")
    if policy.required_checks:
        kinds.append(f"check(s) {', '.join(policy.required_checks)} required")
    return f"rule {', '.join(repr(p) for p in policy.patterns)}: {'; '.join(kinds)}"
