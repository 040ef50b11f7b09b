"""The container images `make image` builds, checked with podman.

Builds silt and silt-gc with scripts/images/build.sh (the command `make image` runs; the base
and layers come from the engine's cache and ~/.cache/silt-images after the first run) and checks
what each carries under the manifests' security context (uid 10001, read-only root file system,
every capability dropped, no privilege escalation): no Spark or Java in the services' image,
under its size budget; Spark, Java and the S3A jars in the GC image. The images running the
dev overlay as pods (clients, kills, the GC CronJob) is tests/e2e/test_k8s_podman.py. Skipped,
with the reason, where podman cannot run containers.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
IMAGES = REPO_ROOT / "scripts" / "images"
TAG = "0.1.0"  # the tag deploy/k8s names
RUNTIME_BUDGET = 400 * 2**20  # the services' image, uncompressed
BUILD_TIMEOUT_S = 3600.0  # a cold machine: debootstrap, Debian's Python, every locked wheel, Java
RUN_TIMEOUT_S = 120.0
# The suite's 600 s per test would end the first test inside the images' build, whose own
# bound is BUILD_TIMEOUT_S: a changed lock rebuilds every wheel's layer, a cold machine all of them.
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.podman,
    pytest.mark.timeout(BUILD_TIMEOUT_S + 2 * RUN_TIMEOUT_S),
]
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
