"""What a client of Silt needs before it dials anything, without gRPC: the CLI's exit codes and
errors, repository URIs, where the saved credentials and the configuration file are, and what a
client reads from the configuration (ClientView). silt.client re-exports all of it; the `silt`
CLI's REST commands import this module alone, so that they start without gRPC.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from silt.errors import (
    Aborted,
    AlreadyExists,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    SiltError,
    Unauthenticated,
    Unavailable,
)
from silt.listen_addresses import dialable_address

if TYPE_CHECKING:
    from silt.config import ClientConfig, Config

CREDENTIALS_FILE_ENV = "SILT_CLIENT_CREDENTIALS_FILE"
ACCESS_KEY_ENV = "SILT_ACCESS_KEY_ID"
SECRET_KEY_ENV = "SILT_SECRET_ACCESS_KEY"

# Exit codes of the CLI (documented in docs/clients/cli.md).
EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_UNAVAILABLE = 3
EXIT_NOT_FOUND = 4
EXIT_CONFLICT = 5
EXIT_DENIED = 6


def exit_code_of(exc: SiltError) -> int:
    """The exit code for a typed error, raised in the CLI process or decoded from a failed call."""
    for cls, code in _EXIT_OF:
        if isinstance(exc, cls):
            return code
    return EXIT_FAILURE


_EXIT_OF: list[tuple[type[SiltError], int]] = [
    (InvalidArgument, EXIT_USAGE),
    (Unavailable, EXIT_UNAVAILABLE),
    (NotFound, EXIT_NOT_FOUND),
    (AlreadyExists, EXIT_CONFLICT),
    (Aborted, EXIT_CONFLICT),
    (PermissionDenied, EXIT_DENIED),
    (Unauthenticated, EXIT_DENIED),
]

_WORDS_OF: list[tuple[type[SiltError], str]] = [
    (PermissionDenied, "permission denied"),
    (Unauthenticated, "not authenticated"),
    (NotFound, "not found"),
    (AlreadyExists, "already exists"),
]


class ClientError(SiltError):
    """A failed operation: a one-line message and the exit code for it."""

    def __init__(self, message: str, exit_code: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def credentials_file_candidates() -> list[Path]:
    if os.environ.get(CREDENTIALS_FILE_ENV):
        return [Path(os.environ[CREDENTIALS_FILE_ENV]).expanduser()]
    if os.environ.get("SILT_DATA_DIR"):
        return [Path(os.environ["SILT_DATA_DIR"]).expanduser() / "credentials.json"]
    # Only the home directory by default (`silt run`'s stack); `make run`'s ./.silt-data needs
    # SILT_DATA_DIR, as does anything else found relative to the current directory.
    return [Path("~/.silt/credentials.json").expanduser()]


def find_config_path(explicit: str | None) -> str | None:
    """The configuration file every command reads: --config or SILT_CONFIG (explicit), else
    the config.yaml beside the credentials file the CLI uses (the running stack's data
    directory), else none (built-in defaults)."""
    if explicit:
        return explicit
    for path in credentials_file_candidates():
        candidate = path.parent / "config.yaml"
        if candidate.is_file():
            return str(candidate)
    return None


def _saved() -> tuple[dict[str, Any], str]:
    for path in credentials_file_candidates():
        if path.is_file():
            try:
                return json.loads(path.read_text()), str(path)
            except (OSError, ValueError) as exc:
                raise ClientError(f"cannot read credentials file {path}: {exc}", EXIT_USAGE) from None
    return {}, ""


@dataclass(frozen=True)
class TLSView:
    """The ``tls`` section as a client reads it (silt.config.TLSConfig's client fields)."""

    enabled: bool = False
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    server_name: str | None = None


@dataclass(frozen=True)
class ClientView:
    """What a client reads from a validated configuration (Config or ClientConfig): where it
    dials each service, the gateway's URL, region and CA, TLS file paths. Plain values, no
    secret: the `silt` CLI caches it (cli/config_cache.py) and starts without pydantic."""

    graveler: str
    auth: str
    compactor: str
    s3_endpoint: str
    region: str
    s3_ca_file: str | None
    tls: TLSView

    @classmethod
    def of(cls, config: Config | ClientConfig) -> ClientView:
        s3 = config.gateways.s3
        tls = config.tls
        return cls(
            graveler=config.graveler.dial_address,
            auth=config.auth.endpoint,
            compactor=config.compactor.dial_address,
            s3_endpoint=s3.endpoint
            or f"{'https' if s3.tls.enabled else 'http'}://{dialable_address(s3.listen_address)}",
            region=s3.region,
            s3_ca_file=s3.tls.ca_file,
            tls=TLSView(tls.enabled, tls.ca_file, tls.cert_file, tls.key_file, tls.server_name),
        )


# lakectl's scheme is taken wherever Silt's is, so that lakeFS users' scripts and habits work.
URI_SCHEMES = ("silt://", "lakefs://")


def is_uri(text: str) -> bool:
    """Whether text is a repository URI (silt:// or lakefs://) rather than a bare name or ref."""
    return text.startswith(URI_SCHEMES)


def strip_scheme(uri: str) -> str:
    """The URI without its silt:// or lakefs:// scheme (text that has neither, unchanged)."""
    for scheme in URI_SCHEMES:
        if uri.startswith(scheme):
            return uri[len(scheme) :]
    return uri


def parse_uri(uri: str, need_ref: bool = True) -> tuple[str, str, str]:
    """`silt://repo/ref/path` or lakectl's `lakefs://repo/ref/path` -> (repo, ref, path); path
    may be empty."""
    if not need_ref and uri and "/" not in uri and ":" not in uri:
        uri = URI_SCHEMES[0] + uri  # a bare repository name, as `silt repo show NAME` takes it
    if not is_uri(uri):
        raise ClientError(
            f"expected a URI like lakefs://<repository>/<ref>/<path> (or silt://...), got {uri!r}", EXIT_USAGE
        )
    repo, _, rest = strip_scheme(uri).partition("/")
    ref, _, path = rest.partition("/")
    if not repo or (need_ref and not ref):
        what = "lakefs://<repository>/<ref>[/<path>]" if need_ref else "lakefs://<repository>"
        raise ClientError(f"expected a URI like {what} (or silt://...), got {uri!r}", EXIT_USAGE)
    return repo, ref, path
