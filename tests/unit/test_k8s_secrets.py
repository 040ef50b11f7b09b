"""deploy/k8s's secrets, rendered per overlay: Cassandra runs with authentication and every KV
client logs in as itself, on its own keyspace (auth's and the gateway's reached by no other
login; graveler and the compactor share graveler's); only those clients reach Cassandra; the setup
Job writes the keys it issues into Secrets that its ServiceAccount alone may patch (and
nothing else), has a TTL and prints no secret. tests/e2e/test_k8s_deploy.py runs all of it."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from silt.config import load_config
from tests.support.k8s import (
    NAMESPACE,
    OVERLAYS,
    ingress_allowed,
    named,
    of_kind,
    pod_labels,
    pod_spec,
    rbac_allows,
    render,
    silt_config_text,
    workloads,
)
from tests.support.k8s_run import cassandra_configure_script

KV_CLIENTS = {
    "silt-auth": "auth",
    "silt-graveler": "graveler",
    "silt-compactor": "compactor",
    "silt-gateway": "gateway",
}
USERNAME, PASSWORD, KEYSPACE = (
    "SILT_DATABASE_CASSANDRA_USERNAME",
    "SILT_DATABASE_CASSANDRA_PASSWORD",
    "SILT_DATABASE_CASSANDRA_KEYSPACE",
)
SETUP_ACCOUNT = "silt-auth-setup"
CQL_PORT = 9042

# cassandra.yaml as the versions write it: 2.1 to 4.1 (a class name), 5.0 (a class_name mapping).
CASSANDRA_4_YAML = "cluster_name: x\nauthenticator: AllowAllAuthenticator\nauthorizer: AllowAllAuthorizer\n"
CASSANDRA_5_YAML = """cluster_name: 'Test Cluster'
# - PasswordAuthenticator relies on username/password pairs to authenticate
authenticator:
  class_name: AllowAllAuthenticator
# MutualTlsAuthenticator can be configured using the following configuration.
#  class_name: org.apache.cassandra.auth.MutualTlsAuthenticator
#  parameters:
#    validator_class_name: org.apache.cassandra.auth.SpiffeCertificateValidator

# Authorization backend, implementing IAuthorizer; used to limit access/provide permissions
authorizer:
  class_name: AllowAllAuthorizer

role_manager:
  class_name: CassandraRoleManager
  parameters:
"""


@pytest.fixture(params=OVERLAYS)
def docs(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    return render(str(request.param))


def env_of(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {var["name"]: var for var in container.get("env", [])}


def secret_ref(var: dict[str, Any]) -> tuple[str, str]:
    ref = var["valueFrom"]["secretKeyRef"]
    return ref["name"], ref["key"]


def all_containers(doc: dict[str, Any]) -> list[dict[str, Any]]:
    spec = pod_spec(doc)
    return [*spec.get("initContainers", []), *spec["containers"]]


def setup_job(docs: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    job = named(docs, "Job", "silt-auth-setup")
    (roles,) = pod_spec(job)["initContainers"]
    (setup,) = pod_spec(job)["containers"]
    return job, roles, setup


def flag_values(args: list[str], flag: str) -> list[str]:
    return [args[i + 1] for i, arg in enumerate(args) if arg == flag]


def run_configure_script(docs: list[dict[str, Any]], tmp_path: Path, text: str) -> tuple[int, str]:
    script = cassandra_configure_script(docs, tmp_path)
    yaml_file = tmp_path / "cassandra.yaml"
    yaml_file.write_text(text)
    done = subprocess.run(["bash", str(script), str(yaml_file)], capture_output=True, text=True, timeout=30)
    return done.returncode, yaml_file.read_text()


# --- Cassandra ----------------------------------------------------------------------------


@pytest.mark.parametrize("layout", [CASSANDRA_4_YAML, CASSANDRA_5_YAML], ids=["2.1-4.1", "5.0"])
def test_cassandra_starts_with_password_authentication_and_role_authorization(
    docs: list[dict[str, Any]], tmp_path: Path, layout: str
) -> None:
    (container,) = pod_spec(named(docs, "StatefulSet", "cassandra"))["containers"]
    # The script runs on the image's own cassandra.yaml, then the image's entrypoint starts
    # Cassandra (cassandra_configure_script checks the command has that shape).
    code, written = run_configure_script(docs, tmp_path, layout)
    assert code == 0
    config = yaml.safe_load(written)
    assert _class(config["authenticator"]) == "PasswordAuthenticator"
    assert _class(config["authorizer"]) == "CassandraAuthorizer"
    assert written.count("MutualTlsAuthenticator") == layout.count("MutualTlsAuthenticator")  # comments untouched
    # The readiness probe needs no CQL login (there is no anonymous one any more).
    assert "cqlsh" not in str(container["readinessProbe"])


def test_the_cassandra_configuration_script_fails_when_it_cannot_turn_authentication_on(
    docs: list[dict[str, Any]], tmp_path: Path
) -> None:
    code, _ = run_configure_script(docs, tmp_path, "cluster_name: x\n")
    assert code != 0, "Cassandra would start without authentication"


def _class(value: Any) -> str:
    return str(value["class_name"] if isinstance(value, dict) else value)


def test_each_kv_client_logs_in_to_cassandra_as_itself_and_auths_keyspace_is_its_alone(
    docs: list[dict[str, Any]], tmp_path: Path
) -> None:
    (tmp_path / "silt.yaml").write_text(silt_config_text(docs))
    config = load_config(tmp_path / "silt.yaml", env={}).database.cassandra
    assert config.create_schema is False, "the services' logins may not create schema"
    _, roles_container, setup = setup_job(docs)
    assert roles_container["command"] == ["python", "-m", "silt.kv.cassandra_roles"]
    roles_env = env_of(roles_container)
    # The roles the Job creates: name -> (keyspace, the Secret holding its password), and the
    # keyspaces each may only read.
    roles: dict[str, tuple[str, tuple[str, str]]] = {}
    reads: dict[str, list[str]] = {}
    for spec in flag_values(roles_container["args"], "--role"):
        name, keyspace, variable, *read = spec.split(":")
        roles[name] = (keyspace, secret_ref(roles_env[variable]))
        reads[name] = read[0].split(",") if read else []
    # The Job logs in as the superuser of its own Secret, which nothing else reads.
    assert secret_ref(roles_env[USERNAME]) == ("silt-cassandra-superuser", "username")
    assert secret_ref(roles_env[PASSWORD]) == ("silt-cassandra-superuser", "password")
    for doc in workloads(docs):
        for container in all_containers(doc):
            if container is not roles_container:
                assert "silt-cassandra-superuser" not in str(container.get("env")), doc["metadata"]["name"]

    logins: dict[str, str] = {}
    keyspaces: dict[str, str] = {}
    for deployment, service in KV_CLIENTS.items():
        (container,) = pod_spec(named(docs, "Deployment", deployment))["containers"]
        env = env_of(container)
        name = env[USERNAME]["value"]
        keyspace = env[KEYSPACE]["value"] if KEYSPACE in env else config.keyspace
        assert roles[name] == (keyspace, secret_ref(env[PASSWORD])), deployment
        assert secret_ref(env[PASSWORD]) == (f"silt-cassandra-{service}", "password")
        logins[deployment], keyspaces[deployment] = name, keyspace
    assert len(set(logins.values())) == len(logins), "two services share a Cassandra login"
    assert set(roles) == set(logins.values()), "a login nobody uses, or one the Job does not create"
    # auth's users, groups, policies and credentials live in a keyspace no other login reaches:
    # a compromised graveler or compactor cannot write itself into Admins through Cassandra.
    others = {keyspaces[d] for d in KV_CLIENTS if d != "silt-auth"}
    assert keyspaces["silt-auth"] not in others, "another service's login reaches auth's keyspace"
    # The internet-facing gateway keeps its multipart uploads in a keyspace of its own: its
    # login cannot read or rewrite auth's users and policies or rewrite graveler's refs. It reads
    # graveler's keyspace (SELECT alone), the one its direct reads are pointed at; nobody else
    # reads another keyspace.
    assert keyspaces["silt-gateway"] not in {keyspaces[d] for d in KV_CLIENTS if d != "silt-gateway"}
    gateway_env = env_of(pod_spec(named(docs, "Deployment", "silt-gateway"))["containers"][0])
    assert reads == {name: [] for name in roles} | {
        logins["silt-gateway"]: [gateway_env["SILT_GATEWAYS_S3_GRAVELER_KEYSPACE"]["value"]]
    }
    assert gateway_env["SILT_GATEWAYS_S3_GRAVELER_KEYSPACE"]["value"] == keyspaces["silt-graveler"]
    # Graveler and the compactor (graveler's core, compacting its branches) share the configured one.
    assert keyspaces["silt-graveler"] == keyspaces["silt-compactor"] == config.keyspace
    # auth's data is written by the setup container, as auth, in auth's keyspace.
    setup_env = env_of(setup)
    assert setup_env[USERNAME]["value"] == logins["silt-auth"]
    assert setup_env[KEYSPACE]["value"] == keyspaces["silt-auth"]
    assert secret_ref(setup_env[PASSWORD]) == secret_ref(
        env_of(pod_spec(named(docs, "Deployment", "silt-auth"))["containers"][0])[PASSWORD]
    )
    # Anything else (the GC CronJob) works through graveler, with no Cassandra login.
    for doc in workloads(docs):
        if doc["metadata"]["name"] not in {*KV_CLIENTS, "silt-auth-setup", "cassandra"}:
            for container in all_containers(doc):
                assert not any(v.startswith("SILT_DATABASE_") for v in env_of(container)), doc["metadata"]["name"]


def test_only_pods_with_a_cassandra_login_reach_cassandra(docs: list[dict[str, Any]]) -> None:
    cassandra = pod_labels(named(docs, "StatefulSet", "cassandra"))
    assert not ingress_allowed(docs, None, cassandra, CQL_PORT), "Cassandra is reachable from outside the namespace"
    assert not ingress_allowed(docs, {}, cassandra, CQL_PORT), "an unlabelled pod reaches Cassandra"
    assert ingress_allowed(docs, cassandra, cassandra, 7000), "Cassandra's nodes cannot gossip"
    for doc in workloads(docs):
        name = doc["metadata"]["name"]
        if name == "cassandra":
            continue
        has_login = any(USERNAME in env_of(c) for c in all_containers(doc))
        assert ingress_allowed(docs, pod_labels(doc), cassandra, CQL_PORT) == has_login, name
    assert not ingress_allowed(docs, pod_labels(named(docs, "CronJob", "silt-gc")), cassandra, CQL_PORT)


# --- the setup Job, its Secrets and its ServiceAccount --------------------------------------


def test_the_setup_job_writes_the_keys_into_secrets_and_is_deleted_after_a_while(docs: list[dict[str, Any]]) -> None:
    job, _, setup = setup_job(docs)
    assert 0 < job["spec"]["ttlSecondsAfterFinished"] <= 24 * 3600
    assert setup["command"] == ["python", "-m", "services.auth.setup_k8s"], "the key-printing setup runs"
    targets = dict(spec.split("=", 1) for spec in flag_values(setup["args"], "--secret"))
    assert set(targets) == {"admin", "graveler", "compactor", "gateway", "api", "gc"}
    # The Secrets are declared without data: the Job fills them, nobody ships keys.
    declared = {s["metadata"]["name"]: s for s in of_kind(docs, "Secret")}
    for secret in targets.values():
        assert not declared[secret].get("data") and not declared[secret].get("stringData"), secret
    # Every service signs with the key the Job wrote for it; GC with its own user's, not admin's.
    for deployment, service in KV_CLIENTS.items():
        if service == "auth":
            continue
        env = env_of(pod_spec(named(docs, "Deployment", deployment))["containers"][0])
        assert secret_ref(env["SILT_CREDENTIALS_ACCESS_KEY_ID"]) == (targets[service], "access-key-id")
        assert secret_ref(env["SILT_CREDENTIALS_SECRET_ACCESS_KEY"]) == (targets[service], "secret-access-key")
    # The REST API in the gateway's pods signs as svc-api, with a key of its own.
    gateway = env_of(pod_spec(named(docs, "Deployment", "silt-gateway"))["containers"][0])
    assert secret_ref(gateway["SILT_API_CREDENTIALS_ACCESS_KEY_ID"]) == (targets["api"], "access-key-id")
    assert secret_ref(gateway["SILT_API_CREDENTIALS_SECRET_ACCESS_KEY"]) == (targets["api"], "secret-access-key")
    assert targets["api"] != targets["gateway"]
    gc = env_of(pod_spec(named(docs, "CronJob", "silt-gc"))["containers"][0])
    assert secret_ref(gc["SILT_ACCESS_KEY_ID"]) == (targets["gc"], "access-key-id")
    assert secret_ref(gc["SILT_SECRET_ACCESS_KEY"]) == (targets["gc"], "secret-access-key")
    assert targets["gc"] != targets["admin"]


def test_the_setup_jobs_service_account_may_patch_those_secrets_and_nothing_else(docs: list[dict[str, Any]]) -> None:
    _, _, setup = setup_job(docs)
    targets = {spec.split("=", 1)[1] for spec in flag_values(setup["args"], "--secret")}
    secrets = {s["metadata"]["name"] for s in of_kind(docs, "Secret")} | {"silt-secrets", "silt-ca", "other"}
    secrets |= {c["spec"]["secretName"] for c in of_kind(docs, "Certificate")}
    verbs = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")
    for secret in secrets | targets:
        for verb in verbs:
            allowed = rbac_allows(docs, SETUP_ACCOUNT, verb, "secrets", secret)
            assert allowed == (verb == "patch" and secret in targets), (verb, secret)
    for resource in ("pods", "serviceaccounts", "configmaps", "roles", "rolebindings"):
        assert not any(rbac_allows(docs, SETUP_ACCOUNT, verb, resource, "x") for verb in verbs), resource
    # No other ServiceAccount is granted anything.
    for binding in of_kind(docs, "RoleBinding"):
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": SETUP_ACCOUNT, "namespace": NAMESPACE}]


def test_no_container_but_the_setup_one_gets_an_api_token(docs: list[dict[str, Any]]) -> None:
    for account in of_kind(docs, "ServiceAccount"):
        assert account.get("automountServiceAccountToken") is False, account["metadata"]["name"]
    mounted_tokens = []
    for doc in workloads(docs):
        spec = pod_spec(doc)
        assert spec.get("automountServiceAccountToken") is False, doc["metadata"]["name"]
        token_volumes = {
            v["name"]
            for v in spec.get("volumes", [])
            if any("serviceAccountToken" in s for s in v.get("projected", {}).get("sources", []))
        }
        for container in all_containers(doc):
            if {m["name"] for m in container.get("volumeMounts", [])} & token_volumes:
                mounted_tokens.append((doc["metadata"]["name"], container["name"], spec.get("serviceAccountName")))
    assert mounted_tokens == [("silt-auth-setup", "setup", SETUP_ACCOUNT)]
