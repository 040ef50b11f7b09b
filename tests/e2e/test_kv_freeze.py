"""A frozen KV fails requests quickly instead of hanging them: a dedicated Cassandra node (never
the shared one) is paused with SIGSTOP under a running stack; PUTs through the gateway answer
503 SlowDown and graveler answers UNAVAILABLE within the default bound, and the first PUT after
SIGCONT succeeds within seconds."""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
import yaml
from botocore.exceptions import ClientError

from silt.config import CassandraConfig
from silt.graveler.v1 import graveler_pb2 as api
from silt.launcher import initial_config
from tests.e2e.conftest import entry
from tests.support.cassandra import CassandraServer
from tests.support.gateway_stack import gateway_stack

pytestmark = pytest.mark.cassandra

# The default request timeout, one KV call's worth of waiting, plus the RPC around it.
FAILURE_BOUND_SECONDS = CassandraConfig().request_timeout_s + 2.5
RECOVERY_BOUND_SECONDS = 10.0


@pytest.fixture
def frozen_node() -> Iterator[CassandraServer]:
    server = CassandraServer.start()
    try:
        yield server
    finally:
        assert server._process is not None
        os.killpg(server._process.pid, signal.SIGCONT)  # a stopped JVM ignores SIGTERM
        server.stop()


def _pause(server: CassandraServer, sig: signal.Signals) -> None:
    assert server._process is not None
    os.killpg(server._process.pid, sig)


def test_frozen_cassandra_fails_fast_and_recovers(frozen_node: CassandraServer, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    config = initial_config(data_dir)
    # Only where the node is: every timeout stays at its default, which is what is tested.
    config["database"] = {
        "type": "cassandra",
        "cassandra": {
            "contact_points": [frozen_node.host],
            "port": frozen_node.port,
            "keyspace": f"silt_freeze_{uuid.uuid4().hex[:10]}",
            "protocol_version": frozen_node.protocol_version,
        },
    }
    (data_dir / "config.yaml").write_text(yaml.safe_dump(config))
    with gateway_stack(data_dir) as stack:
        s3 = stack.client(read_timeout=60, retries={"total_max_attempts": 1})
        s3.create_bucket(Bucket="freeze")
        s3.put_object(Bucket="freeze", Key="main/before", Body=b"v")

        took_all: list[float] = []
        _pause(frozen_node, signal.SIGSTOP)
        try:
            for i in range(3):
                started = time.monotonic()
                with pytest.raises(ClientError) as refused:
                    s3.put_object(Bucket="freeze", Key=f"main/frozen-{i}", Body=b"v")
                took = time.monotonic() - started
                took_all.append(took)
                assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503
                assert refused.value.response["Error"]["Code"] in ("SlowDown", "ServiceUnavailable")
                assert took < FAILURE_BOUND_SECONDS, f"PUT {i} failed only after {took:.1f} s: {refused.value}"

            started = time.monotonic()
            with pytest.raises(grpc.RpcError) as failed:
                stack.graveler.StageEntry(
                    api.StageEntryRequest(repository="freeze", branch="main", key="g", entry=entry("g")), timeout=60
                )
            assert failed.value.code() == grpc.StatusCode.UNAVAILABLE
            assert time.monotonic() - started < FAILURE_BOUND_SECONDS
        finally:
            _pause(frozen_node, signal.SIGCONT)

        resumed = time.monotonic()
        quick = stack.client(read_timeout=10, retries={"total_max_attempts": 1})
        while True:
            try:
                quick.put_object(Bucket="freeze", Key="main/after", Body=b"v")
                break
            except ClientError:
                assert time.monotonic() - resumed < RECOVERY_BOUND_SECONDS, "no good PUT after SIGCONT"
                time.sleep(0.1)
        recovered = time.monotonic() - resumed
        assert quick.get_object(Bucket="freeze", Key="main/after")["Body"].read() == b"v"
        print(
            f"frozen PUT failures after {', '.join(f'{t:.1f}' for t in took_all)} s; first good PUT {recovered:.2f} s"
        )
