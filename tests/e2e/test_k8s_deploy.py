"""deploy/k8s (the dev overlay) run here as the manifests say, on a Cassandra configured as
the StatefulSet configures its own (password authentication and authorization on).

The auth-setup Job (its init container creating Cassandra's logins, then auth setup writing the
keys into Secrets through a stand-in API server), then auth, graveler, the compactor and the
gateway with the replica counts, commands, env, ConfigMaps and Secrets of the rendered
manifests (tests/support/k8s_run.py says what is substituted: Service names -> local
round-robin proxies, Cassandra and MinIO -> test servers). Checks that Cassandra refuses
anonymous and built-in logins and confines each service's login to its keyspace (auth's IAM
records in a keyspace of their own, which graveler's and the compactor's logins can neither read
nor write; a grant beyond that, as an older layout left it, revoked when the Job runs again),
that no secret reaches the Job's log and that the keys land in the Secrets the manifest names. Waits
for every declared probe, asks the REST API on each gateway pod's port who the admin is (HTTP
Basic), drives S3 (boto3) and CLI traffic (the GC CronJob's container, with
CLI args), and kills one replica of each service mid-traffic: every acknowledged write must
survive. A wrong endpoint, env name or config key fails here.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from cassandra import Unauthorized
from cassandra.auth import PlainTextAuthProvider
from cassandra.cluster import Cluster as CqlCluster
from cassandra.cluster import NoHostAvailable

from tests.support.k8s import named, pod_spec, resolve_env, silt_config_text
from tests.support.k8s_run import BUILT_IN_SUPERUSER, Cluster, Replica, dev_cluster, s3_client, set_up
from tests.support.k8s_run import cassandra_superuser as superuser

# The services in the order a cluster brings them up (each needs the ones before it).
DEPLOYMENTS = ("silt-auth", "silt-graveler", "silt-compactor", "silt-gateway")
REPOSITORY = "example"  # the GC CronJob's repository (ConfigMap silt-gc)
# The Secrets the setup Job's --secret arguments name, by who gets the key.
KEY_SECRETS = {name: f"silt-{name}-credentials" for name in ("admin", "graveler", "compactor", "gateway", "api", "gc")}
# Each KV client's keyspace: auth's alone, graveler's shared with the compactor (which runs
# graveler's core on graveler's branches), the gateway's alone.
KEYSPACES = {
    "silt-auth": "silt_auth",
    "silt-graveler": "silt",
    "silt-compactor": "silt",
    "silt-gateway": "silt_gateway",
}
# Keyspaces a login may read and not write: the gateway answers HEAD, GET and LIST from graveler's.
READS = {"silt-gateway": "silt"}
AUTH_PARTITION = "0x" + b"auth".hex()  # services/auth/keys.py PARTITION: users, groups, policies, keys

pytestmark = pytest.mark.cassandra


@pytest.fixture
def cluster(moto_server: str, tmp_path: Path) -> Iterator[Cluster]:
    with dev_cluster(moto_server, tmp_path) as running:
        yield running


def cql(cluster: Cluster, login: tuple[str, str] | None) -> CqlCluster:
    assert cluster.cassandra is not None
    return CqlCluster(
        [cluster.cassandra.host],
        port=cluster.cassandra.port,
        protocol_version=3,
        auth_provider=PlainTextAuthProvider(*login) if login else None,
        connect_timeout=5,
    )


def refused(cluster: Cluster, login: tuple[str, str] | None) -> bool:
    session = cql(cluster, login)
    try:
        session.connect()
    except NoHostAvailable as exc:
        return "authenticat" in str(exc).lower() or "credentials" in str(exc).lower()
    finally:
        session.shutdown()
    return False


def cassandra_login(cluster: Cluster, deployment: str) -> tuple[tuple[str, str], str]:
    """The login a Deployment's pods use and the keyspace they open, from their resolved
    environment (the keyspace: its variable, else the ConfigMap's silt.yaml)."""
    (container,) = pod_spec(named(cluster.docs, "Deployment", deployment))["containers"]
    env = resolve_env(cluster.docs, container, cluster.secrets)
    configured = yaml.safe_load(silt_config_text(cluster.docs))["database"]["cassandra"]["keyspace"]
    keyspace = env.get("SILT_DATABASE_CASSANDRA_KEYSPACE", configured)
    return (env["SILT_DATABASE_CASSANDRA_USERNAME"], env["SILT_DATABASE_CASSANDRA_PASSWORD"]), keyspace


def check_auth_records_only_in_auths_keyspace(cluster: Cluster) -> None:
    session = cql(cluster, superuser(cluster))
    try:
        connected = session.connect()
        where = f"WHERE partition_key = {AUTH_PARTITION} LIMIT 1"
        assert list(connected.execute(f"SELECT key FROM silt_auth.kv {where}")), "auth wrote no IAM record"
        for keyspace in ("silt", "silt_gateway"):
            assert not list(connected.execute(f"SELECT key FROM {keyspace}.kv {where}")), f"IAM records in {keyspace}"
    finally:
        session.shutdown()


def check_setup_job(cluster: Cluster) -> None:
    """Keys in the Secrets the manifest names, written by the Job's ServiceAccount only; no
    secret in its log; Cassandra with no anonymous or built-in login, one login per service."""
    log = cluster.logs["silt-auth-setup"]
    for name, secret in KEY_SECRETS.items():
        key = cluster.secrets[secret]
        assert key["access-key-id"] and key["secret-access-key"], name
        assert key["secret-access-key"] not in log, f"{name}'s secret key is in the Job's log"
        assert f"Secret {secret}" in log, log
    assert cluster.secrets["silt-gc-credentials"] != cluster.secrets["silt-admin-credentials"], "GC runs as admin"
    assert cluster.secrets["silt-api-credentials"] != cluster.secrets["silt-gateway-credentials"], "one key for two"
    patched = {(r.account, r.verb, r.path.rpartition("/")[2], r.status) for r in cluster.kube_api.requests}
    assert patched == {("silt-auth-setup", "patch", secret, 200) for secret in KEY_SECRETS.values()}
    cassandra_secrets = [s for s in cluster.secrets if s.startswith("silt-cassandra-")]
    assert len(cassandra_secrets) == 5, cassandra_secrets
    for secret in cassandra_secrets:
        assert cluster.secrets[secret]["password"] not in log, f"{secret}'s password is in the Job's log"

    assert refused(cluster, None), "Cassandra accepts a connection without credentials"
    assert refused(cluster, BUILT_IN_SUPERUSER), "the built-in superuser cassandra/cassandra still logs in"


def check_logins(cluster: Cluster) -> None:
    """Each service's login does its KV work in its keyspace and nothing else: graveler's and
    the compactor's cannot read auth's keyspace nor write a user or membership into it (nor can
    the gateway's), auth's cannot touch graveler's refs, the gateway's may read graveler's keyspace
    but write nothing there; none may change schema or read logins."""
    check_auth_records_only_in_auths_keyspace(cluster)
    for deployment, keyspace in KEYSPACES.items():
        login, configured = cassandra_login(cluster, deployment)
        assert configured == keyspace, f"{deployment} opens keyspace {configured}"
        session = cql(cluster, login)
        try:
            connected = session.connect()
            connected.execute(f"SELECT key FROM {keyspace}.kv LIMIT 1")
            statements = [
                "SELECT * FROM system_auth.credentials",
                f"CREATE TABLE {keyspace}.intruder (k int PRIMARY KEY)",
            ]
            read = READS.get(deployment)
            if read is not None:
                connected.execute(f"SELECT key FROM {read}.kv LIMIT 1")
            for other in set(KEYSPACES.values()) - {keyspace}:
                if other != read:
                    statements.append(f"SELECT key FROM {other}.kv WHERE partition_key = {AUTH_PARTITION} LIMIT 1")
                statements += [
                    f"INSERT INTO {other}.kv (partition_key, key, value) VALUES ({AUTH_PARTITION}, 0x00, 0x00)",
                    f"DELETE FROM {other}.kv WHERE partition_key = {AUTH_PARTITION}",
                ]
            for statement in statements:
                with pytest.raises(Unauthorized):
                    connected.execute(statement)
                    pytest.fail(f"{deployment}'s login may: {statement}")
        finally:
            session.shutdown()


def check_rerun_revokes_other_grants(cluster: Cluster) -> None:
    """Grants beyond a login's keyspace (auth's login on graveler's keyspace, as the first
    per-service layout left it; graveler's on auth's) are revoked when the Job runs again."""
    session = cql(cluster, superuser(cluster))
    try:
        connected = session.connect()
        connected.execute("GRANT SELECT ON KEYSPACE silt TO silt_auth")
        connected.execute("GRANT MODIFY ON KEYSPACE silt_auth TO silt_graveler")
        cluster.run_to_completion("Job", "silt-auth-setup")
        log = cluster.logs["silt-auth-setup"]
        assert "silt_auth: revoked SELECT on <keyspace silt>" in log, log
        assert "silt_graveler: revoked MODIFY on <keyspace silt_auth>" in log, log
        for secret in [s for s in cluster.secrets if s.startswith("silt-cassandra-")]:
            assert cluster.secrets[secret]["password"] not in log, f"{secret}'s password is in the Job's log"
        for login, keyspace in [("silt_auth", "silt_auth"), ("silt_graveler", "silt")]:
            rows = connected.execute(f"LIST ALL PERMISSIONS OF {login} NORECURSIVE")
            assert {(row.resource, row.permission) for row in rows} == {
                (f"<keyspace {keyspace}>", "SELECT"),
                (f"<keyspace {keyspace}>", "MODIFY"),
            }, login
    finally:
        session.shutdown()


def check_rest_api(replica: Replica, admin: dict[str, Any]) -> None:
    """The REST API answers on a gateway pod's port (no AWS signature, /api/v1/...), signing its
    calls as svc-api with the key from silt-api-credentials: without it every call is a 503."""
    basic = base64.b64encode(f"{admin['access_key_id']}:{admin['secret_access_key']}".encode()).decode()
    request = urllib.request.Request(
        f"http://127.0.0.1:{replica.port}/api/v1/user", headers={"Authorization": f"Basic {basic}"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200
        assert response.headers.get_content_type() == "application/json"
        body = json.loads(response.read(64 * 1024))
    assert body["user"]["id"] == "admin", body


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
    check_setup_job(cluster)
    check_rerun_revokes_other_grants(cluster)
    check_logins(cluster)
    for deployment in DEPLOYMENTS:
        replicas = cluster.run_deployment(deployment)
        assert len(replicas) >= 2, f"{deployment}: the manifest asks for {len(replicas)} replicas"
        if deployment == "silt-gateway":
            for replica in replicas:
                check_rest_api(replica, admin)

    s3 = s3_client(cluster, admin)
    s3.create_bucket(Bucket=REPOSITORY)
    s3.put_object(Bucket=REPOSITORY, Key="main/hello.txt", Body=b"hello from k8s")

    # CLI traffic in the GC CronJob's container (its env and config), other args, the admin's key
    # (GC's own user may do only what GC needs).
    as_admin = {"SILT_ACCESS_KEY_ID": admin["access_key_id"], "SILT_SECRET_ACCESS_KEY": admin["secret_access_key"]}
    cli = lambda *args: cluster.run_to_completion("CronJob", "silt-gc", list(args), env=as_admin)  # noqa: E731
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
    shown = cli("branch", "show", f"silt://{REPOSITORY}/main")  # one pod: each costs an interpreter's start
    assert "Compacted:  " in shown and "no (reads go" not in shown, shown
    cli("commit", f"silt://{REPOSITORY}/main", "-m", "after the kills")
    log = cli("log", f"silt://{REPOSITORY}/main")
    assert "after the kills" in log and "first commit through the manifests" in log
    check_auth_records_only_in_auths_keyspace(cluster)
