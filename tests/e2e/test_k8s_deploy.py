"""deploy/k8s (the dev overlay) run here as the manifests say, on the test Cassandra.

The auth-setup Job, then auth, graveler, the compactor and the gateway with the replica counts, commands,
env, ConfigMaps and Secrets of the rendered manifests (tests/support/k8s_run.py says what is
substituted: Service names -> local round-robin proxies, Cassandra and MinIO -> the test
servers). Waits for every declared probe, drives S3 (boto3) and CLI traffic (the GC CronJob's
container, with CLI args), and kills one replica of each service mid-traffic: every
acknowledged write must survive. A wrong endpoint, env name or config key fails here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.k8s_run import Cluster, dev_cluster, s3_client, set_up

# The services in the order a cluster brings them up (each needs the ones before it).
DEPLOYMENTS = ("silt-auth", "silt-graveler", "silt-compactor", "silt-gateway")
REPOSITORY = "example"  # the GC CronJob's repository (ConfigMap silt-gc)


@pytest.fixture
def cluster(cassandra_server: Any, moto_server: str, tmp_path: Path) -> Iterator[Cluster]:
    with dev_cluster(cassandra_server, moto_server, tmp_path) as running:
        yield running


class Writer(threading.Thread):
    """Puts objects through the gateway Service until stopped; remembers what was acknowledged."""

    def __init__(self, s3: Any) -> None:
        super().__init__(daemon=True)
        self.s3 = s3
        self.acked: dict[str, bytes] = {}
        self.failed: list[str] = []
        self.stop_event = threading.Event()

    def run(self) -> None:
        i = 0
        while not self.stop_event.is_set():
            key, body = f"main/traffic/{i:05d}", f"object {i}".encode()
            try:
                self.s3.put_object(Bucket=REPOSITORY, Key=key, Body=body)
                self.acked[key] = body
            except Exception as exc:
                self.failed.append(f"{key}: {exc}")
            i += 1

    def wait_for(self, count: int, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        target = len(self.acked) + count
        while len(self.acked) < target:
            assert time.monotonic() < deadline, f"traffic stalled: {self.failed[-3:]}"
            time.sleep(0.05)


def test_the_dev_overlay_runs_as_written_and_survives_losing_a_replica_of_each_service(cluster: Cluster) -> None:
    admin = set_up(cluster)
    for deployment in DEPLOYMENTS:
        replicas = cluster.run_deployment(deployment)
        assert len(replicas) >= 2, f"{deployment}: the manifest asks for {len(replicas)} replicas"

    s3 = s3_client(cluster, admin)
    s3.create_bucket(Bucket=REPOSITORY)
    s3.put_object(Bucket=REPOSITORY, Key="main/hello.txt", Body=b"hello from k8s")

    # CLI traffic in the GC CronJob's container (its env, config and credentials), other args.
    cli = lambda *args: cluster.run_to_completion("CronJob", "silt-gc", list(args))  # noqa: E731
    cli("gc", "rules", "set", REPOSITORY, "--default-days", "7")
    assert "default retention: 7 days" in cli("gc", "rules", "show", REPOSITORY)
    cli("commit", f"silt://{REPOSITORY}/main", "-m", "first commit through the manifests")
    cli("branch", "create", f"silt://{REPOSITORY}/feature", "--source", "main")
    assert s3.get_object(Bucket=REPOSITORY, Key="feature/hello.txt")["Body"].read() == b"hello from k8s"

    writer = Writer(s3)
    writer.start()
    try:
        writer.wait_for(20)
        for deployment in DEPLOYMENTS:
            cluster.replace(deployment, 0)  # SIGKILL one replica mid-traffic; a new pod replaces it
            writer.wait_for(20)
    finally:
        writer.stop_event.set()
        writer.join(timeout=60)

    # Every acknowledged write is there, through a fresh client and any gateway replica.
    reader = s3_client(cluster, admin)
    for key, body in writer.acked.items():
        assert reader.get_object(Bucket=REPOSITORY, Key=key)["Body"].read() == body, key
    # Clients retry a request cut by a dying replica; at most one per kill gets through failed.
    assert len(writer.failed) <= len(DEPLOYMENTS), writer.failed
    # The compactor Deployment, reached through its Service by the CLI in the CronJob's container.
    s3.delete_object(Bucket=REPOSITORY, Key="main/hello.txt")
    assert "compacted" in cli("branch", "compact", f"silt://{REPOSITORY}/main")
    assert "Compacted:  " in cli("branch", "show", f"silt://{REPOSITORY}/main")
    assert "no (reads go" not in cli("branch", "show", f"silt://{REPOSITORY}/main")
    cli("commit", f"silt://{REPOSITORY}/main", "-m", "after the kills")
    log = cli("log", f"silt://{REPOSITORY}/main")
    assert "after the kills" in log and "first commit through the manifests" in log
