"""Entry point of the `silt` command.

Errors are one readable line on stderr and a non-zero exit code, never a traceback.

Scripts and shell completion run `silt` thousands of times: this module imports no command's
module. Each command is named in COMMANDS with its one-line help, and its module is imported
only when it runs (or shows its --help); tests/unit/test_cli_startup.py keeps it so, and checks
that each line here is the command's own.
"""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING

import click

from cli.common import SiltGroup, State, json_option

if TYPE_CHECKING:
    from silt.config import Config

# name -> ("module:attribute", the first line of its help, as `silt --help` shows it).
COMMANDS: dict[str, tuple[str, str]] = {
    "abuse": ("cli.abuse:abuse", "Load on a running server through the REST API (lakectl's abuse)."),
    "actions": ("cli.actions:actions", "Hooks' runs (lakectl's actions)."),
    "admin": (
        "cli.admin:admin",
        "Operator commands on the KV store and the object store (configuration file, no services).",
    ),
    "annotate": (
        "cli.annotate:annotate",
        "Each object under PATH with the last commit that changed it (lakectl's annotate).",
    ),
    "auth": ("cli.iam:auth", "Users, groups, policies and credentials."),
    "bisect": (
        "cli.bisect:bisect",
        "Binary search of a ref's history for the commit that introduced a change (lakectl's bisect).",
    ),
    "branch": ("cli.branch:branch", "Branches."),
    "cat-hook-output": ("cli.actions:cat_hook_output", "A hook run's output, as it came (lakectl's cat-hook-output)."),
    "branch-protect": ("cli.protect:branch_protect", "Branch protection rules (lakectl's branch-protect)."),
    "completion": (
        "cli.completion:completion",
        "The shell completion script for SHELL: `source <(silt completion bash)`, or in ~/.bashrc.",
    ),
    "commit": (
        "cli.commits:commit",
        "Commit a branch's uncommitted changes (only those under PREFIX when given).",
    ),
    "diff": (
        "cli.commits:diff",
        "Differences between two refs, or a branch's uncommitted changes when only LEFT is given.",
    ),
    "doctor": (
        "cli.doctor:doctor",
        "Check credentials and connectivity to the REST API, auth, graveler and the S3 gateway.",
    ),
    "events": (
        "cli.events:events",
        "A branch's history events: reads, writes and deletes through S3 and the REST API,"
        " and commits, merges, reverts, cherry-picks, resets, branch and tag changes.",
    ),
    "find-merge-base": (
        "cli.commits:find_merge_base",
        "The commit a merge of SOURCE into DESTINATION would start from (lakectl's find-merge-base).",
    ),
    "fs": ("cli.fs:fs", "Objects in a repository: lakefs://REPO/REF/PATH."),
    "gc": ("cli.gc:gc", "Garbage collection: retention rules and runs."),
    "identity": ("cli.iam:identity", "The user your credentials belong to (lakectl's identity)."),
    "import": (
        "cli.imports:import_",
        "Import objects in place, zero-copy: entries naming them where they are, committed as one commit.",
    ),
    "local": (
        "cli.local:local",
        "Local checkouts of a path of a ref, as lakectl's `local` (a `.lakefs_ref.yaml` in each).",
    ),
    "log": (
        "cli.commits:log",
        "History of a ref, newest first (only commits that touched PATH, a key or prefix, when given).",
    ),
    "merge": (
        "cli.commits:merge",
        "Merge SOURCE into the branch DESTINATION; conflicts are listed and exit with code 5.",
    ),
    "migrate": ("cli.migrate:migrate", "Bring repositories across from another system, with their history."),
    "refs-dump": (
        "cli.refs:refs_dump",
        "Dump a repository's refs to its storage namespace; print the manifest refs-restore reads.",
    ),
    "refs-restore": (
        "cli.refs:refs_restore",
        "Restore refs from a manifest into a new, empty repository (made with the dump's storage namespace).",
    ),
    "repo": ("cli.repo:repo", "Repositories."),
    "run": (
        "cli.run:run",
        "Start auth, graveler and the S3 gateway locally; restart what crashes; stop on Ctrl-C.",
    ),
    "show": ("cli.commits:show_commit", "The commit a ref resolves to."),
    "tag": ("cli.branch:tag", "Tags: immutable names for commits."),
    "usage": ("cli.usage:usage", "The installation's usage report (lakectl's usage)."),
}


@click.group(cls=SiltGroup, lazy_commands=COMMANDS)
@click.version_option(package_name="silt", prog_name="silt", message="%(prog)s, version %(version)s")
@click.option("--config", "config_path", envvar="SILT_CONFIG", help="YAML configuration file.")
@click.option(
    "--endpoint",
    metavar="URL",
    help="The server's URL: its REST API (/api/v1) and S3 gateway, all the user commands need"
    " (default: lakectl's server.endpoint_url, or the gateway `silt run` saved, or config).",
)
@click.option("--graveler", metavar="HOST:PORT", help="Graveler's gRPC endpoint, for operator commands.")
@click.option("--auth", "auth_endpoint", metavar="HOST:PORT", help="Auth's gRPC endpoint, for operator commands.")
@click.option("--s3-endpoint", metavar="URL", help="S3 gateway URL (the same as --endpoint).")
@json_option
@click.pass_context
def cli(
    ctx: click.Context,
    config_path: str | None,
    endpoint: str | None,
    graveler: str | None,
    auth_endpoint: str | None,
    s3_endpoint: str | None,
) -> None:
    """Silt: git-like version control for data lakes.

    \b
    Objects are named by URIs: lakefs://REPOSITORY/REF/PATH (silt://... too).
    User commands call the REST API at one endpoint; lakectl's configuration
    (~/.lakectl.yaml, LAKECTL_*) is read as well as Silt's.
    Exit codes: 0 ok, 1 failure, 2 usage or configuration, 3 unavailable,
    4 not found, 5 conflict, 6 permission denied or not authenticated.
    """
    state = ctx.ensure_object(State)
    state.config_path = config_path
    state.endpoint = endpoint
    state.graveler = graveler
    state.auth = auth_endpoint
    state.s3_endpoint = s3_endpoint


def _config(ctx: click.Context) -> Config:
    from silt.client_base import find_config_path
    from silt.config import load_config

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
    from cli.stack_check import run_check
    from silt.client_base import find_config_path
    from silt.config import load_config

    path = find_config_path(ctx.find_root().ensure_object(State).config_path)
    run_check(load_config(path), path)


def main() -> None:
    try:
        cli(obj=State())
    finally:
        # What start-up built (modules, classes, validators: a few hundred thousand objects) is
        # kept to the end; frozen, the interpreter's collections at exit no longer walk it all,
        # a fifth of `silt repo list`'s CPU otherwise. atexit handlers and stdio flushes still
        # run; only objects left in reference cycles are not finalized before the process ends.
        gc.freeze()


if __name__ == "__main__":
    main()
