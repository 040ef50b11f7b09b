"""`silt refs-dump` and `silt refs-restore` (lakectl's): a repository's refs (its branches, tags
and commits) written to metaranges in its storage namespace, and a repository made from such a
manifest, through the REST API."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from cli.common import done, json_option, repository_argument, rest
from cli.rest import segment
from silt.client_base import EXIT_USAGE, ClientError


@click.command("refs-dump")
@click.argument("repository", metavar="lakefs://REPO")
@click.option(
    "--output", "-o", type=click.Path(dir_okay=False, path_type=Path), help="Write the manifest here (default: stdout)."
)
@json_option
def refs_dump(repository: str, output: Path | None) -> None:
    """Dump a repository's refs to its storage namespace; print the manifest refs-restore reads."""
    name = repository_argument(repository)
    manifest = rest().put(f"/repositories/{segment(name)}/refs/dump", what=f"dump the refs of {name}")
    text = json.dumps(manifest, indent=2)
    if output is None:
        click.echo(text)
        return
    output.write_text(text + "\n")
    done(f"Refs of {name} dumped; manifest written to {output}", repository=name, manifest=manifest)


@click.command("refs-restore")
@click.argument("repository", metavar="lakefs://REPO")
@click.option(
    "--manifest", required=True, help="The manifest refs-dump printed: a file, or - for stdin.", metavar="FILE"
)
@json_option
def refs_restore(repository: str, manifest: str) -> None:
    """Restore refs from a manifest into a new, empty repository (made with the dump's storage namespace)."""
    name = repository_argument(repository)
    text = sys.stdin.read() if manifest == "-" else Path(manifest).read_text()
    try:
        body = json.loads(text)
    except ValueError as exc:
        raise ClientError(f"the manifest is not JSON: {exc}", EXIT_USAGE) from None
    rest().put(f"/repositories/{segment(name)}/refs/restore", body, what=f"restore the refs of {name}")
    done(f"Refs of {name} restored", repository=name)
