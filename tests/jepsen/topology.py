"""The processes a run faults: auth, two gravelers, two edges (S3 gateway and REST API on one
port), the compactor, on one KV (the 3-node Cassandra cluster, or one SQLite file).

Each edge dials graveler through its own FaultProxy, which spreads connections over both
gravelers. Auth setup and the services' environments come from silt.launcher.Stack.prepare();
the processes are started here, each in its own process group and tied to this process
(silt/lifeline.py's PARENT_PID_ENV: a service exits when pytest dies, even by kill -9),
because the nemesis kills, pauses and restarts them one by one.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from silt.free_ports import free_port
from silt.launcher import ENTRY_POINTS, Stack, initial_config
from silt.lifeline import PARENT_PID_ENV
from silt.listeners import owns_listener
from silt.rpc.signing import Credentials
from tests.jepsen.fault_proxy import FaultProxy

READY_TIMEOUT_S = 60.0
STOP_GRACE_S = 10.0
CLOCK_OFFSET_ENV = "SILT_CLOCK_OFFSET_SECONDS"


class TopologyError(RuntimeError):
    pass


@dataclass
class Service:
    """One service process, restartable on the same port with other environment variables."""

    name: str
    module: str
    env: dict[str, str]
    port: int
    log: Path
    extra_env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None
    paused: bool = False

    def start(self) -> None:
        with self.log.open("ab") as out:
            out.write(f"\n--- starting {self.name} {self.extra_env} ---\n".encode())
            out.flush()
            self.proc = subprocess.Popen(
                [sys.executable, "-m", self.module],
                env={**self.env, **self.extra_env, PARENT_PID_ENV: str(os.getpid())},
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.paused = False

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise TopologyError(f"{self.name} exited ({self.proc.returncode}); log: {self.log}")
            if owns_listener(self.proc.pid, self.port):
                return
            time.sleep(0.05)
        raise TopologyError(f"{self.name} did not listen on {self.port} in {timeout_s:.0f}s; log: {self.log}")

    def signal(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)
        if sig == signal.SIGSTOP:
            self.paused = True
        elif sig == signal.SIGCONT:
            self.paused = False

    def kill(self) -> None:
        """kill -9 of the whole process group (a service's workers too)."""
        self.signal(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(STOP_GRACE_S)
        self.paused = False

    def restart(self, extra_env: dict[str, str] | None = None) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.kill()
        if extra_env is not None:
            self.extra_env = extra_env
        self.start()
        self.wait_ready()

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        try:
            self.proc.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            self.kill()


@dataclass
class Topology:
    data_dir: Path
    admin: Credentials
    auth: Service
    gravelers: list[Service]
    edges: list[Service]
    compactor: Service
    proxies: list[FaultProxy]

    def services(self) -> list[Service]:
        return [self.auth, *self.gravelers, self.compactor, *self.edges]

    def spread(self) -> None:
        """Each edge on a graveler of its own (edge i on graveler i), as after a fresh start:
        concurrent writes of one key then reach both gravelers, and both clocks."""
        for i, proxy in enumerate(self.proxies):
            proxy.prefer(i % len(self.gravelers))

    def edge_url(self, i: int) -> str:
        return f"http://127.0.0.1:{self.edges[i].port}"

    def stop(self) -> None:
        for service in reversed(self.services()):
            service.stop()
        for proxy in self.proxies:
            proxy.stop()


def start_topology(data_dir: Path, database: dict[str, Any], rng: random.Random, log_level: str = "WARN") -> Topology:
    """Everything started and listening; database: the config's `database` section."""
    data_dir.mkdir(parents=True, exist_ok=True)
    config = initial_config(data_dir)
    config["database"] = database
    config["logging"] = {"level": log_level}
    (data_dir / "config.yaml").write_text(yaml.safe_dump(config))
    names = ["auth", "graveler", "gateway", "compactor"]
    stack = Stack(data_dir, ports=dict.fromkeys(names, 0), services=names, restart=False, log_level=log_level)
    stack.prepare()
    assert stack.admin is not None
    envs: dict[str, dict[str, str]] = {name: dict(svc.env) for name, svc in stack._services.items()}
    logs = data_dir / "logs"

    def service(name: str, kind: str, listen_variable: str, **extra: str) -> Service:
        port = free_port()
        env = {**envs[kind], listen_variable: f"127.0.0.1:{port}", **extra}
        return Service(name, ENTRY_POINTS[kind], env, port, logs / f"{name}.log")

    auth = service("auth", "auth", "SILT_AUTH_LISTEN_ADDRESS")
    auth_endpoint = f"127.0.0.1:{auth.port}"
    gravelers = [
        service(f"graveler{i}", "graveler", "SILT_GRAVELER_LISTEN_ADDRESS", SILT_AUTH_ENDPOINT=auth_endpoint)
        for i in range(2)
    ]
    proxies = [FaultProxy([g.port for g in gravelers], random.Random(rng.random())).start() for _ in range(2)]
    for i, proxy in enumerate(proxies):
        proxy.prefer(i)  # edge i's first connection goes to graveler i
    edges = [
        service(
            f"edge{i}",
            "gateway",
            "SILT_GATEWAYS_S3_LISTEN_ADDRESS",
            SILT_AUTH_ENDPOINT=auth_endpoint,
            SILT_GRAVELER_ENDPOINT=f"127.0.0.1:{proxies[i].port}",
        )
        for i in range(2)
    ]
    compactor = service(
        "compactor",
        "compactor",
        "SILT_COMPACTOR_LISTEN_ADDRESS",
        SILT_AUTH_ENDPOINT=auth_endpoint,
        SILT_GRAVELER_ENDPOINT=f"127.0.0.1:{gravelers[0].port}",
    )
    for g in gravelers:
        g.env["SILT_COMPACTOR_ENDPOINT"] = f"127.0.0.1:{compactor.port}"
    topology = Topology(data_dir, stack.admin, auth, gravelers, edges, compactor, proxies)
    try:
        for svc in topology.services():
            svc.start()
            svc.wait_ready()
    except BaseException:
        topology.stop()
        raise
    return topology
