"""`silt completion SHELL` (lakectl's completion): the script that makes SHELL complete `silt`'s
commands, subcommands and options; click's own completion, which reads no command's module."""

from __future__ import annotations

import click

from cli.common import json_option


@click.command("completion")
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
@json_option
@click.pass_context
def completion(ctx: click.Context, shell: str) -> None:
    """The shell completion script for SHELL: `source <(silt completion bash)`, or in ~/.bashrc."""
    from click.shell_completion import get_completion_class

    cls = get_completion_class(shell)
    assert cls is not None  # every choice has one
    click.echo(cls(ctx.find_root().command, {}, "silt", "_SILT_COMPLETE").source())
