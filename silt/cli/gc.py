"""`silt gc`: retention rules, and garbage-collection runs on Spark (jobs/gc).

Changing rules and running GC are administration, not writing (silt/actions.py): setting and
deleting rules need SetGCRules and DeleteGCRules, a run needs PrepareGC and ReadRepo. The
Admins preset holds them all; the user svc-gc, which auth setup creates for scheduled runs,
holds only what a run needs. Showing rules needs ReadRepo.
"""

from __future__ import annotations

import click

from silt.cli.common import as_dict, client, human_size, output, state, table
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import model_pb2 as pb


@click.group()
def gc() -> None:
    """Garbage collection: retention rules and runs."""


@gc.group()
def rules() -> None:
    """Retention rules of a repository."""


def _repo_name(uri: str) -> str:
    return uri.removeprefix("silt://").strip("/")


def _branch_rule(text: str) -> tuple[str, int]:
    name, sep, days = text.rpartition("=")
    if not sep or not name or not days.isdigit():
        raise click.BadParameter(f"{text!r}: expected BRANCH=DAYS", param_hint="--branch")
    return name, int(days)


@rules.command("set")
@click.argument("repository")
@click.option("--default-days", type=click.IntRange(0), required=True, help="Retention of every branch, in days.")
@click.option("--branch", "branches", multiple=True, metavar="BRANCH=DAYS", help="A branch's own retention.")
def rules_set(repository: str, default_days: int, branches: tuple[str, ...]) -> None:
    """Replace REPOSITORY's retention rules (needs SetGCRules: administrators)."""
    overrides = dict(_branch_rule(b) for b in branches)
    request = api.SetGCRulesRequest(
        repository=_repo_name(repository),
        rules=pb.GCRules(default_retention_days=default_days, branch_retention_days=overrides),
    )
    client().graveler.SetGCRules(request)
    click.echo(f"GC rules of {request.repository} set: {default_days} days by default, {len(overrides)} branch rules")


@rules.command("show")
@click.argument("repository")
def rules_show(repository: str) -> None:
    """REPOSITORY's retention rules."""
    info = client().graveler.GetGCRules(api.GetGCRulesRequest(repository=_repo_name(repository)))

    def human() -> None:
        if not info.is_set:
            click.echo(f"{info.repository} has no GC rules; `silt gc run` refuses to run until they are set")
            return
        click.echo(f"default retention: {info.rules.default_retention_days} days")
        overrides = sorted(info.rules.branch_retention_days.items())
        if overrides:
            table(["branch", "retention days"], overrides)

    output(as_dict(info), human)


@rules.command("delete")
@click.argument("repository")
def rules_delete(repository: str) -> None:
    """Remove REPOSITORY's retention rules; GC then refuses to run on it (needs DeleteGCRules)."""
    name = _repo_name(repository)
    client().graveler.DeleteGCRules(api.DeleteGCRulesRequest(repository=name))
    click.echo(f"GC rules of {name} deleted")


@gc.command("run")
@click.argument("repository")
@click.option("--dry-run", is_flag=True, help="Mark and write the report; delete nothing.")
@click.option("--master", default="local[*]", show_default=True, help="Spark master: local[N] or spark://HOST:PORT.")
@click.option("--grace", default="6h", show_default=True, help="Skip objects modified this long before the run.")
@click.option("--sweep-only", metavar="RUN_ID", help="Sweep an earlier run's report again (resume).")
def run(repository: str, dry_run: bool, master: str, grace: str, sweep_only: str | None) -> None:
    """Collect REPOSITORY's garbage with a Spark job (local mode by default).

    Needs PrepareGC and ReadRepo on REPOSITORY: an administrator, or the svc-gc user's key.
    """
    # Imported here: pyspark and the job are heavy, and only this command needs them.
    from jobs.gc.job import GCOptions, parse_grace, run_gc
    from silt.spark import local_session

    options = GCOptions(dry_run=dry_run, grace_seconds=parse_grace(grace), sweep_only=sweep_only)
    config = state().config()
    from pyspark.sql import SparkSession

    # A session this process already runs (an embedding program, a test run) is reused, not stopped.
    own_session = SparkSession.getActiveSession() is None
    # The JVM before any gRPC channel: PySpark forks to launch it, which gRPC's threads make unreliable.
    spark = local_session(None, master=master, app_name="silt-gc")
    if own_session:
        spark.sparkContext.setLogLevel("ERROR")
    graveler = client().graveler
    try:
        summary = run_gc(
            spark,
            graveler,
            _repo_name(repository),
            config.blockstore,
            options,
            lambda message: click.echo(message, err=True),
        )
    finally:
        if own_session:
            spark.stop()

    def human() -> None:
        click.echo(f"GC run {summary.run_id} of {summary.repository}{' (dry run)' if summary.dry_run else ''}")
        table(
            ["reason", "objects", "bytes"],
            [(r, summary.objects[r], human_size(summary.bytes[r])) for r in summary.objects],
        )
        click.echo(f"deleted: {summary.deleted}, spared (referenced again before the sweep): {summary.spared}")
        table(["phase", "seconds"], [(p, f"{s:.1f}") for p, s in summary.seconds.items()])

    output(summary.__dict__, human)
