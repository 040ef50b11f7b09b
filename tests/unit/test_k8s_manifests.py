"""deploy/k8s, rendered per overlay and validated offline: schemas (kubernetes-validate), and
agreement with the code and the configuration. tests/e2e/test_k8s_deploy.py runs them."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import kubernetes_validate  # type: ignore[import-untyped]
import pytest

from silt.config import Config, env_keys, load_config
from tests.support.k8s import (
    NAMESPACE,
    OVERLAYS,
    blockstore_settings,
    named,
    of_kind,
    pod_labels,
    pod_spec,
    render,
    silt_config_text,
    workloads,
)

KUBERNETES_VERSION = "1.32.0"
SILT_SERVICES = {
    "auth": "silt-auth",
    "graveler": "silt-graveler",
    "compactor": "silt-compactor",
    "gateway": "silt-gateway",
}
# Variables the CLI reads (silt/client.py), besides the configuration's.
CLI_VARIABLES = {"SILT_CONFIG", "SILT_ACCESS_KEY_ID", "SILT_SECRET_ACCESS_KEY"}
PART_OF = ("silt.io/part-of", "silt")
# The services' own drain on SIGTERM (server.stop(grace=5), uvicorn timeout_graceful_shutdown=5).
SERVICE_DRAIN_SECONDS = 5


def _resource(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "additionalProperties": False,
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object", "required": ["name", "namespace"]},
            "spec": spec,
        },
    }


# kubernetes-validate knows only Kubernetes' own kinds: cert-manager's (cert-manager.io/v1 CRDs)
# are checked against the part of their schemas the overlays use, unknown fields refused.
_ISSUER_REF = {
    "type": "object",
    "required": ["name"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string"},
        "kind": {"enum": ["Issuer", "ClusterIssuer"]},
        "group": {"const": "cert-manager.io"},
    },
}
_USAGES = ["digital signature", "key encipherment", "server auth", "client auth"]
CUSTOM_RESOURCES: dict[str, dict[str, dict[str, Any]]] = {
    "cert-manager.io/v1": {
        "Issuer": _resource(
            {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "ca": {
                        "type": "object",
                        "required": ["secretName"],
                        "additionalProperties": False,
                        "properties": {"secretName": {"type": "string"}},
                    },
                    "selfSigned": {"type": "object"},
                },
                "minProperties": 1,
                "maxProperties": 1,
            }
        ),
        "Certificate": _resource(
            {
                "type": "object",
                "required": ["secretName", "issuerRef"],
                "additionalProperties": False,
                "properties": {
                    "secretName": {"type": "string"},
                    "issuerRef": _ISSUER_REF,
                    "commonName": {"type": "string", "maxLength": 64},
                    "dnsNames": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                    "usages": {"type": "array", "items": {"enum": _USAGES}, "uniqueItems": True},
                    "duration": {"type": "string", "pattern": "^[0-9]+h$"},
                    "renewBefore": {"type": "string", "pattern": "^[0-9]+h$"},
                    "isCA": {"type": "boolean"},
                    "privateKey": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "algorithm": {"enum": ["RSA", "ECDSA", "Ed25519"]},
                            "size": {"type": "integer"},
                            "rotationPolicy": {"enum": ["Never", "Always"]},
                            "encoding": {"enum": ["PKCS1", "PKCS8"]},
                        },
                    },
                },
            }
        ),
    }
}


def config_of(docs: list[dict[str, Any]], tmp_path: Path) -> Config:
    """silt.yaml with the blockstore switch's variables (tests/unit/test_k8s_blockstore.py checks
    that the workloads that open the store load them)."""
    path = tmp_path / "silt.yaml"
    path.write_text(silt_config_text(docs))
    return load_config(path, env=blockstore_settings(docs))


def service_address(docs: list[dict[str, Any]], name: str) -> str:
    service = named(docs, "Service", name)
    return f"{name}.{NAMESPACE}.svc.cluster.local:{service['spec']['ports'][0]['port']}"


@pytest.fixture(params=OVERLAYS)
def overlay(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_every_rendered_document_passes_kubernetes_validate(overlay: str) -> None:
    docs = render(overlay)
    assert {d["kind"] for d in docs} >= {
        "Namespace", "ConfigMap", "Service", "Deployment", "StatefulSet", "Job", "CronJob",
        "PodDisruptionBudget", "NetworkPolicy", "HorizontalPodAutoscaler",
    }  # fmt: skip
    for doc in docs:
        if doc["apiVersion"] in CUSTOM_RESOURCES:
            jsonschema.validate(doc, CUSTOM_RESOURCES[doc["apiVersion"]][doc["kind"]])
        else:
            kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
        if doc["kind"] != "Namespace":
            assert doc["metadata"]["namespace"] == NAMESPACE, doc["metadata"]["name"]


def test_the_configmap_is_a_valid_silt_configuration_whose_endpoints_are_services(overlay: str, tmp_path: Path) -> None:
    docs = render(overlay)
    config = config_of(docs, tmp_path)
    assert config.database.type == "cassandra"
    assert config.auth.encrypt_secret_key is None, "secrets belong in a Secret, not the ConfigMap"
    assert config.auth.endpoint == service_address(docs, "auth")
    assert config.graveler.endpoint == service_address(docs, "graveler")
    assert config.compactor.endpoint == service_address(docs, "compactor")
    for name, listen in [
        ("auth", config.auth.listen_address),
        ("graveler", config.graveler.listen_address),
        ("compactor", config.compactor.listen_address),
        ("gateway", config.gateways.s3.listen_address),
    ]:
        # Pods listen on every interface, on the port their Service forwards to.
        host, _, port = listen.rpartition(":")
        assert host == "0.0.0.0"
        assert int(port) == named(docs, "Service", name)["spec"]["ports"][0]["port"]


def test_the_gateway_serves_the_rest_api_with_a_key_of_its_own(overlay: str, tmp_path: Path) -> None:
    # api.enabled: the REST API answers on the gateway's port; without api.credentials it would
    # answer 503 (edge/server.py), so the gateway's pods get svc-api's key too.
    docs = render(overlay)
    assert config_of(docs, tmp_path).api.enabled
    (container,) = pod_spec(named(docs, "Deployment", "silt-gateway"))["containers"]
    refs = {v["name"]: v["valueFrom"]["secretKeyRef"] for v in container["env"] if "valueFrom" in v}
    assert refs["SILT_API_CREDENTIALS_ACCESS_KEY_ID"] == {"name": "silt-api-credentials", "key": "access-key-id"}
    assert refs["SILT_API_CREDENTIALS_SECRET_ACCESS_KEY"] == {
        "name": "silt-api-credentials",
        "key": "secret-access-key",
    }
    assert named(docs, "Secret", "silt-api-credentials")


def test_commands_run_modules_that_exist(overlay: str) -> None:
    for doc in workloads(render(overlay)):
        for container in pod_spec(doc)["containers"] + pod_spec(doc).get("initContainers", []):
            command = container.get("command")
            if command and command[:2] == ["python", "-m"]:
                assert importlib.util.find_spec(command[2]) is not None, command


def test_environment_variables_are_known_configuration_keys(overlay: str) -> None:
    known = set(env_keys().values()) | CLI_VARIABLES
    docs = render(overlay)
    for doc in workloads(docs):
        for container in pod_spec(doc)["containers"] + pod_spec(doc).get("initContainers", []):
            for var in container.get("env", []):
                if var["name"].startswith("SILT_"):
                    assert var["name"] in known, var["name"]
            for source in container.get("envFrom", []):
                for name in named(docs, "ConfigMap", source["configMapRef"]["name"]).get("data") or {}:
                    assert name in known, name


def test_services_select_pods_that_expose_their_target_ports(overlay: str) -> None:
    docs = render(overlay)
    for service in of_kind(docs, "Service"):
        selector = service["spec"]["selector"].items()
        (pods,) = [w for w in workloads(docs) if selector <= pod_labels(w).items()]
        ports = {p.get("name") for c in pod_spec(pods)["containers"] for p in c.get("ports", [])}
        ports |= {p["containerPort"] for c in pod_spec(pods)["containers"] for p in c.get("ports", [])}
        for port in service["spec"]["ports"]:
            assert port.get("targetPort", port["port"]) in ports, service["metadata"]["name"]


def test_probes_use_the_health_endpoints_of_each_service(overlay: str, tmp_path: Path) -> None:
    docs = render(overlay)
    config = config_of(docs, tmp_path)
    for name, deployment in SILT_SERVICES.items():
        (container,) = pod_spec(named(docs, "Deployment", deployment))["containers"]
        (port,) = container["ports"]
        readiness = container["readinessProbe"]
        if name == "gateway":
            scheme = {"scheme": "HTTPS"} if config.gateways.s3.tls.enabled else {}
            assert readiness["httpGet"] == {"path": "/_silt/health/ready", "port": port["name"], **scheme}
            assert container["livenessProbe"]["httpGet"] == {
                "path": "/_silt/health/live",
                "port": port["name"],
                **scheme,
            }
            assert container["startupProbe"]["httpGet"] == {
                "path": "/_silt/health/live",
                "port": port["name"],
                **scheme,
            }
        else:
            # Native gRPC probes ask grpc.health.v1.Health: on the service's own port, or, with
            # TLS (which the kubelet's gRPC probe cannot speak), on its plaintext health port.
            section = getattr(config, name)
            health_port = port["containerPort"]
            if config.tls.enabled:
                assert section.health_listen_address, f"{name}: TLS needs a health_listen_address for probes"
            if section.health_listen_address:
                health_port = int(section.health_listen_address.rpartition(":")[2])
            assert readiness["grpc"]["port"] == health_port
            assert container["livenessProbe"]["tcpSocket"]["port"] == port["containerPort"]


def _mounted_file(spec: dict[str, Any], container: dict[str, Any], path: str) -> str:
    """The Secret a file path lies in, through the container's volume mounts."""
    for mount in container.get("volumeMounts", []):
        if path.startswith(mount["mountPath"].rstrip("/") + "/"):
            (volume,) = [v for v in spec["volumes"] if v["name"] == mount["name"]]
            assert "secret" in volume, f"{path} is not in a Secret"
            return str(volume["secret"]["secretName"])
    raise AssertionError(f"{path} is not mounted in {container['name']}")


def test_prod_runs_mutual_tls_between_services_and_https_at_the_gateway(tmp_path: Path) -> None:
    docs = render("prod")
    config = config_of(docs, tmp_path)
    tls = config.tls
    assert tls.enabled and tls.require_client_cert
    assert tls.cert_file and tls.key_file and tls.ca_file
    # Every Silt process, the GC job too, finds its certificate, key and CA in a Secret of its
    # own, which cert-manager writes (tests/unit/test_k8s_isolation.py checks the certificates).
    for doc in [named(docs, "Deployment", d) for d in SILT_SERVICES.values()] + [named(docs, "CronJob", "silt-gc")]:
        spec = pod_spec(doc)
        (container,) = spec["containers"]
        for path in (tls.cert_file, tls.key_file, tls.ca_file):
            assert _mounted_file(spec, container, path) == f"{doc['metadata']['name']}-mtls", doc["metadata"]["name"]
        # The non-root user reads the files through its group.
        assert spec["securityContext"]["fsGroup"] == spec["securityContext"]["runAsGroup"]
    s3 = config.gateways.s3.tls
    assert s3.enabled and s3.cert_file and s3.key_file
    spec = pod_spec(named(docs, "Deployment", "silt-gateway"))
    for path in (s3.cert_file, s3.key_file):
        assert _mounted_file(spec, spec["containers"][0], path) == "silt-gateway-tls"


def test_dev_runs_without_tls(tmp_path: Path) -> None:
    config = config_of(render("dev"), tmp_path)
    assert not config.tls.enabled and not config.gateways.s3.tls.enabled


def test_replicas_disruption_budgets_and_anti_affinity(overlay: str) -> None:
    docs = render(overlay)
    for deployment in SILT_SERVICES.values():
        doc = named(docs, "Deployment", deployment)
        assert doc["spec"]["replicas"] >= 2, deployment
        assert doc["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
        anti = pod_spec(doc)["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
        assert anti[0]["podAffinityTerm"]["labelSelector"]["matchLabels"] == {"app": deployment}
        pdb = named(docs, "PodDisruptionBudget", deployment)
        assert pdb["spec"]["selector"]["matchLabels"] == {"app": deployment}
        assert pdb["spec"]["maxUnavailable"] == 1
    hpa = named(docs, "HorizontalPodAutoscaler", "silt-gateway")
    assert hpa["spec"]["scaleTargetRef"]["name"] == "silt-gateway"
    assert hpa["spec"]["minReplicas"] >= 2


def test_graceful_shutdown_fits_in_the_termination_grace_period(overlay: str) -> None:
    docs = render(overlay)
    for deployment in SILT_SERVICES.values():
        spec = pod_spec(named(docs, "Deployment", deployment))
        (container,) = spec["containers"]
        pre_stop = container["lifecycle"]["preStop"]["exec"]["command"]
        assert pre_stop[0] == "sleep"
        assert int(pre_stop[1]) + SERVICE_DRAIN_SECONDS < spec["terminationGracePeriodSeconds"]


def test_network_policies_expose_only_the_gateway(overlay: str) -> None:
    docs = render(overlay)
    policies = {p["metadata"]["name"]: p["spec"] for p in of_kind(docs, "NetworkPolicy")}
    assert policies["default-deny-ingress"] == {"podSelector": {}, "policyTypes": ["Ingress"]}
    (gateway_rule,) = policies["gateway-from-anywhere"]["ingress"]
    assert "from" not in gateway_rule and gateway_rule["ports"] == [{"protocol": "TCP", "port": 8000}]
    coarse = ("auth-from-silt", "graveler-from-silt", "compactor-from-silt")
    if overlay == "prod":
        # Replaced by per-caller rules (tests/unit/test_k8s_isolation.py).
        assert not set(coarse) & set(policies)
    else:
        for name in coarse:
            (rule,) = policies[name]["ingress"]
            assert rule["from"] == [{"podSelector": {"matchLabels": dict([PART_OF])}}]
    # Every Silt pod carries the label those rules admit.
    for doc in workloads(docs):
        if doc["metadata"]["name"].startswith("silt-"):
            assert PART_OF in pod_labels(doc).items(), doc["metadata"]["name"]


def test_the_gc_cronjob_runs_silt_gc_run_on_the_configured_repository(overlay: str) -> None:
    docs = render(overlay)
    cron = named(docs, "CronJob", "silt-gc")
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
    (container,) = pod_spec(cron)["containers"]
    assert container["command"] == ["silt"] and container["args"][:3] == ["gc", "run", "$(GC_REPOSITORY)"]
    (repo,) = [v for v in container["env"] if v["name"] == "GC_REPOSITORY"]
    assert named(docs, "ConfigMap", "silt-gc")["data"][repo["valueFrom"]["configMapKeyRef"]["key"]]


def test_prod_runs_three_cassandra_nodes_with_local_quorum(tmp_path: Path) -> None:
    docs = render("prod")
    config = config_of(docs, tmp_path).database.cassandra
    cassandra = named(docs, "StatefulSet", "cassandra")
    replicas = cassandra["spec"]["replicas"]
    assert replicas == 3
    pods = {f"cassandra-{i}.{cassandra['spec']['serviceName']}.{NAMESPACE}.svc.cluster.local" for i in range(replicas)}
    assert set(config.contact_points) == pods
    assert config.replication_strategy == "NetworkTopologyStrategy" and config.datacenters == {"dc1": 3}
    assert (config.consistency, config.serial_consistency) == ("LOCAL_QUORUM", "LOCAL_SERIAL")
    dc = {v["name"]: v.get("value") for v in pod_spec(cassandra)["containers"][0]["env"]}["CASSANDRA_DC"]
    assert config.local_datacenter == dc
    # Prod holds no Secret values: they are created out of band, or written by the setup Job.
    for secret in of_kind(docs, "Secret"):
        assert not secret.get("data") and not secret.get("stringData"), secret["metadata"]["name"]


def test_no_http_proxy_in_front_of_the_gateway_so_no_proxy_is_trusted(overlay: str, tmp_path: Path) -> None:
    """The gateway's Service forwards TCP (ClusterIP, no header rewritten) and nothing renders an
    Ingress in front of it: the TCP peer is the client, so trusted_proxies is empty and no
    X-Forwarded-For is believed. An overlay that adds an HTTP proxy must list it
    (docs/operations/kubernetes.md, "Client addresses")."""
    docs = render(overlay)
    config = config_of(docs, tmp_path)
    assert not of_kind(docs, "Ingress") and not of_kind(docs, "HTTPRoute")
    assert named(docs, "Service", "gateway")["spec"].get("type", "ClusterIP") == "ClusterIP"
    assert config.gateways.trusted_proxies == []
    if overlay == "prod":
        # The overlay says why it is empty, with an example of what to set behind a proxy.
        text = silt_config_text(docs)
        assert "  trusted_proxies: []" in text and "  # trusted_proxies: [" in text
