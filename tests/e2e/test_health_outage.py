"""Health follows the KV: with Cassandra unreachable (a TCP proxy in front of the test node is
stopped — the node itself keeps running for everyone else) auth and graveler answer
NOT_SERVING and the gateway is not ready; when it is back, they serve again."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import grpc
import pytest
import yaml
from grpc_health.v1 import health_pb2, health_pb2_grpc

from silt.launcher import initial_config
from tests.support.cassandra import CassandraServer
from tests.support.gateway_stack import gateway_stack
from tests.support.tcp_proxy import TcpProxy
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


def test_health_flips_with_the_kv_and_back(cassandra_server: CassandraServer, tmp_path: Path) -> None:
    with TcpProxy(cassandra_server.host, cassandra_server.port) as proxy:
        overrides = {
            "database": {
                "type": "cassandra",
                "cassandra": {
                    "contact_points": [cassandra_server.host],
                    "port": proxy.port,
                    "keyspace": f"silt_health_{uuid.uuid4().hex[:10]}",
                    "protocol_version": cassandra_server.protocol_version,
                    "connect_timeout_s": 2.0,
                    "request_timeout_s": 2.0,
                },
            },
            "telemetry": {"health_check_interval_seconds": 0.5, "health_check_timeout_seconds": 1.5},
        }
        # Auth setup runs before gateway_stack applies overrides: the KV must be in place first.
        data_dir = tmp_path / "data"
        data_dir.mkdir()
        config = initial_config(data_dir)
        config["database"] = overrides.pop("database")
        (data_dir / "config.yaml").write_text(yaml.safe_dump(config))
        with gateway_stack(data_dir, overrides=overrides) as stack:
            endpoints = stack.stack.endpoints
            auth, graveler, gateway = endpoints["auth"], endpoints["graveler"], endpoints["gateway"]
            wait_until(lambda: _status(auth) == _status(graveler) == SERVING, 10, "SERVING at start")
            # The gateway answers from its own periodic check, at most one interval behind.
            wait_until(lambda: _ready(gateway) == (200, {"status": "ready"}), 10, "gateway ready at start")

            proxy.stop()  # Cassandra goes away for these services
            wait_until(lambda: _status(auth) == _status(graveler) == NOT_SERVING, 15, "NOT_SERVING")
            # Not ready, without saying why to an anonymous caller: the log says it.
            wait_until(lambda: _ready(gateway) == (503, {"status": "not ready"}), 15, "gateway not ready")
            # Liveness is not readiness: the process itself is fine and must not be restarted.
            with urllib.request.urlopen(f"{gateway}/_silt/health/live", timeout=5) as reply:
                assert reply.status == 200

            proxy.start()  # and comes back on the same address
            wait_until(lambda: _status(auth) == _status(graveler) == SERVING, 60, "SERVING again")
            wait_until(lambda: _ready(gateway)[0] == 200, 30, "gateway ready again")
            s3 = stack.client()
            s3.create_bucket(Bucket="after-outage")
            s3.put_object(Bucket="after-outage", Key="main/k", Body=b"v")
            assert s3.get_object(Bucket="after-outage", Key="main/k")["Body"].read() == b"v"
