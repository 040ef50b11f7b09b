"""`silt run`: the whole stack in the foreground until Ctrl-C (what `make run` calls)."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import sys
import threading
from pathlib import Path

import click

from silt.launcher import DEFAULT_DATA_DIR, RUN_MAX_RESTART_DELAY_SECONDS, Stack


def _hint_data_dir(data_dir: Path) -> str | None:
    """How the CLI finds this stack's credentials, when it would not by itself: it looks in
    the home directory only (`make run`'s ./.silt-data too needs SILT_DATA_DIR)."""
    if data_dir.resolve() == Path(DEFAULT_DATA_DIR).expanduser().resolve():
        return None
    return f"export SILT_DATA_DIR={shlex.quote(str(data_dir))}"


@click.command("run")
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    envvar="SILT_DATA_DIR",
    help="Where all state lives (default: $SILT_DATA_DIR, else ~/.silt).",
)
@click.option("--auth-port", type=int, help="Override auth's port from <data-dir>/config.yaml.")
@click.option("--graveler-port", type=int, help="Override graveler's port.")
@click.option("--gateway-port", type=int, help="Override the S3 gateway's port.")
@click.option("--compactor-port", type=int, help="Override the compactor's port.")
def run(
    data_dir: Path | None,
    auth_port: int | None,
    graveler_port: int | None,
    gateway_port: int | None,
    compactor_port: int | None,
) -> None:
    """Start auth, graveler and the S3 gateway locally; restart what crashes; stop on Ctrl-C."""
    requested = {"auth": auth_port, "graveler": graveler_port, "gateway": gateway_port, "compactor": compactor_port}
    ports = {k: v for k, v in requested.items() if v}
    stack = Stack(
        data_dir,
        ports=ports,
        on_event=lambda line: click.echo(f"silt: {line}", err=True),
        max_restart_delay=RUN_MAX_RESTART_DELAY_SECONDS,
    )
    stop = threading.Event()
    # Ctrl-C and SIGTERM both end in an orderly stop of every service.
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    click.echo(f"Starting Silt (data in {stack.data_dir}) ...")
    with stack:
        _announce(stack)
        stop.wait()
        click.echo("Stopping Silt ...")
    click.echo("Stopped.")


def _silt_command() -> str:
    """`silt` if that is on PATH and is this installation, else a path to this one's."""
    ours = Path(sys.executable).parent / "silt"
    found = shutil.which("silt")
    if found and Path(found).resolve() == ours.resolve():
        return "silt"
    try:
        return os.path.relpath(ours) if not os.path.relpath(ours).startswith("..") else str(ours)
    except ValueError:
        return str(ours)


def _announce(stack: Stack) -> None:
    endpoints = stack.endpoints
    s3 = endpoints.get("gateway")
    click.echo("Silt is running.")
    api_enabled = bool(s3 and stack.config is not None and stack.config.api.enabled)
    if api_enabled:
        # First and on a line of its own: what a new user opens next.
        click.echo(f"\nWeb UI: {s3}/ui/   (open it in a browser; sign in with the admin access key below)\n")
    click.echo(f"  S3 endpoint:  {s3 or '(gateway not installed yet)'}")
    if api_enabled:
        # One endpoint for both, as lakeFS: give lakeFS clients (lakefs-sdk, lakectl) this one.
        click.echo(f"  lakeFS API:   {s3} (REST API under {s3}/api/v1; same access key)")
    for name in ("graveler", "auth", "compactor"):
        if name in endpoints:
            click.echo(f"  {name + ':':13} {endpoints[name]} (gRPC)")
    click.echo(f"  logs:         {stack.logs_dir}")
    assert stack.admin is not None
    if stack.first_run:
        click.echo("\nAdmin credentials (shown only this once; saved for the silt CLI in")
        click.echo(f"{stack.credentials_path}, mode 0600):")
        click.echo(f"  access_key_id:     {stack.admin.access_key_id}")
        click.echo(f"  secret_access_key: {stack.admin.secret_access_key.get_secret_value()}")
    else:
        click.echo(f"\nAdmin credentials: in {stack.credentials_path} (from the first run).")
    hint = _hint_data_dir(stack.data_dir)
    click.echo("\nTry, in another terminal:")
    if hint:
        click.echo(f"  {hint}")
    silt = _silt_command()
    # The sample repository is named as the README's own: its quickstart creates `quickstart`, and
    # a hint that made it first would make the README's first command fail.
    click.echo(f"  {silt} repo create sample --sample")
    if s3:
        # The AWS CLI needs Silt's key (and the endpoint) in its environment.
        click.echo(f'  eval "$({silt} auth env)"')
        click.echo(f"  aws --endpoint-url {s3} s3 ls s3://sample/main/")
    else:
        click.echo(f"  {silt} branch create lakefs://sample/dev --source main")
    click.echo(f"  {silt} fs ls lakefs://sample/main/")
    click.echo("\nPress Ctrl-C to stop.")
