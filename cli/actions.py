"""`silt actions`: the runs of a repository's hooks (lakectl's `actions runs list|describe`), over
the REST API; `actions validate` reads action files offline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from cli.common import json_option, output, repository_argument, rest, table
from cli.rest import ApiError, segment


def _when(stamp: str | None) -> str:
    """The REST API's RFC 3339 time as the table shows it."""
    return (stamp or "").replace("T", " ")[:19]


def _run(run: dict[str, Any]) -> dict[str, Any]:
    return {
        "run_id": run.get("run_id", ""),
        "event_type": run.get("event_type", ""),
        "branch": run.get("branch", ""),
        "commit_id": run.get("commit_id", ""),
        "status": run.get("status", ""),
        "start_time": _when(run.get("start_time")),
        "end_time": _when(run.get("end_time")),
    }


def _runs_path(repo: str) -> str:
    return f"/repositories/{segment(repo)}/actions/runs"


@click.group("actions")
def actions() -> None:
    """Hooks' runs (lakectl's actions)."""


@actions.group("runs")
def runs() -> None:
    """Runs of the hooks that events matched."""


@runs.command("list")
@click.argument("uri", metavar="lakefs://REPO")
@click.option("--branch", default="", help="Only runs of this branch.")
@click.option("--commit", default="", help="Only runs of this commit.")
@click.option("--amount", type=click.IntRange(1, 1000), default=100, show_default=True, help="How many runs.")
@click.option("--after", default="", help="Start after this run id (runs are listed newest first).")
@json_option
def runs_list(uri: str, branch: str, commit: str, amount: int, after: str) -> None:
    """The runs of a repository's hooks, newest first."""
    repo = repository_argument(uri)
    found: list[dict[str, Any]] = []
    while len(found) < amount:
        params = {"branch": branch, "commit": commit, "after": after, "amount": amount - len(found)}
        answer = rest().get(_runs_path(repo), params)
        found.extend(answer.get("results") or [])
        pagination = answer.get("pagination") or {}
        if not pagination.get("has_more") or not pagination.get("next_offset"):
            break
        after = pagination["next_offset"]
    shown = [_run(r) for r in found[:amount]]

    def human() -> None:
        table(
            ["run id", "event", "branch", "commit", "status", "started", "ended"],
            [
                (
                    r["run_id"],
                    r["event_type"],
                    r["branch"],
                    r["commit_id"][:16],
                    r["status"],
                    r["start_time"],
                    r["end_time"],
                )
                for r in shown
            ],
        )

    output(shown, human)


def hook_output(repo: str, run_id: str, hook_run_id: str) -> str:
    """A hook's output (lakeFS's getRunHookOutput), as text."""
    path = f"{_runs_path(repo)}/{segment(run_id)}/hooks/{segment(hook_run_id)}/output"
    return rest().raw(path, what=f"hook run {hook_run_id} of run {run_id}").decode("utf-8", "replace")


@runs.command("describe")
@click.argument("uri", metavar="lakefs://REPO")
@click.argument("run_id")
@click.option("--amount", type=click.IntRange(0), default=0, help="At most this many hooks (0: all; lakectl's).")
@click.option("--after", default="", help="Hooks after this hook run id (lakectl's).")
@json_option
def runs_describe(uri: str, run_id: str, amount: int, after: str) -> None:
    """One run: its hooks, their status and their output."""
    repo = repository_argument(uri)
    run = rest().get(f"{_runs_path(repo)}/{segment(run_id)}")
    hooks: list[dict[str, Any]] = []
    for h in rest().pages(f"{_runs_path(repo)}/{segment(run_id)}/hooks", {"after": after} if after else None):
        if amount and len(hooks) >= amount:
            break
        hook = {
            "hook_run_id": h.get("hook_run_id", ""),
            "action": h.get("action", ""),
            "hook_id": h.get("hook_id", ""),
            "status": h.get("status", ""),
            "start_time": _when(h.get("start_time")),
            "end_time": _when(h.get("end_time")),
        }
        try:
            hook["output"] = hook_output(repo, run_id, hook["hook_run_id"])
        except ApiError as exc:
            if exc.status != 403:  # reading outputs is a permission of its own; the rest is shown
                raise
        hooks.append(hook)
    data = {**_run(run), "hooks": hooks}

    def human() -> None:
        click.echo(f"Run {data['run_id']}: {data['event_type']} on {data['branch']}")
        click.echo(f"Status {data['status']}, started {data['start_time']}, ended {data['end_time']}")
        if data["commit_id"]:
            click.echo(f"Commit {data['commit_id']}")
        for hook in hooks:
            click.echo(f"\n{hook['hook_run_id']}  {hook['action']} / {hook['hook_id']}: {hook['status']}")
            if hook.get("output"):
                click.echo("  " + str(hook["output"]).rstrip().replace("\n", "\n  "))

    output(data, human)


@actions.command("validate")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@json_option
def validate(files: tuple[Path, ...]) -> None:
    """Check action files as the server reads them, offline (lakectl's actions validate)."""
    from engine.actions.files import InvalidActionFile, parse_action

    results = []
    for file in files:
        try:
            action = parse_action(file.read_bytes(), str(file))
        except InvalidActionFile as exc:
            results.append({"file": str(file), "valid": False, "error": str(exc)})
        else:
            results.append({"file": str(file), "valid": True, "name": action.name, "hooks": len(action.hooks)})

    def human() -> None:
        for r in results:
            click.echo(f"{r['file']}: {'ok' if r['valid'] else r['error']}", err=not r["valid"])

    output(results, human)
    if not all(r["valid"] for r in results):
        raise click.exceptions.Exit(1)


@click.command("cat-hook-output")
@click.argument("uri", metavar="lakefs://REPO")
@click.argument("run_id")
@click.argument("hook_run_id")
def cat_hook_output(uri: str, run_id: str, hook_run_id: str) -> None:
    """A hook run's output, as it came (lakectl's cat-hook-output)."""
    repo = repository_argument(uri)
    click.echo(f"Repository: lakefs://{repo}")
    click.echo(hook_output(repo, run_id, hook_run_id))
