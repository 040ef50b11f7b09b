"""Health follows the KV: with Cassandra unreachable (the TCP proxy in front of the test node is
stopped — the node itself keeps running for everyone else) auth and graveler answer
NOT_SERVING and the gateway is not ready; when it is back, they serve again. The stack is the
run's proxied one (tests/support/proxied_stack.py), which the freeze test shares."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.support.proxied_stack import ProxiedStack
from tests.support.wait import wait_until

pytestmark = pytest.mark.cassandra

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


def _status(endpoint: str) -> int:
    with grpc.insecure_channel(endpoint) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        return int(stub.Check(health_pb2.HealthCheckRequest(), timeout=5).status)  # type: ignore[attr-defined]


def _ready(gateway: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(f"{gateway}/_silt/health/ready", timeout=15) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_health_flips_with_the_kv_and_back(proxied_kv_stack: ProxiedStack) -> None:
    stack, proxy = proxied_kv_stack.stack, proxied_kv_stack.proxy
    endpoints = stack.stack.endpoints
    auth, graveler, gateway = endpoints["auth"], endpoints["graveler"], endpoints["gateway"]
    wait_until(lambda: _status(auth) == _status(graveler) == SERVING, 10, "SERVING at start")
    # The gateway answers from its own periodic check, at most one interval behind.
    wait_until(lambda: _ready(gateway) == (200, {"status": "ready"}), 10, "gateway ready at start")

    proxy.stop()  # Cassandra goes away for these services
    try:
        wait_until(lambda: _status(auth) == _status(graveler) == NOT_SERVING, 15, "NOT_SERVING")
        # Not ready, without saying why to an anonymous caller: the log says it.
        wait_until(lambda: _ready(gateway) == (503, {"status": "not ready"}), 15, "gateway not ready")
        # Liveness is not readiness: the process itself is fine and must not be restarted.
        with urllib.request.urlopen(f"{gateway}/_silt/health/live", timeout=5) as reply:
            assert reply.status == 200
    finally:
        proxy.start()  # and comes back on the same address (for the stack's next test too)
    wait_until(lambda: _status(auth) == _status(graveler) == SERVING, 60, "SERVING again")
    wait_until(lambda: _ready(gateway)[0] == 200, 30, "gateway ready again")
    s3 = stack.client()
    bucket = f"after-outage-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="main/k", Body=b"v")
    assert s3.get_object(Bucket=bucket, Key="main/k")["Body"].read() == b"v"
