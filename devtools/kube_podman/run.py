"""`make k8s-up` / `make k8s-down`: the dev overlay, rendered, run with `podman kube play`.

    python -m devtools.kube_podman up [--max-replicas N] [--workdir DIR]
    python -m devtools.kube_podman down [--workdir DIR]
    python -m devtools.kube_podman cronjob NAME [--workdir DIR]   (one run of a CronJob's Job)

up builds the stand-in images (scripts/images/standins.sh), removes what an earlier run left,
creates the network and the Secrets, then plays one front pod per ClusterIP Service (its
address, balancing over the ready replicas: translate.py) and the workloads' pods stage by
stage (ORDER), each stage ready through its containers' own startup and readiness probes
before the next starts. Nothing is published on the host's ports: the host reaches the pods
and Services at their addresses on the bridge network. The
auth-setup Job runs as a pod against a stand-in API server on the network's gateway; the keys
it writes become podman secrets for the pods after it, and the admin's key is written to
WORKDIR/stack.json (mode 0600) with the endpoints. down removes every pod, secret, volume and the
network the manifests name; it is safe to run at any time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import boto3
import yaml

from devtools.kube_podman.kube_api import KubeApiStandIn, patchable_secrets
from devtools.kube_podman.probes import passes
from devtools.kube_podman.translate import STACK_LABEL, Doc, Plan, PodPlan, decoded_secret, plan, secret_payload
from silt.errors import FailedPrecondition, SiltError, Unavailable

T = TypeVar("T")
REPO_ROOT = Path(__file__).resolve().parents[2]
OVERLAY = REPO_ROOT / "deploy" / "k8s" / "overlays" / "dev"
# Each stage needs the ones before it: the stores; the setup Job (every service's Cassandra
# login, auth's data and every key); auth (its login is the Job's); then graveler, the compactor
# (graveler's peer) and the gateway (both of them).
ORDER = [
    ["StatefulSet/cassandra", "Deployment/minio"],
    ["Job/silt-auth-setup"],
    ["Deployment/silt-auth"],
    ["Deployment/silt-graveler"],
    ["Deployment/silt-compactor"],
    ["Deployment/silt-gateway"],
]
STACK = "silt-dev"
NETWORK = "silt-k8s"
SUBNET = "10.89.201.0/24"
STAGE_TIMEOUT_S = 300.0  # Cassandra's first start on a busy 2-core machine
JOB_TIMEOUT_S = 300.0
# The GC CronJob's Job runs Spark: on a busy 2-core machine with the whole stack up, over 5 min.
CRONJOB_TIMEOUT_S = 840.0
PODMAN_TIMEOUT_S = 120.0
CRASH_LOOP_RESTARTS = 5  # a container restarted this often is not going to become ready
CASSANDRA_PROTOCOL_VERSION = 3  # the stand-in is Cassandra 2.1
TAG = "0.1.0"  # of the images `make image` builds (silt:TAG runs the Services' fronts)
PARALLEL_PODMAN = 4  # podman commands at once: more only queue on its locks on 2 cores


def log(message: str) -> None:
    print(f"k8s-podman: {message}", file=sys.stderr, flush=True)


def podman_env() -> dict[str, str]:
    env = dict(os.environ)
    if not env.get("CONTAINERS_CONF"):
        conf = subprocess.run(
            [str(REPO_ROOT / "scripts" / "images" / "podman-conf.sh")],
            capture_output=True, text=True, check=True, timeout=30,
        )  # fmt: skip
        env["CONTAINERS_CONF"] = conf.stdout.strip()
    return env


def podman(*args: str, check: bool = True, timeout: float = PODMAN_TIMEOUT_S, stdin: bytes | None = None) -> str:
    done = subprocess.run(["podman", *args], env=podman_env(), capture_output=True, input=stdin, timeout=timeout)
    if check and done.returncode != 0:
        raise Unavailable(f"podman {' '.join(args[:3])}: exit {done.returncode}: {done.stderr.decode()[-2000:]}")
    return done.stdout.decode()


def render(overlay: Path = OVERLAY) -> list[Doc]:
    kustomize = ["kustomize", "build"] if shutil.which("kustomize") else ["kubectl", "kustomize"]
    text = subprocess.run([*kustomize, str(overlay)], capture_output=True, text=True, check=True, timeout=60).stdout
    return [doc for doc in yaml.safe_load_all(text) if doc]


def make_plan(docs: list[Doc], workdir: Path, api_port: int, max_replicas: int | None, tag: str = TAG) -> Plan:
    return plan(
        docs, ORDER, network=NETWORK, subnet=SUBNET, stack=STACK, api_port=api_port,
        credentials_dir=str(workdir / "serviceaccount"), max_replicas=max_replicas,
        cassandra_protocol_version=CASSANDRA_PROTOCOL_VERSION, front_image=f"silt:{tag}",
    )  # fmt: skip


def each(function: Callable[[T], Any], items: Iterable[T], workers: int = PARALLEL_PODMAN) -> list[Any]:
    """function on every item at once: podman calls mostly wait (on the runtime, on locks, on a
    container's stop timeout)."""
    items = list(items)
    if len(items) <= 1:
        return [function(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(len(items), workers)) as pool:
        return list(pool.map(function, items))


def down(workdir: Path) -> None:
    docs = render()
    stack_plan = make_plan(docs, workdir, 0, None)
    pods = podman("pod", "ps", "-q", "--filter", f"label={STACK_LABEL}={STACK}").split()
    names = list(dict.fromkeys([*pods, *(p.name for p in stack_plan.all_pods())]))
    # One pod at a time would wait out each one's stop timeout in turn.
    each(lambda pod: podman("pod", "rm", "--force", "--ignore", "--time", "5", pod, check=False), names, workers=8)
    for secret in stack_plan.secret_names():
        podman("secret", "rm", secret, check=False)
    for volume in stack_plan.volume_names():
        podman("volume", "rm", "--force", volume, check=False)
    podman("network", "rm", "--force", stack_plan.network, check=False)
    log(f"removed the pods, secrets, volumes and network {stack_plan.network}")


def create_secret(name: str, data: dict[str, str]) -> None:
    podman("secret", "rm", name, check=False)
    podman("secret", "create", name, "-", stdin=secret_payload(data))


def play(pod: PodPlan, stack_plan: Plan, workdir: Path) -> None:
    path = workdir / "pods" / f"{pod.name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump_all([*stack_plan.config_maps, pod.manifest], sort_keys=False))
    podman("kube", "play", "--network", f"{stack_plan.network}:ip={pod.ip}", str(path), timeout=300)


def play_all(pods: list[PodPlan], stack_plan: Plan, workdir: Path, played_config_maps: set[str]) -> None:
    """Play the pods at once, except that a pod mounting a ConfigMap no earlier pod mounted is
    played alone first: kube play makes the ConfigMap's volume, and two plays would race to."""
    rest = []
    for pod in pods:
        volumes = pod.manifest["spec"].get("volumes", [])
        config_maps = {str(v["configMap"]["name"]) for v in volumes if "configMap" in v}
        if config_maps - played_config_maps:
            play(pod, stack_plan, workdir)
            played_config_maps.update(config_maps)
        else:
            rest.append(pod)
    each(lambda pod: play(pod, stack_plan, workdir), rest)


def container_state(container: str) -> dict[str, Any]:
    out = podman("container", "inspect", "--format", "{{json .State}}", container, check=False)
    return dict(json.loads(out)) if out.strip() else {}


def container_state_restarts(container: str) -> tuple[dict[str, Any], int]:
    """Its state and how often its pod restarted it, in one podman call."""
    out = podman("container", "inspect", "--format", "{{.RestartCount}} {{json .State}}", container, check=False)
    restarts, _, state = out.strip().partition(" ")
    return (dict(json.loads(state)) if state else {}), (int(restarts) if restarts.isdigit() else 0)


def logs(container: str) -> str:
    done = subprocess.run(["podman", "logs", container], env=podman_env(), capture_output=True, timeout=60)
    return (done.stdout + done.stderr).decode(errors="replace")[-3000:]


def ready(pod: PodPlan) -> bool:
    """Every container running, and its startup and readiness probes (those it has) passing."""
    for container in pod.manifest["spec"]["containers"]:
        name = pod.container(container["name"])
        state, restarts = container_state_restarts(name)
        if restarts >= CRASH_LOOP_RESTARTS:
            raise Unavailable(f"{name} keeps exiting (a crash loop):\n{logs(name)}")
        if state.get("Status") != "running":
            return False

        def run_exec(command: list[str], timeout: float, name: str = name) -> int:
            argv = ["podman", "exec", name, *command]
            return subprocess.run(argv, env=podman_env(), capture_output=True, timeout=timeout).returncode

        probes = pod.probes.get(container["name"], {})
        for kind in ("startupProbe", "readinessProbe"):
            ports = pod.ports.get(container["name"], [])
            if kind in probes and not passes(probes[kind], pod.ip, ports, run_exec):
                return False
    return True


def wait_ready(pods: list[PodPlan], timeout: float = STAGE_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    waiting = list(pods)
    while waiting:
        waiting = [pod for pod, ok in zip(waiting, each(ready, waiting), strict=True) if not ok]
        if not waiting:
            return
        if time.monotonic() > deadline:
            details = "\n".join(
                f"--- {pod.container(c['name'])}:\n{logs(pod.container(c['name']))}"
                for pod in waiting for c in pod.manifest["spec"]["containers"]
            )  # fmt: skip
            raise Unavailable(f"not ready after {timeout:g} s: {[p.name for p in waiting]}\n{details}")
        time.sleep(1.0)


def run_job(pod: PodPlan, timeout: float = JOB_TIMEOUT_S) -> None:
    """Run the Job's pod to completion; fail with the logs. podman runs the init containers
    while `kube play` starts the pod, stops there when one fails, and then removes them: once
    play returned, they succeeded."""
    deadline = time.monotonic() + timeout
    for container in pod.manifest["spec"]["containers"]:
        name = pod.container(container["name"])
        while (state := container_state(name)).get("Status") not in ("exited", "stopped"):
            if not state:
                raise FailedPrecondition(f"{name} was never created: an init container of {pod.name} failed")
            if time.monotonic() > deadline:
                raise Unavailable(f"{name} did not finish within {timeout:g} s:\n{logs(name)}")
            time.sleep(1.0)
        if state.get("ExitCode") != 0:
            raise FailedPrecondition(f"{name} failed (exit {state.get('ExitCode')}):\n{logs(name)}")
        log(f"{name} done:\n{logs(name).strip()}")


def create_buckets(stack_plan: Plan, docs: list[Doc]) -> None:
    """The buckets of graveler's allowed namespace roots, in the object store (the dev overlay's
    once-only step), from the host through the object store's pod IP."""
    config_map = next(d for d in stack_plan.config_maps if d["metadata"]["name"] == "silt-config")
    config = yaml.safe_load(config_map["data"]["silt.yaml"])
    endpoint = urlsplit(config["blockstore"]["s3"]["endpoint_url"])
    address = f"http://{stack_plan.hosts[str(endpoint.hostname)]}:{endpoint.port}"
    keys = decoded_secret(next(d for d in docs if d["kind"] == "Secret" and d["metadata"]["name"] == "silt-blockstore"))
    s3 = boto3.client(
        "s3", endpoint_url=address, aws_access_key_id=keys["access-key-id"],
        aws_secret_access_key=keys["secret-access-key"], region_name=config["blockstore"]["s3"].get("region"),
    )  # fmt: skip
    for root in config["graveler"]["allowed_namespace_roots"]:
        bucket = urlsplit(root).netloc
        s3.create_bucket(Bucket=bucket)
        log(f"bucket {bucket} created at {address}")


def build_standins(docs: list[Doc], tag: str) -> None:
    def image(kind: str, name: str) -> str:
        doc = next(d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name)
        return str(doc["spec"]["template"]["spec"]["containers"][0]["image"])

    script = REPO_ROOT / "scripts" / "images" / "standins.sh"
    subprocess.run(
        [str(script), tag, image("StatefulSet", "cassandra"), image("Deployment", "minio")],
        env=podman_env(), check=True, timeout=3600,
    )  # fmt: skip


@contextlib.contextmanager
def stand_in_api(docs: list[Doc], stack_plan: Plan, workdir: Path) -> Iterator[KubeApiStandIn]:
    job = next(d for d in docs if d["kind"] == "Job")
    account = job["spec"]["template"]["spec"].get("serviceAccountName", "default")
    namespace = job["metadata"].get("namespace", "default")
    with KubeApiStandIn(
        stack_plan.gateway_ip, namespace, patchable_secrets(docs, account), workdir / "serviceaccount"
    ) as api:
        yield api


def up(workdir: Path, max_replicas: int | None, tag: str) -> dict[str, Any]:
    docs = render()
    build_standins(docs, tag)
    down(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    probe_plan = make_plan(docs, workdir, 0, max_replicas, tag)
    podman("network", "create", "--subnet", probe_plan.subnet, probe_plan.network)
    # The API needs the network's gateway address to listen on; the pods need the API's port.
    with stand_in_api(docs, probe_plan, workdir) as api:
        stack_plan = make_plan(docs, workdir, api.port, max_replicas, tag)
        for name, data in stack_plan.secrets.items():
            create_secret(name, data)  # those the Job fills are empty until it has run
        # The Services' fronts first, as a cluster has its Services before any pod dials one;
        # they wait with the first stage.
        fronts = stack_plan.fronts
        played_config_maps: set[str] = set()
        for index, stage in enumerate(stack_plan.stages):
            for pod in [*fronts, *stage]:
                log(f"stage {index}: {pod.owner} -> pod {pod.name} at {pod.ip}")
            play_all([*fronts, *stage], stack_plan, workdir, played_config_maps)
            if stage[0].run_to_completion:
                wait_ready(fronts)
                for pod in stage:
                    run_job(pod)
                    podman("pod", "rm", "--force", pod.name)  # ttlSecondsAfterFinished, at once
                for name, data in api.patched.items():
                    create_secret(name, {**stack_plan.secrets.get(name, {}), **data})
            else:
                wait_ready([*fronts, *stage])
            fronts = []
            if index == 0:
                create_buckets(stack_plan, docs)
        admin = api.patched.get("silt-admin-credentials", {})
    summary = {
        "network": stack_plan.network,
        "pods": {pod.name: {"ip": pod.ip, "owner": pod.owner,
                            "containers": [pod.container(c["name"]) for c in pod.manifest["spec"]["containers"]]}
                 for pod in stack_plan.pods() if not pod.run_to_completion},
        "services": {pod.owner.partition("/")[2]: {"ip": pod.ip, "pod": pod.name} for pod in stack_plan.fronts},
        "hosts": stack_plan.hosts,
        "s3_endpoint": f"http://{service_address(docs, stack_plan, 'gateway')}",
        "graveler": service_address(docs, stack_plan, "graveler"),
        "auth": service_address(docs, stack_plan, "auth"),
        "admin": {"access_key_id": admin.get("access-key-id"), "secret_access_key": admin.get("secret-access-key")},
        "skipped": stack_plan.skipped,
    }  # fmt: skip
    out = workdir / "stack.json"
    out.write_text(json.dumps(summary, indent=2))
    out.chmod(0o600)
    for line in stack_plan.skipped:
        log(f"not run: {line}")
    log(
        f"up: S3 gateway {summary['s3_endpoint']}, graveler {summary['graveler']}, auth {summary['auth']}"
        f" (the Services' addresses); admin key in {out}"
    )
    return summary


def service_address(docs: list[Doc], stack_plan: Plan, name: str) -> str:
    """host:port of a Service's first port, as cluster DNS would give it."""
    service = next(d for d in docs if d["kind"] == "Service" and d["metadata"]["name"] == name)
    return f"{stack_plan.hosts[name]}:{service['spec']['ports'][0]['port']}"


def cronjob(workdir: Path, name: str, max_replicas: int | None) -> str:
    """One run of a CronJob's Job on the running stack, as its schedule would start it; its log."""
    stack_plan = make_plan(render(), workdir, 0, max_replicas)
    if name not in stack_plan.cron_jobs:
        raise FailedPrecondition(f"no CronJob {name!r} in the manifests: {sorted(stack_plan.cron_jobs)}")
    pod = stack_plan.cron_jobs[name]
    podman("pod", "rm", "--force", "--ignore", pod.name, check=False)
    play(pod, stack_plan, workdir)
    try:
        run_job(pod, CRONJOB_TIMEOUT_S)
        return "".join(logs(pod.container(c["name"])) for c in pod.manifest["spec"]["containers"])
    finally:
        podman("pod", "rm", "--force", "--ignore", pod.name, check=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devtools.kube_podman", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["up", "down", "cronjob"])
    parser.add_argument("name", nargs="?", help="cronjob: the CronJob to run once")
    parser.add_argument("--workdir", type=Path, default=REPO_ROOT / "build" / "k8s-podman")
    parser.add_argument("--max-replicas", type=int, default=None, help="at most this many pods per workload")
    parser.add_argument("--tag", default=TAG, help="the tag of silt and silt-gc (the stand-ins, fronts run on them)")
    args = parser.parse_args(argv)
    try:
        if args.command == "down":
            down(args.workdir)
        elif args.command == "cronjob":
            print(cronjob(args.workdir, args.name or "", args.max_replicas), end="")
        else:
            try:
                up(args.workdir, args.max_replicas, args.tag)
            except BaseException:
                log("up failed: removing what it started")
                down(args.workdir)
                raise
    except (SiltError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        print(f"k8s-podman: {exc}", file=sys.stderr)
        return 1
    return 0
