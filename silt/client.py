"""A small client for Silt's services, as the `silt` CLI and scripts use it.

Where it connects and as whom, first match wins:

- arguments (the CLI's `--graveler`, `--auth`, `--s3-endpoint` flags);
- `SILT_ACCESS_KEY_ID` / `SILT_SECRET_ACCESS_KEY` for the key;
- the credentials file the launcher writes, which holds the admin key and the endpoints:
  `$SILT_CLIENT_CREDENTIALS_FILE`, else `$SILT_DATA_DIR/credentials.json`, else
  `~/.silt/credentials.json`. Never the current directory unless named so
  (`SILT_DATA_DIR=.silt-data` for `make run`'s stack): a checkout someone else controls could
  otherwise choose the endpoints that receive requests signed with the user's key;
- the configuration (`graveler.endpoint`, `auth.endpoint`, `gateways.s3.listen_address`).

Over TLS when the configuration says so: `tls.*` for the gRPC services (the CA, and this
client's certificate where servers require one), `gateways.s3.tls` for the gateway (https,
verified against `gateways.s3.tls.ca_file` or the system's trust store).

Failed calls raise ClientError: one readable line and the CLI exit code that goes with it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import grpc

from silt.client_base import (
    _WORDS_OF,
    ACCESS_KEY_ENV,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    SECRET_KEY_ENV,
    ClientError,
    ClientView,
    _saved,
    credentials_file_candidates,
    exit_code_of,
)
from silt.errors import ConfigError, Unavailable
from silt.graveler.v1 import graveler_pb2 as gapi
from silt.graveler.v1 import graveler_pb2_grpc
from silt.rpc.channels import ClientTLS, client_tls
from silt.rpc.errors import error_from_rpc
from silt.rpc.signing import AUTH_AUDIENCE, COMPACTOR_AUDIENCE, GRAVELER_AUDIENCE, Credentials, signed_channel
from silt.secret import Secret

if TYPE_CHECKING:
    from silt.config import ClientConfig, Config


CALL_TIMEOUT_SECONDS = 60.0


def error_of_rpc(exc: grpc.RpcError, service: str, target: str) -> ClientError:
    error = error_from_rpc(exc)
    details = str(error)
    if isinstance(error, Unavailable) and ("connect" in details.lower() or details == "UNAVAILABLE"):
        return ClientError(f"{service} unavailable at {target} (is the stack running? `silt run`)", EXIT_UNAVAILABLE)
    words = next((w for cls, w in _WORDS_OF if isinstance(error, cls)), None)
    message = details if not words or words in details.lower() else f"{words}: {details}"
    return ClientError(message, exit_code_of(error))


_T = TypeVar("_T")


class _Calls:
    """A stub whose every call has a timeout and raises ClientError instead of grpc.RpcError."""

    def __init__(self, stub: Any, service: str, target: str) -> None:
        self._stub, self._service, self._target = stub, service, target

    def __getattr__(self, method: str) -> Callable[[Any], Any]:
        call = getattr(self._stub, method)

        def invoke(request: Any, timeout: float = CALL_TIMEOUT_SECONDS) -> Any:
            try:
                return call(request, timeout=timeout)
            except grpc.RpcError as exc:
                raise error_of_rpc(exc, self._service, self._target) from None

        return invoke


@dataclass
class Settings:
    graveler: str
    auth: str
    s3_endpoint: str
    region: str
    credentials: Credentials | None
    credentials_source: str
    compactor: str = ""
    # tls.*: how the gRPC channels reach the services (None: plaintext).
    tls: ClientTLS | None = None
    # gateways.s3.tls.ca_file: the CA bundle boto3 verifies the gateway with (None: the system's).
    s3_ca_file: str | None = None


def resolve_settings(
    config: Config | ClientConfig | ClientView,
    graveler: str | None = None,
    auth: str | None = None,
    s3_endpoint: str | None = None,
) -> Settings:
    view = config if isinstance(config, ClientView) else ClientView.of(config)
    saved, source = _saved()
    credentials = None
    if os.environ.get(ACCESS_KEY_ENV) and os.environ.get(SECRET_KEY_ENV):
        credentials = Credentials(os.environ[ACCESS_KEY_ENV], Secret(os.environ[SECRET_KEY_ENV]))
        source = f"{ACCESS_KEY_ENV}/{SECRET_KEY_ENV}"
    elif saved.get("access_key_id") and saved.get("secret_access_key"):
        credentials = Credentials(saved["access_key_id"], Secret(saved["secret_access_key"]))
    return Settings(
        graveler=graveler or saved.get("graveler") or view.graveler,
        auth=auth or saved.get("auth") or view.auth,
        s3_endpoint=s3_endpoint or saved.get("gateway") or view.s3_endpoint,
        region=saved.get("region") or view.region,
        credentials=credentials,
        credentials_source=source,
        compactor=saved.get("compactor") or view.compactor,
        tls=_client_tls(view),
        s3_ca_file=view.s3_ca_file,
    )


def _client_tls(view: ClientView) -> ClientTLS | None:
    try:
        return client_tls(view.tls)
    except ConfigError as exc:
        raise ClientError(str(exc), EXIT_USAGE) from None


class Client:
    """Signed channels to graveler and auth (opened on first use), and an S3 client for bytes."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._channels: list[grpc.Channel] = []
        self._graveler: _Calls | None = None
        self._auth: _Calls | None = None
        self._compactor: _Calls | None = None
        self._s3: Any = None

    def credentials(self) -> Credentials:
        if self.settings.credentials is None:
            raise ClientError(
                f"no credentials: set {ACCESS_KEY_ENV} and {SECRET_KEY_ENV}, or start the stack with `silt run` "
                f"(it saves them to {credentials_file_candidates()[-1]} or $SILT_DATA_DIR/credentials.json; "
                "for `make run`'s stack: export SILT_DATA_DIR=$PWD/.silt-data)",
                EXIT_USAGE,
            )
        return self.settings.credentials

    def _channel(self, target: str, audience: str) -> grpc.Channel:
        # Short reconnect backoff: a long-lived client should find a restarted service at once.
        options = [("grpc.initial_reconnect_backoff_ms", 100), ("grpc.max_reconnect_backoff_ms", 2000)]
        channel = signed_channel(target, self.credentials(), options, self.settings.tls, audience=audience)
        self._channels.append(channel)
        return channel

    @property
    def graveler(self) -> Any:
        if self._graveler is None:
            stub = graveler_pb2_grpc.GravelerServiceStub(self._channel(self.settings.graveler, GRAVELER_AUDIENCE))
            self._graveler = _Calls(stub, "graveler", self.settings.graveler)
        return self._graveler

    @property
    def compactor(self) -> Any:
        if self._compactor is None:
            from silt.compactor.v1 import compactor_pb2_grpc  # only what a command calls is imported

            target = self.settings.compactor
            stub = compactor_pb2_grpc.CompactorServiceStub(self._channel(target, COMPACTOR_AUDIENCE))
            self._compactor = _Calls(stub, "compactor", target)
        return self._compactor

    @property
    def auth(self) -> Any:
        if self._auth is None:
            from silt.auth.v1 import auth_pb2_grpc  # only what a command calls is imported

            stub = auth_pb2_grpc.AuthServiceStub(self._channel(self.settings.auth, AUTH_AUDIENCE))
            self._auth = _Calls(stub, "auth", self.settings.auth)
        return self._auth

    @property
    def s3(self) -> Any:
        """boto3 S3 client on the gateway: object bytes never go through graveler."""
        if self._s3 is None:
            import boto3
            from botocore.config import Config as BotoConfig

            creds = self.credentials()
            self._s3 = boto3.client(
                "s3",
                endpoint_url=self.settings.s3_endpoint,
                region_name=self.settings.region,
                aws_access_key_id=creds.access_key_id,
                aws_secret_access_key=creds.secret_access_key.get_secret_value(),
                config=BotoConfig(s3={"addressing_style": "path"}, retries={"max_attempts": 3}),
                verify=self.settings.s3_ca_file,
            )
        return self._s3

    def close(self) -> None:
        for channel in self._channels:
            channel.close()
        self._channels.clear()

    # --- paging helpers -----------------------------------------------------------------

    def entries(
        self, repo: str, ref: str, prefix: str = "", delimiter: str = "", page: int = 1000
    ) -> Iterator[gapi.ListItem]:
        after = ""
        while True:
            resp = self.graveler.ListEntries(
                gapi.ListEntriesRequest(
                    repository=repo, ref=ref, prefix=prefix, delimiter=delimiter, after=after, amount=page
                )
            )
            yield from resp.items
            if not resp.has_more or not resp.items:
                return
            after = resp.items[-1].key


def paged(fetch: Callable[[str], Any], items: str, key: Callable[[Any], str]) -> Iterator[Any]:
    """Every item of a list call paged by `after`: fetch(after) returns a response with `has_more`."""
    after = ""
    while True:
        resp = fetch(after)
        batch = list(getattr(resp, items))
        yield from batch
        if not resp.has_more or not batch:
            return
        after = key(batch[-1])


def config_error(exc: ConfigError) -> ClientError:
    return ClientError(str(exc), EXIT_USAGE)
