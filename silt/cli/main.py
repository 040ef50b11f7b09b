"""Entry point of the `silt` command.

Errors are one readable line on stderr and a non-zero exit code, never a traceback.
"""

from __future__ import annotations

import click

from silt.cli.admin import admin
from silt.cli.annotate import annotate
from silt.cli.branch import branch, tag
from silt.cli.common import SiltGroup, State, json_option
from silt.cli.doctor import doctor
from silt.cli.events import events
from silt.cli.fs import fs
from silt.cli.gc import gc
from silt.cli.history import commit, diff, log, merge, show_commit
from silt.cli.iam import auth
from silt.cli.imports import import_
from silt.cli.local import local
from silt.cli.presign import presign
from silt.cli.protect import branch_protect
from silt.cli.repo import repo
from silt.cli.run import run
from silt.client import find_config_path
from silt.config import Config, load_config


@click.group(cls=SiltGroup)
@click.option("--config", "config_path", envvar="SILT_CONFIG", help="YAML configuration file.")
@click.option("--graveler", metavar="HOST:PORT", help="Graveler endpoint (default: saved by `silt run`, or config).")
@click.option("--auth", "auth_endpoint", metavar="HOST:PORT", help="Auth endpoint.")
@click.option("--s3-endpoint", metavar="URL", help="S3 gateway URL, for object bytes.")
@json_option
@click.pass_context
def cli(
    ctx: click.Context,
    config_path: str | None,
    graveler: str | None,
    auth_endpoint: str | None,
    s3_endpoint: str | None,
) -> None:
    """Silt: git-like version control for data lakes.

    \b
    Objects are named by URIs: silt://REPOSITORY/REF/PATH (lakectl's lakefs://... too)
    Exit codes: 0 ok, 1 failure, 2 usage or configuration, 3 unavailable,
    4 not found, 5 conflict, 6 permission denied or not authenticated.
    """
    state = ctx.ensure_object(State)
    state.config_path = config_path
    state.graveler = graveler
    state.auth = auth_endpoint
    state.s3_endpoint = s3_endpoint


def _config(ctx: click.Context) -> Config:
    return load_config(find_config_path(ctx.find_root().ensure_object(State).config_path))


@cli.group()
def config() -> None:
    """Inspect the configuration."""


@config.command("check")
@json_option  # the output is JSON either way
@click.pass_context
def config_check(ctx: click.Context) -> None:
    """Validate the configuration file and SILT_* overrides, then print the result."""
    loaded = _config(ctx.find_root())
    click.echo(loaded.model_dump_json(indent=2))


@cli.command("check")
@json_option
@click.pass_context
def check(ctx: click.Context) -> None:
    """Validate the configuration and reach the KV store and the object store; creates nothing."""
    from silt.cli.stack_check import run_check

    path = find_config_path(ctx.find_root().ensure_object(State).config_path)
    run_check(load_config(path), path)


COMMANDS = (
    repo,
    branch,
    branch_protect,
    tag,
    commit,
    log,
    diff,
    merge,
    show_commit,
    annotate,
    events,
    fs,
    local,
    import_,
    auth,
    run,
    doctor,
    gc,
    admin,
)
for command in COMMANDS:
    cli.add_command(command)
fs.add_command(presign)


def main() -> None:
    cli(obj=State())


if __name__ == "__main__":
    main()
