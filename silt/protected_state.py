"""Where an installation keeps its own state, which no import may name as a source.

An import in place (`blockstore.local.allowed_external_prefixes`) lets any writer of a
repository commit the files under a prefix and read them back through Silt. A prefix that
reached Silt's own state would hand out its secrets: the KV file (every credential's hash,
every ref), the launcher's `secret.key` (auth's encryption key) and `services.json` (the
service users' keys), the configuration file, TLS private keys, and the object store's root
(other repositories' bytes). Directories are refused both ways (a prefix inside one, or one
inside a prefix); files when a prefix contains them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from silt.config import CONFIG_PATH_ENV, Config
from silt.errors import ConfigError
from silt.launcher import CREDENTIALS_FILE, DATA_DIR_ENV, DEFAULT_DATA_DIR, SECRET_KEY_FILE, SERVICE_KEYS_FILE

# SQLite keeps a write-ahead log and shared memory beside its file.
_KV_SIDE_FILES = ("", "-wal", "-shm", "-journal")


@dataclass(frozen=True)
class Protected:
    path: str
    what: str
    directory: bool


def protected_state(config: Config, env: Mapping[str, str]) -> list[Protected]:
    """Every path of this installation's own state (env: where SILT_CONFIG and SILT_DATA_DIR are read)."""
    found: list[Protected] = []

    def directory(path: str, what: str) -> None:
        found.append(Protected(os.path.expanduser(path), what, True))

    def file(path: str, what: str) -> None:
        found.append(Protected(os.path.expanduser(path), what, False))

    directory(config.blockstore.local.path, "blockstore.local.path")
    if config.database.type == "local":
        kv = config.database.local.path
        # The KV file's directory: in the launcher's layout also the keys' and the configuration's.
        directory(os.path.dirname(os.path.expanduser(kv)) or ".", f"the directory of the KV file ({kv})")
        for suffix in _KV_SIDE_FILES:
            file(kv + suffix, "the KV file (database.local.path)")
    directory(env.get(DATA_DIR_ENV) or DEFAULT_DATA_DIR, f"the data directory ({DATA_DIR_ENV})")
    config_path = env.get(CONFIG_PATH_ENV)
    if config_path:
        file(config_path, f"the configuration file ({CONFIG_PATH_ENV})")
        beside = os.path.dirname(os.path.expanduser(config_path)) or "."
        for name in (SECRET_KEY_FILE, SERVICE_KEYS_FILE, CREDENTIALS_FILE):
            file(os.path.join(beside, name), f"the launcher's {name}")
    for key_file, what in (
        (config.tls.key_file, "tls.key_file"),
        (config.gateways.s3.tls.key_file, "gateways.s3.tls.key_file"),
    ):
        if key_file:
            file(key_file, what)
    return found


def _within(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def _spellings(path: str) -> set[str]:
    absolute = os.path.abspath(path)
    return {absolute, os.path.realpath(absolute)}


def refusal(prefix: str, state: Iterable[Protected]) -> str | None:
    """Why prefix may not be imported from, or None."""
    for protected in state:
        for mine in _spellings(prefix):
            for theirs in _spellings(protected.path):
                if _within(theirs, mine) or (protected.directory and _within(mine, theirs)):
                    return f"{prefix!r} overlaps {protected.what} {theirs!r}"
    return None


def check_external_prefixes_spare_state(config: Config, env: Mapping[str, str]) -> None:
    """ConfigError if an importable directory reaches the installation's own state."""
    if config.blockstore.type != "local" or not config.blockstore.local.import_enabled:
        return
    state = protected_state(config, env)
    for prefix in config.blockstore.local.allowed_external_prefixes:
        reason = refusal(prefix, state)
        if reason is not None:
            raise ConfigError(f"blockstore.local.allowed_external_prefixes: {reason}")
