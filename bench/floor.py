"""`make bench-floor`: what the frameworks under the gateway and graveler cost per request
alone, as CPU milliseconds, to set against `make bench-gateway`'s per-request CPU.

- HTTP: uvicorn with uvloop and httptools (the gateway's server) running an ASGI app that does
  nothing but answer a 4 KiB GET or read a 4 KiB PUT body, at 32 keep-alive clients.
- gRPC: a grpcio synchronous server (graveler's) answering an empty unary method, called from a
  grpc.aio client (the gateway's) with 32 calls in flight, ~200-byte messages; then grpc.aio's
  server answering on its event loop, and answering from a thread pool as graveler's blocking
  engine would have to under it.

No Silt code runs in either: the figures are the floor one S3 request through a gateway and a
graveler pays on these frameworks, whatever Silt does. CPU time is read per process (bench/processes.py), so the
figures hold on a loaded machine where request rates do not.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc

from bench.gateway import _hammer, _own_cpu
from bench.processes import cpu_seconds, process_tree
from bench.report import emit
from silt.free_ports import free_port

BODY = b"x" * 4096
MESSAGE = b"m" * 200
METHOD = "/floor.Floor/Call"


async def http_app(scope: dict, receive: object, send: object) -> None:
    """The least an HTTP server can do per S3-sized request: read the body, answer 4 KiB."""
    if scope["type"] != "http":
        return
    more = True
    while more:
        message = await receive()  # type: ignore[operator]
        more = message.get("more_body", False)
    body = BODY if scope["method"] == "GET" else b""
    headers = [(b"content-length", str(len(body)).encode()), (b"etag", b'"0"')]
    await send({"type": "http.response.start", "status": 200, "headers": headers})  # type: ignore[operator]
    await send({"type": "http.response.body", "body": body})  # type: ignore[operator]


def serve_grpc(port: int) -> None:

    handler = grpc.method_handlers_generic_handler(
        "floor.Floor", {"Call": grpc.unary_unary_rpc_method_handler(lambda request, context: MESSAGE)}
    )
    server = grpc.server(ThreadPoolExecutor(max_workers=32))
    server.add_generic_rpc_handlers((handler,))
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    server.wait_for_termination()


def serve_grpc_aio(port: int, in_threads: bool) -> None:
    """grpc.aio's server: the handler on the event loop, or (in_threads) in a pool of threads as
    graveler's blocking engine would have to run under it."""
    import grpc.aio

    pool = ThreadPoolExecutor(max_workers=32)

    async def answer(request: bytes, context: Any) -> bytes:
        if in_threads:
            return await asyncio.get_running_loop().run_in_executor(pool, lambda: MESSAGE)
        return MESSAGE

    async def run() -> None:
        handler = grpc.method_handlers_generic_handler(
            "floor.Floor", {"Call": grpc.unary_unary_rpc_method_handler(answer)}
        )
        server = grpc.aio.server()
        server.add_generic_rpc_handlers((handler,))
        server.add_insecure_port(f"127.0.0.1:{port}")
        await server.start()
        await server.wait_for_termination()

    asyncio.run(run())


async def call_grpc(port: int, calls: int, in_flight: int) -> float:
    """Seconds for `calls` unary calls with `in_flight` at a time; prints this process's CPU."""
    import grpc.aio

    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        call: Any = channel.unary_unary(METHOD)
        await channel.channel_ready()
        queue = iter(range(calls))

        async def worker() -> None:
            for _ in queue:
                await call(MESSAGE, timeout=10)

        started, cpu = time.perf_counter(), _own_cpu()
        await asyncio.gather(*(worker() for _ in range(in_flight)))
        elapsed = time.perf_counter() - started
        print(f"{elapsed} {_own_cpu() - cpu}", flush=True)
        return elapsed


def _wait_port(port: int, timeout: float = 30) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise SystemExit(f"nothing listens on port {port}")


def bench_http(count: int, workers: int) -> None:
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "bench.floor:http_app",
            "--port",
            str(port),
            "--workers",
            str(workers),
            "--http",
            "httptools",
            "--loop",
            "uvloop",
            "--no-access-log",
            "--log-level",
            "warning",
        ],
        cwd=Path(__file__).resolve().parents[1],
    )
    try:
        _wait_port(port)
        for method in ("PUT", "GET"):
            urls = [(method, f"http://127.0.0.1:{port}/bucket/key{i}?X-Amz-Signature=0") for i in range(count)]
            _hammer(urls[:500], BODY, 32)  # warm up
            tree = process_tree(server.pid)
            before, client = sum(cpu_seconds(p) for p in tree), _own_cpu()
            rate = _hammer(urls, BODY, 32)
            used = sum(cpu_seconds(p) for p in tree) - before
            name = method.lower()
            emit(f"floor.http_{name}_4kib.req_per_s", rate, "req/s", None)
            emit(f"floor.http_{name}_4kib.cpu_ms_per_request.server", used * 1000 / count, "ms", None)
            emit(f"floor.http_{name}_4kib.cpu_ms_per_request.client", (_own_cpu() - client) * 1000 / count, "ms", None)
    finally:
        server.terminate()
        server.wait(10)


# The servers compared: grpcio's synchronous server (graveler's, auth's), and grpc.aio's with the
# handler on its event loop or in threads.
GRPC_SERVERS = {
    "server_sync": "from bench.floor import serve_grpc; serve_grpc(int(sys.argv[1]))",
    "server_aio": "from bench.floor import serve_grpc_aio; serve_grpc_aio(int(sys.argv[1]), False)",
    "server_aio_threads": "from bench.floor import serve_grpc_aio; serve_grpc_aio(int(sys.argv[1]), True)",
}


def bench_grpc(count: int) -> None:
    for name, serve in GRPC_SERVERS.items():
        _bench_grpc_server(count, name, serve)


def _bench_grpc_server(count: int, name: str, serve: str) -> None:
    port = free_port()
    code = f"import sys; {serve}"
    root = Path(__file__).resolve().parents[1]
    server = subprocess.Popen([sys.executable, "-c", code, str(port)], cwd=root)
    try:
        _wait_port(port)
        client_code = (
            "import asyncio, sys; from bench.floor import call_grpc; "
            "asyncio.run(call_grpc(int(sys.argv[1]), int(sys.argv[2]), 32))"
        )
        subprocess.run([sys.executable, "-c", client_code, str(port), "500"], cwd=root, check=True, capture_output=True)
        before = cpu_seconds(server.pid)
        command = [sys.executable, "-c", client_code, str(port), str(count)]
        out = subprocess.run(command, cwd=root, check=True, capture_output=True, text=True).stdout.split()
        used = cpu_seconds(server.pid) - before
        elapsed, client_cpu = float(out[0]), float(out[1])
        emit(f"floor.grpc_unary.{name}.calls_per_s", count / elapsed, "calls/s", None)
        emit(f"floor.grpc_unary.cpu_ms_per_call.{name}", used * 1000 / count, "ms", None)
        emit(f"floor.grpc_unary.{name}.cpu_ms_per_call.client_aio", client_cpu * 1000 / count, "ms", None)
    finally:
        server.terminate()
        server.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=5000, help="requests or calls per measure")
    parser.add_argument("--workers", type=int, default=2, help="uvicorn workers, as bench-gateway's gateway")
    parser.add_argument("--only", default="http,grpc")
    args = parser.parse_args()
    only = set(args.only.split(","))
    if "http" in only:
        bench_http(args.count, args.workers)
    if "grpc" in only:
        bench_grpc(args.count)
    print(f'{{"note": "cores: {os.cpu_count()}"}}', flush=True)


if __name__ == "__main__":
    main()
