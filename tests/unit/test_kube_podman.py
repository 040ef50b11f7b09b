"""devtools/kube_podman without podman: the dev overlay translated into what `podman kube play` runs
(network addresses, hostAliases, Pods, Secrets, skipped kinds), the stand-in API server the setup
Job writes its keys through (over real HTTPS), and the probes checked against real listeners."""

from __future__ import annotations

import base64
import json
import socket
import ssl
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from devtools.kube_podman.kube_api import KubeApiStandIn, patchable_secrets
from devtools.kube_podman.probes import passes
from devtools.kube_podman.run import ORDER
from devtools.kube_podman.translate import STACK_LABEL, Plan, plan, secret_payload
from silt.errors import InvalidArgument
from tests.support.k8s import render

SUBNET = "10.89.250.0/24"


def dev_plan(tmp_path: Path, max_replicas: int | None = None) -> tuple[list[dict[str, Any]], Plan]:
    docs = render("dev")
    translated = plan(
        docs, ORDER, network="n", subnet=SUBNET, stack="s", api_port=6443, credentials_dir=str(tmp_path),
        max_replicas=max_replicas, cassandra_protocol_version=3,
    )  # fmt: skip
    return docs, translated


def test_every_workload_becomes_pods_in_start_order_with_fixed_addresses(tmp_path: Path) -> None:
    _, translated = dev_plan(tmp_path)
    owners = [[pod.owner for pod in stage] for stage in translated.stages]
    assert owners[0] == ["StatefulSet/cassandra", "Deployment/minio"]
    assert owners[1] == ["Job/silt-auth-setup"]
    assert owners[2] == ["Deployment/silt-auth"] * 2  # the manifest's replicas
    pods = translated.pods()
    assert [pod.name for pod in pods][:3] == ["cassandra-0", "minio-0", "silt-auth-setup"]
    assert len({pod.ip for pod in pods}) == len(pods) and translated.gateway_ip == "10.89.250.1"
    assert all(pod.manifest["metadata"]["labels"][STACK_LABEL] == "s" for pod in pods)
    _, capped = dev_plan(tmp_path, max_replicas=1)
    assert [pod.name for pod in capped.stages[2]] == ["silt-auth-0"]


def test_a_start_order_that_misses_a_workload_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument, match="Deployment/silt-gateway"):
        plan(render("dev"), ORDER[:-1], network="n", subnet=SUBNET, stack="s", api_port=1, credentials_dir="/x")


def test_service_names_resolve_through_host_aliases_in_every_pod(tmp_path: Path) -> None:
    _, translated = dev_plan(tmp_path)
    by_name = {pod.name: pod for pod in translated.pods()}
    # A ClusterIP Service's name is its front's address, which spreads connections over the replicas.
    fronts = {pod.owner: pod for pod in translated.fronts}
    assert translated.hosts["graveler.silt.svc.cluster.local"] == fronts["Service/graveler"].ip
    assert translated.hosts["auth"] == fronts["Service/auth"].ip
    assert fronts["Service/graveler"].ip not in {pod.ip for pod in translated.pods()}
    # The headless Service names each StatefulSet pod: silt.yaml's contact point.
    assert translated.hosts["cassandra-0.cassandra.silt.svc.cluster.local"] == by_name["cassandra-0"].ip
    host_aliases = by_name["silt-gateway-1"].manifest["spec"]["hostAliases"]
    aliases = {name: alias["ip"] for alias in host_aliases for name in alias["hostnames"]}
    assert aliases == translated.hosts


def test_what_podman_cannot_run_is_rewritten(tmp_path: Path) -> None:
    _, translated = dev_plan(tmp_path)
    by_name = {pod.name: pod for pod in translated.pods()}
    job = by_name["silt-auth-setup"]
    assert job.run_to_completion and job.manifest["spec"]["restartPolicy"] == "Never"
    (kube_api,) = [v for v in job.manifest["spec"]["volumes"] if v["name"] == "kube-api"]
    assert kube_api == {"name": "kube-api", "hostPath": {"path": str(tmp_path), "type": "Directory"}}
    env = {e["name"]: e.get("value") for e in job.manifest["spec"]["containers"][0]["env"]}
    assert env["KUBERNETES_SERVICE_HOST"] == "10.89.250.1" and env["KUBERNETES_SERVICE_PORT"] == "6443"
    # Probes are the caller's to check; podman sees none.
    gateway = by_name["silt-gateway-0"]
    (container,) = gateway.manifest["spec"]["containers"]
    assert not {"startupProbe", "readinessProbe", "livenessProbe"} & set(container)
    assert gateway.probes["gateway"]["readinessProbe"]["httpGet"]["path"] == "/_silt/health/ready"
    # The StatefulSet's claim: a named volume per pod.
    cassandra = by_name["cassandra-0"]
    assert cassandra.volumes == ("data-cassandra-0",)
    assert {"name": "data", "persistentVolumeClaim": {"claimName": "data-cassandra-0"}} in cassandra.manifest["spec"][
        "volumes"
    ]
    assert "data-cassandra-0" in translated.volume_names() and "silt-config" in translated.volume_names()
    # The Cassandra stand-in (2.1) speaks protocol v3 at most.
    (config,) = [d for d in translated.config_maps if d["metadata"]["name"] == "silt-config"]
    assert yaml.safe_load(config["data"]["silt.yaml"])["database"]["cassandra"]["protocol_version"] == 3
    # The GC CronJob's Job, runnable once on demand.
    gc = translated.cron_jobs["silt-gc"]
    assert gc.run_to_completion and gc.manifest["spec"]["containers"][0]["image"] == "silt-gc:0.1.0"


def test_secrets_and_skipped_kinds(tmp_path: Path) -> None:
    docs, translated = dev_plan(tmp_path)
    assert translated.secrets["silt-blockstore"]["access-key-id"] == "silt-dev"
    assert translated.secrets["silt-admin-credentials"] == {}  # the setup Job fills it
    payload = json.loads(secret_payload({"password": "p@ss"}))
    assert payload == {"password": base64.b64encode(b"p@ss").decode()}
    skipped_kinds = {line.split("/")[0] for line in translated.skipped}
    assert {"NetworkPolicy", "PodDisruptionBudget", "HorizontalPodAutoscaler", "CronJob"} <= skipped_kinds
    declared = sum(d["kind"] in ("NetworkPolicy", "PodDisruptionBudget", "HorizontalPodAutoscaler") for d in docs)
    assert sum(line.startswith(("NetworkPolicy/", "PodDisruptionBudget/", "HorizontalPodAutoscaler/"))
               for line in translated.skipped) == declared  # fmt: skip


@pytest.fixture
def api(tmp_path: Path) -> Iterator[tuple[KubeApiStandIn, ssl.SSLContext]]:
    allowed = patchable_secrets(render("dev"), "silt-auth-setup")
    assert "silt-admin-credentials" in allowed and "silt-blockstore" not in allowed
    with KubeApiStandIn("127.0.0.1", "silt", allowed, tmp_path / "sa") as server:
        yield server, ssl.create_default_context(cafile=str(tmp_path / "sa" / "ca.crt"))


def patch(api: KubeApiStandIn, context: ssl.SSLContext, name: str, token: str, body: bytes) -> int:
    request = urllib.request.Request(
        f"https://127.0.0.1:{api.port}/api/v1/namespaces/silt/secrets/{name}", data=body, method="PATCH",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/merge-patch+json"},
    )  # fmt: skip
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_the_stand_in_api_takes_patches_of_the_roles_secrets_only(
    api: tuple[KubeApiStandIn, ssl.SSLContext], tmp_path: Path
) -> None:
    server, context = api
    token = (tmp_path / "sa" / "token").read_text()
    body = json.dumps({"data": {"access-key-id": base64.b64encode(b"AKIA").decode()}}).encode()
    assert patch(server, context, "silt-admin-credentials", token, body) == 200
    assert server.patched == {"silt-admin-credentials": {"access-key-id": "AKIA"}}
    assert patch(server, context, "silt-blockstore", token, body) == 403
    assert patch(server, context, "silt-admin-credentials", "wrong", body) == 401
    assert patch(server, context, "silt-admin-credentials", token, b"not json") == 400
    assert (tmp_path / "sa" / "namespace").read_text() == "silt" and not (tmp_path / "sa" / "api.key").exists()


def test_probes_against_real_listeners() -> None:
    class Health(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(200 if self.path == "/ready" else 503)
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    ports = [{"name": "http", "containerPort": port}]
    try:
        assert passes({"httpGet": {"path": "/ready", "port": "http"}}, "127.0.0.1", ports, lambda c, t: 1)
        assert not passes({"httpGet": {"path": "/other", "port": port}}, "127.0.0.1", ports, lambda c, t: 1)
        assert passes({"tcpSocket": {"port": port}}, "127.0.0.1", ports, lambda c, t: 1)
    finally:
        server.shutdown()
        server.server_close()
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        free = closed.getsockname()[1]
    assert not passes({"tcpSocket": {"port": free}}, "127.0.0.1", [], lambda c, t: 1)
    assert passes({"exec": {"command": ["true"]}}, "127.0.0.1", [], lambda c, t: 0 if c == ["true"] else 1)


def test_variable_references_in_args_are_expanded_as_a_kubelet_does(tmp_path: Path) -> None:
    _, translated = dev_plan(tmp_path)
    (gc,) = translated.cron_jobs["silt-gc"].manifest["spec"]["containers"]
    # args: ["gc", "run", "$(GC_REPOSITORY)", ...], GC_REPOSITORY from the ConfigMap silt-gc.
    assert gc["args"][:3] == ["gc", "run", "example"]
