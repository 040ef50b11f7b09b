"""The gateway's anonymous readiness endpoint answers ready or not ready from its periodic
check: it names no dependency and asks none of them per probe."""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from tests.support.gateway_stack import GatewayStack, gateway_stack
from tests.support.wait import wait_until

HEALTH_TIMEOUT_S = 1.0


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    """A stack of its own (graveler is paused here) that checks its dependencies often."""
    telemetry = {"health_check_interval_seconds": 0.3, "health_check_timeout_seconds": HEALTH_TIMEOUT_S}
    with gateway_stack(tmp_path_factory.mktemp("readiness-stack"), overrides={"telemetry": telemetry}) as stack:
        yield stack


def ready(gw: GatewayStack) -> tuple[int, dict[str, str]]:
    try:
        with urllib.request.urlopen(f"{gw.endpoint}/_silt/health/ready", timeout=15) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_readiness_says_only_ready_and_costs_no_call_per_probe(quick: GatewayStack) -> None:
    wait_until(lambda: ready(quick)[0] == 200, 10, "ready at start")
    assert ready(quick) == (200, {"status": "ready"})
    graveler = quick.stack.pid("graveler")
    assert graveler is not None
    # Paused, not stopped: a call to it hangs until its timeout instead of failing at once.
    os.kill(graveler, signal.SIGSTOP)
    try:
        wait_until(lambda: ready(quick)[0] == 503, 10, "not ready with graveler paused")
        started = time.monotonic()
        answers = [ready(quick) for _ in range(20)]
        # A probe that asked graveler would wait HEALTH_TIMEOUT_S for it, every time.
        assert time.monotonic() - started < 20 * HEALTH_TIMEOUT_S / 4
        assert answers == [(503, {"status": "not ready"})] * 20
    finally:
        os.kill(graveler, signal.SIGCONT)
    wait_until(lambda: ready(quick) == (200, {"status": "ready"}), 15, "ready again")
    # Which dependency failed is for the operator: the gateway's log says it.
    log = (quick.stack.logs_dir / "gateway.log").read_text()
    assert "not ready: graveler not answering" in log
