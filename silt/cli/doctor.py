"""`silt doctor`: can this CLI reach and use every service?"""

from __future__ import annotations

from collections.abc import Callable

import click

from silt.auth.v1 import auth_pb2 as aapi
from silt.cli.common import client, json_option, output, table
from silt.client import EXIT_UNAVAILABLE, Client, ClientError
from silt.graveler.v1 import graveler_pb2 as gapi


@click.command("doctor")
@json_option
def doctor() -> None:
    """Check credentials and connectivity to auth, graveler and the S3 gateway."""
    c = client()
    s = c.settings
    checks: list[dict[str, str]] = []

    def check(name: str, endpoint: str, probe: Callable[[], str]) -> None:
        try:
            detail = probe()
            checks.append({"service": name, "endpoint": endpoint, "status": "ok", "detail": str(detail)})
        except ClientError as exc:
            checks.append({"service": name, "endpoint": endpoint, "status": "FAIL", "detail": str(exc)})

    check("credentials", s.credentials_source or "-", lambda: _credentials(c))
    check("auth", s.auth, lambda: "signed in as " + c.auth.WhoAmI(aapi.WhoAmIRequest(), timeout=5).user.id)
    check(
        "graveler",
        s.graveler,
        lambda: (
            f"{len(c.graveler.ListRepositories(gapi.ListRepositoriesRequest(amount=1000), timeout=5).repositories)}"
            " readable repositories"
        ),
    )
    check("gateway", s.s3_endpoint, lambda: _gateway(c))
    output(
        checks,
        lambda: table(
            ["service", "endpoint", "status", "detail"],
            [(x["service"], x["endpoint"], x["status"], x["detail"]) for x in checks],
        ),
    )
    failed = [x for x in checks if x["status"] != "ok"]
    if failed:
        raise ClientError(f"{len(failed)} check(s) failed: {', '.join(x['service'] for x in failed)}", EXIT_UNAVAILABLE)


def _credentials(c: Client) -> str:
    creds = c.credentials()
    return f"access key {creds.access_key_id}"


def _gateway(c: Client) -> str:
    from botocore.exceptions import BotoCoreError
    from botocore.exceptions import ClientError as BotoError

    try:
        buckets = c.s3.list_buckets().get("Buckets", [])
    except (BotoError, BotoCoreError) as exc:
        raise ClientError(f"{type(exc).__name__}: {exc}", EXIT_UNAVAILABLE) from None
    return f"{len(buckets)} bucket(s) listed"
