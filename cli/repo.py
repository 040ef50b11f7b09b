"""`silt repo`: create, list, show, delete repositories."""

from __future__ import annotations

import click

from cli.common import as_dict, client, done, json_option, output, repository_argument, table, when
from silt.client import paged
from silt.graveler.v1 import graveler_pb2 as api


@click.group()
def repo() -> None:
    """Repositories."""


@repo.command("create")
@click.argument("repository")
@click.option(
    "--storage-namespace",
    "-s",
    help="Where its objects go, below one of graveler.allowed_namespace_roots "
    "(default: assigned by graveler, the first root plus the name).",
)
@click.option("--default-branch", default="main", show_default=True, help="The branch created with it.")
@click.option(
    "--sample",
    is_flag=True,
    help="Fill it with sample data: CSV and Parquet tables, a README, two commits and a branch "
    "with a change in an open pull request (through the REST API).",
)
@json_option
def create(repository: str, storage_namespace: str | None, default_branch: str, sample: bool) -> None:
    """Create REPOSITORY (silt://name or name) with an initial commit on the default branch."""
    name = repository_argument(repository)
    g = client().graveler
    if sample:
        # The sample is written by the REST API (the same as the web UI's), imported only here.
        from cli.presign import rest_api

        rest_api().create_repository(name, storage_namespace, default_branch, sample=True)
        info = g.GetRepository(api.GetRepositoryRequest(name=name))
    else:
        info = g.CreateRepository(
            api.CreateRepositoryRequest(
                name=name, storage_namespace=storage_namespace or "", default_branch=default_branch
            )
        )
    output(
        as_dict(info),
        lambda: click.echo(
            f"Repository: lakefs://{info.name}\n"
            f"Repository {info.name} created in {info.storage_namespace} (default branch {info.default_branch})"
            + (f"\nSample data: 2 commits on {info.default_branch}, a pull request to review" if sample else "")
        ),
    )


@repo.command("list")
@json_option
def list_() -> None:
    """The repositories you may read."""
    g = client().graveler
    repos = list(
        paged(
            lambda after: g.ListRepositories(api.ListRepositoriesRequest(after=after, amount=1000)),
            "repositories",
            lambda r: r.name,
        )
    )
    output(
        [as_dict(r) for r in repos],
        lambda: table(
            ["name", "default branch", "storage namespace", "created"],
            [(r.name, r.default_branch, r.storage_namespace, when(r.creation_date)) for r in repos],
        ),
    )


@repo.command("show")
@click.argument("repository")
@json_option
def show(repository: str) -> None:
    """One repository's details."""
    request = api.GetRepositoryRequest(name=repository_argument(repository))
    info = client().graveler.GetRepository(request)

    def human() -> None:
        click.echo(f"name:              {info.name}")
        click.echo(f"default branch:    {info.default_branch}")
        click.echo(f"storage namespace: {info.storage_namespace}")
        click.echo(f"created:           {when(info.creation_date)}")

    output(as_dict(info), human)


@repo.command("delete")
@click.argument("repository")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@json_option
def delete(repository: str, yes: bool) -> None:
    """Delete a repository with all its branches, tags and history."""
    name = repository_argument(repository)
    g = client().graveler
    g.GetRepository(api.GetRepositoryRequest(name=name))  # a missing one fails before anyone is asked
    if not yes:
        click.confirm(f"Delete repository {name} and all its history?", abort=True)
    g.DeleteRepository(api.DeleteRepositoryRequest(name=name))
    done(f"Repository {name} deleted", repository=name)
