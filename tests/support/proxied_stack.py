"""One Silt stack for the end-to-end tests that reaches the run's Cassandra node through a TCP proxy, for the
tests that take the KV away from a running stack (the proxy stopped: an outage; frozen: a hung
node) while the node itself keeps serving every other test.

One stack for all of them: starting one (three processes, a keyspace) costs more than most of
these tests' own work. Each test leaves the proxy as it found it, listening and forwarding, and
the stack serving again; the stack keeps the KV's timeouts at their defaults (what the freeze
test measures) and checks its health every half second (what the outage test waits on).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import yaml

from silt.launcher import initial_config
from tests.support.cassandra import CassandraServer
from tests.support.gateway_stack import GatewayStack, gateway_stack
from tests.support.tcp_proxy import TcpProxy

HEALTH_CHECK_INTERVAL_S = 0.5
HEALTH_CHECK_TIMEOUT_S = 1.5


@dataclass
class ProxiedStack:
    stack: GatewayStack
    proxy: TcpProxy  # between every service of the stack and the Cassandra node


# Package scope (tests/e2e, whose conftest imports it): its processes stop with the last e2e test,
# not idle through the rest of the run.
@pytest.fixture(scope="package")
def proxied_kv_stack(
    cassandra_server: CassandraServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ProxiedStack]:
    with TcpProxy(cassandra_server.host, cassandra_server.port) as proxy:
        data_dir = tmp_path_factory.mktemp("proxied-stack") / "data"
        data_dir.mkdir()
        config = initial_config(data_dir)
        # Only where the node is: every KV timeout stays at its default.
        config["database"] = {
            "type": "cassandra",
            "cassandra": {
                "contact_points": [cassandra_server.host],
                "port": proxy.port,
                "keyspace": f"silt_proxied_{uuid.uuid4().hex[:10]}",
                "protocol_version": cassandra_server.protocol_version,
            },
        }
        # Auth's setup runs before gateway_stack applies overrides: the KV must be in the file first.
        (data_dir / "config.yaml").write_text(yaml.safe_dump(config))
        telemetry = {
            "health_check_interval_seconds": HEALTH_CHECK_INTERVAL_S,
            "health_check_timeout_seconds": HEALTH_CHECK_TIMEOUT_S,
        }
        with gateway_stack(data_dir, overrides={"telemetry": telemetry}) as stack:
            yield ProxiedStack(stack, proxy)
