"""The container images `make image` builds, run with podman as the manifests run them.

Builds silt and silt-gc with scripts/images/build.sh (the command `make image` runs; the base
and layers come from the engine's cache and ~/.cache/silt-images after the first run), checks
what each image carries (no Spark or Java in the services' image, under its size budget; Spark,
Java and the S3A jars in the GC image), then runs the whole stack in one container of the
services' image under the manifests' security context (uid 10001, read-only root file system,
every capability dropped, no privilege escalation): boto3 and the AWS CLI's multipart upload
through the published gateway port, the container killed and replaced on the same data, every
acknowledged object still there. Skipped, with the reason, where podman cannot run containers.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml
from botocore.config import Config as BotoConfig

from silt.launcher import CREDENTIALS_FILE, free_port, initial_config
from tests.e2e.conftest import aws_cli
from tests.support.wait import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.podman]

REPO_ROOT = Path(__file__).resolve().parents[2]
IMAGES = REPO_ROOT / "scripts" / "images"
TAG = "0.1.0"  # the tag deploy/k8s names
RUNTIME_BUDGET = 400 * 2**20  # the services' image, uncompressed
BUILD_TIMEOUT_S = 3600.0  # a cold machine: debootstrap, Debian's Python, every locked wheel, Java
RUN_TIMEOUT_S = 120.0
UID = "10001"  # the manifests' runAsUser
# The manifests' securityContext, as podman flags.
SECURITY = ["--user", f"{UID}:{UID}", "--read-only", "--tmpfs", "/tmp", "--cap-drop", "ALL"]
SECURITY += ["--security-opt", "no-new-privileges"]


@dataclass(frozen=True)
class Podman:
    env: dict[str, str]

    def run(self, *args: str, timeout: float = RUN_TIMEOUT_S, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(["podman", *args], env=self.env, capture_output=True, text=True, timeout=timeout)
        assert not check or done.returncode == 0, (
            f"podman {' '.join(args)}: exit {done.returncode}:\n{done.stderr[-3000:]}"
        )
        return done

    def run_once(self, *args: str, timeout: float = RUN_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
        """`podman run --rm` under a name of our own, removed even when the call times out
        (the podman client dies then, its container does not)."""
        name = f"silt-e2e-{uuid.uuid4().hex[:8]}"
        try:
            return self.run("run", "--rm", "--name", name, *args, timeout=timeout)
        finally:
            self.run("rm", "--force", "--ignore", "--time", "0", name, check=False)


def _unusable_reason(env: dict[str, str]) -> str | None:
    """Why podman cannot serve this test here, or None. A podman that answers but then cannot
    build or run a container fails the test instead: that is a broken setup, not a missing one."""
    try:
        info = subprocess.run(["podman", "info"], env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return f"`podman info` did not answer within {RUN_TIMEOUT_S:g} s"
    if info.returncode != 0:
        return f"`podman info` fails: {info.stderr.strip()[-300:]}"
    return None


@pytest.fixture(scope="module")
def podman() -> Podman:
    if shutil.which("podman") is None:
        pytest.skip("podman is not installed (scripts/ensure-system-deps.sh installs it with apt-get)")
    conf = subprocess.run(
        [str(IMAGES / "podman-conf.sh")], capture_output=True, text=True, timeout=30, check=True
    ).stdout.strip()
    # podman even where docker answers too: the test inspects and runs with podman.
    env = {**os.environ, "CONTAINERS_CONF": conf, "SILT_IMAGE_ENGINE": "podman"}
    reason = _unusable_reason(env)
    if reason:
        pytest.skip(reason)
    return Podman(env)


@pytest.fixture(scope="module")
def images(podman: Podman) -> dict[str, str]:
    """{target: image}, built as `make image` builds them."""
    build = subprocess.run(
        [str(IMAGES / "build.sh"), TAG],
        cwd=REPO_ROOT,
        env=podman.env,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
    )
    assert build.returncode == 0, f"make image failed:\n{build.stderr[-4000:]}"
    return {"runtime": f"localhost/silt:{TAG}", "gc": f"localhost/silt-gc:{TAG}"}


def image_size(podman: Podman, image: str) -> int:
    return int(podman.run("image", "inspect", "--format", "{{.Size}}", image).stdout.strip())


def test_the_services_image_has_no_spark_or_java_and_fits_its_budget(podman: Podman, images: dict[str, str]) -> None:
    runtime = images["runtime"]
    size = image_size(podman, runtime)
    assert size <= RUNTIME_BUDGET, f"{runtime} is {size / 2**20:.0f} MiB, over {RUNTIME_BUDGET / 2**20:.0f} MiB"
    probe = "import importlib.util as u, shutil, os; print(u.find_spec('pyspark'), shutil.which('java'), os.getuid())"
    out = podman.run_once("--network", "none", *SECURITY, runtime, "python", "-c", probe).stdout.split()
    assert out == ["None", "None", UID]
    # The default command answers (the entrypoint is the venv's `silt`).
    assert "Usage" in podman.run_once("--network", "none", *SECURITY, runtime).stdout


def test_the_gc_image_carries_spark_java_and_the_s3a_jars(podman: Podman, images: dict[str, str]) -> None:
    gc = images["gc"]
    probe = "import pyspark; from silt.spark import s3a_jars; print(pyspark.__version__, len(s3a_jars()))"
    out = podman.run_once("--network", "none", *SECURITY, gc, "python", "-c", probe).stdout.split()
    assert out == ["4.1.1", "2"]
    java = podman.run_once("--network", "none", *SECURITY, gc, "java", "-version")
    assert 'version "17' in java.stderr
    assert image_size(podman, gc) > image_size(podman, images["runtime"])


@dataclass
class StackContainer:
    """`silt run` (auth, graveler, compactor, gateway) in one container of the services' image,
    its state in a host directory; the gateway's and graveler's ports published on loopback."""

    podman: Podman
    image: str
    data: Path
    ports: dict[str, int]
    name: str = ""

    @property
    def s3_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.ports['gateway']}"

    def start(self) -> None:
        self.name = f"silt-e2e-{uuid.uuid4().hex[:8]}"
        published = [f"--publish=127.0.0.1:{port}:{port}" for port in self.ports.values()]
        self.podman.run(
            "run", "-d", "--name", self.name, *SECURITY, "-v", f"{self.data}:/data:Z", *published,
            "-e", "SILT_DATA_DIR=/data", self.image, "silt", "run",
        )  # fmt: skip
        self.wait_ready()

    def wait_ready(self) -> None:
        wait_until(self._ready, timeout=RUN_TIMEOUT_S, message=f"the gateway in {self.name} ready", interval=0.5)

    def _ready(self) -> bool:
        state = self.podman.run("inspect", "--format", "{{.State.Running}}", self.name, check=False).stdout.strip()
        assert state != "false", f"{self.name} exited:\n{self.logs()}"
        try:
            with urllib.request.urlopen(f"{self.s3_endpoint}/_silt/health/ready", timeout=2) as answer:
                return bool(answer.status == 200)
        except OSError:
            return False

    def kill_service(self, module: str) -> int:
        """SIGKILL the process running `python -m module` in the container; its pid."""
        find_and_kill = (
            "import os, signal, sys\n"
            "for pid in filter(str.isdigit, os.listdir('/proc')):\n"
            "    try: argv = open(f'/proc/{pid}/cmdline', 'rb').read().split(b'\\0')\n"
            "    except OSError: continue\n"
            "    if sys.argv[1].encode() in argv:\n"
            "        os.kill(int(pid), signal.SIGKILL); print(pid); break\n"
        )
        return int(self.podman.run("exec", self.name, "python", "-c", find_and_kill, module).stdout)

    def logs(self) -> str:
        return self.podman.run("logs", self.name, check=False).stderr[-4000:]

    def keys(self) -> dict[str, str]:
        saved = json.loads((self.data / CREDENTIALS_FILE).read_text())
        return {"SILT_ACCESS_KEY_ID": saved["access_key_id"], "SILT_SECRET_ACCESS_KEY": saved["secret_access_key"]}

    def kill(self) -> None:
        if self.name:
            self.podman.run("rm", "--force", "--time", "0", self.name, check=False)
            self.name = ""


@pytest.fixture
def stack(podman: Podman, images: dict[str, str], tmp_path: Path) -> Iterator[StackContainer]:
    data = tmp_path / "data"
    data.mkdir()
    ports = {"gateway": free_port(), "graveler": free_port()}
    config: dict[str, Any] = initial_config(Path("/data"))
    config["gateways"]["s3"]["listen_address"] = f"0.0.0.0:{ports['gateway']}"
    config["graveler"]["listen_address"] = f"0.0.0.0:{ports['graveler']}"
    (data / "config.yaml").write_text(yaml.safe_dump(config))
    for path in (data, data / "config.yaml"):
        os.chown(path, int(UID), int(UID))
    container = StackContainer(podman, images["runtime"], data, ports)
    try:
        container.start()
        yield container
    finally:
        container.kill()


def s3(stack: StackContainer) -> Any:
    keys = stack.keys()
    return boto3.client(
        "s3",
        endpoint_url=stack.s3_endpoint,
        aws_access_key_id=keys["SILT_ACCESS_KEY_ID"],
        aws_secret_access_key=keys["SILT_SECRET_ACCESS_KEY"],
        region_name="us-east-1",
        config=BotoConfig(s3={"addressing_style": "path"}, retries={"max_attempts": 8, "mode": "standard"}),
    )


def host_cli(stack: StackContainer, *args: str) -> str:
    """The host's `silt` CLI against the container, as `silt run`'s user would call it; its output."""
    env = {**os.environ, "SILT_DATA_DIR": str(stack.data)}
    done = subprocess.run(
        [str(REPO_ROOT / ".venv" / "bin" / "silt"), *args],
        env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
    )  # fmt: skip
    assert done.returncode == 0, f"silt {' '.join(args)}: {done.stderr[-2000:]}"
    return done.stdout


def test_the_stack_in_a_container_serves_clients_survives_kills_and_is_collected(
    podman: Podman, images: dict[str, str], stack: StackContainer, tmp_path: Path
) -> None:
    client = s3(stack)
    client.create_bucket(Bucket="images")
    written = {f"small/{i}.txt": f"object {i}".encode() for i in range(10)}
    for key, body in written.items():
        client.put_object(Bucket="images", Key=f"main/{key}", Body=body)
    # The AWS CLI splits anything over 8 MiB into parts: a multipart upload through the container.
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(20 * 2**20))
    keys = stack.keys()
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": keys["SILT_ACCESS_KEY_ID"],
        "AWS_SECRET_ACCESS_KEY": keys["SILT_SECRET_ACCESS_KEY"],
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    subprocess.run(
        [aws_cli(), "--endpoint-url", stack.s3_endpoint, "s3", "cp", str(big), "s3://images/main/big.bin"],
        env=env, check=True, capture_output=True, timeout=RUN_TIMEOUT_S,
    )  # fmt: skip
    head = client.head_object(Bucket="images", Key="main/big.bin")
    assert head["ContentLength"] == big.stat().st_size
    assert head["ETag"].strip('"').endswith("-3"), head["ETag"]  # 8 + 8 + 4 MiB parts
    written["big.bin"] = big.read_bytes()

    # A commit with the CLI from the host, through the published graveler port.
    commit = json.loads(host_cli(stack, "--json", "commit", "silt://images/main", "-m", "through the container"))
    assert commit["id"]

    # Each service killed in turn: the stack restarts it, and a write after it is acknowledged.
    for module in ("services.gateway.server", "services.graveler.server", "services.auth.server"):
        stack.kill_service(module)
        stack.wait_ready()
        key = f"after-kill/{module}"
        written[key] = module.encode()
        client.put_object(Bucket="images", Key=f"main/{key}", Body=written[key])

    # And the whole container replaced on the same data: every acknowledged write is there.
    stack.kill()
    stack.start()
    client = s3(stack)
    for key, body in written.items():
        assert client.get_object(Bucket="images", Key=f"main/{key}")["Body"].read() == body, key

    # The GC image run once against the repository, as the CronJob runs it (its user, no more),
    # with the retention rules a run needs set from the host.
    assert "7 days" in host_cli(stack, "gc", "rules", "set", "images", "--default-days", "7")
    # The configuration where the CronJob mounts its ConfigMap, the key in its environment.
    keys = stack.keys()
    gc = podman.run_once(
        "--network", f"container:{stack.name}", "--user", f"{UID}:{UID}",
        "-v", f"{stack.data}:/data:Z", "-v", f"{stack.data / 'config.yaml'}:/etc/silt/silt.yaml:ro,Z",
        "-e", f"SILT_ACCESS_KEY_ID={keys['SILT_ACCESS_KEY_ID']}",
        "-e", f"SILT_SECRET_ACCESS_KEY={keys['SILT_SECRET_ACCESS_KEY']}",
        images["gc"], "silt", "--json", "gc", "run", "images", "--master", "local[1]",
        timeout=600,
    )  # fmt: skip
    summary = json.loads(gc.stdout)
    assert summary["repository"] == "images" and summary["run_id"], summary
