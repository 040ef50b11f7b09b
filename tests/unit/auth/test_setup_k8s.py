"""The auth-setup Job's key publishing (services/auth/setup_k8s.py, kube_secrets.py) against a
stand-in API server that applies the rendered RBAC: keys land in the Secrets named, a refused
or missing Secret fails with a typed error that shows no key, and every issued key needs a
Secret. And the argument checks of the Cassandra roles step (silt/kv/cassandra_roles.py), and
how it takes back every grant a login holds beyond its own keyspace."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import SecretStr

from services.auth.kube_secrets import KubeApi
from services.auth.setup import IssuedKey, SetupResult
from services.auth.setup_k8s import parse_targets, publish
from silt.config import CassandraConfig
from silt.errors import ConfigError, FailedPrecondition, InvalidArgument, NotFound, PermissionDenied, Unavailable
from silt.kv.cassandra_roles import _superuser, parse_role, revoke_other_grants
from tests.support.k8s import render
from tests.support.kube_api import KubeApiServer

SECRET_KEY = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


@pytest.fixture
def api_server(tmp_path: Path) -> Iterator[KubeApiServer]:
    docs: list[dict[str, Any]] = render("dev")
    server = KubeApiServer(docs, {}, tmp_path).start()
    # As if the manifests had not been applied: a Secret the Role names does not exist.
    server.secrets.pop("silt-gc-credentials")
    try:
        yield server
    finally:
        server.stop()


def client(server: KubeApiServer, tmp_path: Path, account: str = "silt-auth-setup") -> KubeApi:
    directory = tmp_path / "sa"
    directory.mkdir(exist_ok=True)
    (directory / "token").write_text(server.token_for(account))
    (directory / "ca.crt").write_text(server.ca_pem)
    (directory / "namespace").write_text("silt")
    env = {"KUBERNETES_SERVICE_HOST": server.host, "KUBERNETES_SERVICE_PORT": str(server.port)}
    return KubeApi.in_cluster(directory, env)


def key(user: str) -> IssuedKey:
    return IssuedKey(user, f"AKIA{user.upper():0<16}"[:20], SECRET_KEY)


def test_keys_land_in_the_secrets_named(api_server: KubeApiServer, tmp_path: Path) -> None:
    api = client(api_server, tmp_path)
    # The gateway's pods get two keys: svc-gateway's for S3, svc-api's for the REST API.
    targets = parse_targets(
        ["admin=silt-admin-credentials", "gateway=silt-gateway-credentials", "api=silt-api-credentials"]
    )
    publish(api, targets, SetupResult(key("admin"), {"gateway": key("svc-gateway"), "api": key("svc-api")}))
    for service in ("gateway", "api"):
        assert api_server.secrets[f"silt-{service}-credentials"] == {
            "access-key-id": key(f"svc-{service}").access_key_id,
            "secret-access-key": SECRET_KEY,
        }
    assert api_server.secrets["silt-admin-credentials"]["access-key-id"] == key("admin").access_key_id


def test_a_secret_the_role_does_not_name_is_refused_without_showing_the_key(
    api_server: KubeApiServer, tmp_path: Path
) -> None:
    api = client(api_server, tmp_path)
    with pytest.raises(PermissionDenied, match="silt-secrets") as refused:
        api.patch_secret_data("silt-secrets", {"secret-access-key": SECRET_KEY})
    assert SECRET_KEY not in str(refused.value)
    assert "secret-access-key" not in api_server.secrets["silt-secrets"]
    # Another ServiceAccount's token may patch nothing.
    with pytest.raises(PermissionDenied):
        client(api_server, tmp_path, "default").patch_secret_data("silt-admin-credentials", {"x": "y"})


def test_a_missing_secret_says_to_apply_the_manifests(api_server: KubeApiServer, tmp_path: Path) -> None:
    with pytest.raises(NotFound, match="apply deploy/k8s"):
        client(api_server, tmp_path).patch_secret_data("silt-gc-credentials", {"secret-access-key": SECRET_KEY})


def test_every_issued_key_needs_a_secret(api_server: KubeApiServer, tmp_path: Path) -> None:
    api = client(api_server, tmp_path)
    with pytest.raises(FailedPrecondition):
        publish(api, {"admin": "silt-admin-credentials"}, SetupResult(key("admin"), {"gc": key("svc-gc")}))
    assert api_server.requests == [], "nothing may be written when a key would be lost"
    with pytest.raises(InvalidArgument):
        parse_targets(["gateway=silt-gateway-credentials"])  # the admin's key would be lost


def test_outside_a_pod_the_api_is_not_guessed(tmp_path: Path) -> None:
    with pytest.raises(FailedPrecondition, match="KUBERNETES_SERVICE_HOST"):
        KubeApi.in_cluster(tmp_path, {})


def test_cassandra_roles_refuse_unsafe_arguments() -> None:
    env = {"P": "secret-password"}
    role = parse_role("silt_gateway:silt_gateway:P", env)
    assert (role.name, role.keyspace, role.password.get_secret_value()) == ("silt_gateway", "silt_gateway", env["P"])
    assert "secret-password" not in repr(role)
    reader = parse_role("silt_gateway:silt_gateway:P:silt", env)
    assert (reader.keyspace, reader.reads) == ("silt_gateway", ("silt",))
    for spec in (
        "cassandra:silt:P",
        "a;drop:silt:P",
        "x:silt:MISSING",
        "x:bad-keyspace:P",
        "x:silt",
        "x:silt_gateway:P:bad-keyspace",
        "x:silt_gateway:P:silt_gateway",  # its own keyspace is not a read-only one
        "x:silt_gateway:P:silt:extra",
    ):
        with pytest.raises(InvalidArgument):
            parse_role(spec, env)
    # The superuser must be named, and not keep the well-known password.
    for username, password in (("silt_admin", "cassandra"), ("silt_admin", None), (None, "long-password")):
        config = CassandraConfig(username=username, password=SecretStr(password) if password else None)
        with pytest.raises(ConfigError):
            _superuser(config)


class PermissionsSession:
    """Answers LIST ALL PERMISSIONS with the given (resource, permission) rows; records the rest."""

    def __init__(self, grants: list[tuple[str, str]]) -> None:
        self.grants = grants
        self.statements: list[str] = []

    def execute(self, cql: str, parameters: Any = None) -> list[SimpleNamespace]:
        if cql.startswith("LIST ALL PERMISSIONS OF "):
            return [SimpleNamespace(username="x", resource=r, permission=p) for r, p in self.grants]
        self.statements.append(cql)
        return []


def test_the_roles_step_revokes_every_grant_but_select_and_modify_on_the_logins_own_keyspace() -> None:
    # auth's login as the first per-service layout left it (on graveler's keyspace), plus strays.
    session = PermissionsSession(
        [
            ("<keyspace silt_auth>", "SELECT"),
            ("<keyspace silt_auth>", "MODIFY"),
            ("<keyspace silt>", "SELECT"),
            ("<keyspace silt>", "MODIFY"),
            ("<keyspace silt_auth>", "ALTER"),
            ("<table silt_gateway.kv>", "SELECT"),
            ("<all keyspaces>", "SELECT"),
            ("<role silt_admin>", "AUTHORIZE"),
        ]
    )
    said: list[str] = []
    revoke_other_grants(session, parse_role("silt_auth:silt_auth:P", {"P": "pw"}), said.append)
    assert session.statements == [
        'REVOKE SELECT ON KEYSPACE "silt" FROM silt_auth',
        'REVOKE MODIFY ON KEYSPACE "silt" FROM silt_auth',
        'REVOKE ALTER ON KEYSPACE "silt_auth" FROM silt_auth',
        'REVOKE SELECT ON TABLE "silt_gateway"."kv" FROM silt_auth',
        "REVOKE SELECT ON ALL KEYSPACES FROM silt_auth",
        'REVOKE AUTHORIZE ON ROLE "silt_admin" FROM silt_auth',
    ]
    assert len(said) == 6 and all("revoked" in line for line in said)
    # A grant it cannot name in CQL stops the Job rather than being left in place silently.
    with pytest.raises(Unavailable, match="revoke it by hand"):
        revoke_other_grants(
            PermissionsSession([("<mbean org.apache.cassandra.db:type=Tables>", "EXECUTE")]),
            parse_role("silt_graveler:silt:P", {"P": "pw"}),
            said.append,
        )


def test_a_read_keyspace_keeps_its_select_and_loses_anything_more() -> None:
    # The gateway reads graveler's keyspace to answer reads itself, and may write none of it.
    session = PermissionsSession(
        [
            ("<keyspace silt_gateway>", "SELECT"),
            ("<keyspace silt_gateway>", "MODIFY"),
            ("<keyspace silt>", "SELECT"),
            ("<keyspace silt>", "MODIFY"),
        ]
    )
    said: list[str] = []
    revoke_other_grants(session, parse_role("silt_gateway:silt_gateway:P:silt", {"P": "pw"}), said.append)
    assert session.statements == ['REVOKE MODIFY ON KEYSPACE "silt" FROM silt_gateway']
