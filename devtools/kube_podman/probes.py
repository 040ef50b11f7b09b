"""A container's probes, checked from the host as a kubelet checks them: httpGet, tcpSocket
and grpc against the pod's IP, exec with `podman exec` in the container."""

from __future__ import annotations

import socket
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import grpc
from grpc_health.v1 import health_pb2

Exec = Callable[[list[str], float], int]  # (command, timeout) -> exit status in the container


def _port(value: int | str, ports: list[dict[str, Any]]) -> int:
    if isinstance(value, int) or str(value).isdigit():
        return int(value)
    for port in ports:
        if port.get("name") == value:
            return int(port["containerPort"])
    raise ValueError(f"no container port named {value!r}")


def passes(probe: dict[str, Any], ip: str, ports: list[dict[str, Any]], run_exec: Exec) -> bool:
    timeout = float(probe.get("timeoutSeconds", 1))
    try:
        if "httpGet" in probe:
            get = probe["httpGet"]
            url = f"http://{ip}:{_port(get['port'], ports)}{get.get('path', '/')}"
            try:
                with urllib.request.urlopen(url, timeout=timeout) as answer:
                    return 200 <= int(answer.status) < 400
            except urllib.error.HTTPError as exc:
                return 200 <= exc.code < 400
        if "tcpSocket" in probe:
            with socket.create_connection((ip, _port(probe["tcpSocket"]["port"], ports)), timeout=timeout):
                return True
        if "grpc" in probe:
            check = probe["grpc"]
            with grpc.insecure_channel(f"{ip}:{_port(check['port'], ports)}") as channel:
                check_call = channel.unary_unary(
                    "/grpc.health.v1.Health/Check",
                    request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
                    response_deserializer=health_pb2.HealthCheckResponse.FromString,
                )
                answer = check_call(health_pb2.HealthCheckRequest(service=check.get("service", "")), timeout=timeout)
                return bool(answer.status == health_pb2.HealthCheckResponse.SERVING)
        if "exec" in probe:
            return run_exec(list(probe["exec"]["command"]), max(timeout, 10.0)) == 0
    except (OSError, grpc.RpcError, subprocess.TimeoutExpired):
        return False
    raise ValueError(f"unknown probe kind: {sorted(probe)}")
