"""`silt doctor`: can this CLI reach and use every service?"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from cli.common import client, json_option, output, table
from silt.auth.v1 import auth_pb2 as aapi
from silt.client import Client
from silt.client_base import EXIT_DENIED, EXIT_UNAVAILABLE, ClientError
from silt.graveler.v1 import graveler_pb2 as gapi
from silt.rpc.channels import ClientTLS

if TYPE_CHECKING:
    from silt.config import Config


# The gRPC services: internal on Kubernetes, where a laptop reaches only the REST API and S3.
_INTERNAL = ("auth", "graveler", "auth health", "graveler health")


@click.command("doctor")
@json_option
def doctor() -> None:
    """Check credentials and connectivity to the REST API, auth, graveler and the S3 gateway."""
    c = client()
    s = c.settings
    checks: list[dict[str, str]] = []
    exit_codes: list[int] = []

    def check(name: str, endpoint: str, probe: Callable[[], str]) -> None:
        try:
            detail = probe()
            checks.append({"service": name, "endpoint": endpoint, "status": "ok", "detail": str(detail)})
        except ClientError as exc:
            rest_ok = any(x["service"] == "rest api" and x["status"] == "ok" for x in checks)
            if name in _INTERNAL and exc.exit_code == EXIT_UNAVAILABLE and rest_ok:
                # The user commands need only the REST API: an unreachable internal port is a
                # fact about where this runs, not a failure.
                detail = f"{exc} (internal: only the operator commands need it)"
                checks.append({"service": name, "endpoint": endpoint, "status": "unreachable", "detail": detail})
                return
            checks.append({"service": name, "endpoint": endpoint, "status": "FAIL", "detail": str(exc)})
            exit_codes.append(exc.exit_code)

    check("credentials", s.credentials_source or "-", lambda: _credentials(c))
    check("rest api", s.s3_endpoint + "/api/v1", _rest_user)
    check("auth", s.auth, lambda: "signed in as " + c.auth.WhoAmI(aapi.WhoAmIRequest(), timeout=5).user.id)
    check(
        "graveler",
        s.graveler,
        lambda: (
            f"{len(c.graveler.ListRepositories(gapi.ListRepositoriesRequest(amount=1000), timeout=5).repositories)}"
            " readable repositories"
        ),
    )
    check("gateway", s.s3_endpoint, lambda: _gateway(c))
    # The probes Kubernetes uses: each service's own view of its KV and object store.
    check("auth health", s.auth, lambda: _grpc_health(s.auth, s.tls))
    check("graveler health", s.graveler, lambda: _grpc_health(s.graveler, s.tls))
    check("gateway health", s.s3_endpoint, lambda: _gateway_ready(s.s3_endpoint, s.s3_ca_file))
    # The object store, from here, when this machine has the services' configuration (the
    # stack's own, or SILT_CONFIG): the same probe as `silt check`.
    blockstore = _blockstore_config()
    if blockstore is not None:
        config, source = blockstore
        check("blockstore", source, lambda: _blockstore(config))
        if config.database.type == "cassandra":
            found = _cassandra(config)
            checks += found
            exit_codes += [EXIT_UNAVAILABLE for x in found if x["status"] == "FAIL"]
    output(
        checks,
        lambda: table(
            ["service", "endpoint", "status", "detail"],
            [(x["service"], x["endpoint"], x["status"], x["detail"]) for x in checks],
        ),
    )
    failed = [x for x in checks if x["status"] == "FAIL"]
    if failed:
        names = ", ".join(x["service"] for x in failed)
        raise ClientError(f"{len(failed)} check(s) failed: {names}", _exit_code(exit_codes))


def _exit_code(codes: list[int]) -> int:
    """Refused credentials (6) explain every other failure they cause, so they win; otherwise
    the first failure's code, as any other command would exit with it."""
    return EXIT_DENIED if EXIT_DENIED in codes else codes[0]


def _blockstore_config() -> tuple[Config, str] | None:
    """The services' configuration, if this machine has one (else the store is not checked here:
    the services' health above includes their own view of it)."""
    from cli.common import state
    from silt.client_base import find_config_path
    from silt.config import load_config

    path = find_config_path(state().config_path)
    if path is None:
        return None
    try:
        return load_config(path), path
    except Exception:  # a configuration `silt check` would report; the services' checks stand
        return None


def _blockstore(config: Config) -> str:
    from cli.stack_check import probe_blockstore
    from silt.block import open_adapter
    from silt.errors import SiltError

    try:
        return f"{config.blockstore.type} {probe_blockstore(open_adapter(config.blockstore), config)}"
    except SiltError as exc:
        raise ClientError(f"blockstore: {exc}", EXIT_UNAVAILABLE) from None


def _rest_user() -> str:
    """GET /user: the REST API answers, and takes the key."""
    from cli.common import rest

    user = rest().get("/user", what="GET /user") or {}
    return "signed in as " + str((user.get("user") or {}).get("id", "?"))


def _cassandra(config: Config) -> list[dict[str, str]]:
    """The Cassandra cluster's settings that work against Silt's driver: WARN, not a failure."""
    from silt.kv.cassandra_settings import check_cluster

    endpoint = ",".join(config.database.cassandra.contact_points)
    try:
        findings = check_cluster(config.database.cassandra)
    except Exception as exc:
        return [{"service": "cassandra", "endpoint": endpoint, "status": "FAIL", "detail": str(exc).splitlines()[0]}]
    return [
        {"service": f"cassandra {f.name}", "endpoint": endpoint, "status": "ok" if f.ok else "WARN", "detail": f.detail}
        for f in findings
    ]


def _credentials(c: Client) -> str:
    creds = c.credentials()
    return f"access key {creds.access_key_id}"


def _grpc_health(endpoint: str, tls: ClientTLS | None) -> str:
    """grpc.health.v1 Check of the whole server: SERVING only while its stores answer."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from silt.rpc.channels import open_channel

    with open_channel(endpoint, tls) as channel:
        try:
            stub = health_pb2_grpc.HealthStub(channel)
            reply = stub.Check(health_pb2.HealthCheckRequest(), timeout=5)  # type: ignore[attr-defined]
        except grpc.RpcError as exc:
            raise ClientError(f"health check failed: {exc.code().name}", EXIT_UNAVAILABLE) from None
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
    if reply.status != health_pb2.HealthCheckResponse.SERVING:
        raise ClientError(f"{status}: its KV or object store does not answer (see its log)", EXIT_UNAVAILABLE)
    return status


def _gateway_ready(endpoint: str, ca_file: str | None) -> str:
    """The gateway's readiness endpoint: auth, graveler and the KV all answer it."""
    import json
    import ssl
    import urllib.error
    import urllib.request

    url = endpoint.rstrip("/") + "/_silt/health/ready"
    # https: verified against gateways.s3.tls.ca_file, else the system's trust store.
    context = ssl.create_default_context(cafile=ca_file) if url.startswith("https://") else None
    try:
        with urllib.request.urlopen(url, timeout=5, context=context) as reply:
            return str(json.loads(reply.read()).get("status", "ready"))
    except urllib.error.HTTPError as exc:
        failing = json.loads(exc.read() or b"{}").get("failing", [])
        raise ClientError(f"not ready: {', '.join(failing) or exc.code}", EXIT_UNAVAILABLE) from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise ClientError(f"readiness check failed: {exc}", EXIT_UNAVAILABLE) from None


def _gateway(c: Client) -> str:
    from botocore.exceptions import BotoCoreError
    from botocore.exceptions import ClientError as BotoError

    try:
        buckets = c.s3.list_buckets().get("Buckets", [])
    except BotoError as exc:
        code = str(exc.response.get("Error", {}).get("Code", ""))
        denied = code in ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "403")
        raise ClientError(f"{code}: {exc}", EXIT_DENIED if denied else EXIT_UNAVAILABLE) from None
    except BotoCoreError as exc:
        raise ClientError(f"{type(exc).__name__}: {exc}", EXIT_UNAVAILABLE) from None
    return f"{len(buckets)} bucket(s) listed"
