"""A running Silt stack with the S3 gateway, for tests and benchmarks: auth, graveler and the
gateway as real processes (silt/launcher.py), plus clients signed in as the admin or as a
read-only user."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import yaml
from botocore.config import Config as BotoConfig
from pydantic import SecretStr

from silt.auth.v1 import auth_pb2, auth_pb2_grpc
from silt.graveler.v1 import graveler_pb2_grpc
from silt.launcher import Stack
from silt.rpc.signing import Credentials, signed_channel

CLIENTS_BIN = Path(__file__).resolve().parents[2] / ".venv-clients" / "bin"
DOMAIN = "s3.local"


@dataclass
class GatewayStack:
    stack: Stack
    endpoint: str
    admin: Credentials
    reader: Credentials  # a member of Analysts: ReadRepo only
    graveler: graveler_pb2_grpc.GravelerServiceStub
    region: str = "us-east-1"

    def client(self, credentials: Credentials | None = None, **config: Any) -> Any:
        creds = credentials or self.admin
        # SigV4 for presigned URLs too: botocore presigns with SigV2 unless told otherwise, and
        # a test that means SigV2 (or botocore's default, signature_version=None) asks for it.
        options = {
            "s3": {"addressing_style": "path"},
            "retries": {"max_attempts": 1},
            "signature_version": "s3v4",
            **config,
        }
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=creds.access_key_id,
            aws_secret_access_key=creds.secret_access_key.get_secret_value(),
            region_name=self.region,
            config=BotoConfig(**options),
        )

    def client_env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            AWS_ACCESS_KEY_ID=self.admin.access_key_id,
            AWS_SECRET_ACCESS_KEY=self.admin.secret_access_key.get_secret_value(),
            AWS_DEFAULT_REGION=self.region,
            AWS_CONFIG_FILE="/dev/null",
            AWS_SHARED_CREDENTIALS_FILE="/dev/null",
        )
        return env


def _reader(auth: auth_pb2_grpc.AuthServiceStub) -> Credentials:
    auth.CreateUser(auth_pb2.CreateUserRequest(id="reader", description="read-only test user"))
    auth.AddGroupMember(auth_pb2.GroupMemberRequest(group_id="Analysts", user_id="reader"))
    issued = auth.CreateCredentials(auth_pb2.CreateCredentialsRequest(user_id="reader"))
    return Credentials(issued.credential.access_key_id, SecretStr(issued.secret_access_key))


def _merge(into: dict[str, Any], changes: dict[str, Any]) -> None:
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


@contextmanager
def gateway_stack(
    data_dir: Path, log_level: str = "WARN", workers: int = 1, overrides: dict[str, Any] | None = None
) -> Iterator[GatewayStack]:
    """overrides: configuration merged over the stack's (e.g. {"blockstore": {"type": "s3", ...}})."""
    stack = Stack(
        data_dir,
        ports={"auth": 0, "graveler": 0, "gateway": 0},
        services=["auth", "graveler", "gateway"],
        restart=False,
        log_level=log_level,
    )
    stack.prepare()
    config = yaml.safe_load(stack.config_path.read_text())
    config["gateways"]["s3"]["storage_namespace_template"] = "local://{repo}"
    config["gateways"]["s3"]["domain_name"] = DOMAIN
    config["gateways"]["s3"]["workers"] = workers
    _merge(config, overrides or {})
    stack.config_path.write_text(yaml.safe_dump(config))
    stack.start()
    assert stack.admin is not None
    auth_channel = signed_channel(stack.endpoints["auth"], stack.admin)
    graveler_channel = signed_channel(stack.endpoints["graveler"], stack.admin)
    try:
        reader = _reader(auth_pb2_grpc.AuthServiceStub(auth_channel))
        yield GatewayStack(
            stack,
            stack.endpoints["gateway"],
            stack.admin,
            reader,
            graveler_pb2_grpc.GravelerServiceStub(graveler_channel),
        )
    finally:
        auth_channel.close()
        graveler_channel.close()
        stack.stop()


def stack_s3_client(stack: Stack) -> Any:
    """A boto3 S3 client of a started Stack's gateway as its admin, path-style, one attempt a call."""
    assert stack.admin is not None
    return boto3.client(
        "s3",
        endpoint_url=stack.endpoints["gateway"],
        aws_access_key_id=stack.admin.access_key_id,
        aws_secret_access_key=stack.admin.secret_access_key.get_secret_value(),
        region_name="us-east-1",
        config=BotoConfig(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )
