"""`silt bisect` (lakectl's bisect): a binary search of a repository's history for the commit
that introduced a change, between a bad commit and a good one. The session is kept in
``~/.lakectl.bisect.json`` (cli/bisect_state.py); the history is read through the REST API."""

from __future__ import annotations

import os
import subprocess
from typing import Any

import click

from cli import bisect_state
from cli.bisect_state import BAD, GOOD, Bisect
from cli.common import json_option, output, rest, when
from cli.rest import segment
from silt.client_base import EXIT_FAILURE, EXIT_USAGE, ClientError, parse_uri

# Commits per page of the log read from the bad commit back to the good one.
LOG_PAGE = 500


def _started() -> Bisect:
    state = bisect_state.load()
    if state is None:
        raise ClientError('You need to start by "silt bisect start"', EXIT_FAILURE)
    return state


def _resolve(repository: str, ref: str) -> str:
    commit = rest().get(f"/repositories/{segment(repository)}/commits/{segment(ref)}")
    return str(commit["id"])


def candidates(repository: str, bad: str, good: str) -> list[dict[str, Any]]:
    """The commits from bad back to good (good left out), newest first; good must be in bad's history."""
    found: list[dict[str, Any]] = []
    path = f"/repositories/{segment(repository)}/refs/{segment(bad)}/commits"
    after = ""
    while True:
        answer = rest().get(path, {"amount": LOG_PAGE, "after": after})
        for commit in answer.get("results") or []:
            if commit["id"] == good:
                return found
            found.append(commit)
        pagination = answer.get("pagination") or {}
        if not pagination.get("has_more") or not pagination.get("next_offset"):
            raise ClientError(f"good commit {good} is not in the history of bad commit {bad}", EXIT_USAGE)
        after = pagination["next_offset"]


def _print_status(state: Bisect) -> None:
    data = {**state.to_json(), "current": state.current, "found": state.found}
    output(data, lambda: click.echo("\n".join(state.status())))


@click.group("bisect")
def bisect() -> None:
    """Binary search of a ref's history for the commit that introduced a change (lakectl's bisect)."""


@bisect.command("start")
@click.argument("bad_uri", metavar="lakefs://REPO/BAD_REF")
@click.argument("good_uri", metavar="lakefs://REPO/GOOD_REF")
@json_option
def start(bad_uri: str, good_uri: str) -> None:
    """Start a session between a bad ref and an older good one (replacing any session)."""
    bad_repo, bad_ref, _ = parse_uri(bad_uri)
    good_repo, good_ref, _ = parse_uri(good_uri)
    if bad_repo != good_repo:
        raise ClientError("both refs must be in the same repository", EXIT_USAGE)
    repository = str(rest().get(f"/repositories/{segment(bad_repo)}")["id"])
    state = Bisect(
        repository=repository,
        bad_commit=_resolve(repository, bad_ref),
        good_commit=_resolve(repository, good_ref),
        created=bisect_state.now(),
    )
    state.commits = candidates(repository, state.bad_commit, state.good_commit)
    bisect_state.save(state)
    _print_status(state)


def _verdict(verdict: str) -> None:
    state = _started()
    state.select(verdict)
    bisect_state.save(state)
    _print_status(state)


@bisect.command("good")
@json_option
def good() -> None:
    """The current commit is good: the change came after it (`old` too)."""
    _verdict(GOOD)


@bisect.command("bad")
@json_option
def bad() -> None:
    """The current commit is bad: the change is in it or before it (`new` too)."""
    _verdict(BAD)


# lakectl's aliases.
bisect.add_command(click.Command("old", callback=good.callback, params=good.params, help=good.help), "old")
bisect.add_command(click.Command("new", callback=bad.callback, params=bad.params, help=bad.help), "new")


@bisect.command("log")
@json_option
def log() -> None:
    """Where the session stands."""
    _print_status(_started())


@bisect.command("view")
@json_option
def view() -> None:
    """The commits still in question, newest first."""
    state = _started()
    if not state.commits:
        _print_status(state)
        return

    def human() -> None:
        for c in state.commits:
            click.echo(f"\nID:            {c['id']}")
            if c.get("committer"):
                click.echo(f"Author:        {c['committer']}")
            click.echo(f"Date:          {when(c.get('creation_date'))}")
            click.echo(f"Meta Range ID: {c.get('meta_range_id', '')}")
            if len(c.get("parents") or []) > 1:
                click.echo(f"Merge:         {', '.join(c['parents'])}")
            click.echo(f"\n\t{c.get('message', '')}")

    output(state.commits, human)


@bisect.command("reset")
@json_option
def reset() -> None:
    """End the session (removes its file)."""
    removed = bisect_state.remove()
    output({"ok": True, "removed": removed}, lambda: click.echo("Cleared bisect session" if removed else "No session"))


def _substituted(arg: str, commit: dict[str, Any]) -> str:
    for name, value in _bisect_values(commit).items():
        arg = arg.replace(f":{name}:", value)
    return arg


def _bisect_values(commit: dict[str, Any]) -> dict[str, str]:
    return {
        "BISECT_ID": str(commit.get("id", "")),
        "BISECT_MESSAGE": str(commit.get("message", "")),
        "BISECT_METARANGE_ID": str(commit.get("meta_range_id", "")),
        "BISECT_COMMITTER": str(commit.get("committer", "")),
    }


@bisect.command("run", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.argument("command", nargs=-1, required=True)
def run(command: tuple[str, ...]) -> None:
    """Test each commit with COMMAND until one is left: exit code 0 marks it good, anything else bad.

    \b
    The commit is in the variables BISECT_ID, BISECT_MESSAGE, BISECT_METARANGE_ID and
    BISECT_COMMITTER, and :BISECT_ID: (and the others) in the arguments is replaced by it.
    """
    state = _started()
    while state.current is not None:
        commit = state.current
        click.echo(f"== Commit [{commit['id']}] {commit.get('message', '')}")
        values = _bisect_values(commit)
        try:
            code = subprocess.run(
                [_substituted(a, commit) for a in command], env={**os.environ, **values}, check=False
            ).returncode
        except OSError as exc:  # it could not start: lakectl counts that as bad too
            click.echo(f"silt: {command[0]}: {exc}", err=True)
            code = 1
        verdict = GOOD if code == 0 else BAD
        click.echo(f"-- {verdict.upper()} [{commit['id']}] {commit.get('message', '')}")
        state.select(verdict)
        bisect_state.save(state)
    click.echo("\n".join(state.status()))
