"""deploy/k8s rendered as Kubernetes would see it: `kustomize build` (or `kubectl kustomize`,
which embeds kustomize) of an overlay, and lookups over the resulting documents."""

from __future__ import annotations

import base64
import functools
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

K8S = Path(__file__).resolve().parents[2] / "deploy" / "k8s"
OVERLAYS = ("dev", "prod")
NAMESPACE = "silt"


def _kustomize_command(directory: Path) -> list[str]:
    if shutil.which("kustomize"):
        return ["kustomize", "build", str(directory)]
    if shutil.which("kubectl"):
        return ["kubectl", "kustomize", str(directory)]
    pytest.fail("rendering deploy/k8s needs kustomize or kubectl (which embeds it) on the PATH", pytrace=False)


def _kustomize(directory: Path) -> str:
    done = subprocess.run(_kustomize_command(directory), capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, f"kustomize {directory}: {done.stderr.strip()}"
    return done.stdout


@functools.cache
def _render_text(overlay: str) -> str:
    return _kustomize(K8S / "overlays" / overlay)


def render(overlay: str) -> list[dict[str, Any]]:
    """The overlay's documents (fresh copies: callers may change them)."""
    return [doc for doc in yaml.safe_load_all(_render_text(overlay)) if doc]


def render_directory(directory: Path) -> list[dict[str, Any]]:
    """The documents of the kustomization in directory (a changed copy of an overlay), uncached."""
    return [doc for doc in yaml.safe_load_all(_kustomize(directory)) if doc]


def of_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [doc for doc in docs if doc["kind"] == kind]


def named(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (found,) = [doc for doc in of_kind(docs, kind) if doc["metadata"]["name"] == name]
    return found


def pod_spec(doc: dict[str, Any]) -> dict[str, Any]:
    if doc["kind"] == "CronJob":
        return doc["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return doc["spec"]["template"]["spec"]


def pod_labels(doc: dict[str, Any]) -> dict[str, str]:
    template = doc["spec"]["jobTemplate"]["spec"]["template"] if doc["kind"] == "CronJob" else doc["spec"]["template"]
    return template.get("metadata", {}).get("labels", {})


def workloads(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [doc for doc in docs if doc["kind"] in ("Deployment", "StatefulSet", "Job", "CronJob")]


def silt_config_text(docs: list[dict[str, Any]]) -> str:
    return str(named(docs, "ConfigMap", "silt-config")["data"]["silt.yaml"])


# The blockstore switch: the overlay's blockstore.env, which the workloads that open the object
# store load with envFrom.
BLOCKSTORE_SETTINGS = "silt-blockstore-settings"


def blockstore_settings(docs: list[dict[str, Any]]) -> dict[str, str]:
    return {k: str(v) for k, v in (named(docs, "ConfigMap", BLOCKSTORE_SETTINGS).get("data") or {}).items()}


def resolve_env(
    docs: list[dict[str, Any]], container: dict[str, Any], secrets: dict[str, dict[str, str]]
) -> dict[str, str]:
    """A container's environment as the kubelet builds it: every key of its envFrom ConfigMaps
    first, then env's literal values, ConfigMap and Secret keys (Secrets from `secrets`,
    the live ones, else from the documents), $(VAR) references to earlier ones.
    A reference to a missing ConfigMap, Secret or key fails, as the pod would not start, unless
    it is `optional`: then the variable is left out."""
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        assert set(source) <= {"configMapRef", "prefix"}, f"unsupported envFrom source {source}"
        ref = source["configMapRef"]
        found = [d for d in of_kind(docs, "ConfigMap") if d["metadata"]["name"] == ref["name"]]
        assert found or ref.get("optional"), f"no ConfigMap {ref['name']}"
        for doc in found:
            env |= {source.get("prefix", "") + key: str(value) for key, value in (doc.get("data") or {}).items()}
    for var in container.get("env", []):
        if "value" in var:
            env[var["name"]] = expand(str(var["value"]), env)
            continue
        source = var["valueFrom"]
        if "configMapKeyRef" in source:
            ref = source["configMapKeyRef"]
            maps = [d for d in of_kind(docs, "ConfigMap") if d["metadata"]["name"] == ref["name"]]
            data = (maps[0].get("data") or {}) if maps else {}
            if ref["key"] not in data and ref.get("optional"):
                continue
            assert ref["key"] in data, f"ConfigMap {ref['name']} has no key {ref['key']}"
            env[var["name"]] = str(data[ref["key"]])
        elif "secretKeyRef" in source:
            ref = source["secretKeyRef"]
            if ref.get("optional") and not secret_has(docs, ref["name"], ref["key"], secrets):
                continue
            env[var["name"]] = secret_value(docs, ref["name"], ref["key"], secrets)
        else:
            raise AssertionError(f"unsupported env source {source}")
    return env


def secret_has(docs: list[dict[str, Any]], name: str, key: str, extra: dict[str, dict[str, str]]) -> bool:
    """Whether Secret `name` (from `extra`, else the documents) has `key`."""
    if name in extra and key in extra[name]:
        return True
    return any(
        doc["metadata"]["name"] == name and (key in (doc.get("data") or {}) or key in (doc.get("stringData") or {}))
        for doc in of_kind(docs, "Secret")
    )


def secret_value(docs: list[dict[str, Any]], name: str, key: str, extra: dict[str, dict[str, str]]) -> str:
    if name in extra and key in extra[name]:
        return extra[name][key]
    for doc in of_kind(docs, "Secret"):
        if doc["metadata"]["name"] == name:
            if key in doc.get("stringData", {}):
                return str(doc["stringData"][key])
            assert key in doc.get("data", {}), f"Secret {name} has no key {key}"
            return base64.b64decode(doc["data"][key]).decode()
    assert name in extra and key in extra[name], f"no Secret {name} with key {key}"
    return extra[name][key]


def expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion in command, args and env values ($$ escapes)."""
    out, i = [], 0
    while i < len(text):
        if text.startswith("$$", i):
            out.append("$")
            i += 2
        elif text.startswith("$(", i) and ")" in text[i:]:
            end = text.index(")", i)
            name = text[i + 2 : end]
            out.append(env[name] if name in env else text[i : end + 1])
            i = end + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def rbac_allows(docs: list[dict[str, Any]], account: str, verb: str, resource: str, name: str) -> bool:
    """Kubernetes RBAC over the documents: does a Role bound to ServiceAccount `account` allow
    verb on the core-group resource `resource` named `name`? (Cluster-wide bindings are refused.)"""
    assert not of_kind(docs, "ClusterRoleBinding") and not of_kind(docs, "ClusterRole"), "cluster-wide RBAC"
    for binding in of_kind(docs, "RoleBinding"):
        if not any(
            s["kind"] == "ServiceAccount"
            and s["name"] == account
            and s.get("namespace", binding["metadata"]["namespace"]) == NAMESPACE
            for s in binding.get("subjects", [])
        ):
            continue
        assert binding["roleRef"]["kind"] == "Role", "only namespaced Roles are modelled"
        role = named(docs, "Role", binding["roleRef"]["name"])
        for rule in role.get("rules", []):
            if (
                set(rule.get("apiGroups", [])) & {"", "*"}
                and set(rule.get("resources", [])) & {resource, "*"}
                and set(rule.get("verbs", [])) & {verb, "*"}
                and (not rule.get("resourceNames") or name in rule["resourceNames"])
            ):
                return True
    return False


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    assert set(selector) <= {"matchLabels"}, f"unsupported selector {selector}"
    return dict(selector.get("matchLabels", {})).items() <= labels.items()


def ingress_allowed(
    docs: list[dict[str, Any]], source: dict[str, str] | None, target: dict[str, str], port: int
) -> bool:
    """NetworkPolicy semantics for a TCP connection to `port` of a pod labelled `target` in the
    namespace, from a pod labelled `source` in the namespace (None: from outside it)."""
    policies = [
        p["spec"]
        for p in of_kind(docs, "NetworkPolicy")
        if "Ingress" in p["spec"].get("policyTypes", ["Ingress"]) and _selects(p["spec"]["podSelector"], target)
    ]
    if not policies:
        return True  # a pod no policy selects is not isolated
    for policy in policies:
        for rule in policy.get("ingress", []):
            peers = rule.get("from")
            if peers is not None:
                for peer in peers:
                    assert set(peer) == {"podSelector"}, f"unsupported peer {peer}"
                if source is None or not any(_selects(peer["podSelector"], source) for peer in peers):
                    continue
            ports = rule.get("ports")
            if ports is None or any(p.get("protocol", "TCP") == "TCP" and p["port"] == port for p in ports):
                return True
    return False
