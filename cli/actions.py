"""`silt actions`: the runs of a repository's hooks (lakectl's `actions runs list|describe`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from cli.common import client, json_option, output, repository_argument, table
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb


def _when(run_or_hook: Any, field: str) -> str:
    if not run_or_hook.HasField(field):
        return ""
    return str(getattr(run_or_hook, field).ToDatetime().strftime("%Y-%m-%d %H:%M:%S"))


def _status(failed: bool) -> str:
    return "failed" if failed else "completed"


def _run(run: pb.ActionRun) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "event_type": run.event_type,
        "branch": run.branch,
        "commit_id": run.commit_id,
        "status": _status(run.failed),
        "start_time": _when(run, "start_time"),
        "end_time": _when(run, "end_time"),
    }


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
    found: list[pb.ActionRun] = []
    more = True
    while more and len(found) < amount:
        reply = client().graveler.ListActionRuns(
            api.ListActionRunsRequest(
                repository=repo, branch=branch, commit_id=commit, after=after, amount=amount - len(found)
            )
        )
        found.extend(reply.runs)
        more, after = reply.has_more, reply.next_after
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


@runs.command("describe")
@click.argument("uri", metavar="lakefs://REPO")
@click.argument("run_id")
@json_option
def runs_describe(uri: str, run_id: str) -> None:
    """One run: its hooks, their status and their output."""
    repo = repository_argument(uri)
    run = client().graveler.GetActionRun(api.GetActionRunRequest(repository=repo, run_id=run_id))
    hooks = [
        {
            "hook_run_id": h.hook_run_id,
            "action": h.action,
            "hook_id": h.hook_id,
            "status": "skipped" if h.skipped else _status(h.failed),
            "start_time": _when(h, "start_time"),
            "end_time": _when(h, "end_time"),
            "error": h.error,
            "output": h.output,
        }
        for h in run.hooks
    ]
    data = {**_run(run), "source_ref": run.source_ref, "hooks": hooks}

    def human() -> None:
        click.echo(f"Run {run.run_id}: {run.event_type} on {run.branch or run.tag_id or run.source_ref}")
        click.echo(f"Status {data['status']}, started {data['start_time']}, ended {data['end_time']}")
        if run.commit_id:
            click.echo(f"Commit {run.commit_id}")
        for hook in hooks:
            click.echo(f"\n{hook['hook_run_id']}  {hook['action']} / {hook['hook_id']}: {hook['status']}")
            if hook["error"]:
                click.echo(f"  error: {hook['error']}")
            if hook["output"]:
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
