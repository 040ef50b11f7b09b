"""`silt branch-protect`: lakectl's branch protection commands, over the REST API's rules
(lakeFS's settings/branch_protection, with Silt's fields).

A rule's pattern is a branch-name glob. lakectl's `add` blocks direct writes (staging writes,
commits, resets, deletion) on matching branches; `--required-approvals N` is Silt's further
rule that such a branch changes only by merging a pull request with N approvals.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from cli.common import done, json_option, output, repository_argument, rest, table
from cli.rest import ApiError, segment
from silt.client_base import EXIT_CONFLICT, EXIT_NOT_FOUND, ClientError

# Each change is a compare-and-set on the rules' ETag: a concurrent change makes it read again.
_ATTEMPTS = 5

Rule = dict[str, Any]


def _path(repo: str) -> str:
    return f"/repositories/{segment(repo)}/settings/branch_protection"


def _rules(repo: str) -> tuple[list[Rule], str]:
    rules, headers = rest().exchange("GET", _path(repo), what=f"branch protection of {repo}")
    return list(rules or []), str(headers.get("ETag") or "")


def _change(repo: str, edit: Callable[[list[Rule]], str]) -> str:
    """Apply edit to the repository's rules and store them if they did not change meanwhile."""
    for _ in range(_ATTEMPTS):
        rules, etag = _rules(repo)
        message = edit(rules)
        try:
            rest().exchange("PUT", _path(repo), body=rules, headers={"If-Match": etag} if etag else None)
        except ApiError as exc:
            if exc.status == 412:
                continue  # another change came first: read the rules again
            raise
        return message
    raise ClientError(f"the protection rules of {repo} kept changing; try again", EXIT_CONFLICT)


@click.group("branch-protect")
def branch_protect() -> None:
    """Branch protection rules (lakectl's branch-protect)."""


@branch_protect.command("list")
@click.argument("uri", metavar="lakefs://REPO")
@json_option
def protect_list(uri: str) -> None:
    """The protection rules of a repository."""
    repo = repository_argument(uri)
    rules = [
        {
            "pattern": r["pattern"],
            "block_direct_writes": bool(r.get("block_direct_writes")),
            "required_approvals": int(r.get("required_approvals") or 0),
            "required_checks": list(r.get("required_checks") or []),
        }
        for r in _rules(repo)[0]
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
@click.argument("uri", metavar="lakefs://REPO")
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
    rule: Rule = {
        "pattern": pattern,
        "block_direct_writes": True,
        "required_approvals": required_approvals,
        "required_checks": list(required_checks),
    }

    def edit(rules: list[Rule]) -> str:
        for n, existing in enumerate(rules):
            if existing["pattern"] == pattern:
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
@click.argument("uri", metavar="lakefs://REPO")
@click.argument("pattern")
@json_option
def protect_delete(uri: str, pattern: str) -> None:
    """Remove the protection rule whose pattern is PATTERN."""
    repo = repository_argument(uri)

    def edit(rules: list[Rule]) -> str:
        for n, existing in enumerate(rules):
            if existing["pattern"] == pattern:
                del rules[n]
                return f"branch protection rule {pattern!r} removed from {repo}"
        raise ClientError(f"{repo} has no branch protection rule {pattern!r}", EXIT_NOT_FOUND)

    done(_change(repo, edit), repository=repo, pattern=pattern)
