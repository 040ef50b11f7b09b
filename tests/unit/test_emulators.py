"""The emulators' command lines (tests/support/emulators.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import emulators


def test_azurite_runs_without_reporting_usage(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # With no route out, Azurite's usage reports pile up under /tmp and are rescanned: CPU the
    # whole run pays for, and a test run should not try to reach anyone anyway. Azurite refuses
    # an option it does not know, so the integration tests' start checks the flag still exists.
    fake = tmp_path / "azurite-blob"
    fake.write_text("")
    monkeypatch.setattr(emulators, "AZURITE_BIN", fake)
    command = emulators._azurite_command(10000)
    assert "--disableTelemetry" in command
    assert command[command.index("--blobHost") + 1] == "127.0.0.1"
