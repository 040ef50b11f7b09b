"""Several replicas, one truth: the dev overlay's 2 auth, 2 graveler and 2 gateway processes
(run as the manifests say, tests/support/k8s_run.py) on Cassandra as the manifests configure
it (authentication on, a login per service), in two variants of the module's stack:

* node: one Cassandra node, the overlay's replication factor 1;
* cluster (mark cassandra_cluster): three nodes of tests/support/cassandra_cluster.py, each
  also configured by the StatefulSet's script, started for this module (the session's cluster
  runs without authentication, and the setup Job must meet a fresh cluster's built-in
  superuser). The setup Job replicates every keyspace, system_auth too, 3 times, and the
  services read and write at the overlay's LOCAL_QUORUM / LOCAL_SERIAL: with one datacenter,
  2 of 3 replicas, as in production.

`make test` runs the cluster's case at every commit, and the node's in its rotating slice of the
nightly tests (tests/support/rotation.py keeps the node's tests in one slice, so that its stack
starts once); `make test-all` runs both. Both check first that the keyspaces have the
replication factor meant, then:

* the concurrency torture test of tests/integration/graveler/test_concurrency.py across
  processes: 8 writers spread over both gateways (S3 PUT/DELETE), 2 committers, one per
  graveler, 3 rounds each (the nightly variant: SILT_REPLICAS_ROUNDS, 120 in `make test-all`
  and 40 in `make test`'s rotating slice, tests/support/rotation.py): no lost or resurrected
  writes, every commit holds every write acknowledged before it started. The short case runs
  every path the long one does (the two committers, in two processes, race for the branch
  head while writes land through both gateways, and every commit is checked through the other
  graveler): the committers start together and commit back to back, each commit taking seconds
  under the writers, so each of a committer's commits overlaps one of the other's and the race
  for the head is run in every round; the long one gives a rare interleaving more chances to
  show;
* read-your-writes across replicas: what one graveler (or gateway) did, the other sees on
  the next call;
* a credential deleted through one auth replica stops working through every gateway and
  graveler within REVOCATION_BOUND_SECONDS (docs/operations.md, "Scaling").
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from botocore.exceptions import ClientError
from pydantic import SecretStr

from silt.auth.v1 import auth_pb2, auth_pb2_grpc
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import graveler_pb2_grpc as api_grpc
from silt.rpc.signing import Credentials, signed_channel
from tests.support.k8s_run import Cluster, cassandra_superuser, dev_cluster, s3_client, set_up

WRITERS = 8
COMMITTERS = 2
# Commits each committer makes: `make test` runs the short case, `make test-all` both. The
# committers' rounds are the test's time (each commit races the other's for the branch head).
NIGHTLY_ROUNDS = int(os.environ.get("SILT_REPLICAS_ROUNDS", "120"))
ROUNDS = [pytest.param(3, id="3-rounds"), pytest.param(NIGHTLY_ROUNDS, id="many-rounds", marks=pytest.mark.nightly)]
KEYS_PER_WRITER = 4
# auth.cache_ttl_seconds (dev overlay: the default, 5 s) bounds two caches in a row: the
# gateway's (or graveler's) cache of key owners, then auth's own. Plus one polling step.
CACHE_TTL_SECONDS = 5.0
REVOCATION_BOUND_SECONDS = 2 * CACHE_TTL_SECONDS + 1.0
# What the setup Job creates (graveler's, auth's, the gateway's) and the logins' keyspace.
KEYSPACES = ("silt", "silt_auth", "silt_gateway", "system_auth")

pytestmark = pytest.mark.cassandra


class Running:
    def __init__(self, cluster: Cluster, admin: dict[str, Any]) -> None:
        self.cluster = cluster
        self.admin = admin
        self.credentials = Credentials(admin["access_key_id"], SecretStr(admin["secret_access_key"]))
        self.channels: list[grpc.Channel] = []

    def replica_ports(self, deployment: str) -> list[int]:
        return [r.port for r in self.cluster.replicas[deployment]]

    def gateway(self, i: int, credentials: dict[str, Any] | None = None) -> Any:
        port = self.replica_ports("silt-gateway")[i]
        return s3_client(self.cluster, credentials or self.admin, endpoint=f"127.0.0.1:{port}", attempts=1)

    def graveler(self, i: int, credentials: Credentials | None = None) -> api_grpc.GravelerServiceStub:
        channel = signed_channel(f"127.0.0.1:{self.replica_ports('silt-graveler')[i]}", credentials or self.credentials)
        self.channels.append(channel)
        return api_grpc.GravelerServiceStub(channel)

    def auth(self, i: int) -> auth_pb2_grpc.AuthServiceStub:
        channel = signed_channel(f"127.0.0.1:{self.replica_ports('silt-auth')[i]}", self.credentials)
        self.channels.append(channel)
        return auth_pb2_grpc.AuthServiceStub(channel)


@pytest.fixture(
    scope="module",
    # The node case's tests run in `make test`'s rotating slice, all in one (the module's stack
    # starts once): the cluster's run every commit, the dev overlay on one node is
    # test_k8s_deploy.py's at every commit.
    params=[
        pytest.param("node", marks=pytest.mark.nightly),
        pytest.param("cluster", marks=pytest.mark.cassandra_cluster),
    ],
)
def running(
    request: pytest.FixtureRequest, moto_server: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Running]:
    nodes = 3 if request.param == "cluster" else 1
    with dev_cluster(moto_server, Path(tmp_path_factory.mktemp("replicas")), cassandra_nodes=nodes) as cluster:
        admin = set_up(cluster)
        assert replication_factors(cluster) == dict.fromkeys(KEYSPACES, nodes)
        for deployment in ("silt-auth", "silt-graveler", "silt-gateway"):
            assert len(cluster.run_deployment(deployment)) == 2
        state = Running(cluster, admin)
        try:
            yield state
        finally:
            for channel in state.channels:
                channel.close()


def replication_factors(cluster: Cluster) -> dict[str, int]:
    """Each of KEYSPACES -> its replication factor, as Cassandra reports it to the superuser."""
    from cassandra.auth import PlainTextAuthProvider
    from cassandra.cluster import Cluster as CqlCluster

    cql = CqlCluster(
        cluster.env_overrides["SILT_DATABASE_CASSANDRA_CONTACT_POINTS"].split(","),
        port=int(cluster.env_overrides["SILT_DATABASE_CASSANDRA_PORT"]),
        protocol_version=3,
        auth_provider=PlainTextAuthProvider(*cassandra_superuser(cluster)),
        connect_timeout=10,
    )
    try:
        cql.connect()
        found = {}
        for name in KEYSPACES:
            strategy = cql.metadata.keyspaces[name].replication_strategy
            found[name] = int(getattr(strategy, "replication_factor", 0) or 0)
        return found
    finally:
        cql.shutdown()


# --- the torture test ------------------------------------------------------------------


def body(key: str, op: int) -> bytes:
    return f"{key}#{op}".encode()


def is_delete(op: int) -> bool:
    return op % 4 == 3


class Histories:
    def __init__(self) -> None:
        self.keys = [f"w{w}/k{k}" for w in range(WRITERS) for k in range(KEYS_PER_WRITER)]
        self.acked: dict[str, list[tuple[int, float]]] = {key: [] for key in self.keys}
        # etag (hex MD5 of the body) -> op, per key
        self.ops: dict[str, dict[str, int]] = {key: {} for key in self.keys}

    def last_acked_before(self, key: str, moment: float) -> int | None:
        found = None
        for op, at in self.acked[key]:
            if at < moment:
                found = op
        return found


def snapshot(stub: api_grpc.GravelerServiceStub, repo: str, ref: str, histories: Histories) -> dict[str, int]:
    out: dict[str, int] = {}
    after = ""
    while True:
        page = stub.ListEntries(api.ListEntriesRequest(repository=repo, ref=ref, after=after, amount=1000))
        for item in page.items:
            out[item.key] = histories.ops[item.key][item.entry.etag.strip('"')]
        if not page.has_more:
            return out
        after = page.items[-1].key


def check_holds(state: dict[str, int], histories: Histories, moment: float, what: str) -> None:
    for key in histories.keys:
        required = histories.last_acked_before(key, moment)
        if required is None:
            continue
        if key in state:
            got = state[key]
            assert got >= required and not is_delete(got), f"{what}: {key} holds op {got}, needs op >= {required}"
        else:
            latest = histories.acked[key][-1][0]
            assert any(is_delete(op) for op in range(required, latest + 1)), (
                f"{what}: {key} missing, but op {required} (a put) was acknowledged before"
            )


@pytest.mark.parametrize("rounds", ROUNDS)
def test_writers_over_two_gateways_and_committers_over_two_gravelers_lose_nothing(
    running: Running, rounds: int
) -> None:
    repo = f"torture-{rounds}"
    s3 = [running.gateway(0), running.gateway(1)]
    s3[0].create_bucket(Bucket=repo)
    histories = Histories()
    for key in histories.keys:  # seed: deletes of never-written keys would be NotFound
        s3[0].put_object(Bucket=repo, Key=f"main/{key}", Body=body(key, -1))
        histories.ops[key][hashlib.md5(body(key, -1)).hexdigest()] = -1
    gravelers = [running.graveler(0), running.graveler(1)]
    gravelers[0].Commit(api.CommitRequest(repository=repo, branch="main", message="seed"))

    commits: list[tuple[float, str]] = []
    stop = threading.Event()
    errors: list[BaseException] = []
    lock = threading.Lock()
    writing = threading.Event()  # some write was acknowledged: committers have something to race

    def writer(w: int) -> None:
        client = running.gateway(w % 2)  # writers alternate between the two gateways
        op = 0
        try:
            while not stop.is_set():
                for k in range(KEYS_PER_WRITER):
                    key = f"w{w}/k{k}"
                    if is_delete(op):
                        client.delete_object(Bucket=repo, Key=f"main/{key}")
                    else:
                        histories.ops[key][hashlib.md5(body(key, op)).hexdigest()] = op
                        client.put_object(Bucket=repo, Key=f"main/{key}", Body=body(key, op))
                    histories.acked[key].append((op, time.monotonic()))
                    writing.set()
                op += 1
        except BaseException as exc:
            errors.append(exc)
            stop.set()

    def committer(c: int) -> None:
        try:
            for r in range(rounds):
                if stop.is_set():
                    return
                started = time.monotonic()
                result = gravelers[c].Commit(
                    api.CommitRequest(repository=repo, branch="main", message=f"c{c}-r{r}", allow_empty=True),
                    timeout=60,
                )
                with lock:
                    commits.append((started, result.id))
        except BaseException as exc:
            errors.append(exc)
            stop.set()

    writers = [threading.Thread(target=writer, args=(w,)) for w in range(WRITERS)]
    committers = [threading.Thread(target=committer, args=(c,)) for c in range(COMMITTERS)]
    began = time.monotonic()
    for t in writers:
        t.start()
    assert writing.wait(60) or errors, "no write was acknowledged"
    for t in committers:
        t.start()
    for t in committers:
        t.join(600)
    committed = time.monotonic()
    stop.set()
    for t in writers:
        t.join(120)
    took = time.monotonic() - began
    # The figures behind docs/operations.md's capacity model (run with -s to see them).
    writes = sum(len(a) for a in histories.acked.values())
    print(
        f"\n{writes} S3 writes over 2 gateways and {len(commits)} commits on one branch in {took:.1f} s: "
        f"{writes / took:.1f} writes/s, {len(commits) / took:.2f} commits/s"
    )
    assert not errors, errors[:3]
    assert len(commits) == COMMITTERS * rounds
    # The writes raced the commits: every writer had writes acknowledged between the first
    # commit's start and the last one's end. (A count of writes, "more than three passes", once
    # failed at exactly three on a cluster whose writes ran slow that minute: it measured speed.)
    first_commit, last_commit = min(at for at, _ in commits), committed
    racing = {
        key.split("/")[0]
        for key, acks in histories.acked.items()
        if any(first_commit <= at <= last_commit for _, at in acks)
    }
    assert len(racing) == WRITERS, f"only writers {sorted(racing)} wrote while the commits ran"

    # Each commit is checked through the graveler that did not make it.
    for i, (started, commit_id) in enumerate(commits):
        check_holds(snapshot(gravelers[i % 2], repo, commit_id, histories), histories, started, f"commit {commit_id}")

    for stub in gravelers:  # both replicas show the same branch: each key's last op, nothing back
        final = snapshot(stub, repo, "main", histories)
        for key in histories.keys:
            last = histories.acked[key][-1][0]
            if is_delete(last):
                assert key not in final, f"{key} was deleted (op {last}) but is back as op {final.get(key)}"
            else:
                assert final.get(key) == last, f"{key}: last acknowledged op {last}, branch shows {final.get(key)}"

    history: set[str] = set()
    after = ""
    while True:
        page = gravelers[1].Log(api.LogRequest(repository=repo, ref="main", after=after, amount=1000))
        history.update(c.id for c in page.commits)
        if not page.has_more:
            break
        after = page.next_after
    assert not [cid for _, cid in commits if cid not in history], "acknowledged commits missing from main's history"


# --- read-your-writes across replicas --------------------------------------------------


def test_what_one_graveler_did_the_other_sees_on_the_next_call(running: Running) -> None:
    a, b = running.graveler(0), running.graveler(1)
    s3a, s3b = running.gateway(0), running.gateway(1)
    repo = "ryw"
    s3a.create_bucket(Bucket=repo)
    assert repo in [bucket["Name"] for bucket in s3b.list_buckets()["Buckets"]]
    # Warm B's caches on main and on the branch-to-be.
    head = b.GetBranch(api.GetBranchRequest(repository=repo, name="main")).commit_id
    with pytest.raises(grpc.RpcError) as missing:
        b.GetBranch(api.GetBranchRequest(repository=repo, name="feature"))
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND

    a.CreateBranch(api.CreateBranchRequest(repository=repo, name="feature", source_ref="main"))
    assert b.GetBranch(api.GetBranchRequest(repository=repo, name="feature")).commit_id == head

    s3a.put_object(Bucket=repo, Key="feature/x.txt", Body=b"x")
    assert s3b.get_object(Bucket=repo, Key="feature/x.txt")["Body"].read() == b"x"
    commit = a.Commit(api.CommitRequest(repository=repo, branch="feature", message="through A"))
    assert b.GetBranch(api.GetBranchRequest(repository=repo, name="feature")).commit_id == commit.id
    assert b.ResolveRef(api.ResolveRefRequest(repository=repo, ref="feature")).commit_id == commit.id

    a.DeleteBranch(api.DeleteBranchRequest(repository=repo, name="feature"))
    with pytest.raises(grpc.RpcError) as gone:
        b.GetBranch(api.GetBranchRequest(repository=repo, name="feature"))
    assert gone.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(ClientError) as gone_s3:
        s3b.get_object(Bucket=repo, Key="feature/x.txt")
    assert gone_s3.value.response["Error"]["Code"] in ("NoSuchKey", "NoSuchBucket", "NoSuchBranch")


# --- revocation ------------------------------------------------------------------------


def test_a_credential_deleted_through_one_auth_replica_stops_working_everywhere_in_bound(running: Running) -> None:
    auth_a = running.auth(0)
    user = "revoked-user"
    auth_a.CreateUser(auth_pb2.CreateUserRequest(id=user))
    auth_a.AddGroupMember(auth_pb2.GroupMemberRequest(group_id="Developers", user_id=user))
    issued = auth_a.CreateCredentials(auth_pb2.CreateCredentialsRequest(user_id=user))
    key = {"access_key_id": issued.credential.access_key_id, "secret_access_key": issued.secret_access_key}
    credentials = Credentials(key["access_key_id"], SecretStr(key["secret_access_key"]))
    gateways = [running.gateway(0, key), running.gateway(1, key)]
    gravelers = [running.graveler(0, credentials), running.graveler(1, credentials)]
    for gateway in gateways:  # works, and is now cached everywhere
        gateway.list_buckets()
    for graveler in gravelers:
        graveler.ListRepositories(api.ListRepositoriesRequest())

    running.auth(1).DeleteCredentials(
        auth_pb2.DeleteCredentialsRequest(user_id=user, access_key_id=key["access_key_id"])
    )
    revoked_at = time.monotonic()
    refused: dict[str, float] = {}
    while len(refused) < len(gateways) + len(gravelers):
        elapsed = time.monotonic() - revoked_at
        assert elapsed < REVOCATION_BOUND_SECONDS, f"still accepted after {elapsed:.1f} s; refused so far: {refused}"
        for i, gateway in enumerate(gateways):
            try:
                gateway.list_buckets()
            except ClientError as exc:
                assert exc.response["Error"]["Code"] in ("InvalidAccessKeyId", "AccessDenied", "SignatureDoesNotMatch")
                refused.setdefault(f"gateway-{i}", elapsed)
        for i, graveler in enumerate(gravelers):
            try:
                graveler.ListRepositories(api.ListRepositoriesRequest())
            except grpc.RpcError as exc:
                assert exc.code() in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED)
                refused.setdefault(f"graveler-{i}", elapsed)
        time.sleep(0.25)
    print(f"revocation took effect after: {refused}")
