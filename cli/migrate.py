"""`silt migrate lakefs`: a lakeFS repository brought across with its whole history
(docs/migrating-from-lakefs.md).

The source is any server speaking lakeFS's REST API, read with lakeFS's own client and its
lakectl-style settings; the target is this Silt installation, written through graveler as every
`silt` command writes. Objects are not copied: the target's entries name the source's objects
where they are, which the installation must allow (graveler.allowed_import_prefixes covering the
source's storage namespace).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from types import TracebackType

import click

from cli.common import client, human_size, json_option, output, state
from cli.lakefs_migration.iam import IamReport, copy_iam
from cli.lakefs_migration.ledger import Ledger
from cli.lakefs_migration.replay import Progress, Replay
from cli.lakefs_migration.source import LakeFSSource
from cli.progress import _duration, _interval


@click.group()
def migrate() -> None:
    """Bring repositories across from another system, with their history."""


class MigrationProgress(Progress):
    """A bar on a terminal; elsewhere a line every few seconds (a long migration is never silent)."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.total = self.done = self.objects = self.bytes = 0
        self.started = time.monotonic()
        self._last_line = 0.0
        self._bar: object | None = None

    def __enter__(self) -> MigrationProgress:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self._stop()

    def start(self, commits: int, done: int) -> None:
        self.total, self.done = commits, done
        if self.quiet:
            return
        if sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            bar = Progress(
                TextColumn("commits"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[detail]}"),
                TimeRemainingColumn(),
                console=Console(stderr=True),
            )
            bar.start()
            self._task = bar.add_task("commits", total=commits, completed=done, detail="")
            self._bar = bar

    def advance(self, objects: int, size: int) -> None:
        self.done += 1
        self.objects += objects
        self.bytes += size
        if self.quiet:
            return
        detail = f"{self.objects:,} objects, {human_size(self.bytes)}"
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done, detail=detail)  # type: ignore[attr-defined]
            return
        now = time.monotonic()
        if now - self._last_line >= _interval() or self.done == self.total:
            self._last_line = now
            elapsed = _duration(now - self.started)
            click.echo(f"silt: migrating: {self.done:,}/{self.total:,} commits, {detail}, {elapsed}", err=True)

    def _stop(self) -> None:
        if self._bar is not None:
            self._bar.stop()  # type: ignore[attr-defined]
            self._bar = None


def _source_auth(source: LakeFSSource) -> object:
    import lakefs_sdk

    return lakefs_sdk.AuthApi(source.api_client)


def _target_auth() -> object:
    import lakefs_sdk

    from cli.common import state

    connection = state().connection()
    configuration = lakefs_sdk.Configuration(
        host=connection.endpoint.rstrip("/") + "/api/v1",
        username=connection.access_key_id,
        password=connection.secret_access_key,
    )
    if connection.ca_file:
        configuration.ssl_ca_cert = connection.ca_file
    return lakefs_sdk.AuthApi(lakefs_sdk.ApiClient(configuration))


@migrate.command("lakefs")
@click.option(
    "--endpoint",
    envvar="LAKECTL_SERVER_ENDPOINT_URL",
    required=True,
    help="The source's lakeFS endpoint (as lakectl's LAKECTL_SERVER_ENDPOINT_URL).",
)
@click.option(
    "--access-key-id",
    envvar="LAKECTL_CREDENTIALS_ACCESS_KEY_ID",
    required=True,
    help="The source's key (LAKECTL_CREDENTIALS_ACCESS_KEY_ID).",
)
@click.option(
    "--secret-access-key",
    envvar="LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY",
    required=True,
    prompt=True,
    hide_input=True,
    help="From LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY, or asked for: never on the command line, where ps shows it.",
)
@click.option("--repository", "-r", required=True, help="The source repository.")
@click.option("--to", "target", help="The repository to create here (default: the source's name).")
@click.option(
    "--storage-namespace",
    default="",
    help="The new repository's storage namespace (default: under the installation's first namespace root).",
)
@click.option(
    "--ledger",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The migration's progress file, for resuming (default: ./lakefs-migration-TARGET.jsonl).",
)
@click.option("--iam", is_flag=True, help="Also bring users, groups, memberships and policies across.")
@click.option("--no-progress", is_flag=True, help="No progress display.")
@json_option
def lakefs(
    endpoint: str,
    access_key_id: str,
    secret_access_key: str,
    repository: str,
    target: str | None,
    storage_namespace: str,
    ledger: Path | None,
    iam: bool,
    no_progress: bool,
) -> None:
    """A lakeFS repository, with every branch, tag and commit, into a new repository here.

    \b
    Each commit is recorded in order, with its committer, message, metadata and date, and its
    id mapped (the mapping file: source id, tab, Silt id). Objects keep their physical
    addresses: nothing is copied, and the source's storage is only read. A migration stopped
    at any point goes on from where it was when run again with the same ledger.
    """
    # lakectl's settings name the source here: the target is only ever Silt's own.
    state().silt_settings_only = True
    target = target or repository
    ledger_path = ledger or Path(f"lakefs-migration-{target}.jsonl")
    header = {"endpoint": endpoint, "source": repository, "target": target}
    started = time.monotonic()
    source = LakeFSSource(endpoint, access_key_id, secret_access_key, repository)
    book = Ledger.open(ledger_path, header)
    try:
        with MigrationProgress(quiet=no_progress or state().json) as progress:
            counts = Replay(source, client().graveler, target, book, progress).run(storage_namespace)
        iam_report = copy_iam(_source_auth(source), _target_auth()) if iam else None
    finally:
        book.close()
        source.close()
    mapping = ledger_path.with_suffix(".map.tsv")
    book.write_mapping(mapping)
    report = {
        "source": f"{endpoint} {repository}",
        "target": target,
        "commits": counts.commits,
        "recorded_now": counts.recorded,
        "branches": counts.branches,
        "tags": counts.tags,
        "objects": book.objects,
        "bytes": book.bytes,
        "uncommitted_changes": counts.uncommitted,
        "ledger": str(ledger_path),
        "mapping": str(mapping),
        "seconds": round(time.monotonic() - started, 1),
    }
    if iam_report is not None:
        report["iam"] = vars(iam_report)
    output(report, lambda: _print_report(report, iam_report))


def _print_report(report: dict[str, object], iam: IamReport | None) -> None:
    click.echo(
        f"Migrated {report['source']} into {report['target']}: {report['commits']:,} commits"
        f" ({report['recorded_now']:,} recorded in this run), {report['branches']} branches, {report['tags']} tags,"
        f" {report['objects']:,} object changes ({human_size(int(str(report['bytes'])))}), zero-copy;"
        f" {report['uncommitted_changes']:,} uncommitted changes staged."
    )
    click.echo(f"Commit id map: {report['mapping']} (ledger: {report['ledger']})")
    if iam is not None:
        click.echo(
            f"IAM: {iam.users} users, {iam.groups} groups, {iam.policies} policies, {iam.memberships} memberships,"
            f" {iam.attachments} attachments created; users need new access keys here."
        )
        for refused in iam.refused:
            click.echo(f"  not brought across: {refused}")
        for kept in iam.kept:
            click.echo(f"  {kept}")
