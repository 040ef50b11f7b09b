"""What every `silt` command shares: the client, output (tables or --json) and error handling."""

from __future__ import annotations

import functools
import importlib
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import click

from silt.client_base import ClientError
from silt.errors import ConfigError, SiltError

# Every `silt` invocation imports this module, `silt --version` and completion included: what
# only some commands need (gRPC, protobuf, pydantic's configuration models) is imported where used;
# a client's configuration is read from its cache (cli/config_cache.py), without pydantic.
if TYPE_CHECKING:
    from click.shell_completion import CompletionItem
    from google.protobuf.message import Message
    from google.protobuf.timestamp_pb2 import Timestamp

    from cli.rest import Connection, RestClient
    from silt.client import Client
    from silt.config import ClientConfig, Config


_EXIT_FAILURE = 1  # silt.client_base.EXIT_FAILURE


@dataclass
class State:
    config_path: str | None = None
    json: bool = False
    graveler: str | None = None
    auth: str | None = None
    s3_endpoint: str | None = None
    endpoint: str | None = None
    # lakectl's configuration ignored (`silt migrate lakefs`, where it names the source).
    silt_settings_only: bool = False
    _client: Client | None = field(default=None, repr=False)
    _rest: RestClient | None = field(default=None, repr=False)
    _connection: Connection | None = field(default=None, repr=False)
    # The REST API's client (cli/presign.py), made on first use: one per invocation, so
    # what it learns from the server (does it presign?) is asked once.
    rest_api: Any = field(default=None, repr=False)

    def config(self) -> Config:
        """The whole configuration, every section validated: for commands that open the stores."""
        from silt.client_base import find_config_path
        from silt.config import load_config

        return load_config(find_config_path(self.config_path))

    def client_config(self) -> ClientConfig:
        """The sections a client dials the services with, validated alone (fast: no other
        section's model is built; an error elsewhere is the services' to report)."""
        from silt.client_base import find_config_path
        from silt.config import load_client_config

        return load_client_config(find_config_path(self.config_path))

    def connection(self) -> Connection:
        """Where the REST API is and as whom it is called (cli/rest.py)."""
        if self._connection is None:
            from cli.rest import Connection, resolve_connection

            if self._client is not None:
                # A client given whole (an embedding program, a test): its gateway and key.
                settings, key = self._client.settings, self._client.credentials()
                secret = key.secret_access_key.get_secret_value()
                self._connection = Connection(
                    settings.s3_endpoint, key.access_key_id, secret, settings.s3_ca_file, settings.credentials_source
                )
            else:
                self._connection = resolve_connection(
                    self.config_path, self.endpoint or self.s3_endpoint, lakectl=not self.silt_settings_only
                )
        return self._connection

    def rest(self) -> RestClient:
        """The REST API's client, the transport of the user commands (cli/rest.py)."""
        if self._rest is None:
            from cli.rest import RestClient

            self._rest = RestClient(self.connection())
        return self._rest

    def client(self) -> Client:
        """Graveler's and auth's gRPC services, for the operator commands with no REST form;
        its gateway and key are the REST API's (lakectl's configuration when that is what the
        CLI was given), for the transfers that go through the S3 gateway."""
        if self._client is None:
            from cli.config_cache import client_view
            from silt.client import Client, resolve_settings
            from silt.client_base import find_config_path
            from silt.rpc.signing import Credentials
            from silt.secret import Secret

            # Validated once per change of the file or SILT_* variables (cli/config_cache.py).
            view = client_view(find_config_path(self.config_path))
            settings = resolve_settings(view, self.graveler, self.auth, self.endpoint or self.s3_endpoint)
            try:
                connection = self.connection()
            except ClientError:
                connection = None  # no credentials: Client says so when a call needs them
            if connection is not None:
                settings.s3_endpoint = connection.endpoint
                settings.s3_ca_file = connection.ca_file
                settings.credentials = Credentials(connection.access_key_id, Secret(connection.secret_access_key))
                settings.credentials_source = connection.source
            self._client = Client(settings)
        return self._client


def state() -> State:
    return click.get_current_context().find_root().ensure_object(State)


def client() -> Client:
    return state().client()


def rest() -> RestClient:
    return state().rest()


def confirm(question: str, yes: bool) -> None:
    """Ask before a destructive change, as lakectl does (`-y`/`--yes` answers for the user);
    with no terminal to ask on and no --yes, refuse rather than act unasked."""
    import sys

    from silt.client_base import EXIT_USAGE

    if yes:
        return
    if not sys.stdin.isatty():
        raise ClientError(f"{question} Not confirmed: stdin is not a terminal; pass --yes (-y) to confirm", EXIT_USAGE)
    click.confirm(question, abort=True)


class SiltGroup(click.Group):
    """Turns every error of a subcommand into one line on stderr and its exit code; takes
    `--json` anywhere on the command line, for every command.

    lazy_commands: name -> ("package.module:attribute", its one-line help), commands whose
    module is imported only when that command runs (or its --help): `silt --help`, completion
    and `silt --version` list them from this map, without importing gRPC, pyarrow and the rest.
    """

    def __init__(self, *args: Any, lazy_commands: Mapping[str, tuple[str, str]] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands = dict(lazy_commands or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy_commands:
            self.add_command(self.load_lazy(cmd_name), cmd_name)
        return self.commands.get(cmd_name)

    def load_lazy(self, cmd_name: str) -> click.Command:
        module_name, _, attribute = self.lazy_commands[cmd_name][0].partition(":")
        command = getattr(importlib.import_module(module_name), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{module_name}:{attribute} is not a click command")
        return command

    def command_help(self, cmd_name: str, limit: int = 45) -> str:
        """A command's line in `silt --help`, without importing a lazy command's module."""
        if cmd_name in self.commands:
            return self.commands[cmd_name].get_short_help_str(limit)
        # Shortened exactly as the command's own would be (an empty command with the same help).
        return click.Command(cmd_name, help=self.lazy_commands[cmd_name][1]).get_short_help_str(limit)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = [n for n in self.list_commands(ctx) if n in self.lazy_commands or not self.commands[n].hidden]
        if names:
            limit = formatter.width - 6 - max(len(name) for name in names)
            with formatter.section("Commands"):
                formatter.write_dl([(name, self.command_help(name, limit)) for name in names])

    def shell_complete(self, ctx: click.Context, incomplete: str) -> list[CompletionItem]:
        from click.shell_completion import CompletionItem

        results = [
            CompletionItem(name, help=self.command_help(name))
            for name in self.list_commands(ctx)
            if name.startswith(incomplete) and (name in self.lazy_commands or not self.commands[name].hidden)
        ]
        # Options (click.Group's own completion, minus the subcommands listed above).
        results.extend(click.Command.shell_complete(self, ctx, incomplete))
        return results

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0]
        known = name in self.commands or name in self.lazy_commands
        if not known and name[:1].isalnum() and ctx.token_normalize_func is None and not ctx.resilient_parsing:
            # click suggests from self.commands alone; the lazy ones count too ("Did you mean").
            raise click.exceptions.NoSuchCommand(name, possibilities=self.list_commands(ctx), ctx=ctx)
        return super().resolve_command(ctx, args)

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
        except SiltError as exc:
            from silt.client_base import EXIT_USAGE, exit_code_of

            click.echo(f"silt: {exc}", err=True)
            if isinstance(exc, ClientError):
                ctx.exit(exc.exit_code)
            ctx.exit(EXIT_USAGE if isinstance(exc, ConfigError) else exit_code_of(exc))
        except KeyboardInterrupt:
            click.echo("silt: interrupted", err=True)
            ctx.exit(130)
        except BrokenPipeError:
            ctx.exit(_EXIT_FAILURE)
        except Exception as exc:  # a bug: still one line for the user
            click.echo(f"silt: internal error: {type(exc).__name__}: {exc}", err=True)
            ctx.exit(_EXIT_FAILURE)
        finally:
            root = ctx.find_root().obj
            if isinstance(root, State) and ctx.parent is None:
                if root._client is not None:
                    root._client.close()
                if root._rest is not None:
                    root._rest.close()


def when(ts: Timestamp | int | None) -> str:
    """A time for people: a protobuf Timestamp, or the REST API's Unix seconds."""
    if ts is None or isinstance(ts, int):
        seconds = ts or 0
    elif ts.seconds or ts.nanos:
        seconds = ts.seconds
    else:
        return ""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S") if seconds else ""


def iso_time(seconds: int | None) -> str | None:
    """The REST API's Unix seconds as --json printed graveler's times (RFC 3339, UTC)."""
    if not seconds:
        return None
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@functools.cache
def _int64_types() -> frozenset[int]:
    from google.protobuf.descriptor import FieldDescriptor

    return frozenset(
        {
            FieldDescriptor.TYPE_INT64,
            FieldDescriptor.TYPE_UINT64,
            FieldDescriptor.TYPE_SINT64,
            FieldDescriptor.TYPE_FIXED64,
            FieldDescriptor.TYPE_SFIXED64,
        }
    )


def _numbers(message: Message, data: dict[str, Any]) -> dict[str, Any]:
    """Proto3's JSON mapping writes 64-bit integers as strings; scripts want numbers."""
    for descriptor in message.DESCRIPTOR.fields:
        name = descriptor.name
        if name not in data:
            continue
        value = getattr(message, name)
        if descriptor.message_type is not None and descriptor.message_type.GetOptions().map_entry:
            value_descriptor = descriptor.message_type.fields_by_name["value"]
            if value_descriptor.type in _int64_types():
                data[name] = {k: int(v) for k, v in data[name].items()}
            elif value_descriptor.message_type is not None and isinstance(data[name], dict):
                for k in data[name]:
                    if isinstance(data[name][k], dict):
                        _numbers(value[k], data[name][k])
        elif descriptor.type in _int64_types():
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
    from google.protobuf.json_format import MessageToDict

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


def repository_argument(uri: str) -> str:
    """The repository a command's `silt://REPO` argument names (lakectl's `lakefs://REPO`, or a
    bare name); a ref or path after it is a usage error, not a name the server would refuse."""
    from silt.client_base import EXIT_USAGE, parse_uri

    repo, ref, path = parse_uri(uri, need_ref=False)
    if ref or path:
        raise ClientError(f"expected lakefs://<repository> (or silt://<repository>), got {uri!r}", EXIT_USAGE)
    return repo


def meta_pairs(pairs: tuple[str, ...]) -> dict[str, str]:
    """--meta KEY=VALUE options (commit and import metadata) as a dict; a later key wins."""
    from silt.client_base import EXIT_USAGE

    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ClientError(f"expected --meta key=value, got {pair!r}", EXIT_USAGE)
        out[key] = value
    return out


def directory_prefix(path: str) -> str:
    """path as the prefix of the objects below it: ending in "/" (the empty path: every object)."""
    return path if not path or path.endswith("/") else path + "/"


@contextmanager
def on_branch(repo: str, name: str) -> Iterator[None]:
    """Around a call that needs a branch: when name is a tag instead, say so, not "not found"."""
    from silt.client_base import EXIT_NOT_FOUND, EXIT_USAGE

    try:
        yield
    except ClientError as exc:
        if exc.exit_code == EXIT_NOT_FOUND and _is_tag(repo, name):
            raise ClientError(
                f"{name!r} is a tag of {repo}, not a branch: tags never change; to work on it, create a branch"
                f" from it: silt branch create lakefs://{repo}/NEW-BRANCH --source {name}",
                EXIT_USAGE,
            ) from None
        raise


def _is_tag(repo: str, name: str) -> bool:
    from cli.rest import segment

    try:
        rest().get(f"/repositories/{segment(repo)}/tags/{segment(name)}")
    except SiltError:
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
