"""`silt gc`: retention rules, garbage-collection runs (jobs/gc) and last-access expiry
runs (jobs/retention) on Spark.

Changing rules and running GC are administration, not writing (silt/iam_actions.py): setting and
deleting rules need SetGCRules and DeleteGCRules, a run needs PrepareGC and ReadRepo, and so
does an expiry run. The Admins preset holds them all; the user svc-gc, which auth setup
creates for scheduled runs, holds only what a run needs. Showing rules needs ReadRepo.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from typing import Any

import click

from cli.common import as_dict, client, human_size, output, repository_argument, state, table
from silt.client_base import ClientError
from silt.errors import InvalidArgument
from silt.gc_grace import DEFAULT_GRACE, MIN_GRACE_SECONDS, check_grace, parse_grace
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb

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


def _last_access_rules(texts: tuple[str, ...]) -> list[pb.LastAccessRule]:
    """BRANCH=DAYS:PREFIX options as rules: those with the same branch and days are one rule
    with several prefixes, in the order first given. graveler checks the bounds."""
    rules: dict[tuple[str, int], pb.LastAccessRule] = {}
    for text in texts:
        branch, sep, rest = text.partition("=")
        days, colon, prefix = rest.partition(":")
        if not sep or not colon or not branch or not days.isdigit():
            raise click.BadParameter(f"{text!r}: expected BRANCH=DAYS:PREFIX", param_hint="--last-access")
        rule = rules.setdefault((branch, int(days)), pb.LastAccessRule(branch=branch, days=int(days)))
        if prefix not in rule.prefixes:
            rule.prefixes.append(prefix)
    return list(rules.values())


def _branch_rule(text: str) -> tuple[str, int]:
    name, sep, days = text.rpartition("=")
    if not sep or not name or not days.isdigit():
        raise click.BadParameter(f"{text!r}: expected BRANCH=DAYS", param_hint="--branch")
    return name, int(days)


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
    request = api.SetGCRulesRequest(
        repository=repository_argument(repository),
        rules=pb.GCRules(
            default_retention_days=default_days, branch_retention_days=overrides, last_access_rules=expiring
        ),
    )
    client().graveler.SetGCRules(request)
    click.echo(
        f"GC rules of {request.repository} set: {default_days} days by default, {len(overrides)} branch rules, "
        f"{len(expiring)} last-access rules"
    )


@rules.command("show")
@click.argument("repository")
def rules_show(repository: str) -> None:
    """REPOSITORY's retention rules."""
    request = api.GetGCRulesRequest(repository=repository_argument(repository))
    info = client().graveler.GetGCRules(request)

    def human() -> None:
        if not info.is_set:
            click.echo(f"{info.repository} has no GC rules; `silt gc run` refuses to run until they are set")
            return
        click.echo(f"default retention: {info.rules.default_retention_days} days")
        overrides = sorted(info.rules.branch_retention_days.items())
        if overrides:
            table(["branch", "retention days"], overrides)
        expiring = info.rules.last_access_rules
        if expiring:
            click.echo("expire by last access (`silt gc expire`):")
            rows = [(n, r.branch, r.days, " ".join(repr(p) for p in r.prefixes)) for n, r in enumerate(expiring, 1)]
            table(["rule", "branch", "days", "prefixes"], rows)

    output(as_dict(info), human)


@rules.command("delete")
@click.argument("repository")
def rules_delete(repository: str) -> None:
    """Remove REPOSITORY's retention rules; GC then refuses to run on it (needs DeleteGCRules)."""
    name = repository_argument(repository)
    client().graveler.DeleteGCRules(api.DeleteGCRulesRequest(repository=name))
    click.echo(f"GC rules of {name} deleted")


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
