"""The gateway rides out an auth restart: S3 requests that need auth while it restarts wait for
it (briefly) and are answered, rather than refused with 503 until auth is back and the
gateway's channel has waited out its reconnect backoff."""

from __future__ import annotations

import signal
from typing import Any

import boto3
from botocore.config import Config as BotoConfig

from silt.launcher import Stack
from tests.e2e.conftest import Silt
from tests.support.wait import wait_until

REPO = "e2e-auth-restart"
KEYS = 6


def client(stack: Stack, key: dict[str, Any]) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=stack.endpoints["gateway"],
        aws_access_key_id=key["access_key_id"],
        aws_secret_access_key=key["secret_access_key"],
        region_name="us-east-1",
        # One attempt: a 503 must not be hidden by the SDK's own retries.
        config=BotoConfig(retries={"max_attempts": 1, "mode": "standard"}),
    )


def test_requests_right_after_an_auth_restart_are_answered(stack: Stack, silt: Silt) -> None:
    silt("repo", "create", REPO)
    silt("auth", "users", "create", "restart-reader")
    silt("auth", "groups", "add-member", "Admins", "restart-reader")
    # Keys never used before the restart: the gateway has nothing cached for them, so each
    # request asks auth to verify its signature and to authorize it.
    keys = [silt("auth", "credentials", "create", "--user", "restart-reader", "--json").json() for _ in range(KEYS)]
    client(stack, silt("auth", "credentials", "create", "--user", "restart-reader", "--json").json()).put_object(
        Bucket=REPO, Key="main/a", Body=b"x"
    )
    clients = [client(stack, key) for key in keys]
    restarts = stack.restarts("auth")
    stack.kill("auth", signal.SIGKILL)
    # As soon as the launcher has started auth again (after its restart delay, which depends on
    # how long auth had been up): the requests then come while auth is still starting and the
    # gateway's channel is backing off from the kill, which is what the gateway must ride out
    # (within its bound, silt/rpc/authority.py's UNAVAILABLE_RETRY_SECONDS), however long the
    # launcher waited before starting it.
    wait_until(lambda: stack.restarts("auth") > restarts or None, timeout=30, message="auth was not restarted")
    answers = [c.get_object(Bucket=REPO, Key="main/a")["Body"].read() for c in clients]
    assert answers == [b"x"] * KEYS
    assert stack.restarts("auth") == restarts + 1
    # The stack is shared: leave it answering every service's calls before the next test (graveler
    # verifies signatures with auth, whose channel may still be backing off after the kill).
    wait_until(
        lambda: silt("repo", "list", ok=False).code == 0 or None,
        timeout=60,
        message="graveler did not answer again after auth's restart",
        interval=0.5,
    )
