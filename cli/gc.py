"""`silt gc`: retention rules, garbage-collection runs (jobs/gc) and last-access expiry
runs (jobs/retention) on Spark.

Rules are read and written through the REST API (lakeFS's GC rules, with Silt's last-access
rules beside them), as are lakectl's set-config, get-config, delete-config and the commits'
export (prepare, prepare-async, check-async). Changing rules and running GC are
administration, not writing (silt/iam_actions.py): setting and deleting rules need SetGCRules and
DeleteGCRules, a run needs PrepareGC and ReadRepo, and so does an expiry run. The Admins preset
holds them all; the user svc-gc, which auth setup creates for scheduled runs, holds only what a
run needs. Showing rules needs ReadRepo.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from typing import Any

import click

from cli.common import human_size, output, repository_argument, rest, state, table
from cli.rest import ApiError, segment
from silt.client_base import EXIT_USAGE, ClientError
from silt.errors import InvalidArgument
from silt.gc_grace import DEFAULT_GRACE, MIN_GRACE_SECONDS, check_grace, parse_grace

# The GC job's entry point (jobs/gc/job.py), the one the CronJob runs too.
GC_JOB = "jobs.gc.job"
LAST_ACCESS_JOB = "jobs.retention.last_access"
# How a job names itself at the start of its failure line.
_JOB_PREFIX = re.compile(r"^silt-[a-z-]+: ")


@click.group()
def gc() -> None:
    """Garbage collection: retention rules and runs."""


@gc.group()
def rules() -> None:
    """Retention rules of a repository."""


def _last_access_rules(texts: tuple[str, ...]) -> list[dict[str, Any]]:
    """BRANCH=DAYS:PREFIX options as rules: those with the same branch and days are one rule
    with several prefixes, in the order first given. graveler checks the bounds."""
    rules: dict[tuple[str, int], dict[str, Any]] = {}
    for text in texts:
        branch, sep, rest_ = text.partition("=")
        days, colon, prefix = rest_.partition(":")
        if not sep or not colon or not branch or not days.isdigit():
            raise click.BadParameter(f"{text!r}: expected BRANCH=DAYS:PREFIX", param_hint="--last-access")
        rule = rules.setdefault((branch, int(days)), {"branch": branch, "prefixes": [], "days": int(days)})
        if prefix not in rule["prefixes"]:
            rule["prefixes"].append(prefix)
    return list(rules.values())


def _branch_rule(text: str) -> tuple[str, int]:
    name, sep, days = text.rpartition("=")
    if not sep or not name or not days.isdigit():
        raise click.BadParameter(f"{text!r}: expected BRANCH=DAYS", param_hint="--branch")
    return name, int(days)


def _rules_path(repository: str) -> str:
    return f"/repositories/{segment(repository)}/settings/gc_rules"


def _read_rules(repository: str) -> dict[str, Any] | None:
    """The repository's rules as the REST API answers them (lakeFS's shape, with Silt's
    last_access_rules); None when it has none. lakeFS answers 404 for both a repository without
    rules and one that does not exist: the repository is asked for to tell them apart."""
    try:
        rules: dict[str, Any] = rest().get(_rules_path(repository))
    except ApiError as exc:
        if exc.status != 404:
            raise
        rest().get(f"/repositories/{segment(repository)}")  # 404 again: no such repository
        return None
    return rules


@rules.command("set")
@click.argument("repository")
@click.option("--default-days", type=click.IntRange(0), required=True, help="Retention of every branch, in days.")
@click.option("--branch", "branches", multiple=True, metavar="BRANCH=DAYS", help="A branch's own retention.")
@click.option(
    "--last-access",
    "last_access",
    multiple=True,
    metavar="BRANCH=DAYS:PREFIX",
    help="Expire objects under PREFIX of BRANCH not read or written for DAYS (an empty PREFIX: the whole branch).",
)
def rules_set(repository: str, default_days: int, branches: tuple[str, ...], last_access: tuple[str, ...]) -> None:
    """Replace REPOSITORY's retention rules (needs SetGCRules: administrators)."""
    overrides = dict(_branch_rule(b) for b in branches)
    expiring = _last_access_rules(last_access)
    name = repository_argument(repository)
    body = {
        "default_retention_days": default_days,
        "branches": [{"branch_id": b, "retention_days": d} for b, d in overrides.items()],
        "last_access_rules": expiring,
    }
    rest().put(_rules_path(name), body)
    click.echo(
        f"GC rules of {name} set: {default_days} days by default, {len(overrides)} branch rules, "
        f"{len(expiring)} last-access rules"
    )


@rules.command("show")
@click.argument("repository")
def rules_show(repository: str) -> None:
    """REPOSITORY's retention rules."""
    name = repository_argument(repository)
    found = _read_rules(name)
    rules_ = found or {}
    shown: dict[str, Any] = {
        "default_retention_days": rules_.get("default_retention_days", 0),
        "branch_retention_days": {b["branch_id"]: b["retention_days"] for b in rules_.get("branches") or []},
        "last_access_rules": rules_.get("last_access_rules") or [],
    }
    data = {"repository": name, "is_set": found is not None, "rules": shown}

    def human() -> None:
        if found is None:
            click.echo(f"{name} has no GC rules; `silt gc run` refuses to run until they are set")
            return
        click.echo(f"default retention: {shown['default_retention_days']} days")
        overrides = sorted(shown["branch_retention_days"].items())
        if overrides:
            table(["branch", "retention days"], overrides)
        expiring = shown["last_access_rules"]
        if expiring:
            click.echo("expire by last access (`silt gc expire`):")
            rows = [
                (n, r["branch"], r["days"], " ".join(repr(p) for p in r["prefixes"])) for n, r in enumerate(expiring, 1)
            ]
            table(["rule", "branch", "days", "prefixes"], rows)

    output(data, human)


@rules.command("delete")
@click.argument("repository")
def rules_delete(repository: str) -> None:
    """Remove REPOSITORY's retention rules; GC then refuses to run on it (needs DeleteGCRules)."""
    name = repository_argument(repository)
    rest().delete(_rules_path(name))
    click.echo(f"GC rules of {name} deleted")


# --- lakectl's gc commands ----------------------------------------------------------------


@gc.command("set-config")
@click.argument("repository", metavar="lakefs://REPO")
@click.option("--filename", "-f", required=True, metavar="FILE", help='The rules as JSON ("-": stdin).')
def set_config(repository: str, filename: str) -> None:
    """Set the GC rules from lakeFS's JSON: {"default_retention_days": 21, "branches":
    [{"branch_id": "main", "retention_days": 28}]} (lakectl's gc set-config)."""
    name = repository_argument(repository)
    text = sys.stdin.read() if filename == "-" else _read_file(filename)
    try:
        body = json.loads(text)
    except ValueError as exc:
        raise ClientError(f"{filename}: not valid JSON: {exc}", EXIT_USAGE) from None
    rest().put(_rules_path(name), body)


def _read_file(name: str) -> str:
    try:
        with open(name) as file:
            return file.read()
    except OSError as exc:
        raise ClientError(f"cannot read {name}: {exc}", EXIT_USAGE) from None


@gc.command("get-config")
@click.argument("repository", metavar="lakefs://REPO")
@click.option("--json", "-p", "as_json", is_flag=True, help="The rules as JSON (lakectl's -p).")
def get_config(repository: str, as_json: bool) -> None:
    """The GC rules in lakeFS's shape (lakectl's gc get-config); 404 when none are set."""
    rules_ = rest().get(_rules_path(repository_argument(repository)))
    if as_json or state().json:
        click.echo(json.dumps(rules_, indent=2))
        return
    click.echo(f"Default Retention Days: {rules_.get('default_retention_days')}")
    click.echo("Branch Rules:")
    for b in rules_.get("branches") or []:
        click.echo(f"  - Branch: {b['branch_id']}\n    Retention Days: {b['retention_days']}")


@gc.command("delete-config")
@click.argument("repository", metavar="lakefs://REPO")
def delete_config(repository: str) -> None:
    """Delete the GC rules (lakectl's gc delete-config)."""
    rest().delete(_rules_path(repository_argument(repository)))


@gc.command("prepare")
@click.argument("repository", metavar="lakefs://REPO")
def prepare(repository: str) -> None:
    """Export the commits GC reads (lakeFS's prepareGarbageCollectionCommits): where they are."""
    name = repository_argument(repository)
    run_ = rest().post(f"/repositories/{segment(name)}/gc/prepare_commits")

    def human() -> None:
        click.echo(f"Run ID:           {run_.get('run_id')}")
        click.echo(f"Commits location: {run_.get('gc_commits_location')}")
        if run_.get("gc_commits_presigned_url"):
            click.echo(f"Presigned URL:    {run_['gc_commits_presigned_url']}")

    output(run_, human)


@gc.command("prepare-async")
@click.argument("repository", metavar="lakefs://REPO")
def prepare_async(repository: str) -> None:
    """Start the commits' export as a task (lakectl's gc prepare-async); `gc check-async` follows it."""
    name = repository_argument(repository)
    task = rest().post(f"/repositories/{segment(name)}/gc/prepare_commits/async")
    output(
        task,
        lambda: click.echo(
            f"Started prepare GC commits task {task['id']}.\nCheck it using\n"
            f"    silt gc check-async lakefs://{name} --id {task['id']}"
        ),
    )


@gc.command("check-async")
@click.argument("repository", metavar="lakefs://REPO")
@click.option("--id", "task_id", required=True, help='The task id "gc prepare-async" printed.')
def check_async(repository: str, task_id: str) -> None:
    """The status of a commits' export task (lakectl's gc check-async)."""
    name = repository_argument(repository)
    status = rest().get(f"/repositories/{segment(name)}/gc/prepare_commits/status", {"id": task_id})

    def human() -> None:
        click.echo(f"GC commits task {task_id}: {'Completed' if status.get('completed') else 'Running'}.")
        if status.get("error"):
            click.echo(f"Failed: {status['error'].get('message')}")
        result = status.get("result") or {}
        if result:
            click.echo(f"Commits location: {result.get('gc_commits_location')}")
            if result.get("gc_commits_presigned_url"):
                click.echo(f"  Presigned URL:  {result['gc_commits_presigned_url']}")
            click.echo(f"  Run ID:           {result.get('run_id')}")
        click.echo(f"Last updated {status.get('update_time')}.")

    output(status, human)


@gc.command("run")
@click.argument("repository")
@click.option("--dry-run", is_flag=True, help="Mark and write the report; delete nothing.")
@click.option("--master", default="local[*]", show_default=True, help="Spark master: local[N] or spark://HOST:PORT.")
@click.option(
    "--grace", default=DEFAULT_GRACE, show_default=True, help="Skip objects modified this long before the run."
)
@click.option(
    "--unsafe-short-grace",
    is_flag=True,
    help=f"Accept a grace under {MIN_GRACE_SECONDS // 3600}h: a staging-API upload linked later may lose its bytes.",
)
@click.option("--sweep-only", metavar="RUN_ID", help="Sweep an earlier run's report again (resume).")
def run(
    repository: str, dry_run: bool, master: str, grace: str, unsafe_short_grace: bool, sweep_only: str | None
) -> None:
    """Collect REPOSITORY's garbage with a Spark job (local mode by default).

    Needs PrepareGC and ReadRepo on REPOSITORY: an administrator, or the svc-gc user's key.
    """
    # Refused here, before a Spark job starts (the job refuses it again).
    try:
        check_grace(parse_grace(grace), unsafe_short_grace=unsafe_short_grace)
    except InvalidArgument as exc:
        raise click.BadParameter(str(exc), param_hint="--grace") from None
    if not sweep_only:  # a sweep of an earlier run's report needs no rules
        _refuse_without_rules(repository_argument(repository))
    args = [repository_argument(repository), "--master", master, "--grace", grace]
    args += ["--unsafe-short-grace"] if unsafe_short_grace else []
    args += ["--dry-run"] if dry_run else []
    args += ["--sweep-only", sweep_only] if sweep_only else []
    settings = state()
    args += ["--config", settings.config_path] if settings.config_path else []
    args += ["--graveler", settings.graveler] if settings.graveler else []
    summary = submit(args, GC_JOB)

    def human() -> None:
        click.echo(f"GC run {summary['run_id']} of {summary['repository']}{' (dry run)' if summary['dry_run'] else ''}")
        table(
            ["reason", "objects", "bytes"],
            [(r, count, human_size(summary["bytes"][r])) for r, count in summary["objects"].items()],
        )
        click.echo(f"deleted: {summary['deleted']}, spared (referenced again before the sweep): {summary['spared']}")
        table(["phase", "seconds"], [(p, f"{s:.1f}") for p, s in summary["seconds"].items()])

    output(summary, human)


@gc.command("expire")
@click.argument("repository")
@click.argument("branch")
@click.option("--dry-run", is_flag=True, help="Write the report and list what would expire; change nothing.")
@click.option("--master", default="local[*]", show_default=True, help="Spark master: local[N] or spark://HOST:PORT.")
@click.option(
    "--batch-size",
    type=click.IntRange(1, 1000),
    default=1000,
    show_default=True,
    help="Objects deleted per commit.",
)
def expire(repository: str, branch: str, dry_run: bool, master: str, batch_size: int) -> None:
    """Expire BRANCH's objects by its last-access rules with a Spark job (local mode by default).

    Objects under a rule's prefixes not read or written for its days are deleted from the
    branch in commits by the system user; `silt gc run` then frees their bytes. Needs
    PrepareGC on REPOSITORY: an administrator, or the svc-gc user's key.
    """
    args = [repository_argument(repository), branch, "--master", master, "--batch-size", str(batch_size)]
    args += ["--dry-run"] if dry_run else []
    settings = state()
    args += ["--config", settings.config_path] if settings.config_path else []
    args += ["--graveler", settings.graveler] if settings.graveler else []
    summary = submit(args, LAST_ACCESS_JOB)

    def human() -> None:
        mode = " (dry run: nothing changed)" if summary["dry_run"] else ""
        click.echo(f"last-access run {summary['run_id']} of {summary['repository']}/{summary['branch']}{mode}")
        rows = [
            (n, r["rule"], r["objects"], human_size(r["bytes"]), r["expired"], r["spared"])
            for n, r in enumerate(summary["rules"], 1)
        ]
        table(["rule", "expires", "objects", "bytes", "deleted", "spared"], rows)
        for path in summary["paths"]:
            click.echo(f"  {path}")
        if summary["paths_truncated"]:
            click.echo(f"  ... (all of them in {summary['report_location']})")
        for warning in summary.get("warnings", []):
            click.echo(f"warning: {warning}", err=True)
        if summary["commits"]:
            click.echo(f"commits by the system user: {' '.join(summary['commits'])}")

    output(summary, human)


def _refuse_without_rules(name: str) -> None:
    """A repository without GC rules refused here, before a Spark JVM starts for a run the job
    would refuse at its first call (graveler's PrepareGC, the refusal that counts). Reading the
    rules needs ReadRepo, which a run needs too; when they cannot be read here (no REST API
    configured, an error answer), the job decides, as it always does."""
    try:
        found = _read_rules(name)
    except ClientError:
        return
    if found is None:
        raise ClientError(f"repository {name!r} has no GC rules: set them first with `silt gc rules set {name}`")


def submit(args: list[str], module: str) -> dict[str, Any]:
    """Run a Spark job (module: GC_JOB or LAST_ACCESS_JOB) as its own process, as the CronJob
    does, and return its summary.

    The CLI submits the job rather than importing it: Spark, the job and what it depends on
    stay out of the CLI's process and out of the shared library's imports. The job prints its
    progress on stderr (passed on as it comes) and its summary as JSON on stdout; a failure is
    its last stderr line ("silt-gc: ...", "silt-last-access: ...") and the CLI's exit codes.
    """
    command = [sys.executable, "-m", module, *args]
    with tempfile.TemporaryFile("w+") as out:
        # stdout to a file: the JVM may write there too, and a full pipe nobody reads would stall it.
        with subprocess.Popen(command, stdout=out, stderr=subprocess.PIPE, text=True) as job:
            assert job.stderr is not None
            last = ""
            for line in job.stderr:
                if last:
                    click.echo(last, err=True)
                last = line.rstrip("\n")
            code = job.wait()
        if code != 0:
            raise ClientError(_JOB_PREFIX.sub("", last) or f"the job {module} exited with {code}", code)
        if last:
            click.echo(last, err=True)
        out.seek(0)
        lines = [line for line in out.read().splitlines() if line.strip()]
    if not lines:
        raise ClientError("the GC job printed no summary")
    summary: dict[str, Any] = json.loads(lines[-1])
    return summary
