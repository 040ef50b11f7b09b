"""The prod overlay keeps its workloads apart: each holds a TLS key of its own, whose
certificate names its own Service only, and NetworkPolicies admit to each pod exactly the pods
that call it (derived from the code's channels and the `*.endpoint` addresses the workloads'
configuration gives them), the world to the gateway only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from silt.config import Config, load_config
from tests.support.k8s import (
    NAMESPACE,
    blockstore_settings,
    ingress_allowed,
    named,
    of_kind,
    pod_labels,
    pod_spec,
    render,
    silt_config_text,
    workloads,
)

# The Silt services other processes dial over gRPC, by configuration section.
DIALABLE = ("auth", "graveler", "compactor")
# What each entry point dials, read from the code: the interceptors of graveler and the compactor
# ask auth (silt.rpc.interceptor.remote_interceptor); graveler's compaction sensor calls the
# compactor (services.graveler.server.compactor_trigger); the gateway and its REST API open
# channels to auth and graveler (silt.rpc.signing.service_aio_channels); `silt gc run` calls
# graveler only (jobs.gc.job). An entry point missing here fails the tests: add what it dials.
CALLS: dict[str, frozenset[str]] = {
    "services.auth.server": frozenset(),
    "services.graveler": frozenset({"auth", "compactor"}),
    "services.compactor.server": frozenset({"auth"}),
    "edge.server": frozenset({"auth", "graveler"}),
    "silt gc": frozenset({"graveler"}),
    # The setup Job talks to Cassandra and the Kubernetes API only.
    "silt.kv.cassandra_roles": frozenset(),
    "services.auth.setup_k8s": frozenset(),
    "cassandra": frozenset(),
}
# An operator's pod (CLI, backups): admitted to the gRPC services, documented in docs/security.md.
OPERATOR = {"silt.io/operator": "true"}
CASSANDRA_LOGIN = "SILT_DATABASE_CASSANDRA_USERNAME"
CQL_PORT, GOSSIP_PORT = 9042, 7000


@pytest.fixture(scope="module")
def docs() -> list[dict[str, Any]]:
    return render("prod")


def entry_point(container: dict[str, Any]) -> str:
    command = container.get("command") or []
    if command[:2] == ["python", "-m"]:
        return str(command[2])
    if command == ["silt"]:
        return f"silt {container['args'][0]}"
    return str(container["image"]).partition(":")[0]


def literal_env(container: dict[str, Any]) -> dict[str, str]:
    return {v["name"]: str(v["value"]) for v in container.get("env", []) if "value" in v}


def workload_config(docs: list[dict[str, Any]], container: dict[str, Any], tmp_path: Path) -> Config:
    """The configuration the container runs with: silt.yaml and its literal SILT_* overrides
    (an `*.endpoint` set in one workload's env is the address that workload dials)."""
    path = tmp_path / "silt.yaml"
    path.write_text(silt_config_text(docs))
    settings = blockstore_settings(docs) if container.get("envFrom") else {}
    return load_config(path, env={**settings, **literal_env(container)})


def service_dns_names(name: str) -> set[str]:
    return {name, f"{name}.{NAMESPACE}", f"{name}.{NAMESPACE}.svc", f"{name}.{NAMESPACE}.svc.cluster.local"}


def service_at(docs: list[dict[str, Any]], address: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The Service an `*.endpoint` address names, and its port."""
    host, _, port = address.rpartition(":")
    (service,) = [s for s in of_kind(docs, "Service") if host in service_dns_names(s["metadata"]["name"])]
    (spec_port,) = [p for p in service["spec"]["ports"] if p["port"] == int(port)]
    return service, spec_port


def backing_workload(docs: list[dict[str, Any]], service: dict[str, Any]) -> dict[str, Any]:
    selector = service["spec"]["selector"].items()
    (workload,) = [w for w in workloads(docs) if selector <= pod_labels(w).items()]
    return workload


def container_port(workload: dict[str, Any], target: int | str) -> int:
    for container in pod_spec(workload)["containers"]:
        for port in container.get("ports", []):
            if target in (port.get("name"), port["containerPort"]):
                return int(port["containerPort"])
    raise AssertionError(f"{workload['metadata']['name']} exposes no port {target}")


def dialed(docs: list[dict[str, Any]], tmp_path: Path) -> dict[str, dict[str, int]]:
    """Workload -> {workload it dials: container port}, from each container's entry point and
    the addresses its configuration dials."""
    graph: dict[str, dict[str, int]] = {}
    for workload in workloads(docs):
        calls = graph.setdefault(workload["metadata"]["name"], {})
        spec = pod_spec(workload)
        for container in [*spec.get("initContainers", []), *spec["containers"]]:
            entry = entry_point(container)
            assert entry in CALLS, f"{entry} ({workload['metadata']['name']}): what does it dial? add it to CALLS"
            if not CALLS[entry]:
                continue
            config = workload_config(docs, container, tmp_path)
            for section in CALLS[entry]:
                service, port = service_at(docs, getattr(config, section).endpoint)
                target = backing_workload(docs, service)
                calls[target["metadata"]["name"]] = container_port(target, port.get("targetPort", port["port"]))
    return graph


def peers_expected(docs: list[dict[str, Any]], tmp_path: Path) -> set[tuple[str, str, int]]:
    """(from workload, to workload, port) for every connection the workloads make."""
    expected = {(src, dst, port) for src, calls in dialed(docs, tmp_path).items() for dst, port in calls.items()}
    cassandra = named(docs, "StatefulSet", "cassandra")["metadata"]["name"]
    expected.add((cassandra, cassandra, GOSSIP_PORT))
    for workload in workloads(docs):
        spec = pod_spec(workload)
        containers = [*spec.get("initContainers", []), *spec["containers"]]
        if any(v["name"] == CASSANDRA_LOGIN for c in containers for v in c.get("env", [])):
            expected.add((workload["metadata"]["name"], cassandra, CQL_PORT))
    return expected


def ports_of(workload: dict[str, Any]) -> set[int]:
    return {int(p["containerPort"]) for c in pod_spec(workload)["containers"] for p in c.get("ports", [])}


def tls_secret(docs: list[dict[str, Any]], workload: dict[str, Any], config: Config) -> str | None:
    """The Secret the workload's tls.key_file lies in (None: not mounted)."""
    assert config.tls.key_file
    spec = pod_spec(workload)
    (container,) = spec["containers"]
    for mount in container.get("volumeMounts", []):
        if config.tls.key_file.startswith(mount["mountPath"].rstrip("/") + "/"):
            (volume,) = [v for v in spec["volumes"] if v["name"] == mount["name"]]
            return str(volume["secret"]["secretName"])
    return None


def certificate_for(docs: list[dict[str, Any]], secret: str) -> dict[str, Any]:
    found = [c for c in of_kind(docs, "Certificate") if c["spec"]["secretName"] == secret]
    assert len(found) == 1, f"{len(found)} cert-manager Certificates write the Secret {secret}"
    return found[0]


def tls_workloads(docs: list[dict[str, Any]], tmp_path: Path) -> list[dict[str, Any]]:
    """The workloads that speak Silt's gRPC: they serve a dialable service or dial one."""
    graph = dialed(docs, tmp_path)
    targets = {dst for calls in graph.values() for dst in calls}
    return [w for w in workloads(docs) if graph[w["metadata"]["name"]] or w["metadata"]["name"] in targets]


def servers(docs: list[dict[str, Any]], config: Config) -> dict[str, dict[str, Any]]:
    """Workload name -> the Service its clients dial it at."""
    found = {}
    for section in DIALABLE:
        service, _ = service_at(docs, getattr(config, section).endpoint)
        found[backing_workload(docs, service)["metadata"]["name"]] = service
    return found


# --- TLS: a key per workload --------------------------------------------------------------


def test_every_workload_mounts_a_tls_key_of_its_own(docs: list[dict[str, Any]], tmp_path: Path) -> None:
    config = workload_config(docs, {}, tmp_path)
    assert config.tls.enabled and config.tls.require_client_cert
    holders: dict[str, str] = {}
    for workload in tls_workloads(docs, tmp_path):
        name = workload["metadata"]["name"]
        secret = tls_secret(docs, workload, config)
        assert secret, f"{name} has no TLS key mounted"
        assert secret not in holders, f"{name} and {holders.get(secret)} share the TLS key in {secret}"
        holders[secret] = name
        # cert-manager issues and renews it: no hand-made key shared across pods.
        assert certificate_for(docs, secret)
    # No pod mounts another workload's key, in whatever volume.
    for workload in workloads(docs):
        mounted = {v["secret"]["secretName"] for v in pod_spec(workload).get("volumes", []) if "secret" in v}
        others = {s for s, holder in holders.items() if holder != workload["metadata"]["name"]}
        assert not mounted & others, workload["metadata"]["name"]


def test_each_certificate_names_only_its_own_service_and_all_share_one_ca(
    docs: list[dict[str, Any]], tmp_path: Path
) -> None:
    config = workload_config(docs, {}, tmp_path)
    serving = servers(docs, config)
    issuers = set()
    for workload in tls_workloads(docs, tmp_path):
        name = workload["metadata"]["name"]
        spec = certificate_for(docs, str(tls_secret(docs, workload, config)))["spec"]
        usages = set(spec["usages"])
        assert "client auth" in usages, name  # every one of them calls another over mutual TLS
        if name in serving:
            service = serving[name]["metadata"]["name"]
            assert set(spec["dnsNames"]) == service_dns_names(service), name
            assert spec.get("commonName") in {None, *service_dns_names(service)}, name
            assert "server auth" in usages, name
        else:
            assert not spec.get("dnsNames") and not spec.get("ipAddresses"), f"{name} serves no gRPC: no names"
            assert "server auth" not in usages, name
        issuers.add((spec["issuerRef"]["name"], spec["issuerRef"].get("kind", "Issuer")))
    # One CA: every client verifies every server with the ca.crt its own Secret carries.
    ((issuer, kind),) = issuers
    if kind == "Issuer":
        assert "ca" in named(docs, "Issuer", issuer)["spec"], "an Issuer that signs with Silt's CA"
    # The addresses clients dial are in the server's certificate.
    for section in DIALABLE:
        host = getattr(config, section).endpoint.rpartition(":")[0]
        service, _ = service_at(docs, getattr(config, section).endpoint)
        server = backing_workload(docs, service)
        assert host in certificate_for(docs, str(tls_secret(docs, server, config)))["spec"]["dnsNames"]


# --- NetworkPolicies ------------------------------------------------------------------------


def test_a_default_deny_selects_every_pod(docs: list[dict[str, Any]]) -> None:
    policies = of_kind(docs, "NetworkPolicy")
    deny = [
        p
        for p in policies
        if p["spec"]["podSelector"] == {} and p["spec"]["policyTypes"] == ["Ingress"] and not p["spec"].get("ingress")
    ]
    assert deny, "no default-deny ingress"
    for workload in workloads(docs):
        labels = pod_labels(workload)
        selected = [p for p in policies if p["spec"]["podSelector"].get("matchLabels", {}).items() <= labels.items()]
        assert selected, f"{workload['metadata']['name']}: no NetworkPolicy selects it"


def test_each_pod_admits_exactly_the_pods_that_call_it(docs: list[dict[str, Any]], tmp_path: Path) -> None:
    expected = peers_expected(docs, tmp_path)
    gateway_port = int(workload_config(docs, {}, tmp_path).gateways.s3.listen_address.rpartition(":")[2])
    # The call graph this checks (so that a test reading it sees what it is).
    assert {(s, d) for s, d, _ in expected} >= {
        ("silt-gateway", "silt-auth"), ("silt-graveler", "silt-auth"), ("silt-compactor", "silt-auth"),
        ("silt-gateway", "silt-graveler"), ("silt-gc", "silt-graveler"), ("silt-graveler", "silt-compactor"),
    }  # fmt: skip
    everything = workloads(docs)
    for src in everything:
        for dst in everything:
            for port in ports_of(dst):
                key = (src["metadata"]["name"], dst["metadata"]["name"], port)
                public = (key[1], port) == ("silt-gateway", gateway_port)
                assert ingress_allowed(docs, pod_labels(src), pod_labels(dst), port) == (key in expected or public), key


def test_only_the_gateways_port_is_open_to_the_world(docs: list[dict[str, Any]], tmp_path: Path) -> None:
    config = workload_config(docs, {}, tmp_path)
    gateway_port = int(config.gateways.s3.listen_address.rpartition(":")[2])
    for workload in workloads(docs):
        for port in ports_of(workload):
            world = workload["metadata"]["name"] == "silt-gateway" and port == gateway_port
            assert ingress_allowed(docs, None, pod_labels(workload), port) == world, (
                workload["metadata"]["name"],
                port,
            )
            assert ingress_allowed(docs, {}, pod_labels(workload), port) == world, "an unlabelled pod in the namespace"


def test_an_operators_pod_reaches_the_grpc_services_and_not_cassandra(
    docs: list[dict[str, Any]], tmp_path: Path
) -> None:
    config = workload_config(docs, {}, tmp_path)
    serving = servers(docs, config)
    for workload in workloads(docs):
        for port in ports_of(workload):
            allowed = ingress_allowed(docs, OPERATOR, pod_labels(workload), port)
            assert allowed == (
                workload["metadata"]["name"] in serving or workload["metadata"]["name"] == "silt-gateway"
            )


def test_no_metrics_port_is_left_without_a_policy(docs: list[dict[str, Any]], tmp_path: Path) -> None:
    # Metrics ports would need a rule admitting the monitoring namespace (docs/security.md,
    # "Network policies"); prod serves none today, so none is open.
    config = workload_config(docs, {}, tmp_path)
    addresses = [
        s.metrics_listen_address
        for s in (config.auth, config.graveler, config.compactor, config.gateways.s3, config.api)
    ]
    assert addresses == [None] * len(addresses), "a /metrics port: add its NetworkPolicy rule"
