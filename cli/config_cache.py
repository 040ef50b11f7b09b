"""The `silt` CLI's configuration, validated once per change rather than at every start.

Validating `config.yaml` takes pydantic, whose import and models cost about a third of
`silt repo list`'s CPU. What a client reads from the validated configuration
(silt.client.ClientView: endpoints, the gateway's URL and region, TLS file paths; never a
secret) is kept in ``$XDG_CACHE_HOME/silt/client-config.json`` (``~/.cache/silt/`` without
it; mode 0600, written atomically), under a key hashing:

- the configuration file's path and content (none: built-in defaults);
- every ``SILT_*`` environment variable, and the ``LAKEFS_*`` ones of lakeFS's keys that the
  client sections translate (silt/lakefs_settings.py), but those naming a secret (``SECRET``,
  ``PASSWORD``): their values are never hashed into a file; the client sections' only such key,
  ``auth.encrypt_secret_key``, accepts any string and is no part of what is cached
  (tests/unit/test_cli_config_cache.py checks both);
- silt/config.py's and silt/lakefs_settings.py's size and modification time, so a new
  version's rules and defaults apply.

A hit imports no pydantic, no YAML parser. A miss validates as every command always did
(silt.config.load_client_config: same rules, same messages) and stores the result; an invalid
configuration raises before anything is stored. An unreadable or corrupt cache is a miss.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

import silt
from silt.client_base import ClientView, TLSView

FORMAT = 1
FILE_NAME = "client-config.json"
MAX_ENTRIES = 8  # configurations (stacks, environments) a user switches between
_SECRET_WORDS = ("SECRET", "PASSWORD")
# lakeFS's variables whose keys load_client_config reads (tests/unit/test_cli_config_cache.py
# checks these cover them all); other LAKEFS_* variables cannot change what a client sees.
LAKEFS_CLIENT_PREFIXES = (
    "LAKEFS_LISTEN_ADDRESS",
    "LAKEFS_TLS_",
    "LAKEFS_GATEWAYS_",
    "LAKEFS_AUTH_CACHE_",
    "LAKEFS_AUTH_ENCRYPT_",
    "LAKEFS_AUTH_LOGIN_DURATION",
    "LAKEFS_COMMITTED_",
    "LAKEFS_GRAVELER_COMPACTION_SENSOR_THRESHOLD",
)
_PREFIXES = ("SILT_", *LAKEFS_CLIENT_PREFIXES)
# The configuration's rules and defaults (silt/config.py, and the lakeFS keys it reads),
# found without importing them (pydantic).
CONFIG_RULES = Path(silt.__file__).resolve().parent / "config.py"
LAKEFS_RULES = CONFIG_RULES.with_name("lakefs_settings.py")


def cache_path() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or ""
    root = Path(base) if os.path.isabs(base) else Path.home() / ".cache"
    return root / "silt" / FILE_NAME


def cache_key(path: str | None, env: dict[str, str] | os._Environ[str] | None = None) -> str | None:
    """The key of the configuration at path under env's SILT_* variables; None when the file
    cannot be read (then the validation's own error is what the user sees)."""
    env = os.environ if env is None else env
    if path is None:
        path = env.get("SILT_CONFIG") or None  # as load_client_config reads it
    digest = hashlib.sha256()
    try:
        if path:
            resolved = Path(path).expanduser().resolve()
            content = resolved.read_bytes()
            digest.update(json.dumps(["file", str(resolved), hashlib.sha256(content).hexdigest()]).encode())
        else:
            digest.update(b'["defaults"]')
        rules = [os.stat(CONFIG_RULES), os.stat(LAKEFS_RULES)]
    except OSError:
        return None
    variables = sorted(
        (k, v) for k, v in env.items() if k.startswith(_PREFIXES) and not any(w in k.upper() for w in _SECRET_WORDS)
    )
    stamps = [(rule.st_size, rule.st_mtime_ns) for rule in rules]
    digest.update(json.dumps([FORMAT, stamps, variables]).encode())
    return digest.hexdigest()


def _entries(file: Path) -> dict[str, Any]:
    try:
        data = json.loads(file.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("entries"), dict):
        return {}
    return data["entries"]


def _view(entry: Any) -> ClientView | None:
    """entry as a ClientView, None unless it is exactly one (a corrupt or foreign entry)."""
    try:
        fields = dict(entry)
        tls = TLSView(**fields.pop("tls"))
        view = ClientView(tls=tls, **fields)
    except (TypeError, ValueError, KeyError):
        return None
    strings = (view.graveler, view.auth, view.compactor, view.s3_endpoint, view.region)
    optional = (view.s3_ca_file, tls.ca_file, tls.cert_file, tls.key_file, tls.server_name)
    if (
        not all(isinstance(s, str) for s in strings)
        or not all(s is None or isinstance(s, str) for s in optional)
        or not isinstance(tls.enabled, bool)
    ):
        return None
    return view


def _store(file: Path, key: str, view: ClientView) -> None:
    entries = {k: v for k, v in _entries(file).items() if k != key}
    entries[key] = asdict(view)
    entries = dict(list(entries.items())[-MAX_ENTRIES:])
    try:
        file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".client-config-", dir=file.parent)  # mode 0600
        try:
            with os.fdopen(fd, "w") as out:
                json.dump({"format": FORMAT, "entries": entries}, out)
            os.replace(tmp, file)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        pass  # a read-only or full home: the next start validates again


def client_view(path: str | None) -> ClientView:
    """The client's view of the configuration at path (None: $SILT_CONFIG or the defaults)."""
    key = cache_key(path)
    file = cache_path()
    if key is not None:
        cached = _view(_entries(file).get(key))
        if cached is not None:
            return cached
    from silt.config import load_client_config

    view = ClientView.of(load_client_config(path))  # raises ConfigError: nothing is stored
    if key is not None:
        _store(file, key, view)
    return view
