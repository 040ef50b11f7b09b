"""A Kubernetes Service's address for `make k8s-up`: what kube-proxy does for a ClusterIP, as
one process in a pod of its own (on the `silt` image, whose Python this is).

    python -m devtools.kube_podman.service_front SPEC

SPEC is JSON: {"service": NAME, "ports": [{"port": P, "backends": [[IP, PORT], ...]}, ...],
"pods": [{"ip": IP, "probes": [[PROBE, CONTAINER_PORTS], ...]}, ...]}. Each port is listened on
once; each connection goes to the next ready backend, round-robin, and falls through to the
next one when a backend refuses (its container is down). A pod is ready while every readiness
probe it declares passes (grpc, httpGet, tcpSocket, checked from here as the endpoints
controller learns them from the kubelet); exec probes cannot be run from outside the pod and
count as passing. No ready pod: the connection is closed, as a Service without endpoints.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import signal
import sys
import threading
import time
from typing import Any

from devtools.kube_podman.probes import passes

CONNECT_TIMEOUT_S = 2.0
# A pod not ready is probed this often, faster than the manifests' periods, so that one the
# runner found ready gets traffic at once; a ready one at its probe's periodSeconds (at most
# PROBE_PERIOD_S late), which keeps the probes' cost off a busy machine.
PROBE_PERIOD_S = 1.0
CHUNK = 1 << 16


def _no_exec(command: list[str], timeout: float) -> int:
    return 0


class Endpoints:
    """The pods' readiness, refreshed by a thread: which backends a connection may go to."""

    def __init__(self, pods: list[dict[str, Any]]) -> None:
        self._pods = pods
        self._ready: set[str] = {pod["ip"] for pod in pods if not pod["probes"]}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="endpoints", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def ready(self, ip: str) -> bool:
        return ip in self._ready

    def _run(self) -> None:
        due = {pod["ip"]: 0.0 for pod in self._pods}
        while not self._stop.is_set():
            started = time.monotonic()
            for pod in self._pods:
                if started < due[pod["ip"]]:
                    continue
                ok = all(passes(probe, pod["ip"], ports, _no_exec) for probe, ports in pod["probes"])
                period = min((float(probe.get("periodSeconds", 10)) for probe, _ in pod["probes"]), default=10.0)
                due[pod["ip"]] = started + (period if ok else 0.0)
                if ok != (pod["ip"] in self._ready):
                    print(f"{pod['ip']} {'ready' if ok else 'not ready'}", flush=True)
                # Replaced, not mutated: readers in the event loop see one set or the other.
                self._ready = self._ready | {pod["ip"]} if ok else self._ready - {pod["ip"]}
            self._stop.wait(max(0.0, PROBE_PERIOD_S - (time.monotonic() - started)))


async def _pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    try:
        while data := await src.read(CHUNK):
            dst.write(data)
            await dst.drain()
        if dst.can_write_eof():
            dst.write_eof()  # a half-close passes through, as it would through kube-proxy's NAT
    except (OSError, RuntimeError):
        dst.close()


class Port:
    def __init__(self, port: int, backends: list[tuple[str, int]], endpoints: Endpoints) -> None:
        self.port = port
        self.backends = backends
        self.endpoints = endpoints
        self._turn = itertools.count()

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        ready = [b for b in self.backends if self.endpoints.ready(b[0])]
        start = next(self._turn)
        for i in range(len(ready)):
            host, port = ready[(start + i) % len(ready)]
            with contextlib.suppress(OSError, asyncio.TimeoutError):
                return await asyncio.wait_for(asyncio.open_connection(host, port), timeout=CONNECT_TIMEOUT_S)
        return None

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream = await self._connect()
        if upstream is None:
            writer.close()
            return
        up_reader, up_writer = upstream
        try:
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            for side in (writer, up_writer):
                side.close()


async def serve(spec: dict[str, Any]) -> None:
    endpoints = Endpoints([{"ip": p["ip"], "probes": [(pr, ports) for pr, ports in p["probes"]]} for p in spec["pods"]])
    endpoints.start()
    servers = []
    for entry in spec["ports"]:
        port = Port(int(entry["port"]), [(str(h), int(p)) for h, p in entry["backends"]], endpoints)
        servers.append(await asyncio.start_server(port.serve, "0.0.0.0", port.port, reuse_address=True))
        print(f"service {spec['service']}: :{port.port} -> {port.backends}", flush=True)
    # PID 1 in its container: without a handler SIGTERM would be ignored until podman's SIGKILL.
    stopped = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopped.set)
    await stopped.wait()
    endpoints.stop()
    for server in servers:
        server.close()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    asyncio.run(serve(json.loads(args[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
