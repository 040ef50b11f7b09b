"""`silt repo`: create, list, show, delete repositories (the REST API)."""

from __future__ import annotations

from typing import Any

import click

from cli import records
from cli.common import confirm, done, json_option, output, repository_argument, rest, table, when
from cli.rest import segment


@click.group()
def repo() -> None:
    """Repositories."""


def _default_namespace(name: str) -> str:
    """Where a repository created without a namespace goes: the server's default prefix plus
    its name, as lakeFS's clients do (/config's default_namespace_prefix)."""
    from silt.client_base import EXIT_USAGE, ClientError

    config = rest().get("/config", what="GET /config")
    storage = config.get("storage_config") or (config.get("storage_config_list") or [None])[0] or {}
    prefix = storage.get("default_namespace_prefix")
    if not prefix:
        raise ClientError(
            "the server has no default storage namespace: pass one (silt repo create NAME NAMESPACE)", EXIT_USAGE
        )
    return prefix + name if prefix.endswith(("/", "://")) else f"{prefix}/{name}"


@repo.command("create")
@click.argument("repository")
@click.argument("namespace", required=False, metavar="[STORAGE_NAMESPACE]")
@click.option(
    "--storage-namespace",
    "-s",
    help="Where its objects go, below one of graveler.allowed_namespace_roots (lakectl's second argument;"
    " default: the server's default namespace prefix plus the name).",
)
@click.option("--default-branch", "-d", default="main", show_default=True, help="The branch created with it.")
@click.option(
    "--sample",
    "--sample-data",
    "sample",
    is_flag=True,
    help="Fill it with sample data: CSV and Parquet tables, a README, two commits and a branch "
    "with a change in an open pull request.",
)
@json_option
def create(
    repository: str, namespace: str | None, storage_namespace: str | None, default_branch: str, sample: bool
) -> None:
    """Create REPOSITORY (lakefs://name, silt://name or name) with an initial commit on the default branch."""
    name = repository_argument(repository)
    where = namespace or storage_namespace or _default_namespace(name)
    body = {"name": name, "storage_namespace": where, "default_branch": default_branch, "sample_data": sample}
    info = rest().post("/repositories", body, what=f"create repository {name}")
    data = records.repository(info)
    output(
        data,
        lambda: click.echo(
            f"Repository: lakefs://{info['id']}\n"
            f"Repository {info['id']} created in {info['storage_namespace']} (default branch {info['default_branch']})"
            + (f"\nSample data: 2 commits on {info['default_branch']}, a pull request to review" if sample else "")
        ),
    )


@repo.command("list")
@json_option
def list_() -> None:
    """The repositories you may read."""
    repos: list[dict[str, Any]] = list(rest().pages("/repositories", what="list repositories"))
    output(
        [records.repository(r) for r in repos],
        lambda: table(
            ["name", "default branch", "storage namespace", "created"],
            [(r["id"], r["default_branch"], r["storage_namespace"], when(r.get("creation_date"))) for r in repos],
        ),
    )


@repo.command("show")
@click.argument("repository")
@json_option
def show(repository: str) -> None:
    """One repository's details."""
    info = rest().get(f"/repositories/{segment(repository_argument(repository))}")

    def human() -> None:
        click.echo(f"name:              {info['id']}")
        click.echo(f"default branch:    {info['default_branch']}")
        click.echo(f"storage namespace: {info['storage_namespace']}")
        click.echo(f"created:           {when(info.get('creation_date'))}")

    output(records.repository(info), human)


@repo.command("delete")
@click.argument("repository")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@json_option
def delete(repository: str, yes: bool) -> None:
    """Delete a repository with all its branches, tags and history."""
    name = repository_argument(repository)
    api = rest()
    api.get(f"/repositories/{segment(name)}")  # a missing one fails before anyone is asked
    confirm(f"Delete repository {name} and all its history?", yes)
    api.delete(f"/repositories/{segment(name)}")
    done(f"Repository {name} deleted", repository=name)
