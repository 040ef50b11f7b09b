"""The gateway dials graveler at graveler.endpoint, never at graveler.listen_address.

In a cluster every pod's configuration says graveler listens on 0.0.0.0:8102 (its own pod), and
the gateway must dial the graveler Service instead. Here the gateway's configuration says
graveler listens on a wildcard address whose port nothing serves on this machine, and the
endpoint names the real graveler: S3 requests must work (a gateway that dialled
127.0.0.1:<listen port> would fail every request)."""

from __future__ import annotations

import socket
from pathlib import Path

from silt.launcher import Stack
from tests.support.gateway_stack import stack_s3_client


def test_gateway_reaches_graveler_through_its_endpoint_not_its_listen_address(tmp_path: Path) -> None:
    stack = Stack(
        tmp_path / "silt",
        ports={"auth": 0, "graveler": 0, "gateway": 0},
        services=["auth", "graveler", "gateway"],
        restart=False,
        log_level="WARN",
    )
    stack.prepare()
    gateway_env = stack._services["gateway"].env
    real_graveler = gateway_env["SILT_GRAVELER_ENDPOINT"]
    # The pod-local view: graveler "listens" on a wildcard address whose port is held (bound,
    # never listening) by this test, so dialling it is refused.
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        gateway_env["SILT_GRAVELER_LISTEN_ADDRESS"] = f"0.0.0.0:{held.getsockname()[1]}"
        assert gateway_env["SILT_GRAVELER_LISTEN_ADDRESS"].rpartition(":")[2] != real_graveler.rpartition(":")[2]
        _put_and_get_through_the_gateway(stack)


def _put_and_get_through_the_gateway(stack: Stack) -> None:
    with stack:
        s3 = stack_s3_client(stack)
        s3.create_bucket(Bucket="endpoints")
        s3.put_object(Bucket="endpoints", Key="main/a.txt", Body=b"through the endpoint")
        body = s3.get_object(Bucket="endpoints", Key="main/a.txt")["Body"].read()
        assert body == b"through the endpoint"
