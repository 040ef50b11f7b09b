"""deploy/k8s, validated offline: shapes, and agreement with the code and the configuration."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
import yaml

from silt.config import env_keys, load_config

K8S = Path(__file__).resolve().parents[2] / "deploy" / "k8s"


def documents() -> list[dict[str, Any]]:
    docs = []
    for path in sorted(K8S.glob("*.yaml")):
        docs.extend(doc for doc in yaml.safe_load_all(path.read_text()) if doc)
    return docs


def of_kind(kind: str) -> list[dict[str, Any]]:
    return [doc for doc in documents() if doc["kind"] == kind]


def containers(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return doc["spec"]["template"]["spec"]["containers"]


def workloads() -> list[dict[str, Any]]:
    return of_kind("Deployment") + of_kind("StatefulSet") + of_kind("Job")


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Any:
    (configmap,) = of_kind("ConfigMap")
    path = tmp_path_factory.mktemp("k8s") / "silt.yaml"
    path.write_text(configmap["data"]["silt.yaml"])
    return load_config(path, env={})


def test_every_document_is_well_formed() -> None:
    docs = documents()
    assert {d["kind"] for d in docs} >= {"Namespace", "ConfigMap", "Service", "Deployment", "StatefulSet", "Job"}
    for doc in docs:
        assert doc["apiVersion"] and doc["metadata"]["name"]
        if doc["kind"] != "Namespace":
            assert doc["metadata"]["namespace"] == "silt", doc["metadata"]["name"]


def test_the_configmap_is_a_valid_silt_configuration(config: Any) -> None:
    assert config.database.type == "cassandra"
    assert config.auth.encrypt_secret_key is None, "secrets belong in a Secret, not the ConfigMap"


def test_commands_run_modules_that_exist() -> None:
    for doc in workloads():
        for container in containers(doc):
            command = container.get("command")
            if command and command[:2] == ["python", "-m"]:
                assert importlib.util.find_spec(command[2]) is not None, command


def test_environment_variables_are_known_configuration_keys() -> None:
    known = set(env_keys().values()) | {"SILT_CONFIG"}
    for doc in workloads():
        for container in containers(doc):
            for var in container.get("env", []):
                if var["name"].startswith("SILT_"):
                    assert var["name"] in known, var["name"]


def test_services_select_pods_on_the_ports_the_configuration_listens_on(config: Any) -> None:
    listen = {
        "auth": config.auth.listen_address,
        "graveler": config.graveler.listen_address,
        "gateway": config.gateways.s3.listen_address,
    }
    pods = {
        tuple(sorted(w["spec"]["template"]["metadata"]["labels"].items())): w
        for w in workloads()
        if "selector" in w["spec"]
    }
    for service in of_kind("Service"):
        selector = tuple(sorted(service["spec"]["selector"].items()))
        assert selector in pods, f"service {service['metadata']['name']} selects no pods"
        ports = {p["containerPort"] for c in containers(pods[selector]) for p in c.get("ports", [])}
        for port in service["spec"]["ports"]:
            assert port.get("targetPort", port["port"]) in ports
        name = service["metadata"]["name"]
        if name in listen:
            assert int(listen[name].rpartition(":")[2]) == service["spec"]["ports"][0]["port"]
    assert config.auth.endpoint == "auth.silt.svc.cluster.local:8101"


def test_cassandra_contact_points_are_statefulset_pods(config: Any) -> None:
    (cassandra,) = of_kind("StatefulSet")
    replicas = cassandra["spec"]["replicas"]
    service = cassandra["spec"]["serviceName"]
    pods = {f"{cassandra['metadata']['name']}-{i}.{service}.silt.svc.cluster.local" for i in range(replicas)}
    assert set(config.database.cassandra.contact_points) <= pods
    assert sum(config.database.cassandra.datacenters.values()) == replicas
