"""lakectl's configuration, read as lakectl reads it, so that a machine set up for lakectl needs
nothing more for `silt`: ``~/.lakectl.yaml`` (or the file ``LAKECTL_CONFIG_FILE`` names) with
``credentials.access_key_id``, ``credentials.secret_access_key`` and ``server.endpoint_url``,
each overridden by its variable, ``LAKECTL_CREDENTIALS_ACCESS_KEY_ID``,
``LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY`` and ``LAKECTL_SERVER_ENDPOINT_URL``.

The endpoint is the server's base URL; lakectl also accepts it with the API's ``/api/v1``, which
is taken off here (the REST client adds it back).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from silt.client_base import EXIT_USAGE, ClientError

CONFIG_FILE_ENV = "LAKECTL_CONFIG_FILE"
ACCESS_KEY_ENV = "LAKECTL_CREDENTIALS_ACCESS_KEY_ID"
SECRET_KEY_ENV = "LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY"
ENDPOINT_ENV = "LAKECTL_SERVER_ENDPOINT_URL"
API_PATH = "/api/v1"


@dataclass(frozen=True)
class LakectlConfig:
    access_key_id: str
    secret_access_key: str
    endpoint_url: str
    source: str  # where it was read, for `silt doctor` and error messages

    @property
    def has_credentials(self) -> bool:
        return bool(self.access_key_id and self.secret_access_key)


def config_file() -> Path:
    named = os.environ.get(CONFIG_FILE_ENV)
    return Path(named).expanduser() if named else Path.home() / ".lakectl.yaml"


def _read_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ClientError(f"cannot read lakectl's configuration {path}: {exc}", EXIT_USAGE) from None
    import yaml  # only when there is a file to read

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ClientError(f"lakectl's configuration {path} is not valid YAML: {exc}", EXIT_USAGE) from None
    return data if isinstance(data, dict) else {}


def _section(data: dict[str, Any], name: str) -> dict[str, Any]:
    section = data.get(name)
    return section if isinstance(section, dict) else {}


def base_url(endpoint: str) -> str:
    """The server's base URL: lakectl's endpoint without a trailing /api/v1 or slash."""
    url = endpoint.strip().rstrip("/")
    if url.endswith(API_PATH):
        url = url[: -len(API_PATH)]
    return url


def load() -> LakectlConfig:
    """lakectl's file overlaid with its variables; empty strings where neither says anything."""
    path = config_file()
    data = _read_file(path)
    credentials, server = _section(data, "credentials"), _section(data, "server")
    access = os.environ.get(ACCESS_KEY_ENV) or str(credentials.get("access_key_id") or "")
    secret = os.environ.get(SECRET_KEY_ENV) or str(credentials.get("secret_access_key") or "")
    endpoint = os.environ.get(ENDPOINT_ENV) or str(server.get("endpoint_url") or "")
    from_env = any(os.environ.get(name) for name in (ACCESS_KEY_ENV, SECRET_KEY_ENV, ENDPOINT_ENV))
    source = "LAKECTL_* variables" if from_env and not data else str(path)
    if from_env and data:
        source = f"{path} and LAKECTL_* variables"
    return LakectlConfig(access, secret, base_url(endpoint) if endpoint else "", source)
