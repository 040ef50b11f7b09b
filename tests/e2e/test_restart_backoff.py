"""The real launcher restarting a service that crashes over and over: the wait stays within the
cap `silt run` uses, and every restart line says why it waits."""

from __future__ import annotations

from pathlib import Path

from silt.launcher import RUN_MAX_RESTART_DELAY_SECONDS, Stack
from tests.support.wait import wait_until

CRASHES = 4


def test_crash_loop_is_capped_and_explained(tmp_path: Path) -> None:
    ports = {"auth": 0, "graveler": 0}
    with Stack(
        tmp_path,
        ports=ports,
        services=["auth", "graveler"],
        on_event=lambda _: None,
        max_restart_delay=RUN_MAX_RESTART_DELAY_SECONDS,
        # Each kill comes as soon as graveler was restarted, not once it is ready: a crash loop
        # is a service dying as it starts, and the restarts are what is tested, not seconds of
        # imports each time. On a loaded machine a pause could still outlast the 10 s that count
        # as a healthy run, which would rightly reset the backoff.
        stable_after=600.0,
    ) as stack:
        for n in range(CRASHES):
            stack.kill("graveler")

            def restarted(crashes: int = n + 1) -> bool:
                return stack.restarts("graveler") >= crashes

            wait_until(restarted, RUN_MAX_RESTART_DELAY_SECONDS + 30, f"graveler restarted after crash {n + 1}")
        # After the loop, the service comes back for good.
        stack.wait_ready("graveler")
    stopped = [line for line in stack.events if line.startswith("graveler stopped")]
    assert len(stopped) == CRASHES
    waits = [float(line.split("restarting in ")[1].split("s:")[0]) for line in stopped]
    assert waits == [1.0, 2.0, 4.0, RUN_MAX_RESTART_DELAY_SECONDS]
    assert all("after starting; waiting longer after each quick crash" in line for line in stopped)
