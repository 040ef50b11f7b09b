"""Rendered manifests -> what `podman kube play` can run, and a list of what it cannot.

podman 4.3 plays Pods, Deployments, ConfigMaps and PVCs only, one replica each, with no cluster
DNS, no API server and no kubelet probes. This module rewrites, without running anything:

- Services -> a bridge network with fixed pod IPs; a ClusterIP Service gets an address of its own,
  served by a front pod (devtools/kube_podman/service_front.py: kube-proxy's part, each Service port
  listened on once and spread over the selected pods that are ready), a headless one names its
  pods directly; every Service's DNS names (and each StatefulSet pod's own name under its
  headless Service) are hostAliases in every pod;
- containerPort -> not given to podman: podman before 4.7 publishes every containerPort on the
  host as its hostPort, so a Deployment's second replica cannot start ("address already in
  use"). On Kubernetes a containerPort publishes nothing; the pods are reached at their IPs on
  the bridge, from the host too, and a hostPort the manifest sets is kept;
- Deployments, StatefulSets and Jobs -> one Pod per replica (StatefulSet pods named NAME-i, a
  volumeClaimTemplate a named volume per pod; a Job a single Pod that is run to completion);
- Secrets -> `podman secret create` payloads (podman reads secretKeyRef from its own secrets);
- the projected ServiceAccount volume -> a host directory the caller fills (token, ca.crt,
  namespace), and KUBERNETES_SERVICE_HOST/_PORT in every container, as a kubelet sets them;
- probes removed from what podman sees (it turns livenessProbe into a systemd-timed healthcheck,
  and runs no timers here): the caller evaluates startup and readiness probes itself.

Everything else kind (NetworkPolicy, PodDisruptionBudget, HorizontalPodAutoscaler, CronJob,
ServiceAccount, Role, RoleBinding, Namespace) is listed as skipped with the reason.
"""

from __future__ import annotations

import base64
import copy
import ipaddress
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from silt.errors import InvalidArgument

Doc = dict[str, Any]

# What podman cannot run, by kind, and why it is safe to leave out here.
SKIPPED_KINDS = {
    "Namespace": "one podman host is the namespace",
    "NetworkPolicy": "podman's bridge network has no policy engine: every pod reaches every other",
    "PodDisruptionBudget": "no voluntary evictions without a scheduler",
    "HorizontalPodAutoscaler": "no metrics server; replicas stay as declared",
    "CronJob": "no scheduler: `python -m devtools.kube_podman cronjob NAME` runs its Job once",
    "ServiceAccount": "no API server; the setup Job's token comes from the stand-in API",
    "Role": "enforced by the stand-in API for the setup Job's Secrets",
    "RoleBinding": "enforced by the stand-in API for the setup Job's Secrets",
}
TRANSLATED_KINDS = {"Service", "Deployment", "StatefulSet", "Job", "ConfigMap", "Secret"}
PROBES = ("startupProbe", "readinessProbe", "livenessProbe")
CLUSTER_DOMAIN = "cluster.local"
STACK_LABEL = "silt.io/kube-podman"
FRONT_LABEL = "silt.io/kube-podman-service"  # on a Service's front pod: the Service's name


@dataclass(frozen=True)
class PodPlan:
    name: str
    owner: str  # Kind/name of the workload it stands for
    ip: str
    manifest: Doc
    run_to_completion: bool = False
    # container name -> its probes, as the manifest declares them (evaluated by the caller).
    probes: dict[str, dict[str, Doc]] = field(default_factory=dict)
    volumes: tuple[str, ...] = ()  # named podman volumes it uses (from volumeClaimTemplates)
    # container name -> its ports as the manifest declares them (named probe ports resolve here).
    ports: dict[str, list[Doc]] = field(default_factory=dict)

    def container(self, name: str) -> str:
        """podman's name for one of its containers."""
        return f"{self.name}-{name}"


@dataclass(frozen=True)
class Plan:
    network: str
    subnet: str
    gateway_ip: str
    config_maps: list[Doc]
    secrets: dict[str, dict[str, str]]  # name -> data, decoded; empty for those a Job fills
    stages: list[list[PodPlan]]
    hosts: dict[str, str]  # DNS name -> pod IP
    skipped: list[str]
    cron_jobs: dict[str, PodPlan] = field(default_factory=dict)  # CronJob name -> its Job's pod
    # One pod per ClusterIP Service, at the Service's address (started before the workloads).
    fronts: list[PodPlan] = field(default_factory=list)

    def pods(self) -> list[PodPlan]:
        return [pod for stage in self.stages for pod in stage]

    def secret_names(self) -> list[str]:
        return sorted(self.secrets)

    def all_pods(self) -> list[PodPlan]:
        """The workloads' pods and the Services' fronts."""
        return [*self.fronts, *self.pods()]

    def volume_names(self) -> list[str]:
        """Named volumes: one per claim per pod, and the one kube play makes of each ConfigMap."""
        claims = {volume for pod in self.pods() for volume in pod.volumes}
        return sorted(claims | {str(doc["metadata"]["name"]) for doc in self.config_maps})


def secret_payload(data: Mapping[str, str]) -> bytes:
    """A Secret as `podman secret create` must hold it for kube play's secretKeyRef: a JSON
    object of base64 values (podman 4.3 cannot read a Secret document there)."""
    return json.dumps({key: base64.b64encode(value.encode()).decode() for key, value in data.items()}).encode()


def decoded_secret(doc: Doc) -> dict[str, str]:
    data = {key: base64.b64decode(value).decode() for key, value in (doc.get("data") or {}).items()}
    data.update({key: str(value) for key, value in (doc.get("stringData") or {}).items()})
    return data


def _name(doc: Doc) -> str:
    return str(doc["metadata"]["name"])


def _key(doc: Doc) -> str:
    return f"{doc['kind']}/{_name(doc)}"


def _selects(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    return bool(selector) and all(labels.get(key) == value for key, value in selector.items())


def _with_protocol_version(config_map: Doc, protocol_version: int | None) -> Doc:
    """silt.yaml with database.cassandra.protocol_version set (the Cassandra stand-in is 2.1)."""
    if protocol_version is None or "silt.yaml" not in config_map.get("data", {}):
        return config_map
    changed = copy.deepcopy(config_map)
    config = yaml.safe_load(changed["data"]["silt.yaml"])
    config.setdefault("database", {}).setdefault("cassandra", {})["protocol_version"] = protocol_version
    changed["data"]["silt.yaml"] = yaml.safe_dump(config, sort_keys=False)
    return changed


def plan(
    docs: list[Doc],
    order: list[list[str]],
    *,
    network: str,
    subnet: str,
    stack: str,
    api_port: int,
    credentials_dir: str,
    max_replicas: int | None = None,
    cassandra_protocol_version: int | None = None,
    front_image: str = "silt:0.1.0",
) -> Plan:
    """order: the workloads (Kind/name) stage by stage; every workload must be named once.
    front_image: the image the Services' fronts run on (it must carry Silt's Python package)."""
    net = ipaddress.ip_network(subnet)
    hosts_iter = net.hosts()
    gateway_ip = str(next(hosts_iter))
    by_key = {_key(doc): doc for doc in docs}
    workloads = {key for key, doc in by_key.items() if doc["kind"] in ("Deployment", "StatefulSet", "Job")}
    ordered = [key for stage in order for key in stage]
    if sorted(ordered) != sorted(workloads):
        missing, unknown = sorted(workloads - set(ordered)), sorted(set(ordered) - workloads)
        raise InvalidArgument(f"start order does not match the manifests: not ordered {missing}, unknown {unknown}")
    skipped: list[str] = []
    for doc in docs:
        if doc["kind"] in SKIPPED_KINDS:
            skipped.append(f"{_key(doc)}: {SKIPPED_KINDS[doc['kind']]}")
        elif doc["kind"] not in TRANSLATED_KINDS:
            raise InvalidArgument(f"{_key(doc)}: no translation for kind {doc['kind']}")

    # Pod names and IPs first: hostAliases need every Service's address before any pod is written.
    placed: list[tuple[str, Doc, str, str, int]] = []  # (workload key, doc, pod name, ip, index)
    for key in ordered:
        doc = by_key[key]
        replicas = 1 if doc["kind"] == "Job" else int(doc["spec"].get("replicas", 1))
        if max_replicas is not None:
            replicas = min(replicas, max_replicas)
        for index in range(replicas):
            pod_name = _name(doc) if doc["kind"] == "Job" else f"{_name(doc)}-{index}"
            placed.append((key, doc, pod_name, str(next(hosts_iter)), index))

    hosts: dict[str, str] = {}
    fronts: list[PodPlan] = []
    for service in (d for d in docs if d["kind"] == "Service"):
        namespace = service["metadata"].get("namespace", "default")
        selector = service["spec"].get("selector", {})
        chosen = [(pod, ip, doc) for _, doc, pod, ip, _ in placed if _selects(selector, _template_labels(doc))]
        if not chosen:
            raise InvalidArgument(f"{_key(service)} selects no pod")
        names = _dns_names(_name(service), namespace)
        if service["spec"].get("clusterIP") == "None":
            # Headless: no address of its own; its name is a pod's (cluster DNS would answer
            # with all of them) and each pod has its own name under it.
            for name in names:
                hosts[name] = chosen[0][1]
            for pod, ip, _ in chosen:
                for name in names:
                    hosts[f"{pod}.{name}"] = ip
        else:
            front = _front(service, str(next(hosts_iter)), chosen, stack=stack, image=front_image)
            fronts.append(front)
            for name in names:
                hosts[name] = front.ip

    config_maps = [_with_protocol_version(d, cassandra_protocol_version) for d in docs if d["kind"] == "ConfigMap"]
    config_data = {_name(d): dict(d.get("data") or {}) for d in config_maps}
    secrets = {_name(d): decoded_secret(d) for d in docs if d["kind"] == "Secret"}
    pods = {
        pod: _pod(doc, pod, ip, hosts, stack=stack, gateway_ip=gateway_ip, api_port=api_port,
                  credentials_dir=credentials_dir, config_maps=config_data)
        for _, doc, pod, ip, _ in placed
    }  # fmt: skip
    stages = [[pods[pod] for key2, _, pod, _, _ in placed if key2 in stage] for stage in order]
    cron_jobs = {
        _name(doc): _pod(
            {"kind": "Job", "metadata": doc["metadata"], "spec": doc["spec"]["jobTemplate"]["spec"]},
            _name(doc), str(next(hosts_iter)), hosts, stack=stack, gateway_ip=gateway_ip, api_port=api_port,
            credentials_dir=credentials_dir, config_maps=config_data,
        )
        for doc in docs
        if doc["kind"] == "CronJob"
    }  # fmt: skip
    return Plan(network, subnet, gateway_ip, config_maps, secrets, stages, hosts, skipped, cron_jobs, fronts)


def _dns_names(service: str, namespace: str) -> list[str]:
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.{CLUSTER_DOMAIN}",
    ]


def _template_labels(doc: Doc) -> dict[str, str]:
    return dict(doc["spec"]["template"].get("metadata", {}).get("labels", {}))


_VAR_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def _expand_args(container: Doc, config_maps: Mapping[str, Mapping[str, str]]) -> None:
    """$(VAR) in command and args, from the container's env with a literal value or a
    configMapKeyRef, as a kubelet expands them ($$ is a literal $; an unknown name stays)."""
    values: dict[str, str] = {}
    for entry in container.get("env", []):
        if "value" in entry:
            values[entry["name"]] = str(entry["value"])
        elif (ref := entry.get("valueFrom", {}).get("configMapKeyRef")) and ref["key"] in config_maps.get(
            ref["name"], {}
        ):
            values[entry["name"]] = config_maps[ref["name"]][ref["key"]]

    def one(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        return values.get(match.group(1), match.group(0))

    for field_name in ("command", "args"):
        if field_name in container:
            container[field_name] = [_VAR_REF.sub(one, str(word)) for word in container[field_name]]


def _pod(
    doc: Doc, name: str, ip: str, hosts: Mapping[str, str], *, stack: str, gateway_ip: str, api_port: int,
    credentials_dir: str, config_maps: Mapping[str, Mapping[str, str]],
) -> PodPlan:  # fmt: skip
    template = doc["spec"]["template"]
    spec = copy.deepcopy(template["spec"])
    labels = {**_template_labels(doc), STACK_LABEL: stack}
    by_ip: dict[str, list[str]] = {}
    for host, address in sorted(hosts.items()):
        by_ip.setdefault(address, []).append(host)
    spec["hostAliases"] = [{"ip": address, "hostnames": names} for address, names in sorted(by_ip.items())]
    if doc["kind"] == "Job":
        # Run once; the caller reports a failure with the log instead of retrying (backoffLimit).
        spec["restartPolicy"] = "Never"
    volumes: list[str] = []
    for claim in doc["spec"].get("volumeClaimTemplates", []) if doc["kind"] == "StatefulSet" else []:
        volume = f"{_name(claim)}-{name}"
        volumes.append(volume)
        spec.setdefault("volumes", []).append({"name": _name(claim), "persistentVolumeClaim": {"claimName": volume}})
    for volume in spec.get("volumes", []):
        if "projected" in volume:
            del volume["projected"]
            volume["hostPath"] = {"path": credentials_dir, "type": "Directory"}
    probes: dict[str, dict[str, Doc]] = {}
    api_env = [
        {"name": "KUBERNETES_SERVICE_HOST", "value": gateway_ip},
        {"name": "KUBERNETES_SERVICE_PORT", "value": str(api_port)},
    ]
    ports: dict[str, list[Doc]] = {}
    for container in [*spec.get("initContainers", []), *spec.get("containers", [])]:
        probes[container["name"]] = {kind: container.pop(kind) for kind in PROBES if kind in container}
        ports[container["name"]] = list(container.get("ports", []))
        published = [port for port in ports[container["name"]] if "hostPort" in port]
        if published:
            container["ports"] = published
        else:
            container.pop("ports", None)
        _expand_args(container, config_maps)
        container["env"] = [*container.get("env", []), *api_env]
    manifest = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels}, "spec": spec}
    return PodPlan(name, _key(doc), ip, manifest, doc["kind"] == "Job", probes, tuple(volumes), ports)


def _target_port(target: int | str, containers: list[Doc]) -> int:
    if isinstance(target, int) or str(target).isdigit():
        return int(target)
    for container in containers:
        for port in container.get("ports", []):
            if port.get("name") == target:
                return int(port["containerPort"])
    raise InvalidArgument(f"no container port named {target!r}")


def _front(service: Doc, ip: str, chosen: list[tuple[str, str, Doc]], *, stack: str, image: str) -> PodPlan:
    """The pod that holds a ClusterIP Service's address: each of its ports forwarded to the
    targetPort of the chosen pods that are ready (by their readinessProbes)."""
    name = _name(service)
    spec_ports = service["spec"]["ports"]
    ports: list[Doc] = []
    for entry in spec_ports:
        if entry.get("protocol", "TCP") != "TCP":
            raise InvalidArgument(f"{_key(service)}: only TCP ports can be served, not {entry['protocol']}")
        backends = []
        for _, pod_ip, doc in chosen:
            containers = doc["spec"]["template"]["spec"]["containers"]
            backends.append([pod_ip, _target_port(entry.get("targetPort", entry["port"]), containers)])
        ports.append({"port": int(entry["port"]), "backends": backends})
    pods = [
        {
            "ip": pod_ip,
            "probes": [
                [container["readinessProbe"], container.get("ports", [])]
                for container in doc["spec"]["template"]["spec"]["containers"]
                if "readinessProbe" in container
            ],
        }
        for _, pod_ip, doc in chosen
    ]
    config = json.dumps({"service": name, "ports": ports, "pods": pods}, separators=(",", ":"))
    pod_security: Doc = {"runAsNonRoot": True, "runAsUser": 10001, "runAsGroup": 10001}
    if min(int(port["port"]) for port in ports) < 1024:  # a non-root process may bind it in its own netns
        pod_security["sysctls"] = [{"name": "net.ipv4.ip_unprivileged_port_start", "value": "0"}]
    container = {
        "name": "front",
        "image": image,
        "command": ["python", "-m", "devtools.kube_podman.service_front", config],
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "resources": {"limits": {"memory": "128Mi"}},
    }
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{name}-service", "labels": {STACK_LABEL: stack, FRONT_LABEL: name}},
        "spec": {"restartPolicy": "Always", "securityContext": pod_security, "containers": [container]},
    }
    declared = [{"containerPort": port["port"]} for port in ports]
    listening = {"readinessProbe": {"tcpSocket": {"port": ports[0]["port"]}}}
    return PodPlan(
        f"{name}-service", _key(service), ip, manifest, probes={"front": listening}, ports={"front": declared}
    )
