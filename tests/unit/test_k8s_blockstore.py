"""deploy/k8s's blockstore switch: the overlay's blockstore.env (ConfigMap silt-blockstore-settings,
loaded with envFrom) chooses s3, azure or gs; the Secret silt-blockstore holds that type's secrets
under optional keys. The prod overlay is rendered once per type, its blockstore.env switched to
that type's commented example, and every workload that opens the object store must come up with
a valid configuration of that type, its secrets from the Secret and none of them in a ConfigMap."""

from __future__ import annotations

import copy
import functools
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel, SecretStr

from silt.config import Config, env_keys, load_config
from silt.namespaces import parse_namespace, parse_roots, within_roots
from tests.support.k8s import (
    BLOCKSTORE_SETTINGS,
    K8S,
    OVERLAYS,
    blockstore_settings,
    named,
    of_kind,
    pod_spec,
    render,
    render_directory,
    resolve_env,
    silt_config_text,
    workloads,
)

TYPES = ("s3", "azure", "gs")
# The workloads whose code opens the object store (graveler, the compactor's probe and journal,
# the gateway's S3 and REST API, `silt gc run`); auth, the setup Job and Cassandra do not.
STORE_WORKLOADS = {
    ("Deployment", "silt-graveler"),
    ("Deployment", "silt-compactor"),
    ("Deployment", "silt-gateway"),
    ("CronJob", "silt-gc"),
}
BLOCKSTORE_SECRET = "silt-blockstore"
# The Secret's keys by type, each with the configuration key it fills.
SECRET_KEYS = {
    "s3": {
        "access-key-id": "blockstore.s3.credentials.access_key_id",
        "secret-access-key": "blockstore.s3.credentials.secret_access_key",
    },
    "azure": {
        "azure-storage-access-key": "blockstore.azure.storage_access_key",
        "azure-connection-string": "blockstore.azure.connection_string",
    },
    "gs": {"gs-credentials-json": "blockstore.gs.credentials_json"},
}
# Keys whose values are secret: they may come from a Secret only.
SECRET_CONFIG_KEYS = {key for keys in SECRET_KEYS.values() for key in keys.values()}
_SECTION = re.compile(r"^# --- (.+?) -+$")
_SECTION_TYPES = {"S3": "s3", "Azure": "azure", "Google": "gs"}
_ACTIVE, _COMMENTED = re.compile(r"^SILT_[A-Z0-9_]+="), re.compile(r"^# SILT_[A-Z0-9_]+=")


def env_file_for(text: str, store: str) -> str:
    """blockstore.env switched to `store`: every other section's variables commented out and, if
    that section is not the active one already, its commented variables uncommented (an active
    section's commented lines are optional settings, left as they are)."""
    sections: list[tuple[str | None, list[str]]] = [(None, [])]
    for line in text.splitlines():
        if match := _SECTION.match(line):
            sections.append((next(t for w, t in _SECTION_TYPES.items() if match.group(1).startswith(w)), []))
        sections[-1][1].append(line)
    out = []
    for section, lines in sections:
        active = any(_ACTIVE.match(line) for line in lines)
        for line in lines:
            if section not in (None, store) and _ACTIVE.match(line):
                line = "# " + line
            elif section == store and not active and _COMMENTED.match(line):
                line = line[2:]
            out.append(line)
    return "\n".join(out) + "\n"


def prod_with(store: str) -> list[dict[str, Any]]:
    """The prod overlay switched to store, rendered: a copy of the rendering, made once per
    type (kustomize takes a second or two each time)."""
    return copy.deepcopy(_rendered_prod_with(store))


@functools.cache
def _rendered_prod_with(store: str) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        k8s = Path(tmp) / "k8s"
        shutil.copytree(K8S, k8s)
        env_file = k8s / "overlays" / "prod" / "blockstore.env"
        env_file.write_text(env_file_for(env_file.read_text(), store))
        return render_directory(k8s / "overlays" / "prod")


def secret_values(store: str) -> dict[str, str]:
    """Sample values for the type's Secret keys (azure: the access key; a connection string is
    the alternative, checked on its own)."""
    keys = ["azure-storage-access-key"] if store == "azure" else list(SECRET_KEYS[store])
    return {key: f"sample-{key}-4f0c9e" for key in keys}


def live_secrets(container: dict[str, Any], blockstore: dict[str, str]) -> dict[str, dict[str, str]]:
    """Stand-ins for the Secrets created out of band or by the setup Job (prod's hold no data),
    with silt-blockstore as given."""
    secrets: dict[str, dict[str, str]] = {BLOCKSTORE_SECRET: dict(blockstore)}
    for var in container.get("env", []):
        ref = var.get("valueFrom", {}).get("secretKeyRef")
        if ref and ref["name"] != BLOCKSTORE_SECRET:
            secrets.setdefault(ref["name"], {})[ref["key"]] = "x"
    return secrets


def workload_config(docs: list[dict[str, Any]], doc: dict[str, Any], env: dict[str, str], tmp_path: Path) -> Config:
    path = tmp_path / f"{doc['metadata']['name']}.yaml"
    path.write_text(silt_config_text(docs))
    return load_config(path, env=env)


def container_of(doc: dict[str, Any]) -> dict[str, Any]:
    (container,) = pod_spec(doc)["containers"]
    return container


@pytest.fixture(params=TYPES)
def store(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_the_example_env_files_switch_the_type(store: str) -> None:
    text = (K8S / "overlays" / "prod" / "blockstore.env").read_text()
    switched = env_file_for(text, store)
    active = dict(line.split("=", 1) for line in switched.splitlines() if line.startswith("SILT_"))
    assert active["SILT_BLOCKSTORE_TYPE"] == store
    assert {"SILT_GRAVELER_ALLOWED_NAMESPACE_ROOTS", "SILT_GATEWAYS_S3_STORAGE_NAMESPACE_TEMPLATE"} <= set(active)
    # Every variable is set once: the other types' blocks are commented out.
    assert len(active) == len([line for line in switched.splitlines() if line.startswith("SILT_")])
    assert env_file_for(text, "s3") == text, "prod's blockstore.env selects s3, its first example"


def test_every_store_workload_runs_with_the_selected_type(store: str, tmp_path: Path) -> None:
    docs = prod_with(store)
    settings = blockstore_settings(docs)
    assert settings["SILT_BLOCKSTORE_TYPE"] == store
    blockstore = secret_values(store)
    for kind, name in STORE_WORKLOADS:
        doc = named(docs, kind, name)
        container = container_of(doc)
        assert {"configMapRef": {"name": BLOCKSTORE_SETTINGS}} in container.get("envFrom", []), name
        env = resolve_env(docs, container, live_secrets(container, blockstore))
        assert env["SILT_BLOCKSTORE_TYPE"] == store, name
        config = workload_config(docs, doc, env, tmp_path)
        assert config.blockstore.type == store
        # The type's settings from the switch, its secrets from the Secret.
        for variable, value in settings.items():
            assert env[variable] == value, (name, variable)
        for key, value in blockstore.items():
            field = _get(config, SECRET_KEYS[store][key])
            assert (field.get_secret_value() if isinstance(field, SecretStr) else field) == value, (name, key)
        _check_namespaces(config, store)


def test_azure_takes_a_connection_string_instead_of_the_key(tmp_path: Path) -> None:
    docs = prod_with("azure")
    doc = named(docs, "Deployment", "silt-graveler")
    container = container_of(doc)
    blockstore = {"azure-connection-string": "DefaultEndpointsProtocol=https;AccountName=siltprod;AccountKey=x"}
    config = workload_config(docs, doc, resolve_env(docs, container, live_secrets(container, blockstore)), tmp_path)
    assert config.blockstore.azure.connection_string is not None
    assert config.blockstore.azure.storage_access_key is None


def test_workload_identity_needs_no_secret_key(store: str, tmp_path: Path) -> None:
    # Azure's default credential, GCS's application default credentials (and IRSA for S3): the
    # Secret silt-blockstore may be missing altogether, and every key of it is optional.
    docs = prod_with(store)
    for kind, name in STORE_WORKLOADS:
        doc = named(docs, kind, name)
        container = container_of(doc)
        secrets = live_secrets(container, {})
        del secrets[BLOCKSTORE_SECRET]
        env = resolve_env(docs, container, secrets)
        assert not {v for v in env if any(v == _variable(k) for k in SECRET_CONFIG_KEYS)}, name
        assert workload_config(docs, doc, env, tmp_path).blockstore.type == store


def test_the_blockstore_secret_keys_are_optional_and_only_in_store_workloads() -> None:
    docs = render("prod")
    expected = {(_variable(key), secret_key) for keys in SECRET_KEYS.values() for secret_key, key in keys.items()}
    for doc in workloads(docs):
        name = (doc["kind"], doc["metadata"]["name"])
        spec = pod_spec(doc)
        for container in [*spec.get("initContainers", []), *spec["containers"]]:
            refs = {
                (var["name"], var["valueFrom"]["secretKeyRef"]["key"]): var["valueFrom"]["secretKeyRef"]
                for var in container.get("env", [])
                if var.get("valueFrom", {}).get("secretKeyRef", {}).get("name") == BLOCKSTORE_SECRET
            }
            settings = [s for s in container.get("envFrom", []) if s["configMapRef"]["name"] == BLOCKSTORE_SETTINGS]
            if name in STORE_WORKLOADS:
                assert set(refs) == expected, name
                assert all(ref.get("optional") is True for ref in refs.values()), name
                assert settings, name
            else:
                assert not refs and not settings, name


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_no_secret_in_a_configmap_and_silt_yaml_agrees_with_the_switch(overlay: str, tmp_path: Path) -> None:
    docs = render(overlay)
    settings = blockstore_settings(docs)
    known = env_keys()
    # The Secret's keys (an access key id is no secret by itself, but travels with its key).
    secret_variables = {known[key] for key in _secret_keys(Config) | SECRET_CONFIG_KEYS}
    assert not set(settings) & secret_variables, "a secret belongs in the Secret silt-blockstore"
    assert set(settings) <= set(known.values())
    # Where silt.yaml sets a key of the switch too, it says the same (the variable wins).
    path = tmp_path / "silt.yaml"
    path.write_text(silt_config_text(docs))
    from_file, switched = load_config(path, env={}), load_config(path, env=settings)
    by_variable = {var: key for key, var in known.items()}
    raw = yaml.safe_load(silt_config_text(docs))
    for variable in settings:
        key = by_variable[variable]
        if _present(raw, key):
            assert _get(from_file, key) == _get(switched, key), key


def test_no_sample_secret_value_lands_in_a_configmap(store: str, tmp_path: Path) -> None:
    docs = prod_with(store)
    values = set(secret_values(store).values())
    for config_map in of_kind(docs, "ConfigMap"):
        text = str(config_map.get("data"))
        assert not any(value in text for value in values), config_map["metadata"]["name"]


def test_network_policies_leave_the_object_stores_reachable() -> None:
    # S3, Azure Blob Storage and GCS are reached over HTTPS outside the namespace: no policy
    # restricts the egress of a workload that opens the store.
    for overlay in OVERLAYS:
        for policy in of_kind(render(overlay), "NetworkPolicy"):
            assert "Egress" not in policy["spec"].get("policyTypes", ["Ingress"]), policy["metadata"]["name"]


def _check_namespaces(config: Config, store: str) -> None:
    roots = parse_roots(config.graveler.allowed_namespace_roots or [])
    assert roots, "with a cloud store every CreateRepository would be refused"
    template = config.gateways.s3.storage_namespace_template
    assert template is not None
    assert within_roots(parse_namespace(template.format(repo="example")), roots)
    scheme = {"s3": "s3", "gs": "gs", "azure": "https"}[store]
    for root in roots:
        assert root.scheme == scheme, root
        if store == "azure":
            account = config.blockstore.azure.storage_account
            assert root.parts[0] == f"{account}.{config.blockstore.azure.domain}", root


def _secret_keys(model: type[BaseModel], prefix: str = "") -> set[str]:
    """The dotted keys of the configuration whose values are secrets (SecretStr)."""
    out: set[str] = set()
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            out |= _secret_keys(annotation, f"{prefix}{name}.")
        elif "SecretStr" in str(annotation):
            out.add(prefix + name)
    return out


def _variable(key: str) -> str:
    return "SILT_" + key.replace(".", "_").upper()


def _get(config: Any, key: str) -> Any:
    for part in key.split("."):
        config = getattr(config, part)
    return config


def _present(raw: Any, key: str) -> bool:
    for part in key.split("."):
        if not isinstance(raw, dict) or part not in raw:
            return False
        raw = raw[part]
    return True
