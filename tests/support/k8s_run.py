"""Run rendered deploy/k8s workloads on this machine, as the manifests say.

A pod becomes a local process: the container's command and args ($(VAR) expanded; `python`
is this interpreter), its env resolved from literals, ConfigMaps and Secrets, its volumes
materialized (a ConfigMap as files, an emptyDir as a fresh directory, a projected volume as its
ServiceAccount token, ConfigMap keys and namespace) and every mount path in env values, args
and mounted files mapped to that directory. A Job's init containers run first, in order.
The API server is tests/support/kube_api.py's (Secrets and RBAC from the documents), named in
every container's KUBERNETES_SERVICE_HOST and _PORT as the kubelet does. Cassandra is the real
one of scripts/cassandra.sh, started with the script the StatefulSet runs on its
cassandra.yaml: one node, or three (tests/support/cassandra_cluster.py) with every keyspace
replicated 3 times. The only things changed, each named:

- a Service's DNS name `<svc>.<ns>.svc.cluster.local:<port>` (and `<svc>:<port>`) in mounted
  files is rewritten to a local round-robin TCP proxy standing in for that Service, or to a
  test server for the Services of third-party images (Cassandra, MinIO);
- each replica listens on its own loopback port: the config key whose listen port equals the
  container port is overridden by its SILT_* variable (none found: the manifest is wrong).

Probes are asked as the kubelet would: grpc (grpc.health.v1, service ""), httpGet, tcpSocket.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import grpc
from botocore.config import Config as BotoConfig
from grpc_health.v1 import health_pb2, health_pb2_grpc

from silt.config import Config, load_config
from silt.free_ports import free_port
from silt.lifeline import PARENT_PID_ENV
from tests.support.cassandra import CassandraServer
from tests.support.cassandra_cluster import CassandraCluster
from tests.support.k8s import NAMESPACE, expand, named, of_kind, pod_spec, render, resolve_env
from tests.support.kube_api import KubeApiServer

REPO_ROOT = Path(__file__).resolve().parents[2]
# What a new Cassandra with PasswordAuthenticator lets in, until the setup Job drops it.
BUILT_IN_SUPERUSER = ("cassandra", "cassandra")


class ServiceProxy:
    """A Service: one local port, connections spread round-robin over the ready backends.
    A backend that refuses a connection is skipped (as an endpoint whose pod died)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.port = free_port()
        self.backends: list[int] = []
        self._turn = itertools.count()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"proxy-{name}", daemon=True)
        self._server: asyncio.base_events.Server | None = None

    def start(self) -> ServiceProxy:
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(asyncio.start_server(self._serve, "127.0.0.1", self.port), self._loop)
        self._server = future.result(timeout=10)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        backends = list(self.backends)
        start = next(self._turn)
        for i in range(len(backends)):
            port = backends[(start + i) % len(backends)]
            with contextlib.suppress(OSError):
                return await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), timeout=2)
        raise OSError(f"service {self.name}: no backend answers")

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await self._connect()
        except OSError:
            writer.close()
            return

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (OSError, asyncio.IncompleteReadError):
                pass
            finally:
                with contextlib.suppress(OSError, RuntimeError):
                    dst.close()

        await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))


@dataclass
class Replica:
    workload: str
    index: int
    port: int
    command: list[str]
    env: dict[str, str]
    probes: dict[str, dict[str, Any]]
    container_ports: dict[str, int]
    log: Path
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(self.command, env=self.env, cwd=REPO_ROOT, stdout=out, stderr=out)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Send sig; as the kubelet, SIGKILL whatever is still running after a 30 s grace."""
        self.signal(sig)
        self.reap()

    def signal(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)

    def reap(self, grace: float = 30.0) -> None:
        """Wait for the process to exit; SIGKILL it if it is still running after the grace."""
        if self.proc is not None:
            try:
                self.proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _port(self, value: int | str) -> int:
        declared = self.container_ports[value] if isinstance(value, str) else value
        assert declared in self.container_ports.values(), f"{self.workload}: probe port {value} is not a container port"
        return self.port  # the replica's one port stands for its container port

    def probe(self, kind: str) -> bool:
        spec = self.probes.get(kind)
        if spec is None or not self.alive():
            return spec is None and self.alive()
        try:
            if "grpc" in spec:
                port = self._port(spec["grpc"]["port"])
                with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
                    request = health_pb2.HealthCheckRequest(service=spec["grpc"].get("service", ""))
                    answer = health_pb2_grpc.HealthStub(channel).Check(request, timeout=2)  # type: ignore[attr-defined]
                return answer.status == health_pb2.HealthCheckResponse.SERVING
            if "httpGet" in spec:
                port = self._port(spec["httpGet"]["port"])
                url = f"http://127.0.0.1:{port}{spec['httpGet'].get('path', '/')}"
                with urllib.request.urlopen(url, timeout=2) as response:
                    return 200 <= response.status < 400
            if "tcpSocket" in spec:
                with socket.create_connection(("127.0.0.1", self._port(spec["tcpSocket"]["port"])), timeout=2):
                    return True
        except (grpc.RpcError, OSError):
            return False
        raise AssertionError(f"{self.workload}: unsupported probe {spec}")

    def startup_budget(self) -> float:
        """How long the kubelet lets the container start before it kills it: its startupProbe's
        initial delay plus failureThreshold periods (Kubernetes' defaults: 0, 3 and 10 s)."""
        spec = self.probes.get("startupProbe")
        if spec is None:
            return 0.0
        delay, periods = spec.get("initialDelaySeconds", 0), spec.get("failureThreshold", 3)
        return float(delay + periods * spec.get("periodSeconds", 10))

    def wait_ready(self, timeout: float | None = None) -> None:
        """Until every probe passes; by default within the startup budget the manifest gives it
        (a loaded machine imports slowly), and at least a minute."""
        deadline = time.monotonic() + (timeout if timeout is not None else max(60.0, self.startup_budget()))
        for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
            while not self.probe(kind):
                assert self.alive(), f"{self.workload}-{self.index} exited: {self.log.read_text()[-2000:]}"
                assert time.monotonic() < deadline, f"{self.workload}-{self.index}: {kind} never passed"
                time.sleep(0.2)


# The config keys a Silt container may listen on, by the SILT_* variable that overrides them.
LISTEN_KEYS = {
    "SILT_AUTH_LISTEN_ADDRESS": lambda c: c.auth.listen_address,
    "SILT_GRAVELER_LISTEN_ADDRESS": lambda c: c.graveler.listen_address,
    "SILT_GATEWAYS_S3_LISTEN_ADDRESS": lambda c: c.gateways.s3.listen_address,
    "SILT_COMPACTOR_LISTEN_ADDRESS": lambda c: c.compactor.listen_address,
}


@dataclass
class Cluster:
    """The rendered documents, run here. substitutes: Service name -> "host:port" of a test
    server standing in for a third-party workload (those workloads are not started)."""

    docs: list[dict[str, Any]]
    workdir: Path
    substitutes: dict[str, str]
    env_overrides: dict[str, str] = field(default_factory=dict)
    secrets: dict[str, dict[str, str]] = field(default_factory=dict)
    proxies: dict[str, ServiceProxy] = field(default_factory=dict)
    replicas: dict[str, list[Replica]] = field(default_factory=dict)
    # Each run Job's (or CronJob's) pod log: the stdout and stderr of all its containers.
    logs: dict[str, str] = field(default_factory=dict)
    cassandra: CassandraServer | None = None
    cassandra_cluster: CassandraCluster | None = None

    def __post_init__(self) -> None:
        for service in of_kind(self.docs, "Service"):
            name = service["metadata"]["name"]
            if name not in self.substitutes:
                self.proxies[name] = ServiceProxy(name).start()
        self.kube_api = KubeApiServer(self.docs, self.secrets, self.workdir).start()

    def service_address(self, name: str) -> str:
        if name in self.substitutes:
            return self.substitutes[name]
        return f"127.0.0.1:{self.proxies[name].port}"

    def _rewrite_service_names(self, text: str) -> str:
        for service in of_kind(self.docs, "Service"):
            name = service["metadata"]["name"]
            local = self.service_address(name)
            for port in service["spec"]["ports"]:
                for dns in (f"{name}.{NAMESPACE}.svc.cluster.local", f"{name}.{NAMESPACE}.svc", name):
                    text = re.sub(rf"(?<![\w.-]){re.escape(dns)}:{port['port']}(?![\d])", local, text)
        return text

    def _config_map(self, name: str) -> dict[str, str]:
        # Kubernetes publishes the cluster's CA in every namespace under this name.
        if name == "kube-root-ca.crt":
            return {"ca.crt": self.kube_api.ca_pem}
        return {k: str(v) for k, v in named(self.docs, "ConfigMap", name)["data"].items()}

    def _projected(self, sources: list[dict[str, Any]], spec: dict[str, Any], local: Path) -> None:
        for source in sources:
            if "serviceAccountToken" in source:
                account = spec.get("serviceAccountName", "default")
                (local / source["serviceAccountToken"]["path"]).write_text(self.kube_api.token_for(account))
            elif "configMap" in source:
                data = self._config_map(source["configMap"]["name"])
                for item in source["configMap"].get("items") or [{"key": k, "path": k} for k in data]:
                    (local / item["path"]).write_text(data[item["key"]])
            elif "downwardAPI" in source:
                for item in source["downwardAPI"]["items"]:
                    assert item["fieldRef"]["fieldPath"] == "metadata.namespace", f"unsupported {item}"
                    (local / item["path"]).write_text(NAMESPACE)
            else:
                raise AssertionError(f"unsupported projected source {source}")

    def _volumes(self, spec: dict[str, Any], container: dict[str, Any], where: Path) -> dict[str, Path]:
        """mountPath -> local directory holding the volume."""
        sources = {v["name"]: v for v in spec.get("volumes", [])}
        mounts: dict[str, Path] = {}
        for mount in container.get("volumeMounts", []):
            volume = sources[mount["name"]]
            local = where / mount["name"]
            local.mkdir(parents=True, exist_ok=True)
            mounts[mount["mountPath"]] = local
            if "configMap" in volume:
                for key, value in self._config_map(volume["configMap"]["name"]).items():
                    (local / key).write_text(self._rewrite_service_names(value))
            elif "projected" in volume:
                self._projected(volume["projected"]["sources"], spec, local)
            else:
                assert "emptyDir" in volume, f"unsupported volume {volume}"
        # Paths inside mounted files (e.g. a cache directory on an emptyDir) follow the mounts.
        for local in mounts.values():
            for file in local.iterdir():
                if file.is_file():
                    file.write_text(_map_paths(file.read_text(), mounts))
        return mounts

    def pod(self, workload: dict[str, Any], index: int, container: dict[str, Any] | None = None) -> Replica:
        """A replica of the workload's one container (or of the container given: an init container)."""
        spec = pod_spec(workload)
        if container is None:
            (container,) = spec["containers"]
        name = workload["metadata"]["name"]
        where = self.workdir / f"{name}-{index}"
        mounts = self._volumes(spec, container, where)
        declared = resolve_env(self.docs, container, self.secrets)
        env = {k: _map_paths(v, mounts) for k, v in declared.items()}
        command = [
            _map_paths(expand(part, declared), mounts)
            for part in container.get("command", []) + container.get("args", [])
        ]
        assert command, f"{name}: the image has no default command worth running"
        if command[0] == "python":
            command[0] = sys.executable
        elif command[0] == "silt":
            command[:1] = [sys.executable, "-m", "cli.main"]
        ports = {p.get("name", str(p["containerPort"])): p["containerPort"] for p in container.get("ports", [])}
        port = free_port()
        base = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(where),
            "PYTHONPATH": str(REPO_ROOT),
            "PYTHONUNBUFFERED": "1",
            PARENT_PID_ENV: str(os.getpid()),
            # The kubelet names the API server (Service kubernetes.default) in every container.
            "KUBERNETES_SERVICE_HOST": self.kube_api.host,
            "KUBERNETES_SERVICE_PORT": str(self.kube_api.port),
        }
        env = {**base, **env, **self.env_overrides}
        if ports:
            env[self._listen_variable(env, list(ports.values()))] = f"127.0.0.1:{port}"
        probes = {k: container[k] for k in ("startupProbe", "readinessProbe", "livenessProbe") if k in container}
        return Replica(name, index, port, command, env, probes, ports, where / "log.txt")

    def _listen_variable(self, env: dict[str, str], container_ports: list[int]) -> str:
        config: Config = load_config(env=env)
        for variable, key in LISTEN_KEYS.items():
            if int(key(config).rpartition(":")[2]) in container_ports:
                return variable
        raise AssertionError(f"no listen address in the configuration serves container ports {container_ports}")

    def run_deployment(self, name: str) -> list[Replica]:
        deployment = named(self.docs, "Deployment", name)
        replicas = [self.pod(deployment, i) for i in range(deployment["spec"]["replicas"])]
        self.replicas[name] = replicas
        for replica in replicas:
            replica.start()
        for replica in replicas:
            replica.wait_ready()
        self._publish(name)
        return replicas

    def _publish(self, deployment: str) -> None:
        """Point the Services selecting this Deployment's pods at its ready replicas."""
        labels = named(self.docs, "Deployment", deployment)["spec"]["template"]["metadata"]["labels"]
        for service in of_kind(self.docs, "Service"):
            if service["spec"]["selector"].items() <= labels.items() and service["metadata"]["name"] in self.proxies:
                self.proxies[service["metadata"]["name"]].backends = [r.port for r in self.replicas[deployment]]

    def replace(self, deployment: str, index: int) -> Replica:
        """The ReplicaSet's answer to a dead pod: a new one, ready before it gets traffic."""
        old = self.replicas[deployment][index]
        old.kill()
        self.proxies_without(old.port)
        new = self.pod(named(self.docs, "Deployment", deployment), index + 100)
        new.start()
        new.wait_ready()
        self.replicas[deployment][index] = new
        self._publish(deployment)
        return new

    def proxies_without(self, port: int) -> None:
        for proxy in self.proxies.values():
            proxy.backends = [p for p in proxy.backends if p != port]

    def run_to_completion(
        self,
        kind: str,
        name: str,
        args: list[str] | None = None,
        timeout: float = 120,
        env: dict[str, str] | None = None,
    ) -> str:
        """A Job's (or CronJob's) pod: its init containers, then its container, optionally with
        other args and env; the container's stdout. The pod's whole log is in self.logs[name]."""
        workload = named(self.docs, kind, name)
        spec = pod_spec(workload)
        log: list[str] = []
        stdout = ""
        for container in [*spec.get("initContainers", []), *spec["containers"]]:
            replica = self.pod(workload, 0, container)
            if args is not None and container is spec["containers"][-1]:
                replica.command = replica.command[: -len(container["args"])] + args
            done = subprocess.run(
                replica.command,
                env={**replica.env, **(env or {})},
                cwd=REPO_ROOT,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
            log += [done.stdout, done.stderr]
            self.logs[name] = "".join(log)
            assert done.returncode == 0, f"{kind} {name} {container['name']} {args}: {done.stderr[-3000:]}"
            stdout = done.stdout
        return stdout

    def stop(self) -> None:
        # Every pod told at once, as when a namespace is deleted: each drains in its own time,
        # and the slowest alone bounds the wait (one after another, their drains added up).
        running = [replica for replicas in self.replicas.values() for replica in replicas]
        for replica in running:
            replica.signal(signal.SIGTERM)
        for replica in running:
            replica.reap()
        for proxy in self.proxies.values():
            proxy.stop()
        self.kube_api.stop()


def _map_paths(text: str, mounts: dict[str, Path]) -> str:
    """Mount paths -> local directories, in one pass (a local directory may start with /tmp)."""
    if not mounts:
        return text
    alternatives = "|".join(re.escape(m) for m in sorted(mounts, key=len, reverse=True))
    pattern = re.compile(rf"(?<![\w/])({alternatives})(?=/|$|\s|\"|')", re.MULTILINE)
    return pattern.sub(lambda match: str(mounts[match.group(1)]), text)


def cassandra_configure_script(docs: list[dict[str, Any]], workdir: Path) -> Path:
    """The script the Cassandra StatefulSet runs on its cassandra.yaml before the image's
    entrypoint (`bash SCRIPT .../cassandra.yaml && exec docker-entrypoint.sh ...`), copied out of
    the ConfigMap mounted there."""
    (container,) = pod_spec(named(docs, "StatefulSet", "cassandra"))["containers"]
    assert container["command"] == ["bash", "-c"], container["command"]
    words = shlex.split(container["args"][0])
    assert words[0] == "bash" and words[2].endswith("/cassandra.yaml"), words
    assert words[3:6] == ["&&", "exec", "docker-entrypoint.sh"], words
    script = words[1]
    volumes = {v["name"]: v for v in pod_spec(named(docs, "StatefulSet", "cassandra")).get("volumes", [])}
    for mount in container["volumeMounts"]:
        prefix = mount["mountPath"].rstrip("/") + "/"
        if script.startswith(prefix):
            config_map = named(docs, "ConfigMap", volumes[mount["name"]]["configMap"]["name"])
            local = workdir / "cassandra-configure.sh"
            local.write_text(config_map["data"][script[len(prefix) :]])
            return local
    raise AssertionError(f"{script} is not in a mounted ConfigMap")


@contextlib.contextmanager
def dev_cluster(moto_server: str, tmp_path: Path, cassandra_nodes: int = 1) -> Iterator[Cluster]:
    """The dev overlay's documents, ready to run on a Cassandra of their own and moto_server.

    The Cassandra is new (the setup Job meets the built-in superuser and creates everything) and
    runs the StatefulSet's configuration: authentication and authorization on. cassandra_nodes
    3: a cluster of three, on which the setup Job replicates every keyspace (system_auth too)
    3 times, as in production, and the services read and write at the overlay's LOCAL_QUORUM /
    LOCAL_SERIAL (with one datacenter, 2 of 3 replicas, as QUORUM / SERIAL)."""
    assert cassandra_nodes in (1, 3), cassandra_nodes
    moto_host = moto_server.removeprefix("http://")
    boto3.client(
        "s3", endpoint_url=moto_server, aws_access_key_id="x", aws_secret_access_key="x", region_name="us-east-1"
    ).create_bucket(Bucket="silt-data")
    docs = render("dev")
    configure = cassandra_configure_script(docs, tmp_path)
    cassandra: CassandraServer | CassandraCluster
    # The test Cassandra stands in for the StatefulSet, on its own port(s).
    overrides: dict[str, str] = {}
    if cassandra_nodes == 1:
        cassandra = CassandraServer.start(configure=configure, credentials=BUILT_IN_SUPERUSER, heap="512M")
        hosts, port, protocol = [cassandra.host], cassandra.port, cassandra.protocol_version
    else:
        cassandra = CassandraCluster.start(configure=configure, credentials=BUILT_IN_SUPERUSER)
        hosts, port, protocol = cassandra.addresses, cassandra.port, 3  # 2.1: see tests/support/cassandra.py
        # The overlay's 1 is for its one-node StatefulSet; the setup Job creates the keyspaces and
        # alters system_auth with it.
        overrides["SILT_DATABASE_CASSANDRA_REPLICATION_FACTOR"] = "3"
    overrides["SILT_DATABASE_CASSANDRA_CONTACT_POINTS"] = ",".join(hosts)
    overrides["SILT_DATABASE_CASSANDRA_PORT"] = str(port)
    if protocol:
        overrides["SILT_DATABASE_CASSANDRA_PROTOCOL_VERSION"] = str(protocol)
    try:
        running = Cluster(
            docs,
            tmp_path,
            substitutes={"cassandra": f"{hosts[0]}:{port}", "minio": moto_host},
            env_overrides=overrides,
        )
        if isinstance(cassandra, CassandraServer):
            running.cassandra = cassandra
        else:
            running.cassandra_cluster = cassandra
        try:
            yield running
        finally:
            running.stop()
    finally:
        cassandra.stop()


def cassandra_superuser(cluster: Cluster) -> tuple[str, str]:
    """The superuser the setup Job's roles step logs in as (Secret silt-cassandra-superuser)."""
    (roles,) = pod_spec(named(cluster.docs, "Job", "silt-auth-setup"))["initContainers"]
    env = resolve_env(cluster.docs, roles, cluster.secrets)
    return env["SILT_DATABASE_CASSANDRA_USERNAME"], env["SILT_DATABASE_CASSANDRA_PASSWORD"]


def set_up(cluster: Cluster) -> dict[str, Any]:
    """The auth-setup Job, as Kubernetes runs it; the admin's key, from the Secret it wrote."""
    cluster.run_to_completion("Job", "silt-auth-setup")
    admin = cluster.secrets["silt-admin-credentials"]
    return {"access_key_id": admin["access-key-id"], "secret_access_key": admin["secret-access-key"]}


def s3_client(cluster: Cluster, admin: dict[str, Any], endpoint: str | None = None, attempts: int = 6) -> Any:
    """boto3 on the gateway Service (or one replica's endpoint), signed with admin's key."""
    return boto3.client(
        "s3",
        endpoint_url=f"http://{endpoint or cluster.service_address('gateway')}",
        aws_access_key_id=admin["access_key_id"],
        aws_secret_access_key=admin["secret_access_key"],
        region_name="us-east-1",
        config=BotoConfig(
            s3={"addressing_style": "path"},
            retries={"mode": "standard", "max_attempts": attempts},
            connect_timeout=5,
            read_timeout=30,
        ),
    )
