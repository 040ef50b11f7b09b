"""One Silt stack per test session, started exactly as `make run` starts it (silt.launcher.Stack),
with real processes on free loopback ports in a temporary data directory."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cli.common import State
from cli.main import cli
from silt.graveler.v1 import graveler_pb2 as api
from silt.graveler.v1 import graveler_pb2_grpc as api_grpc
from silt.graveler.v1 import model_pb2 as pb
from silt.launcher import Stack, available_services
from silt.rpc.signing import Credentials, signed_channel
from tests.support.gateway_stack import GatewayStack, gateway_stack
from tests.support.moto import moto_client, s3_blockstore_overrides
from tests.support.proxied_stack import proxied_kv_stack  # noqa: F401
from tests.support.spark import SHORT_JVM_OPTIONS

REPO_ROOT = Path(__file__).resolve().parents[2]
# `make test` installs the AWS CLI here (its botocore pin conflicts with ours); else the PATH's.
CLIENTS_BIN = REPO_ROOT / ".venv-clients" / "bin"


# For the CLI's Spark jobs (`silt gc run`, `silt gc expire`), each a JVM of its own that lives
# seconds over a few objects: C2's compiles and a parallel collector's threads only pay off in
# long runs, so C1 alone and the serial collector start and finish such a job about a third
# sooner. What the job does, and what the tests check of it, is the same.
SHORT_JVM_ENV = {"JAVA_TOOL_OPTIONS": SHORT_JVM_OPTIONS}


def aws_cli() -> str:
    """The AWS CLI that `make test` installs (make clients); its absence fails the tests using it."""
    bundled = CLIENTS_BIN / "aws"
    found = str(bundled) if bundled.exists() else shutil.which("aws")
    assert found, "the AWS CLI is missing: run `make clients` (make test does)"
    return found


def isolated_aws_env() -> dict[str, str]:
    """No ~/.aws profile of the developer's may change what the AWS CLI does."""
    return {"AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull}


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


class Silt:
    """Runs `silt` as a user would: a real subprocess (or, for speed, click's runner in-process)
    against the running stack, with the given environment."""

    def __init__(self, env: dict[str, str | None], cwd: Path) -> None:
        self.env = env
        self.cwd = cwd

    def as_user(self, access_key_id: str, secret: str) -> Silt:
        return Silt({**self.env, "SILT_ACCESS_KEY_ID": access_key_id, "SILT_SECRET_ACCESS_KEY": secret}, self.cwd)

    def __call__(self, *args: str, ok: bool = True) -> Result:
        """In-process, through click's runner (about 100 times faster than a new interpreter)."""
        runner = CliRunner()
        result = runner.invoke(cli, list(args), obj=State(), env=self.env, catch_exceptions=False)
        out = Result(result.exit_code, result.stdout, result.stderr)
        if ok:
            assert out.code == 0, f"silt {' '.join(args)} -> {out.code}: {out.err}{out.out}"
        return out

    def process_env(self) -> dict[str, str]:
        """The environment of a subprocess: ours, with self.env applied (None removes)."""
        merged: dict[str, str | None] = {**os.environ, **isolated_aws_env(), **self.env, "PYTHONPATH": str(REPO_ROOT)}
        merged["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
        return {k: v for k, v in merged.items() if v is not None}

    def proc(self, *args: str, ok: bool = True, input: str | None = None) -> Result:
        """As a real process: `python -m cli.main ...`."""
        done = subprocess.run(
            [sys.executable, "-m", "cli.main", *args],
            env=self.process_env(),
            cwd=self.cwd,
            capture_output=True,
            text=True,
            input=input,
            timeout=120,
        )
        out = Result(done.returncode, done.stdout, done.stderr)
        if ok:
            assert out.code == 0, f"silt {' '.join(args)} -> {out.code}: {out.err}{out.out}"
        return out


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    data_dir = tmp_path_factory.mktemp("silt-data")
    ports = dict.fromkeys(available_services(), 0)
    with Stack(data_dir, ports=ports, on_event=lambda _: None, log_level="WARN") as running:
        yield running


# The buckets of s3_stack's blockstore: the repositories' namespaces, and the landing bucket whose
# exports/ imports and linked objects may name (and nothing else of it).
S3_DATA = "silt-api-s3-data"
S3_LANDING = "silt-api-s3-landing"


@pytest.fixture(scope="session")
def s3_stack(moto_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    """A stack on an S3 blockstore (moto_server), shared by the e2e tests on S3 (the REST API's
    presigned URLs, presigned multipart uploads and imports: tests/e2e/api's s3_api; the
    gateway's data path on S3): a stack each cost three starts of the services."""
    store = moto_client(moto_server)
    for bucket in (S3_DATA, S3_LANDING):
        store.create_bucket(Bucket=bucket)
    overrides = {
        "blockstore": s3_blockstore_overrides(moto_server),
        "graveler": {
            "allowed_namespace_roots": [f"s3://{S3_DATA}/"],
            "allowed_import_prefixes": [f"s3://{S3_LANDING}/exports/"],
        },
        "gateways": {"s3": {"storage_namespace_template": f"s3://{S3_DATA}/{{repo}}"}},
    }
    with gateway_stack(tmp_path_factory.mktemp("e2e-s3-stack"), overrides=overrides) as stack:
        yield stack


@pytest.fixture(scope="session")
def silt(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Silt:
    cwd = tmp_path_factory.mktemp("cwd")
    # Nothing from the developer's own environment may point the CLI elsewhere.
    env: dict[str, str | None] = {k: None for k in os.environ if k.startswith(("SILT_", "AWS_"))}
    env.update(stack.env_for_clients())
    return Silt(env, cwd)


def graveler_stub(stack: Stack, credentials: Credentials | None = None) -> api_grpc.GravelerServiceStub:
    """A graveler client signed as the admin (or credentials), as any gRPC program would have."""
    options = [("grpc.initial_reconnect_backoff_ms", 100), ("grpc.max_reconnect_backoff_ms", 500)]
    channel = signed_channel(stack.endpoints["graveler"], credentials or stack.admin, options)  # type: ignore[arg-type]
    return api_grpc.GravelerServiceStub(channel)


def entry(key: str, version: str = "v1", size: int = 100) -> pb.Entry:
    """Object metadata as the gateway would stage it after writing the bytes."""
    return pb.Entry(
        physical_address=f"data/{version}/{key}", size=size, etag=f"{version}-{key}", content_type="text/plain"
    )


def stage_tree(stack: Stack, repo: str, branch: str, keys: list[str], version: str = "v1") -> None:
    stub = graveler_stub(stack)
    with ThreadPoolExecutor(8) as pool:
        list(
            pool.map(
                lambda k: stub.StageEntry(
                    api.StageEntryRequest(repository=repo, branch=branch, key=k, entry=entry(k, version)), timeout=30
                ),
                keys,
            )
        )
