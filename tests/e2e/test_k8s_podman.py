"""deploy/k8s's dev overlay run in containers with podman (`make k8s-up`, devtools/kube_podman), as
shipped: the manifests' replica counts (two of each Silt service), the images `make image` builds
and the local stand-ins for Cassandra and the object store, every pod ready through its
manifest's own probes, under its manifest's security context, each Service one address in front
of its replicas. Then `silt doctor` from the host, an object written through one gateway replica
and read through the other, real clients through the gateway Service (boto3, and the AWS CLI's
multipart upload), a commit with the `silt` CLI, one replica of every service killed at once
(its process, as a crash) while writes keep going through the Services to the other replicas,
each restarted by its pod with no acknowledged write lost, and the GC CronJob's Job run once
against the repository. Everything is removed at the end (`make k8s-down`), also after a
failure. Skipped, with the reason, where podman cannot run containers.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config as BotoConfig

from devtools.kube_podman.run import make_plan, ready, render
from devtools.kube_podman.translate import Plan, PodPlan
from tests.e2e.conftest import aws_cli, isolated_aws_env
from tests.support.wait import wait_until

REPO_ROOT = Path(__file__).resolve().parents[2]
IMAGES = REPO_ROOT / "scripts" / "images"
TAG = "0.1.0"
REPOSITORY = "example"  # the GC CronJob's (ConfigMap silt-gc)
UP_TIMEOUT_S = 3600.0  # a cold machine builds the images and the stand-ins first
RESTART_TIMEOUT_S = 180.0  # a restarted service waits for Cassandra and auth again
# The whole module under one deadline: on a cold machine the fixture builds every image first.
# Nightly (`make test-all`): on a fresh machine the image builds alone take about ten minutes.
# `make test` runs the same rendered overlay, replica counts included, as processes
# (test_k8s_deploy.py); what only this test adds is the images and podman's pods.
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.podman,
    pytest.mark.nightly,
    pytest.mark.timeout(UP_TIMEOUT_S + 1800),
]
# The pods whose (only) container is crashed, all at once: one replica of each Silt service.
KILLED = ("silt-auth-0", "silt-graveler-0", "silt-compactor-0", "silt-gateway-0")
SILT_PODS = (*KILLED, "silt-auth-1", "silt-graveler-1", "silt-compactor-1", "silt-gateway-1")


def podman_env() -> dict[str, str]:
    conf = subprocess.run(
        [str(IMAGES / "podman-conf.sh")], capture_output=True, text=True, timeout=30, check=True
    ).stdout.strip()
    return {**os.environ, "CONTAINERS_CONF": conf, "SILT_IMAGE_ENGINE": "podman", "PYTHONPATH": str(REPO_ROOT)}


def podman(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(["podman", *args], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"podman {' '.join(args)}: {done.stderr[-2000:]}"
    return done.stdout


def kube_podman(env: dict[str, str], workdir: Path, *args: str, timeout: float) -> str:
    done = subprocess.run(
        [str(REPO_ROOT / ".venv" / "bin" / "python"), "-m", "devtools.kube_podman", *args, "--workdir", str(workdir)],
        env=env, capture_output=True, text=True, timeout=timeout, cwd=REPO_ROOT,
    )  # fmt: skip
    assert done.returncode == 0, f"kube_podman {' '.join(args)}: exit {done.returncode}\n{done.stderr[-6000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def env() -> dict[str, str]:
    if shutil.which("podman") is None:
        pytest.skip("podman is not installed (scripts/ensure-system-deps.sh installs it with apt-get)")
    if shutil.which("kubectl") is None and shutil.which("kustomize") is None:
        pytest.skip("neither kubectl nor kustomize is installed: the overlay cannot be rendered")
    env = podman_env()
    info = subprocess.run(["podman", "info"], env=env, capture_output=True, text=True, timeout=120)
    if info.returncode != 0:
        pytest.skip(f"`podman info` fails: {info.stderr.strip()[-300:]}")
    return env


@pytest.fixture(scope="module")
def stack(env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, Any], Plan, Path]]:
    workdir = tmp_path_factory.mktemp("k8s-podman")
    build = subprocess.run(
        [str(IMAGES / "build.sh"), TAG], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=UP_TIMEOUT_S
    )
    assert build.returncode == 0, f"make image failed:\n{build.stderr[-4000:]}"
    try:
        kube_podman(env, workdir, "up", timeout=UP_TIMEOUT_S)
        summary = json.loads((workdir / "stack.json").read_text())
        yield summary, make_plan(render(), workdir, 0, None), workdir
    finally:
        kube_podman(env, workdir, "down", timeout=300)
        left = podman(env, "ps", "-a", "--format", "{{.Names}}", "--filter", "label=silt.io/kube-podman")
        assert not left.split(), f"containers left after down: {left}"


def s3_client(summary: dict[str, Any], endpoint: str | None = None) -> Any:
    """boto3 signed with the admin's key, on the gateway Service (or the endpoint given)."""
    return boto3.client(
        "s3",
        endpoint_url=endpoint or summary["s3_endpoint"],
        aws_access_key_id=summary["admin"]["access_key_id"],
        aws_secret_access_key=summary["admin"]["secret_access_key"],
        region_name="us-east-1",
        config=BotoConfig(
            s3={"addressing_style": "path"}, retries={"mode": "standard", "max_attempts": 10},
            connect_timeout=5, read_timeout=30,
        ),
    )  # fmt: skip


def host_cli(summary: dict[str, Any], tmp_path: Path, *args: str) -> str:
    """The host's `silt` CLI against the stack's Services, with the admin's key."""
    env = {
        **os.environ,
        "SILT_DATA_DIR": str(tmp_path / "cli"),  # no saved endpoint of a local `silt run`
        "SILT_ACCESS_KEY_ID": summary["admin"]["access_key_id"],
        "SILT_SECRET_ACCESS_KEY": summary["admin"]["secret_access_key"],
    }
    done = subprocess.run(
        [
            str(REPO_ROOT / ".venv" / "bin" / "silt"), "--graveler", summary["graveler"], "--auth", summary["auth"],
            "--s3-endpoint", summary["s3_endpoint"], *args,
        ],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, f"silt {' '.join(args)}: {done.stderr[-2000:]}"
    return done.stdout


def container_of(pod: PodPlan) -> str:
    (container,) = pod.manifest["spec"]["containers"]
    return pod.container(container["name"])


def restart_count(env: dict[str, str], pod: PodPlan) -> int:
    return int(podman(env, "inspect", "--format", "{{.RestartCount}}", container_of(pod)))


def crash(env: dict[str, str], pod: PodPlan) -> None:
    """SIGKILL the main process of the pod's container from the host (a crash: podman restarts
    it by the pod's restartPolicy, as `podman kill` would not)."""
    os.kill(int(podman(env, "inspect", "--format", "{{.State.Pid}}", container_of(pod))), 9)


def recovered(env: dict[str, str], pod: PodPlan, restarts: int) -> None:
    """The crashed container restarted by its pod and ready again through its probes."""
    wait_until(
        lambda: restart_count(env, pod) > restarts,
        timeout=RESTART_TIMEOUT_S, message=f"{pod.name} restarted", interval=0.5,
    )  # fmt: skip
    wait_until(lambda: ready(pod), timeout=RESTART_TIMEOUT_S, message=f"{pod.name} ready again", interval=1.0)


def test_the_dev_overlay_runs_in_podman_serves_clients_survives_crashes_and_is_collected(
    env: dict[str, str], stack: tuple[dict[str, Any], Plan, Path], tmp_path: Path
) -> None:
    summary, stack_plan, workdir = stack
    pods = {pod.name: pod for pod in stack_plan.pods() if not pod.run_to_completion}
    assert set(summary["pods"]) == set(pods) and set(SILT_PODS) <= set(pods)  # the manifests' replicas
    for pod in [*stack_plan.fronts, *pods.values()]:
        assert ready(pod), pod.name
    # Each ClusterIP Service is one address in front of its replicas; nothing on the host's ports.
    assert set(summary["services"]) == {"auth", "graveler", "compactor", "gateway", "minio"}
    assert summary["s3_endpoint"] == f"http://{summary['services']['gateway']['ip']}:8000"
    published = podman(env, "ps", "--format", "{{.Names}} {{.Ports}}", "--filter", "label=silt.io/kube-podman")
    assert "->" not in published, published
    doctor = json.loads(host_cli(summary, tmp_path, "--json", "doctor"))
    assert [check["status"] for check in doctor] == ["ok"] * len(doctor), doctor
    # The manifests' security context, as the container runs it: uid 10001, no capability,
    # read-only root file system, no privilege escalation.
    for name in SILT_PODS:
        (container,) = summary["pods"][name]["containers"]
        inspected = podman(env, "inspect", "--format", "{{.Config.User}} {{.HostConfig.ReadonlyRootfs}}", container)
        assert inspected.split() == ["10001:10001", "true"], (container, inspected)
        status = podman(env, "exec", container, "python", "-c", "print(open('/proc/self/status').read())")
        assert "CapEff:\t0000000000000000" in status and "NoNewPrivs:\t1" in status, container

    client = s3_client(summary)
    client.create_bucket(Bucket=REPOSITORY)
    # A round trip across the gateway's replicas: written through one, read through the other.
    replicas = [s3_client(summary, f"http://{pods[f'silt-gateway-{i}'].ip}:8000") for i in (0, 1)]
    replicas[0].put_object(Bucket=REPOSITORY, Key="main/across.txt", Body=b"across replicas")
    assert replicas[1].get_object(Bucket=REPOSITORY, Key="main/across.txt")["Body"].read() == b"across replicas"
    written = {"across.txt": b"across replicas", **{f"small/{i}.txt": f"object {i}".encode() for i in range(10)}}
    for key, body in written.items():
        client.put_object(Bucket=REPOSITORY, Key=f"main/{key}", Body=body)
    # The AWS CLI splits anything over 8 MiB into parts: a multipart upload through the gateway pod.
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(20 * 2**20))
    aws_env = {
        **os.environ,
        **isolated_aws_env(),
        "AWS_ACCESS_KEY_ID": summary["admin"]["access_key_id"],
        "AWS_SECRET_ACCESS_KEY": summary["admin"]["secret_access_key"],
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    subprocess.run(
        [aws_cli(), "--endpoint-url", summary["s3_endpoint"], "s3", "cp", str(big), f"s3://{REPOSITORY}/main/big.bin"],
        env=aws_env, check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    head = client.head_object(Bucket=REPOSITORY, Key="main/big.bin")
    assert head["ContentLength"] == big.stat().st_size
    assert head["ETag"].strip('"').endswith("-3"), head["ETag"]  # 8 + 8 + 4 MiB parts
    written["big.bin"] = big.read_bytes()

    commit = json.loads(host_cli(summary, tmp_path, "--json", "commit", f"silt://{REPOSITORY}/main", "-m", "in podman"))
    assert commit["id"]

    # One replica of every service crashes at once: the Services send the writes meanwhile to
    # the other replicas, and the pods restart the crashed containers; every acknowledged write
    # is still there at the end.
    restarts = {name: restart_count(env, pods[name]) for name in KILLED}
    for name in KILLED:
        crash(env, pods[name])
    for i in range(10):
        key = f"during-crash/{i}"
        written[key] = key.encode()
        client.put_object(Bucket=REPOSITORY, Key=f"main/{key}", Body=written[key])
    with ThreadPoolExecutor(len(KILLED)) as pool:
        list(pool.map(lambda name: recovered(env, pods[name], restarts[name]), KILLED))
    for name in KILLED:
        key = f"after-crash/{name}"
        written[key] = name.encode()
        client.put_object(Bucket=REPOSITORY, Key=f"main/{key}", Body=written[key])
    for key, body in written.items():
        assert client.get_object(Bucket=REPOSITORY, Key=f"main/{key}")["Body"].read() == body, key
    assert json.loads(host_cli(summary, tmp_path, "--json", "commit", f"silt://{REPOSITORY}/main", "-m", "after"))["id"]

    # The GC CronJob's Job, once, as its schedule would start it (its image, user and key).
    assert "7 days" in host_cli(summary, tmp_path, "gc", "rules", "set", REPOSITORY, "--default-days", "7")
    out = kube_podman(env, workdir, "cronjob", "silt-gc", timeout=900)
    # `silt gc run` ends with where its report went: the repository's own namespace.
    assert f"report at s3://silt-data/{REPOSITORY}/_silt/gc/" in out, out[-3000:]
