"""`silt import`: bring objects into a branch in place, without copying them (docs/import.md).

As lakectl's import: one source, a prefix (or with --object exactly one object), placed under
the destination and committed as one commit. The import runs in graveler; this command starts
it through the REST API (lakeFS's importStart, importStatus, importCancel), shows its progress
(a live counter on a terminal, a line every few seconds elsewhere) and waits for its commit.
Ctrl-C cancels the import before it commits.
"""

from __future__ import annotations

import sys
import time
from typing import IO

import click
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from cli.common import json_option, meta_pairs, on_branch, output, rest, state
from cli.progress import _duration, _interval
from cli.rest import segment
from silt.client_base import EXIT_FAILURE, EXIT_USAGE, ClientError, parse_uri

POLL_SECONDS = 0.5


class ImportProgress:
    """Objects ingested so far: a live counter and rate on a terminal, a line every few seconds elsewhere."""

    def __init__(self, quiet: bool, stream: IO[str] | None = None) -> None:
        self._stream = stream or sys.stderr
        self._quiet = quiet
        self._started = time.monotonic()
        self._last_line = self._started
        self._interval = _interval()
        self._rich: Progress | None = None
        if not quiet and self._stream.isatty():
            self._rich = Progress(
                SpinnerColumn(),
                TextColumn("importing: {task.completed:,.0f} objects, {task.fields[rate]:,.0f}/s"),
                TimeElapsedColumn(),
                console=Console(file=self._stream),
            )
            self._task = self._rich.add_task("import", total=None, rate=0.0)

    def __enter__(self) -> ImportProgress:
        if self._rich is not None:
            self._rich.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._rich is not None:
            self._rich.stop()

    def update(self, ingested: int) -> None:
        elapsed = max(time.monotonic() - self._started, 1e-6)
        if self._rich is not None:
            self._rich.update(self._task, completed=ingested, rate=ingested / elapsed)
        elif not self._quiet and time.monotonic() - self._last_line >= self._interval:
            self._last_line = time.monotonic()
            print(
                f"silt: importing: {ingested:,} objects, {ingested / elapsed:,.0f}/s, {_duration(elapsed)}",
                file=self._stream,
                flush=True,
            )


@click.command("import")
@click.option(
    "--from",
    "source",
    required=True,
    metavar="URI",
    help="s3://bucket/prefix/, gs://bucket/prefix/, https://ACCOUNT.blob.core.windows.net/CONTAINER/prefix/ "
    "or local:///directory/.",
)
@click.option("--to", "destination", required=True, metavar="lakefs://REPO/BRANCH[/PATH]", help="Where it goes.")
@click.option("--object", "one_object", is_flag=True, help="Import exactly the object --from names, at PATH.")
@click.option("--message", "-m", default="", help="Commit message (default: Import objects).")
@click.option("--meta", multiple=True, metavar="KEY=VALUE", help="Commit metadata; repeatable.")
@click.option("--no-progress", is_flag=True, help="No progress display.")
@click.option(
    "--merge", is_flag=True, hidden=True, help="lakectl's deprecated flag: the import commits on the branch itself."
)
@json_option
def import_(
    source: str,
    destination: str,
    one_object: bool,
    message: str,
    meta: tuple[str, ...],
    no_progress: bool,
    merge: bool,
) -> None:
    """Import objects in place, zero-copy: entries naming them where they are, committed as one commit.

    \b
    Everything the branch had under PATH is replaced by what the import finds (with --object,
    only the key PATH). Sources must be allowed by the installation: graveler.allowed_import_prefixes
    (s3://, gs://, https:// on Azure), or blockstore.local.import_enabled and allowed_external_prefixes
    (local://).
    """
    repo, branch, path = parse_uri(destination)
    if one_object and not path:
        raise ClientError("--object needs the object's key in --to: lakefs://REPO/BRANCH/KEY", EXIT_USAGE)
    body = {
        "paths": [{"type": "object" if one_object else "common_prefix", "path": source, "destination": path}],
        "commit": {"message": message, "metadata": meta_pairs(meta)},
    }
    api = rest()
    where = f"/repositories/{segment(repo)}/branches/{segment(branch)}/import"
    with on_branch(repo, branch):
        import_id = api.post(where, body)["id"]
    try:
        with ImportProgress(quiet=no_progress or state().json) as progress:
            while True:
                status = api.get(where, {"id": import_id})
                progress.update(int(status.get("ingested_objects") or 0))
                if status.get("completed") or status.get("error"):
                    break
                time.sleep(POLL_SECONDS)
    except KeyboardInterrupt:
        api.delete(where, {"id": import_id})
        raise
    error = status.get("error")
    if error:
        raise ClientError(f"import {import_id}: {error.get('message') or error}", EXIT_FAILURE)
    commit_id = (status.get("commit") or {}).get("id", "")
    count = int(status.get("ingested_objects") or 0)
    output(status, lambda: click.echo(f"Imported {count:,} objects into {branch}: commit {commit_id}"))
