"""What every `silt` command shares: the client, output (tables or --json) and error handling."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import click
from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from silt.client import EXIT_FAILURE, EXIT_USAGE, Client, ClientError, exit_code_of, resolve_settings
from silt.config import Config, load_config
from silt.errors import ConfigError, SiltError


@dataclass
class State:
    config_path: str | None = None
    json: bool = False
    graveler: str | None = None
    auth: str | None = None
    s3_endpoint: str | None = None
    _client: Client | None = field(default=None, repr=False)

    def config(self) -> Config:
        return load_config(self.config_path)

    def client(self) -> Client:
        if self._client is None:
            settings = resolve_settings(self.config(), self.graveler, self.auth, self.s3_endpoint)
            self._client = Client(settings)
        return self._client


def state() -> State:
    return click.get_current_context().find_root().ensure_object(State)


def client() -> Client:
    return state().client()


class SiltGroup(click.Group):
    """Turns every error of a subcommand into one line on stderr and its exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise
        except ClientError as exc:
            click.echo(f"silt: {exc}", err=True)
            ctx.exit(exc.exit_code)
        except ConfigError as exc:
            click.echo(f"silt: {exc}", err=True)
            ctx.exit(EXIT_USAGE)
        except SiltError as exc:
            click.echo(f"silt: {exc}", err=True)
            ctx.exit(exit_code_of(exc))
        except KeyboardInterrupt:
            click.echo("silt: interrupted", err=True)
            ctx.exit(130)
        except BrokenPipeError:
            ctx.exit(EXIT_FAILURE)
        except Exception as exc:  # a bug: still one line for the user
            click.echo(f"silt: internal error: {type(exc).__name__}: {exc}", err=True)
            ctx.exit(EXIT_FAILURE)
        finally:
            root = ctx.find_root().obj
            if isinstance(root, State) and root._client is not None and ctx.parent is None:
                root._client.close()


def when(ts: Timestamp) -> str:
    if not ts.seconds and not ts.nanos:
        return ""
    return datetime.fromtimestamp(ts.seconds, UTC).strftime("%Y-%m-%d %H:%M:%S")


def as_dict(message: Message) -> dict[str, Any]:
    return MessageToDict(message, preserving_proto_field_name=True)


def human_size(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return str(size)


def table(columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Columns aligned to their widest cell; nothing but the header when there are no rows."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [max([len(col)] + [len(row[i]) for row in cells]) for i, col in enumerate(columns)]
    line = "  ".join(col.upper().ljust(w) for col, w in zip(columns, widths, strict=True))
    click.echo(line.rstrip())
    for row in cells:
        click.echo("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def output(data: Any, human: Callable[[], None]) -> None:
    """--json prints data as JSON; otherwise human() prints for people."""
    if state().json:
        click.echo(json.dumps(data, indent=2, default=str))
    else:
        human()


def _set_json(ctx: click.Context, _: click.Parameter, value: bool) -> None:
    if value:
        ctx.find_root().ensure_object(State).json = True


# Both `silt --json repo list` and `silt repo list --json` work.
json_option = click.option(
    "--json", is_flag=True, expose_value=False, is_eager=True, callback=_set_json, help="Print JSON for scripts."
)
