"""Import prefixes never reach the installation's own state: the KV file, the launcher's keys,
the configuration, TLS keys, the data directory and the object store's root."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.open import import_prefixes
from silt.config import Config
from silt.errors import ConfigError


@pytest.fixture
def installation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The launcher's layout: config, keys and the KV file in one directory; objects elsewhere."""
    home = tmp_path / "silt"
    home.mkdir()
    for name in ("config.yaml", "secret.key", "services.json", "credentials.json", "metadata.db"):
        (home / name).write_text("x")
    (home / "logs").mkdir()
    monkeypatch.setenv("SILT_CONFIG", str(home / "config.yaml"))
    monkeypatch.setenv("SILT_DATA_DIR", str(tmp_path / "launcher-data"))
    return tmp_path


def _config(root: Path, prefixes: list[str], **extra: Any) -> Config:
    return Config.model_validate(
        {
            "database": {"type": "local", "local": {"path": str(root / "silt" / "metadata.db")}},
            "blockstore": {
                "type": "local",
                "local": {"path": str(root / "objects"), "import_enabled": True, "allowed_external_prefixes": prefixes},
            },
            **extra,
        }
    )


def test_a_prefix_reaching_the_installations_state_is_refused(installation: Path) -> None:
    root = installation
    (root / "link-to-state").symlink_to(root / "silt")
    refused = {
        str(root / "silt"): "the directory of the KV file",  # metadata.db, secret.key, services.json
        str(root / "silt" / "logs"): "the directory of the KV file",
        str(root): "overlaps",  # holds all of it
        str(root / "link-to-state"): "the directory of the KV file",  # by what it resolves to
        str(root / "launcher-data" / "x"): "the data directory (SILT_DATA_DIR)",
        str(root / "objects" / "repo"): "blockstore.local.path",
    }
    for prefix, what in refused.items():
        with pytest.raises(ConfigError, match="allowed_external_prefixes") as caught:
            import_prefixes(_config(root, [prefix]))
        assert what in str(caught.value), (prefix, caught.value)


def test_the_configuration_and_tls_keys_elsewhere_are_refused_too(
    installation: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = installation
    etc = root / "etc"
    etc.mkdir()
    monkeypatch.setenv("SILT_CONFIG", str(etc / "silt.yaml"))
    with pytest.raises(ConfigError, match=r"the configuration file \(SILT_CONFIG\)"):
        import_prefixes(_config(root, [str(etc)]))
    tls = {"tls": {"cert_file": str(root / "pki" / "cert.pem"), "key_file": str(root / "pki" / "key.pem")}}
    with pytest.raises(ConfigError, match=r"tls\.key_file"):
        import_prefixes(_config(root, [str(root / "pki")], **tls))


def test_a_landing_directory_beside_the_state_is_allowed(installation: Path) -> None:
    root = installation
    landing = root / "landing"
    landing.mkdir()
    assert import_prefixes(_config(root, [str(landing)])) == (f"local://{landing}",)
