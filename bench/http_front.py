"""`make bench-http-front`: the same Silt gateway app behind different HTTP servers, side by side.

One stack (auth, graveler and a gateway) and, joining it with the gateway's own environment
(`Stack.service_env`), one more gateway process per server compared, each building the same app
(`edge.server:create_app`, as a gateway worker does):

- `uvicorn`: `python -m edge.server`, uvicorn + uvloop + httptools with Silt's bounded protocol
  (edge/gateway/protocol.py), as production runs;
- `uvicorn_plain`: uvicorn + uvloop + httptools without that protocol: what the bounds cost;
- `granian`: granian's ASGI interface (Rust, hyper), uvloop, HTTP/1 only, with the settings
  closest to Silt's limits (head read timeout, HTTP/1 buffer as the head's cap);
- `hypercorn`: hypercorn on uvloop (h11);
- `socketify`: socketify.py's ASGI interface (uWebSockets, C++); it has no factory option, so it
  serves `lazy_gateway`, which builds the app on its first event (the lifespan's startup).

Each server runs `--workers` processes, as the gateway does. 4 KiB PUTs and GETs from 32
keep-alive client threads with presigned URLs made by boto3 before the clock starts (as
`make bench-gateway`), fresh keys each round; the servers take turns round after round (the
order rotating), so that the machine's load falls on all alike, and each figure is given as
min, median and max over the rounds, a rate also as its ratio to uvicorn's in the same round.
CPU per request is read (bench/processes.py) for the front's processes (the HTTP server and the app in
it), and for graveler and auth together ("backend"), which do the same work whatever the front.

`--only floor` puts each server in front of bench/floor.py's app (no Silt code): the servers'
own cost per request. A server that is not importable is skipped with a line saying how to
get it; nothing is installed at run time.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib.util
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bench.gateway import _hammer, _own_cpu
from bench.processes import cpu_seconds, process_tree
from bench.report import emit_calibration
from silt.free_ports import free_port
from silt.lifeline import PARENT_PID_ENV
from tests.support.gateway_stack import GatewayStack, gateway_stack

ROOT = Path(__file__).resolve().parents[1]
SERVERS = ("uvicorn", "uvicorn_plain", "granian", "hypercorn", "socketify")
BASELINE = "uvicorn"
# The module each server needs, and how to get it without touching the project's environment.
MODULES = {
    "uvicorn": "uvicorn",
    "uvicorn_plain": "uvicorn",
    "granian": "granian",
    "hypercorn": "hypercorn",
    "socketify": "socketify",
}
GET_IT = (
    "$(readlink -f .venv/bin/python) -m venv /tmp/httpfront-venv && "
    "echo $PWD/.venv/lib/python3.11/site-packages > /tmp/httpfront-venv/lib/python3.11/site-packages/project.pth && "
    "/tmp/httpfront-venv/bin/pip install granian==2.8.7 hypercorn==0.18.0 socketify==0.0.31; then "
    "make bench-http-front BENCH_HTTP_FRONT_PY=/tmp/httpfront-venv/bin/python"
)
SILT_APP = "edge.server:create_app"
FLOOR_APP = "bench.floor:http_app"
BODY = b"x" * 4096


@dataclass(frozen=True)
class Limits:
    """The gateway's connection limits a server is asked to keep with its own settings."""

    head_bytes: int = 64 * 1024
    head_timeout_s: float = 20.0
    idle_timeout_s: float = 15.0


# uvicorn with the production settings (edge/core/http_server.py): argv is the app, the port,
# the number of workers, "bounded" (Silt's protocol) or "plain" (httptools as it comes), and
# "factory" or "app".
UVICORN_SERVE = (
    "import sys; from edge.core.http_server import serve_http; "
    "from edge.gateway.protocol import BoundedHttpToolsProtocol; "
    "app, port, workers, protocol, kind = sys.argv[1:]; "
    "serve_http(app, '127.0.0.1:' + port, [], workers=int(workers), factory=kind == 'factory', "
    "http=BoundedHttpToolsProtocol if protocol == 'bounded' else 'httptools')"
)


def server_command(server: str, app: str, port: int, workers: int, limits: Limits) -> list[str]:
    """The command line serving app (an import path; SILT_APP is a factory) on 127.0.0.1:port.
    The gateway reads its port and workers from the environment (see _start)."""
    py = sys.executable
    factory = app == SILT_APP
    kind = "factory" if factory else "app"
    if server == "uvicorn":
        if factory:
            return [py, "-m", "edge.server"]  # the production path itself
        return [py, "-c", UVICORN_SERVE, app, str(port), str(workers), "bounded", kind]
    if server == "uvicorn_plain":
        return [py, "-c", UVICORN_SERVE, app, str(port), str(workers), "plain", kind]
    if server == "granian":
        return [
            *(py, "-m", "granian", "--interface", "asgi", "--host", "127.0.0.1", "--port", str(port)),
            *("--workers", str(workers), "--loop", "uvloop", "--http", "1", "--no-ws", "--log-level", "warning"),
            # The closest granian (hyper) has to Silt's bounds: a head must arrive within the
            # timeout (hyper also applies it to a kept-alive connection's wait for the next
            # request), and the HTTP/1 read buffer caps what a head may take.
            *("--http1-header-read-timeout", str(min(60_000, int(limits.head_timeout_s * 1000)))),
            *("--http1-buffer-size", str(max(8192, limits.head_bytes))),
            *(["--factory"] if factory else []),
            app,
        ]
    if server == "hypercorn":
        return [
            *(py, "-m", "hypercorn", "--bind", f"127.0.0.1:{port}", "--workers", str(workers)),
            *("--worker-class", "uvloop", "--keep-alive", str(int(limits.idle_timeout_s)), "--log-level", "warning"),
            *("--read-timeout", str(int(limits.head_timeout_s))),
            f"{app}()" if factory else app,
        ]
    if server == "socketify":
        # No setting of its own for heads, timeouts or connections: uWebSockets' fixed ones.
        return [
            *(py, "-m", "socketify", "bench.http_front:lazy_gateway" if factory else app, "--port", str(port)),
            *("--workers", str(workers), "--interface", "asgi", "--ws", "none", "--disable-listen-log", "true"),
            *("--lifespan", "on" if factory else "off"),
        ]
    raise ValueError(f"unknown server {server!r}; known: {', '.join(SERVERS)}")


class _LazyGateway:
    """The gateway app for a server that cannot call a factory: built in the worker, on the
    first event it is given (the lifespan's startup), as edge.server:create_app builds it."""

    def __init__(self) -> None:
        self._app: Any = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if self._app is None:
            from edge.server import create_app

            self._app = create_app()
        await self._app(scope, receive, send)


# Lower case: socketify's command line lowercases the name it is given.
lazy_gateway = _LazyGateway()


def missing(server: str) -> str | None:
    """Why server cannot run here, or None."""
    module = MODULES[server]
    if importlib.util.find_spec(module) is None:
        return f"{server}: module {module!r} is not importable by {sys.executable}; to get it: {GET_IT}"
    return None


@dataclass
class Front:
    name: str
    endpoint: str
    proc: subprocess.Popen[bytes]

    @property
    def pid(self) -> int:
        return self.proc.pid


def spread(values: Sequence[float]) -> tuple[float, float, float]:
    """(min, median, max)."""
    if not values:
        raise ValueError("no values")
    return min(values), statistics.median(values), max(values)


def per_round_ratios(samples: Sequence[float], baseline: Sequence[float]) -> list[float]:
    """Each round's figure over the baseline's in the same round (the servers took turns)."""
    if len(samples) != len(baseline):
        raise ValueError(f"{len(samples)} rounds against {len(baseline)} of the baseline")
    return [value / base for value, base in zip(samples, baseline, strict=True)]


def figure(name: str, values: Sequence[float], unit: str, digits: int = 3) -> dict[str, Any]:
    """One JSON figure: the median as its value, with min, max and the number of rounds."""
    low, mid, high = spread(values)
    return {
        "name": name,
        "value": round(mid, digits),
        "unit": unit,
        "target": None,
        "min": round(low, digits),
        "max": round(high, digits),
        "rounds": len(values),
    }


# What each round records per server, and its unit.
METRICS = {
    "put_4kib.req_per_s": "req/s",
    "get_4kib.req_per_s": "req/s",
    "put_4kib.cpu_ms_per_request.front": "ms",
    "get_4kib.cpu_ms_per_request.front": "ms",
    "put_4kib.cpu_ms_per_request.backend": "ms",
    "get_4kib.cpu_ms_per_request.backend": "ms",
    "put_4kib.cpu_ms_per_request.client": "ms",
    "get_4kib.cpu_ms_per_request.client": "ms",
}


def figures(section: str, samples: dict[str, dict[str, list[float]]], baseline: str = BASELINE) -> list[dict[str, Any]]:
    """Every figure of a section: per server and metric its spread over the rounds, and for
    rates and CPU the per-round ratio to the baseline server's."""
    out = []
    for server, metrics in samples.items():
        for metric, values in metrics.items():
            if not values:
                continue
            out.append(figure(f"http_front.{section}.{server}.{metric}", values, METRICS[metric]))
            base = samples.get(baseline, {}).get(metric)
            if server != baseline and base and ".backend" not in metric and ".client" not in metric:
                ratios = per_round_ratios(values, base)
                out.append(figure(f"http_front.{section}.{server}.{metric}.vs_{baseline}", ratios, "ratio"))
    return out


def _wait_ready(front: Front, path: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if front.proc.poll() is not None:
            raise RuntimeError(f"{front.name} exited with code {front.proc.returncode}")
        with contextlib.suppress(OSError), urllib.request.urlopen(f"{front.endpoint}{path}", timeout=5) as answer:
            if answer.status == 200:
                return
        time.sleep(0.2)
    raise RuntimeError(f"{front.name} did not answer {path} in {timeout:.0f}s")


def _start(server: str, app: str, env: dict[str, str], workers: int, limits: Limits, logs: Path) -> Front:
    port = free_port()
    command = server_command(server, app, port, workers, limits)
    env = {**env, "SILT_GATEWAYS_S3_LISTEN_ADDRESS": f"127.0.0.1:{port}", "SILT_GATEWAYS_S3_WORKERS": str(workers)}
    # Not watched as the launcher's services are: a server's workers are its children, not ours.
    env.pop(PARENT_PID_ENV, None)
    # A server's workers import the app by name, from this tree whatever their own cwd.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    log = open(logs / f"{server}.log", "ab")  # noqa: SIM115 (kept open for the child)
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    return Front(server, f"http://127.0.0.1:{port}", proc)


def _stop(front: Front) -> None:
    if front.proc.poll() is not None:
        return
    front.proc.send_signal(signal.SIGTERM)
    try:
        front.proc.wait(15)
    except subprocess.TimeoutExpired:
        # Its own session: the server and the workers it started, nothing else.
        os.killpg(front.proc.pid, signal.SIGKILL)
        front.proc.wait(5)


def _tree_cpu(pid: int) -> float:
    return sum(cpu_seconds(p) for p in process_tree(pid))


def _backend_cpu(gw: GatewayStack | None) -> float:
    if gw is None:
        return 0.0
    return sum(_tree_cpu(pid) for pid in (gw.stack.pid("graveler"), gw.stack.pid("auth")) if pid is not None)


def _urls(front: Front, gw: GatewayStack | None, tag: str, count: int) -> tuple[list[tuple[str, str]], ...]:
    """Presigned (PUT, GET) URLs of count fresh keys on this front (a floor app takes any URL)."""
    if gw is None:
        keys = [f"/bucket/{tag}/{i:06d}?X-Amz-Signature=0" for i in range(count)]
        return [("PUT", front.endpoint + k) for k in keys], [("GET", front.endpoint + k) for k in keys]
    s3 = dataclasses.replace(gw, endpoint=front.endpoint).client()

    def presign(method: str, key: str) -> tuple[str, str]:
        op = "put_object" if method == "PUT" else "get_object"
        return method, s3.generate_presigned_url(op, Params={"Bucket": "bench", "Key": key}, ExpiresIn=3600)

    keys = [f"main/{front.name}/{tag}/{i:06d}" for i in range(count)]
    return [presign("PUT", k) for k in keys], [presign("GET", k) for k in keys]


def measure(front: Front, gw: GatewayStack | None, tag: str, count: int, threads: int) -> dict[str, float]:
    """One round on one front: rate and CPU per request of its PUTs, then of its GETs."""
    puts, gets = _urls(front, gw, tag, count)
    out = {}
    for op, urls in (("put", puts), ("get", gets)):
        front_before, backend_before, client_before = _tree_cpu(front.pid), _backend_cpu(gw), _own_cpu()
        out[f"{op}_4kib.req_per_s"] = _hammer(urls, BODY, threads)
        out[f"{op}_4kib.cpu_ms_per_request.front"] = (_tree_cpu(front.pid) - front_before) * 1000 / count
        if gw is not None:
            out[f"{op}_4kib.cpu_ms_per_request.backend"] = (_backend_cpu(gw) - backend_before) * 1000 / count
        out[f"{op}_4kib.cpu_ms_per_request.client"] = (_own_cpu() - client_before) * 1000 / count
    return out


def run_rounds(
    fronts: list[Front], gw: GatewayStack | None, count: int, threads: int, rounds: int, warmup: int
) -> dict[str, dict[str, list[float]]]:
    samples: dict[str, dict[str, list[float]]] = {f.name: {m: [] for m in METRICS} for f in fronts}
    for front in list(fronts):  # connections, caches, first files
        try:
            measure(front, gw, "warmup", warmup, threads)
        except RuntimeError as failed:
            # A server that fails the app's requests (its scope, say) must not cost the others' figures.
            print(json.dumps({"note": f"skipped {front.name}: {failed}"}), flush=True)
            fronts.remove(front)
            del samples[front.name]
    for round_no in range(rounds):
        turn = round_no % len(fronts)
        for front in fronts[turn:] + fronts[:turn]:
            for metric, value in measure(front, gw, f"r{round_no}", count, threads).items():
                samples[front.name][metric].append(value)
    return samples


@contextlib.contextmanager
def started(
    servers: Sequence[str], app: str, env: dict[str, str], workers: int, limits: Limits, logs: Path, path: str
) -> Iterator[list[Front]]:
    fronts: list[Front] = []
    try:
        for server in servers:
            fronts.append(_start(server, app, env, workers, limits, logs))
        ready = []
        for front in fronts:
            try:
                _wait_ready(front, path)
            except RuntimeError as failed:
                # One server that cannot serve the app must not cost the others' figures.
                said = (logs / f"{front.name}.log").read_text(errors="replace").strip()[-400:]
                print(json.dumps({"note": f"skipped {failed}; its log ends: {said}"}), flush=True)
                continue
            ready.append(front)
        yield ready
    finally:
        for front in fronts:
            _stop(front)


def _print(lines: list[dict[str, Any]]) -> None:
    emit_calibration()
    for line in lines:
        print(json.dumps(line), flush=True)


def bench_silt(servers: list[str], workdir: Path, args: argparse.Namespace) -> None:
    limits = Limits()
    # The stack's own gateway only creates the bucket: one worker.
    with gateway_stack(workdir / "stack", workers=1) as gw:
        gw.client().create_bucket(Bucket="bench")
        # Every front, uvicorn's included, is a gateway process of its own joining this stack.
        env = gw.stack.service_env("gateway")
        with started(servers, SILT_APP, env, args.workers, limits, workdir, "/_silt/health/live") as fronts:
            samples = run_rounds(fronts, gw, args.count, args.threads, args.rounds, args.warmup)
    _print(figures("silt", samples))


def bench_floor(servers: list[str], workdir: Path, args: argparse.Namespace) -> None:
    env = dict(os.environ)
    with started(servers, FLOOR_APP, env, args.workers, Limits(), workdir, "/ready") as fronts:
        samples = run_rounds(fronts, None, args.count, args.threads, args.rounds, args.warmup)
    _print(figures("floor", samples))


# Short limits for the probes, so that a timeout shows in seconds; one worker, so that a cap
# per process is the server's cap.
PROBE_TIMEOUT_S = 2.0
PROBE_PER_CLIENT = 16


def bench_limits(servers: list[str], workdir: Path, args: argparse.Namespace) -> None:
    """protocol.py's guarantees probed on each server in front of the gateway app."""
    from bench import http_front_limits as probes

    limits = Limits(head_timeout_s=PROBE_TIMEOUT_S, idle_timeout_s=PROBE_TIMEOUT_S)
    overrides = {
        "gateways": {
            "s3": {
                "header_timeout_seconds": PROBE_TIMEOUT_S,
                "idle_timeout_seconds": PROBE_TIMEOUT_S,
                "max_connections_per_client": PROBE_PER_CLIENT,
            }
        }
    }
    with gateway_stack(workdir / "limits", workers=1, overrides=overrides) as gw:
        gw.client().create_bucket(Bucket="bench")
        env = gw.stack.service_env("gateway")
        health = "/_silt/health/live"
        with started(servers, SILT_APP, env, 1, limits, workdir, health) as fronts:
            reader = gw.client()  # through the stack's own gateway, whatever the front under probe
            for front in fronts:
                s3 = dataclasses.replace(gw, endpoint=front.endpoint).client()

                def put_url(key: str, s3: Any = s3) -> str:
                    return str(s3.generate_presigned_url("put_object", Params={"Bucket": "bench", "Key": key}))

                # The 100 Continue probe needs a PUT the app accepts, so that it reads the body.
                accepted = urlsplit(put_url(f"main/limits/{front.name}/continue"))
                seen = probes.probe(
                    front.endpoint, health, f"{accepted.path}?{accepted.query}", PROBE_TIMEOUT_S, PROBE_PER_CLIENT + 8
                )
                for name in ("overrun", "half_closed"):
                    key = f"main/limits/{front.name}/{name}"

                    def stored(key: str = key) -> bool:
                        return bool(reader.list_objects_v2(Bucket="bench", Prefix=key)["KeyCount"])

                    check = probes.body_overrun if name == "overrun" else probes.half_closed_body
                    seen[name] = check(front.endpoint, put_url(key), stored)
                emit_calibration()
                for name, observed in seen.items():
                    print(json.dumps({"name": f"http_front.limits.{front.name}.{name}", **observed}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--servers", default=",".join(SERVERS), help="among " + ",".join(SERVERS))
    parser.add_argument(
        "--only",
        default="silt,floor,limits",
        help="silt (the gateway app), floor (no Silt code), limits (protocol.py's guarantees probed)",
    )
    parser.add_argument("--count", type=int, default=2000, help="4 KiB PUTs and GETs per server and round")
    parser.add_argument("--threads", type=int, default=32, help="client threads, as bench-gateway")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=300, help="requests per server before the rounds")
    parser.add_argument("--workers", type=int, default=2, help="processes per server, as bench-gateway's gateway")
    args = parser.parse_args()
    servers = []
    for server in args.servers.split(","):
        why = missing(server)
        if why is None:
            servers.append(server)
        else:
            print(json.dumps({"note": f"skipped {why}"}), flush=True)
    emit_calibration()
    with tempfile.TemporaryDirectory(prefix="silt-bench-http-front-") as tmp:
        workdir = Path(tmp)
        if "silt" in args.only.split(","):
            bench_silt(servers, workdir, args)
        if "floor" in args.only.split(","):
            bench_floor(servers, workdir, args)
        if "limits" in args.only.split(","):
            bench_limits(servers, workdir, args)
    print(json.dumps({"note": f"load_1m at the end: {os.getloadavg()[0]:.2f}, cores: {os.cpu_count()}"}), flush=True)


if __name__ == "__main__":
    main()
