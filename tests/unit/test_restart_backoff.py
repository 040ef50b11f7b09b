"""The launcher backs off only for quick crash loops, within a cap, and says why."""

from __future__ import annotations

from silt.launcher import FIRST_RESTART_DELAY_SECONDS, STABLE_AFTER_SECONDS, restart_delay


def test_quick_crashes_back_off_up_to_the_cap() -> None:
    delay, waits = FIRST_RESTART_DELAY_SECONDS, []
    for _ in range(6):
        wait, delay, why = restart_delay(delay, uptime=2.0, cap=5.0)
        waits.append(wait)
        assert "crashed 2.0s after starting" in why and "up to 5s" in why
    assert waits == [1.0, 2.0, 4.0, 5.0, 5.0, 5.0]


def test_a_healthy_run_resets_the_backoff() -> None:
    # Several quick crashes, then a run that was healthy for a while (seconds, not a minute).
    _, delay, _ = restart_delay(16.0, uptime=1.0, cap=30.0)
    wait, delay, why = restart_delay(delay, uptime=STABLE_AFTER_SECONDS, cap=30.0)
    assert (wait, delay) == (0.0, FIRST_RESTART_DELAY_SECONDS)
    assert "at once" in why
    assert STABLE_AFTER_SECONDS <= 15
