"""Every gRPC connection between Silt's processes, in one place: the client channels (plain or
TLS, with this process's certificate for mutual TLS) and the servers' credentials.

TLS is configuration (``tls.*``, silt/config.py), off by default for a laptop. With it on,
every server presents ``tls.cert_file`` and, with ``tls.require_client_cert``, accepts only
clients presenting a certificate signed by ``tls.ca_file``; every client verifies the server's
certificate against ``tls.ca_file`` and presents its own. Who a caller is still comes from
its signed call (silt/rpc/signing.py): TLS keeps calls private and keeps peers without a
certificate from the CA off the gRPC ports altogether.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

import grpc
import grpc.aio

from silt.errors import ConfigError

if TYPE_CHECKING:
    from silt.config import TLSConfig

log = logging.getLogger(__name__)


def _read(path: str, key: str) -> bytes:
    try:
        data = Path(path).expanduser().read_bytes()
    except OSError as exc:
        raise ConfigError(f"{key}: cannot read {path}: {exc.strerror}") from None
    if b"-----BEGIN " not in data:
        raise ConfigError(f"{key}: {path} is not a PEM file")
    return data


@dataclass(frozen=True, repr=False)
class ClientTLS:
    """What a client needs to reach servers over TLS; the repr shows no key material."""

    ca: bytes | None  # None: the system's trust store
    cert_chain: bytes | None = None  # presented to servers that require client certificates
    private_key: bytes | None = None
    server_name: str | None = None  # the name expected in servers' certificates, if not the target's host

    def __repr__(self) -> str:
        return f"ClientTLS(client_cert={self.cert_chain is not None}, server_name={self.server_name!r})"

    def credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(self.ca, self.private_key, self.cert_chain)

    def options(self) -> list[tuple[str, Any]]:
        return [("grpc.ssl_target_name_override", self.server_name)] if self.server_name else []


class ClientTLSSection(Protocol):
    """What client_tls reads: the ``tls`` section (silt.config.TLSConfig), or the `silt` CLI's
    copy of it (silt.client.ClientView, read without pydantic)."""

    @property
    def enabled(self) -> bool: ...
    @property
    def ca_file(self) -> str | None: ...
    @property
    def cert_file(self) -> str | None: ...
    @property
    def key_file(self) -> str | None: ...
    @property
    def server_name(self) -> str | None: ...


def client_tls(config: ClientTLSSection) -> ClientTLS | None:
    """The client side of config: None when TLS is off."""
    if not config.enabled:
        return None
    ca = _read(config.ca_file, "tls.ca_file") if config.ca_file else None
    cert = _read(config.cert_file, "tls.cert_file") if config.cert_file else None
    key = _read(config.key_file, "tls.key_file") if config.key_file else None
    return ClientTLS(ca, cert, key, config.server_name or None)


def open_channel(target: str, tls: ClientTLS | None, options: Sequence[tuple[str, Any]] = ()) -> grpc.Channel:
    """A channel to target: TLS when tls is given, plaintext otherwise."""
    if tls is None:
        return grpc.insecure_channel(target, options=list(options))
    return grpc.secure_channel(target, tls.credentials(), options=[*options, *tls.options()])


def open_aio_channel(
    target: str,
    tls: ClientTLS | None,
    options: Sequence[tuple[str, Any]] = (),
    interceptors: Sequence[Any] | None = None,
) -> grpc.aio.Channel:
    """The grpc.aio twin of open_channel."""
    if tls is None:
        return grpc.aio.insecure_channel(target, options=list(options), interceptors=interceptors)
    return grpc.aio.secure_channel(
        target, tls.credentials(), options=[*options, *tls.options()], interceptors=interceptors
    )


# --- servers ------------------------------------------------------------------------------


class _ReloadingCertificates:
    """Hands gRPC the current certificate files at each new connection's handshake, so that a
    renewed certificate (a Kubernetes Secret updated in place) is served without a restart."""

    def __init__(self, config: TLSConfig) -> None:
        if not config.cert_file or not config.key_file:
            raise ConfigError("tls.cert_file and tls.key_file must be set: this service serves TLS")
        if config.require_client_cert and not config.ca_file:
            raise ConfigError("tls.ca_file must be set: tls.require_client_cert checks clients against it")
        self._files = [f for f in (config.cert_file, config.key_file, config.ca_file) if f]
        self._config = config
        self._stamp = self._mtimes()
        self.initial = self._load()

    def _mtimes(self) -> tuple[float, ...]:
        try:
            return tuple(os.stat(os.path.expanduser(f)).st_mtime for f in self._files)
        except OSError:
            return ()

    def _load(self) -> grpc.ServerCertificateConfiguration:
        c = self._config
        assert c.cert_file and c.key_file
        pair = (_read(c.key_file, "tls.key_file"), _read(c.cert_file, "tls.cert_file"))
        ca = _read(c.ca_file, "tls.ca_file") if c.ca_file else None
        return grpc.ssl_server_certificate_configuration([pair], root_certificates=ca)

    def __call__(self) -> grpc.ServerCertificateConfiguration | None:
        stamp = self._mtimes()
        if stamp == self._stamp or not stamp:
            return None  # unchanged (or briefly missing while a Secret is swapped): keep the current one
        try:
            fresh = self._load()
        except ConfigError as exc:
            log.warning("keeping the current TLS certificate: %s", exc)
            return None
        self._stamp = stamp
        log.info("TLS certificate files changed; serving the new certificate")
        return fresh


def server_credentials(config: TLSConfig) -> grpc.ServerCredentials | None:
    """A server's TLS credentials from config (None when TLS is off). Raises ConfigError for
    missing or unreadable files, at start-up rather than at the first connection."""
    if not config.enabled:
        return None
    certificates = _ReloadingCertificates(config)
    # grpcio takes None from the fetcher as "unchanged"; its type stubs do not say so.
    fetcher = cast(Callable[[], grpc.ServerCertificateConfiguration], certificates)
    return grpc.dynamic_ssl_server_credentials(
        certificates.initial, fetcher, require_client_authentication=config.require_client_cert
    )
