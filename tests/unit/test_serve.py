"""silt/rpc/serve.py: what every gRPC service does on its way up and down, in order."""

from __future__ import annotations

import logging
import threading

import pytest
from grpc_health.v1 import health_pb2
from grpc_health.v1.health import HealthServicer

from silt.config import Config
from silt.graveler.v1 import graveler_pb2 as api
from silt.rpc import serve as serving

SERVICE = api.DESCRIPTOR.services_by_name["GravelerService"]


def status(health: HealthServicer) -> str:
    # Check answers from the servicer's state alone: no call context needed.
    answer = health.Check(health_pb2.HealthCheckRequest(service=SERVICE.full_name), None)  # type: ignore[arg-type]
    return health_pb2.HealthCheckResponse.ServingStatus.Name(answer.status)


class FakeServer:
    def __init__(self, steps: list[str]) -> None:
        self.steps = steps

    def stop(self, grace: float | None) -> threading.Event:
        self.steps.append(f"server stopped (grace {grace})")
        stopped = threading.Event()
        stopped.set()
        return stopped


def test_a_service_is_up_until_stopped_then_goes_down_in_order(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    steps: list[str] = []
    seen: list[HealthServicer] = []

    def start(health: HealthServicer) -> tuple[FakeServer, int]:
        seen.append(health)
        steps.append("server started")
        return FakeServer(steps), 4242

    def wait(every: float | None, tick: object) -> None:
        steps.append(f"serving (tick every {every})")
        steps.append(f"health {status(seen[0])}")

    monkeypatch.setattr(serving, "wait_for_shutdown", wait)
    with caplog.at_level(logging.INFO, logger=serving.__name__):
        serving.serve(
            "graveler",
            start,  # type: ignore[arg-type]
            config=Config(),
            grpc_service=SERVICE,
            probes={"kv": lambda: None},
            health_address=None,
            tls=True,
            every=60.0,
            close=[lambda: steps.append("sensor closed"), lambda: steps.append("engine closed")],
        )
    assert steps == [
        "server started",
        "serving (tick every 60.0)",
        "health SERVING",
        f"server stopped (grace {serving.STOP_GRACE_SECONDS})",
        "sensor closed",
        "engine closed",
    ]
    assert "graveler listening on port 4242 (TLS)" in caplog.text
    # On the way down, health answers NOT_SERVING before the server stops taking calls.
    assert status(seen[0]) == "NOT_SERVING"
