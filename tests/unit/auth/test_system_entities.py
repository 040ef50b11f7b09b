"""The groups and policies the REST API and auth treat as Silt's own are exactly those setup
writes: one added to setup without being listed would be deletable, and one listed that setup
no longer writes would be a name nobody may reuse."""

from __future__ import annotations

from services.auth import setup
from silt.iam_system import SYSTEM_GROUPS, SYSTEM_POLICIES


def test_system_groups_are_setups_groups() -> None:
    assert set(setup.PRESET_GROUPS) == SYSTEM_GROUPS


def test_system_policies_are_setups_policies() -> None:
    assert set(setup.SILT_POLICIES) == SYSTEM_POLICIES
