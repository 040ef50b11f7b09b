"""Entry point of the `silt` command.

Errors are one readable line on stderr and a non-zero exit code, never a traceback.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable
from functools import wraps
from typing import Any

import click

from silt.config import Config, load_config
from silt.errors import ConfigError, SiltError

EXIT_CONFIG = 2
EXIT_UNAVAILABLE = 3


def _one_line_errors(func: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except ConfigError as exc:
            click.echo(f"silt: {exc}", err=True)
            sys.exit(EXIT_CONFIG)
        except SiltError as exc:
            click.echo(f"silt: {exc}", err=True)
            sys.exit(EXIT_UNAVAILABLE)
        except Exception as exc:  # a bug: still one line for the user, details in the logs
            click.echo(f"silt: internal error: {type(exc).__name__}: {exc}", err=True)
            sys.exit(1)

    return wrapper


@click.group()
@click.option("--config", "config_path", envvar="SILT_CONFIG", help="YAML configuration file.")
@click.pass_context
def cli(ctx: click.Context, config_path: str | None) -> None:
    """Silt: git-like version control for data lakes."""
    ctx.ensure_object(dict)
    ctx.obj["config_path"] = config_path


def _config(ctx: click.Context) -> Config:
    return load_config(ctx.obj["config_path"])


@cli.group()
def config() -> None:
    """Inspect the configuration."""


@config.command("check")
@click.pass_context
@_one_line_errors
def config_check(ctx: click.Context) -> None:
    """Validate the configuration file and SILT_* overrides, then print the result."""
    loaded = _config(ctx.find_root())
    click.echo(loaded.model_dump_json(indent=2))


@cli.command("check")
@click.pass_context
@_one_line_errors
def check(ctx: click.Context) -> None:
    """Validate the configuration and reach the KV store and the object store."""
    from silt.block import open_adapter
    from silt.kv import open_store

    loaded = _config(ctx)
    store = open_store(loaded.database)
    try:
        probe = uuid.uuid4().hex.encode()
        store.set(b"silt-health", probe, b"ok")
        store.get(b"silt-health", probe)
        store.delete(b"silt-health", probe)
    finally:
        store.close()
    click.echo(f"kv: {loaded.database.type} ok")
    open_adapter(loaded.blockstore)
    click.echo(f"blockstore: {loaded.blockstore.type} ok")


def main() -> None:
    cli(obj={})


if __name__ == "__main__":
    main()
