"""What every `silt` command shares: the client, output (tables or --json) and error handling."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import click
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from silt.client import (
    EXIT_FAILURE,
    EXIT_NOT_FOUND,
    EXIT_USAGE,
    Client,
    ClientError,
    exit_code_of,
    find_config_path,
    resolve_settings,
)
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
        return load_config(find_config_path(self.config_path))

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
    """Turns every error of a subcommand into one line on stderr and its exit code; takes
    `--json` anywhere on the command line, for every command."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if ctx.parent is None:
            # Taken out before click sees it, so that no command needs its own --json option
            # (each still declares json_option, for its --help); "--" ends the options.
            end = args.index("--") if "--" in args else len(args)
            if "--json" in args[:end]:
                ctx.ensure_object(State).json = True
                args = [a for a in args[:end] if a != "--json"] + args[end:]
        return super().parse_args(ctx, args)

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


_INT64_TYPES = {
    FieldDescriptor.TYPE_INT64,
    FieldDescriptor.TYPE_UINT64,
    FieldDescriptor.TYPE_SINT64,
    FieldDescriptor.TYPE_FIXED64,
    FieldDescriptor.TYPE_SFIXED64,
}


def _numbers(message: Message, data: dict[str, Any]) -> dict[str, Any]:
    """Proto3's JSON mapping writes 64-bit integers as strings; scripts want numbers."""
    for descriptor in message.DESCRIPTOR.fields:
        name = descriptor.name
        if name not in data:
            continue
        value = getattr(message, name)
        if descriptor.message_type is not None and descriptor.message_type.GetOptions().map_entry:
            value_descriptor = descriptor.message_type.fields_by_name["value"]
            if value_descriptor.type in _INT64_TYPES:
                data[name] = {k: int(v) for k, v in data[name].items()}
            elif value_descriptor.message_type is not None and isinstance(data[name], dict):
                for k in data[name]:
                    if isinstance(data[name][k], dict):
                        _numbers(value[k], data[name][k])
        elif descriptor.type in _INT64_TYPES:
            data[name] = [int(v) for v in data[name]] if isinstance(data[name], list) else int(data[name])
        elif descriptor.message_type is not None and descriptor.message_type.full_name.startswith("google.protobuf."):
            continue  # well-known types (Timestamp...) have their own JSON form
        elif descriptor.message_type is not None:
            if isinstance(data[name], list):
                for item, sub in zip(value, data[name], strict=True):
                    if isinstance(sub, dict):
                        _numbers(item, sub)
            elif isinstance(data[name], dict):
                _numbers(value, data[name])
    return data


def as_dict(message: Message) -> dict[str, Any]:
    return _numbers(message, MessageToDict(message, preserving_proto_field_name=True))


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


@contextmanager
def on_branch(repo: str, name: str) -> Iterator[None]:
    """Around a call that needs a branch: when name is a tag instead, say so, not "not found"."""
    try:
        yield
    except ClientError as exc:
        if exc.exit_code == EXIT_NOT_FOUND and _is_tag(repo, name):
            raise ClientError(
                f"{name!r} is a tag of {repo}, not a branch: tags never change; to work on it, create a branch"
                f" from it: silt branch create silt://{repo}/NEW-BRANCH --source {name}",
                EXIT_USAGE,
            ) from None
        raise


def _is_tag(repo: str, name: str) -> bool:
    from silt.graveler.v1 import graveler_pb2 as api

    try:
        client().graveler.GetTag(api.GetTagRequest(repository=repo, id=name))
    except (ClientError, SiltError):
        return False
    return True


def done(message: str, **data: Any) -> None:
    """The result of a command that changes something: a line for people, an object for --json."""
    output({"ok": True, **data}, lambda: click.echo(message))


def _set_json(ctx: click.Context, _: click.Parameter, value: bool) -> None:
    if value:
        ctx.find_root().ensure_object(State).json = True


# Both `silt --json repo list` and `silt repo list --json` work.
json_option = click.option(
    "--json", is_flag=True, expose_value=False, is_eager=True, callback=_set_json, help="Print JSON for scripts."
)
