"""TLS as configuration: a stack whose gRPC services speak mutual TLS (certificates from a
throwaway CA) and whose S3 gateway serves HTTPS, as the prod overlay runs it. Signed calls
over mTLS work; plaintext clients, clients without a certificate and clients with a
certificate from another CA are refused; boto3 and the `silt` CLI talk to it with the CA."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import botocore.exceptions
import grpc
import pytest
import yaml
from botocore.config import Config as BotoConfig
from grpc_health.v1 import health_pb2, health_pb2_grpc

from silt.auth.v1 import auth_pb2, auth_pb2_grpc
from silt.compactor.v1 import compactor_pb2, compactor_pb2_grpc
from silt.free_ports import free_port
from silt.graveler.v1 import graveler_pb2, graveler_pb2_grpc
from silt.launcher import Stack, initial_config
from silt.rpc.channels import ClientTLS, open_channel
from silt.rpc.signing import signed_channel
from tests.support.tls import Authority, Issued, new_authority

REPO_ROOT = Path(__file__).resolve().parents[2]
SERVICES = ("auth", "graveler", "compactor", "gateway")
GRPC_SERVICES = ("auth", "graveler", "compactor")


@dataclass
class TlsStack:
    stack: Stack
    ca: Authority
    client: Issued  # a certificate the CA issued to a client (the CLI, an operator)
    health_port: int  # auth's plaintext health-check port

    def tls(self, ca: Authority | None = None, issued: Issued | None = None) -> ClientTLS:
        ca = ca or self.ca
        if issued is None:
            return ClientTLS(Path(ca.ca_file).read_bytes())
        return ClientTLS(
            Path(ca.ca_file).read_bytes(), Path(issued.cert_file).read_bytes(), Path(issued.key_file).read_bytes()
        )

    def s3(self, verify: Any) -> Any:
        assert self.stack.admin is not None
        return boto3.client(
            "s3",
            endpoint_url=self.stack.endpoints["gateway"],
            aws_access_key_id=self.stack.admin.access_key_id,
            aws_secret_access_key=self.stack.admin.secret_access_key.get_secret_value(),
            region_name="us-east-1",
            config=BotoConfig(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
            verify=verify,
        )


@pytest.fixture(scope="module")
def tls_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsStack]:
    pki = tmp_path_factory.mktemp("pki")
    ca = new_authority(pki)
    services = ca.issue("silt-services")
    client = ca.issue("operator")
    data_dir = tmp_path_factory.mktemp("silt-tls").resolve()
    health_port = free_port()
    config = initial_config(data_dir)
    config["gateways"]["s3"]["tls"] = {
        "enabled": True,
        "cert_file": services.cert_file,
        "key_file": services.key_file,
        "ca_file": ca.ca_file,
    }
    config["tls"] = {
        "enabled": True,
        "cert_file": services.cert_file,
        "key_file": services.key_file,
        "ca_file": ca.ca_file,
        "require_client_cert": True,
    }
    config["auth"]["health_listen_address"] = f"127.0.0.1:{health_port}"
    (data_dir / "config.yaml").write_text(yaml.safe_dump(config))
    ports = dict.fromkeys(SERVICES, 0)
    with Stack(data_dir, ports=ports, services=list(SERVICES), restart=False, on_event=lambda _: None) as stack:
        yield TlsStack(stack, ca, client, health_port)


def refused(call: Any) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as error:
        call()
    return error.value.code()


def test_signed_calls_over_mutual_tls_reach_every_service(tls_stack: TlsStack) -> None:
    stack = tls_stack.stack
    assert stack.admin is not None
    tls = tls_stack.tls(issued=tls_stack.client)
    with signed_channel(stack.endpoints["auth"], stack.admin, tls=tls) as channel:
        who = auth_pb2_grpc.AuthServiceStub(channel).WhoAmI(auth_pb2.WhoAmIRequest(), timeout=10)
    assert who.user.id == stack.admin_user_id
    with signed_channel(stack.endpoints["graveler"], stack.admin, tls=tls) as channel:
        graveler_pb2_grpc.GravelerServiceStub(channel).ListRepositories(
            graveler_pb2.ListRepositoriesRequest(), timeout=10
        )
    with signed_channel(stack.endpoints["compactor"], stack.admin, tls=tls) as channel:
        stub = compactor_pb2_grpc.CompactorServiceStub(channel)
        # Past TLS and the signature check: the compactor itself answers that there is no such repository.
        code = refused(
            lambda: stub.GetStatus(compactor_pb2.GetStatusRequest(repository="none", branch="main"), timeout=10)
        )
        assert code == grpc.StatusCode.NOT_FOUND


@pytest.mark.parametrize("service", GRPC_SERVICES)
def test_clients_without_a_certificate_from_the_ca_are_refused(tls_stack: TlsStack, service: str) -> None:
    stack = tls_stack.stack
    assert stack.admin is not None
    other = new_authority(tls_stack.ca.directory / "other", "other")
    stranger = other.issue("stranger")
    attempts = {
        "plaintext": None,
        "no client certificate": tls_stack.tls(),
        "certificate from another CA": ClientTLS(
            Path(tls_stack.ca.ca_file).read_bytes(),
            Path(stranger.cert_file).read_bytes(),
            Path(stranger.key_file).read_bytes(),
        ),
        "server not trusted": tls_stack.tls(ca=other, issued=stranger),
    }
    for what, tls in attempts.items():
        with signed_channel(stack.endpoints[service], stack.admin, tls=tls) as channel:
            stub = auth_pb2_grpc.AuthServiceStub(channel)
            code = refused(lambda stub=stub: stub.WhoAmI(auth_pb2.WhoAmIRequest(), timeout=5))
        assert code == grpc.StatusCode.UNAVAILABLE, f"{service}, {what}: {code}"


def test_probes_check_health_on_the_plaintext_health_port_only(tls_stack: TlsStack) -> None:
    with open_channel(f"127.0.0.1:{tls_stack.health_port}", None) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        reply = stub.Check(health_pb2.HealthCheckRequest(), timeout=5)  # type: ignore[attr-defined]
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
        who: Any = channel.unary_unary("/silt.auth.v1.AuthService/WhoAmI")
        assert refused(lambda: who(b"", timeout=5)) == grpc.StatusCode.UNIMPLEMENTED


def test_boto3_talks_https_to_the_gateway_with_the_ca_bundle(tls_stack: TlsStack) -> None:
    endpoint = tls_stack.stack.endpoints["gateway"]
    assert endpoint.startswith("https://")
    s3 = tls_stack.s3(verify=tls_stack.ca.ca_file)
    s3.create_bucket(Bucket="secure")
    s3.put_object(Bucket="secure", Key="main/hello.txt", Body=b"over TLS")
    assert s3.get_object(Bucket="secure", Key="main/hello.txt")["Body"].read() == b"over TLS"
    # Without the CA the gateway's certificate is not trusted; plain HTTP gets no S3 answer.
    with pytest.raises(botocore.exceptions.SSLError):
        tls_stack.s3(verify=None).list_buckets()
    plain = boto3.client(
        "s3",
        endpoint_url=endpoint.replace("https://", "http://"),
        aws_access_key_id="AKIAIOSFODNN7EXAMPLE",
        aws_secret_access_key="wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        region_name="us-east-1",
        config=BotoConfig(retries={"max_attempts": 1}, connect_timeout=5, read_timeout=5),
    )
    with pytest.raises(botocore.exceptions.BotoCoreError):
        plain.list_buckets()


def test_the_cli_uses_tls_from_its_configuration(tls_stack: TlsStack, tmp_path: Path) -> None:
    stack = tls_stack.stack
    assert stack.admin is not None
    config = yaml.safe_load(stack.config_path.read_text())
    # The operator's own certificate, not the services'.
    config["tls"].update(cert_file=tls_stack.client.cert_file, key_file=tls_stack.client.key_file)
    cli_config = tmp_path / "cli.yaml"
    cli_config.write_text(yaml.safe_dump(config))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SILT_", "AWS_"))}
    env.update(
        SILT_CONFIG=str(cli_config),
        SILT_CLIENT_CREDENTIALS_FILE=str(stack.credentials_path),
        PYTHONPATH=str(REPO_ROOT),
    )

    def silt(*args: str, extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "cli.main", *args],
            env={**env, **(extra or {})},
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )

    created = silt("repo", "create", "cli-tls", "--storage-namespace", "local://cli-tls")
    assert created.returncode == 0, created.stderr
    listed = silt("--json", "repo", "list")
    assert listed.returncode == 0, listed.stderr
    assert "cli-tls" in listed.stdout
    doctor = silt("doctor")
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    # Without the TLS settings the same CLI cannot reach the gRPC services (the Silt options still
    # on them, such as a commit of one prefix; `repo list` is the REST API's, on the gateway's https
    # endpoint and its CA above).
    plain = silt("commit", "lakefs://cli-tls/main/p/", "-m", "x", "--allow-empty", extra={"SILT_TLS_ENABLED": "false"})
    assert plain.returncode != 0
