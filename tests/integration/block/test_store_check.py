"""`silt check` reaches the configured object store: a read under each allowed namespace root,
with the configured credentials; a store that does not answer fails the check."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from cli.common import State
from cli.main import cli
from silt.free_ports import free_port


def _check(tmp_path: Path, blockstore: dict[str, Any], roots: list[str]) -> Any:
    config = {
        "database": {"type": "local", "local": {"path": str(tmp_path / "kv.db")}},
        "blockstore": blockstore,
        "graveler": {"allowed_namespace_roots": roots},
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    (tmp_path / "kv.db").touch()
    env = {"SILT_CONFIG": str(path), "HOME": str(tmp_path / "home")}
    return CliRunner().invoke(cli, ["check"], obj=State(), env=env, catch_exceptions=False)


@pytest.mark.gs
def test_check_reaches_gcs_and_reports_an_unreachable_one(fake_gcs_server: str, tmp_path: Path) -> None:
    store = {"type": "gs", "gs": {"endpoint_url": fake_gcs_server, "project": "p", "max_retries": 0}}
    result = _check(tmp_path, store, ["gs://anything-bucket/repos/"])
    assert result.exit_code == 0, result.output
    assert "blockstore: gs ok (reached gs://anything-bucket/repos/)" in result.stdout

    dead = f"http://127.0.0.1:{free_port()}"
    result = _check(tmp_path, {"type": "gs", "gs": {"endpoint_url": dead, "max_retries": 0}}, ["gs://lake-bucket/"])
    assert result.exit_code != 0
    assert "blockstore: gs://lake-bucket/" in result.output and "Unavailable" not in result.output


def test_check_without_roots_says_it_did_not_probe(tmp_path: Path) -> None:
    result = _check(tmp_path, {"type": "gs", "gs": {"endpoint_url": "http://127.0.0.1:9"}}, [])
    assert result.exit_code == 0, result.output
    assert "not probed" in result.stdout
