"""LwtPatience: the bound on a first LWT send follows the p99 of recent sends."""

from __future__ import annotations

import pytest

from silt.kv.lwt_patience import MIN_SAMPLES, RECOMPUTE_EVERY, WINDOW, LwtPatience


def test_the_bound_stays_at_the_ceiling_until_enough_sends_are_seen() -> None:
    patience = LwtPatience(ceiling_s=3.0, factor=3.0, floor_s=0.3)
    for _ in range(MIN_SAMPLES - 1):
        patience.answered(0.2)
    assert patience.bound_s() is None


def test_the_bound_is_the_factor_times_the_p99_within_floor_and_ceiling() -> None:
    patience = LwtPatience(ceiling_s=3.0, factor=3.0, floor_s=0.3)
    # 99 % of the sends at 0.1 s and 1 % at 0.25 s: the p99 is the slowest 1 %'s least.
    for index in range(WINDOW):
        patience.answered(0.25 if index % 100 == 0 else 0.1)
    assert patience.bound_s() == pytest.approx(0.75)
    for _ in range(2 * WINDOW):
        patience.answered(0.01)
    assert patience.bound_s() == 0.3
    for _ in range(2 * WINDOW):
        patience.answered(2.0)
    assert patience.bound_s() is None


def test_sends_given_up_raise_the_bound_until_healthy_rounds_fit_under_it() -> None:
    """A burst of load makes healthy rounds slower than the bound: each one given up counts as
    having taken the bound, so the bound grows by the factor until they fit."""
    patience = LwtPatience(ceiling_s=3.0, factor=3.0, floor_s=0.3)
    for _ in range(WINDOW):
        patience.answered(0.05)
    assert patience.bound_s() == 0.3
    bounds = []
    for _ in range(4 * RECOMPUTE_EVERY):
        bound = patience.bound_s() or 3.0
        # Every round now takes 1 s: under the bound it is answered, over it given up.
        if bound < 1.0:
            patience.gave_up(bound)
        else:
            patience.answered(1.0)
        bounds.append(patience.bound_s() or 3.0)
    assert bounds[-1] >= 1.0
    assert sorted(bounds) == bounds


def test_factor_zero_keeps_the_ceiling() -> None:
    patience = LwtPatience(ceiling_s=3.0, factor=0.0, floor_s=0.3)
    for _ in range(WINDOW):
        patience.answered(0.01)
    assert patience.bound_s() is None
