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


@functools.cache
def _render_text(overlay: str) -> str:
    done = subprocess.run(
        _kustomize_command(K8S / "overlays" / overlay), capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, f"kustomize {overlay}: {done.stderr.strip()}"
    return done.stdout


def render(overlay: str) -> list[dict[str, Any]]:
    """The overlay's documents (fresh copies: callers may change them)."""
    return [doc for doc in yaml.safe_load_all(_render_text(overlay)) if doc]


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


def resolve_env(
    docs: list[dict[str, Any]], container: dict[str, Any], secrets: dict[str, dict[str, str]]
) -> dict[str, str]:
    """A container's environment as the kubelet builds it: literal values, ConfigMap and Secret
    keys (Secrets from the documents, else from `secrets`), $(VAR) references to earlier ones.
    A reference to a missing ConfigMap, Secret or key fails, as the pod would not start."""
    env: dict[str, str] = {}
    for var in container.get("env", []):
        if "value" in var:
            env[var["name"]] = expand(str(var["value"]), env)
            continue
        source = var["valueFrom"]
        if "configMapKeyRef" in source:
            ref = source["configMapKeyRef"]
            data = named(docs, "ConfigMap", ref["name"])["data"]
            assert ref["key"] in data, f"ConfigMap {ref['name']} has no key {ref['key']}"
            env[var["name"]] = str(data[ref["key"]])
        elif "secretKeyRef" in source:
            ref = source["secretKeyRef"]
            env[var["name"]] = secret_value(docs, ref["name"], ref["key"], secrets)
        else:
            raise AssertionError(f"unsupported env source {source}")
    return env


def secret_value(docs: list[dict[str, Any]], name: str, key: str, extra: dict[str, dict[str, str]]) -> str:
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
