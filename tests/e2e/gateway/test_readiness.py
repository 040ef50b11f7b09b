"""The gateway's anonymous readiness endpoint answers ready or not ready from its periodic
check: it names no dependency and asks none of them per probe."""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.error
import urllib.request

from tests.e2e.gateway.conftest import HEALTH_TIMEOUT_S
from tests.support.gateway_stack import GatewayStack
from tests.support.wait import wait_until


def ready(gw: GatewayStack) -> tuple[int, dict[str, str]]:
    try:
        with urllib.request.urlopen(f"{gw.endpoint}/_silt/health/ready", timeout=15) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_readiness_says_only_ready_and_costs_no_call_per_probe(gw: GatewayStack) -> None:
    # The suite's stack, which checks its dependencies often (conftest.py); graveler is paused
    # here, and resumed before the test ends.
    wait_until(lambda: ready(gw)[0] == 200, 10, "ready at start")
    assert ready(gw) == (200, {"status": "ready"})
    graveler = gw.stack.pid("graveler")
    assert graveler is not None
    # Paused, not stopped: a call to it hangs until its timeout instead of failing at once.
    log = gw.stack.logs_dir / "gateway.log"
    logged_before = log.stat().st_size
    os.kill(graveler, signal.SIGSTOP)
    try:
        wait_until(lambda: ready(gw)[0] == 503, 10, "not ready with graveler paused")
        started = time.monotonic()
        answers = [ready(gw) for _ in range(20)]
        # A probe that asked graveler would wait HEALTH_TIMEOUT_S for it, every time.
        assert time.monotonic() - started < 20 * HEALTH_TIMEOUT_S / 4
        assert answers == [(503, {"status": "not ready"})] * 20
    finally:
        os.kill(graveler, signal.SIGCONT)
    wait_until(lambda: ready(gw) == (200, {"status": "ready"}), 15, "ready again")
    # Which dependency failed is for the operator: the gateway's log says it.
    # (What it logged during this test: the suite's other tests stop graveler too.)
    with log.open("rb") as logged:
        logged.seek(logged_before)
        assert b"not ready: graveler not answering" in logged.read()
