"""`silt branch-protect`: lakectl's branch protection commands over graveler's rules.

A rule's pattern is a branch-name glob. lakectl's `add` blocks direct writes (staging writes,
commits, resets, deletion) on matching branches; `--required-approvals N` is Silt's further
rule that such a branch changes only by merging a pull request with N approvals.
"""

from __future__ import annotations

from collections.abc import Callable

import click

from cli.common import client, done, json_option, output, repository_argument, table
from silt.client import EXIT_CONFLICT, EXIT_NOT_FOUND, ClientError
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb

# Each change is a compare-and-set on the rules' ETag: a concurrent change makes it read again.
_ATTEMPTS = 5


def _change(repo: str, edit: Callable[[list[pb.BranchProtectionRule]], str]) -> str:
    """Apply edit to the repository's rules and store them if they did not change meanwhile."""
    g = client().graveler
    for _ in range(_ATTEMPTS):
        info = g.GetBranchProtection(api.GetBranchProtectionRequest(repository=repo))
        rules = list(info.rules)
        message = edit(rules)
        try:
            g.SetBranchProtection(api.SetBranchProtectionRequest(repository=repo, rules=rules, if_match=info.etag))
        except ClientError as exc:
            if "etag mismatch" in str(exc):
                continue  # graveler's refusal when another change came first: read the rules again
            raise
        return message
    raise ClientError(f"the protection rules of {repo} kept changing; try again", EXIT_CONFLICT)


@click.group("branch-protect")
def branch_protect() -> None:
    """Branch protection rules (lakectl's branch-protect)."""


@branch_protect.command("list")
@click.argument("uri", metavar="silt://REPO")
@json_option
def protect_list(uri: str) -> None:
    """The protection rules of a repository."""
    repo = repository_argument(uri)
    info = client().graveler.GetBranchProtection(api.GetBranchProtectionRequest(repository=repo))
    rules = [
        {
            "pattern": r.pattern,
            "block_direct_writes": r.block_direct_writes,
            "required_approvals": r.required_approvals,
            "required_checks": list(r.required_checks),
        }
        for r in info.rules
    ]

    def human() -> None:
        if not rules:
            click.echo(f"{repo} has no branch protection rules")
            return
        table(
            ["branch name pattern", "direct writes", "required approvals", "required checks"],
            [
                (
                    r["pattern"],
                    "blocked" if r["block_direct_writes"] else "allowed",
                    r["required_approvals"],
                    ", ".join(r["required_checks"]) or "-",
                )
                for r in rules
            ],
        )

    output(rules, human)


@branch_protect.command("add")
@click.argument("uri", metavar="silt://REPO")
@click.argument("pattern")
@click.option(
    "--required-approvals",
    type=click.IntRange(0, 100),
    default=0,
    help="Also require a merged pull request with this many approvals to change the branch.",
)
@click.option(
    "--required-check",
    "required_checks",
    multiple=True,
    metavar="ACTION/HOOK",
    help="Also require this pull request check to pass before a merge (repeatable).",
)
@json_option
def protect_add(uri: str, pattern: str, required_approvals: int, required_checks: tuple[str, ...]) -> None:
    """Protect branches matching PATTERN (a glob, e.g. main or release-*) from direct writes."""
    repo = repository_argument(uri)
    rule = pb.BranchProtectionRule(
        pattern=pattern,
        block_direct_writes=True,
        required_approvals=required_approvals,
        required_checks=list(required_checks),
    )

    def edit(rules: list[pb.BranchProtectionRule]) -> str:
        for n, existing in enumerate(rules):
            if existing.pattern == pattern:
                rules[n] = rule
                return f"branch protection rule {pattern!r} of {repo} updated"
        rules.append(rule)
        return f"branch protection rule {pattern!r} added to {repo}"

    done(
        _change(repo, edit),
        repository=repo,
        pattern=pattern,
        required_approvals=required_approvals,
        required_checks=list(required_checks),
    )


@branch_protect.command("delete")
@click.argument("uri", metavar="silt://REPO")
@click.argument("pattern")
@json_option
def protect_delete(uri: str, pattern: str) -> None:
    """Remove the protection rule whose pattern is PATTERN."""
    repo = repository_argument(uri)

    def edit(rules: list[pb.BranchProtectionRule]) -> str:
        for n, existing in enumerate(rules):
            if existing.pattern == pattern:
                del rules[n]
                return f"branch protection rule {pattern!r} removed from {repo}"
        raise ClientError(f"{repo} has no branch protection rule {pattern!r}", EXIT_NOT_FOUND)

    done(_change(repo, edit), repository=repo, pattern=pattern)
