"""A frozen KV fails requests quickly instead of hanging them: the stack reaches the run's
Cassandra node through a TCP proxy that is frozen under the running stack (connections stay
open and accept bytes, nothing is answered: what a SIGSTOPped node's clients see, without a
JVM of its own to pause, and the node keeps serving every other test); PUTs through the
gateway answer 503 ServiceUnavailable (SlowDown is for graveler shedding load) and graveler
answers UNAVAILABLE within the default bounds, and the first PUT after the thaw succeeds within
seconds. A node really paused with SIGSTOP is tests/integration/kv/test_cluster_faults.py's.
The stack is the run's proxied one (tests/support/proxied_stack.py, every KV timeout at its
default), which the outage test shares."""

from __future__ import annotations

import time
import uuid

import grpc
import pytest
from botocore.exceptions import ClientError

from silt.config import CassandraConfig
from silt.graveler.v1 import graveler_pb2 as api
from tests.e2e.conftest import entry
from tests.support.proxied_stack import ProxiedStack

pytestmark = pytest.mark.cassandra

# The longer default KV timeout (a PUT reads before it writes, and reads outlast the server's
# own read timeout), one KV call's worth of waiting, plus the RPC around it.
FAILURE_BOUND_SECONDS = max(CassandraConfig().request_timeout_s, CassandraConfig().read_timeout_s) + 2.5
RECOVERY_BOUND_SECONDS = 10.0


def test_frozen_cassandra_fails_fast_and_recovers(proxied_kv_stack: ProxiedStack) -> None:
    stack, frozen_node = proxied_kv_stack.stack, proxied_kv_stack.proxy
    s3 = stack.client(read_timeout=60, retries={"total_max_attempts": 1})
    bucket = f"freeze-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="main/before", Body=b"v")

    took_all: list[float] = []
    frozen_node.freeze()
    try:
        for i in range(3):
            started = time.monotonic()
            with pytest.raises(ClientError) as refused:
                s3.put_object(Bucket=bucket, Key=f"main/frozen-{i}", Body=b"v")
            took = time.monotonic() - started
            took_all.append(took)
            assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503
            # A dependency down, not overload: never SlowDown, however long the failure took.
            assert refused.value.response["Error"]["Code"] == "ServiceUnavailable"
            assert took < FAILURE_BOUND_SECONDS, f"PUT {i} failed only after {took:.1f} s: {refused.value}"

        started = time.monotonic()
        with pytest.raises(grpc.RpcError) as failed:
            stack.graveler.StageEntry(
                api.StageEntryRequest(repository=bucket, branch="main", key="g", entry=entry("g")), timeout=60
            )
        assert failed.value.code() == grpc.StatusCode.UNAVAILABLE
        assert time.monotonic() - started < FAILURE_BOUND_SECONDS
    finally:
        frozen_node.thaw()

    resumed = time.monotonic()
    quick = stack.client(read_timeout=10, retries={"total_max_attempts": 1})
    while True:
        try:
            quick.put_object(Bucket=bucket, Key="main/after", Body=b"v")
            break
        except ClientError:
            assert time.monotonic() - resumed < RECOVERY_BOUND_SECONDS, "no good PUT after the thaw"
            time.sleep(0.1)
    recovered = time.monotonic() - resumed
    assert quick.get_object(Bucket=bucket, Key="main/after")["Body"].read() == b"v"
    print(
        f"frozen PUT failures after {', '.join(f'{t:.1f}' for t in took_all)} s;"
        f" first good PUT {recovered:.2f} s after the thaw"
    )
