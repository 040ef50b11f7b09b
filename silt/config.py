"""Silt's configuration: one YAML file, every key overridable by an environment variable.

The keys are listed in README.md, "Configuration". A key's environment variable is ``SILT_``
followed by its path in upper case joined by ``_``: ``database.cassandra.port`` is
``SILT_DATABASE_CASSANDRA_PORT``. Lists are written comma-separated
(``SILT_DATABASE_CASSANDRA_CONTACT_POINTS=10.0.0.1,10.0.0.2``) and maps as
``key:value`` pairs (``SILT_DATABASE_CASSANDRA_DATACENTERS=dc1:3,dc2:3``).

Validation happens once, at start-up; an invalid file or value raises ConfigError with a
one-line message naming the key, where it came from, and what was expected.
"""

from __future__ import annotations

import os
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator, model_validator

from silt.errors import ConfigError, InvalidArgument
from silt.namespaces import parse_roots

ENV_PREFIX = "SILT_"
CONFIG_PATH_ENV = "SILT_CONFIG"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)


def _check_listen_address(value: str) -> str:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"expected <host>:<port> with a port from 0 to 65535, got {value!r}")
    return value


def _check_optional_listen_address(value: str | None) -> str | None:
    return None if value is None or value == "" else _check_listen_address(value)


# Hosts that mean "every interface of this machine": fine to listen on, meaningless to dial.
WILDCARD_HOSTS = ("", "0.0.0.0", "::", "[::]", "*")


def dialable_host(host: str) -> str:
    """The host a process on this machine dials for a service listening on host: loopback for
    a wildcard (every interface), else host itself."""
    return "127.0.0.1" if host in WILDCARD_HOSTS else host


def dialable_address(listen_address: str) -> str:
    """Where a process on this machine reaches a service listening on listen_address.

    Only valid on the same machine (the local launcher, a single-host install): in a cluster,
    clients dial the *.endpoint keys, which name a Service, never a listen address."""
    host, _, port = listen_address.rpartition(":")
    return f"{dialable_host(host)}:{port}"


def _check_endpoint(value: str) -> str:
    host, sep, _ = value.rpartition(":")
    if sep and host in WILDCARD_HOSTS:
        raise ValueError(
            "an endpoint is an address other processes dial (e.g. graveler.silt.svc:8102), "
            "not a wildcard listen address"
        )
    return _check_listen_address(value)


def _check_optional_endpoint(value: str | None) -> str | None:
    return None if value is None else _check_endpoint(value)


# Where a process serves Prometheus' /metrics; unset (the default) serves none.
_METRICS_ADDRESS_HELP = "host:port of this process's Prometheus /metrics endpoint; unset: none"


class LoggingConfig(_Section):
    format: Literal["text", "json"] = "text"
    level: Literal["DEBUG", "INFO", "WARN", "ERROR", "NONE"] = "INFO"
    output: str = Field("-", description='"-" for stdout, otherwise a file path')


class LocalDatabaseConfig(_Section):
    path: str = "~/silt/metadata.db"
    # NORMAL survives a crash of any process; FULL also survives power loss (fsync per commit).
    synchronous: Literal["NORMAL", "FULL"] = "NORMAL"
    # Bounds every KV call: a writer waits this long for another process's write, then the
    # request fails Unavailable instead of hanging.
    busy_timeout_ms: int = Field(5_000, ge=0)
    scan_page_size: int = Field(1000, ge=1)


class CassandraConfig(_Section):
    contact_points: list[str] = Field(default_factory=lambda: ["127.0.0.1"], min_length=1)
    port: int = Field(9042, ge=1, le=65535)
    keyspace: str = Field("silt", pattern=r"^[A-Za-z][A-Za-z0-9_]{0,47}$")
    replication_strategy: Literal["SimpleStrategy", "NetworkTopologyStrategy"] = "SimpleStrategy"
    replication_factor: int = Field(1, ge=1, description="with SimpleStrategy")
    datacenters: dict[str, int] = Field(
        default_factory=dict, description="datacenter -> replicas, with NetworkTopologyStrategy"
    )
    local_datacenter: str | None = None
    consistency: Literal["ONE", "TWO", "THREE", "QUORUM", "LOCAL_QUORUM", "EACH_QUORUM", "ALL", "LOCAL_ONE"] = (
        "LOCAL_QUORUM"
    )
    serial_consistency: Literal["SERIAL", "LOCAL_SERIAL"] = "LOCAL_SERIAL"
    username: str | None = None
    password: SecretStr | None = None
    protocol_version: int | None = Field(None, ge=3, le=5)
    connect_timeout_s: float = Field(5.0, gt=0)
    # Bounds every read, write and LWT (retries included): a frozen node fails the request
    # Unavailable after this long instead of hanging it.
    request_timeout_s: float = Field(3.0, gt=0)
    page_size: int = Field(1000, ge=1)
    create_schema: bool = True


class DatabaseConfig(_Section):
    type: Literal["local", "mem", "cassandra"] = "local"
    local: LocalDatabaseConfig = Field(default_factory=LocalDatabaseConfig)
    cassandra: CassandraConfig = Field(default_factory=CassandraConfig)


class LocalBlockstoreConfig(_Section):
    path: str = "~/silt/data"


class S3CredentialsConfig(_Section):
    access_key_id: str | None = None
    secret_access_key: SecretStr | None = None
    session_token: SecretStr | None = None


class S3BlockstoreConfig(_Section):
    region: str = "us-east-1"
    endpoint_url: str | None = None
    profile: str | None = None
    credentials_file: str | None = None
    credentials: S3CredentialsConfig = Field(default_factory=S3CredentialsConfig)
    force_path_style: bool = False
    max_retries: int = Field(5, ge=0)


class BlockstoreConfig(_Section):
    type: Literal["local", "s3"] = "local"
    local: LocalBlockstoreConfig = Field(default_factory=LocalBlockstoreConfig)
    s3: S3BlockstoreConfig = Field(default_factory=S3BlockstoreConfig)


def _check_pem_pair(enabled: bool, cert_file: str | None, key_file: str | None, section: str) -> None:
    if enabled and bool(cert_file) != bool(key_file):
        raise ValueError(f"{section}.cert_file and {section}.key_file go together: set both or neither")


class HttpTLSConfig(_Section):
    """HTTPS on the S3 gateway's listener. Its clients are S3 clients, which present no
    certificate: this is server-side TLS only. The certificate may come from a public CA
    (what S3 clients trust by default) or from Silt's own (clients then need ca_file)."""

    enabled: bool = Field(False, description="serve HTTPS instead of HTTP on gateways.s3.listen_address")
    cert_file: str | None = Field(None, description="PEM certificate chain of the gateway")
    key_file: str | None = Field(None, description="PEM private key of cert_file")
    ca_file: str | None = Field(
        None, description="for Silt's clients (CLI, tests): the CA bundle that verifies the gateway; unset: system"
    )

    @model_validator(mode="after")
    def _pair(self) -> HttpTLSConfig:
        _check_pem_pair(self.enabled, self.cert_file, self.key_file, "gateways.s3.tls")
        if self.enabled and not self.cert_file:
            raise ValueError("gateways.s3.tls.cert_file and key_file must be set when gateways.s3.tls.enabled")
        return self


class TLSConfig(_Section):
    """TLS on every gRPC connection between Silt's processes: servers (auth, graveler,
    compactor) and clients (every service, the CLI, the GC job) alike. See silt/rpc/channels.py."""

    enabled: bool = Field(False, description="gRPC over TLS, as servers and as clients")
    cert_file: str | None = Field(None, description="PEM certificate chain this process presents (server and client)")
    key_file: str | None = Field(None, description="PEM private key of cert_file")
    ca_file: str | None = Field(
        None, description="PEM CA bundle: verifies servers, and clients' certificates; unset: system trust store"
    )
    require_client_cert: bool = Field(
        True, description="servers accept only clients presenting a certificate signed by ca_file (mutual TLS)"
    )
    server_name: str | None = Field(
        None, description="name expected in servers' certificates instead of the endpoint's host"
    )

    @model_validator(mode="after")
    def _pair(self) -> TLSConfig:
        _check_pem_pair(self.enabled, self.cert_file, self.key_file, "tls")
        return self


class S3GatewayConfig(_Section):
    listen_address: str = "0.0.0.0:8000"
    domain_name: str = "s3.local"
    region: str = "us-east-1"
    workers: int = Field(1, ge=1, le=64, description="gateway processes sharing the listen address")
    max_header_bytes: int = Field(64 * 1024, ge=8 * 1024, le=1024 * 1024, description="request line plus headers")
    max_header_line_bytes: int = Field(8 * 1024, ge=1024, le=64 * 1024, description="one header or the URL")
    header_timeout_seconds: float = Field(20.0, gt=0, le=600, description="time to send a request's head")
    max_connections: int = Field(4096, ge=1, description="open connections per gateway process")
    max_connections_per_client: int = Field(
        512, ge=0, description="open connections per client address (IPv6: /64) and gateway process; 0: no cap"
    )
    idle_timeout_seconds: float = Field(
        15.0, gt=0, le=3600, description="a connection that sends no request for this long is closed"
    )
    body_idle_timeout_seconds: float = Field(60.0, gt=0, le=3600, description="longest pause inside a body")
    storage_namespace_template: str | None = Field(
        None, description="storage namespace of repositories created by CreateBucket, e.g. local://{repo}"
    )
    metrics_listen_address: str | None = Field(None, description=_METRICS_ADDRESS_HELP)
    tls: HttpTLSConfig = Field(default_factory=HttpTLSConfig)
    multipart_upload_max_age_seconds: int = Field(
        7 * 24 * 3600, ge=1, description="multipart uploads neither completed nor aborted by this age are aborted"
    )
    multipart_expiry_interval_seconds: float = Field(
        3600.0, gt=0, le=86400, description="how often each gateway process aborts expired multipart uploads"
    )
    # Off by default: SigV2 is HMAC-SHA1, and its presigned URLs carry no signing time.
    sigv2_enabled: bool = Field(
        False, description="also accept AWS Signature Version 2 (header and presigned, at most 7 days ahead)"
    )

    _listen = field_validator("listen_address")(_check_listen_address)
    _metrics_listen = field_validator("metrics_listen_address")(_check_optional_listen_address)


class GatewaysConfig(_Section):
    s3: S3GatewayConfig = Field(default_factory=S3GatewayConfig)


class ServiceConfig(_Section):
    listen_address: str
    metrics_listen_address: str | None = Field(None, description=_METRICS_ADDRESS_HELP)
    # Kubernetes' native gRPC probe speaks plaintext only, so with tls.enabled it needs a port
    # of its own; that port answers grpc.health.v1.Health/Check and nothing else.
    health_listen_address: str | None = Field(
        None, description="host:port of a plaintext port serving only the gRPC health Check; unset: none"
    )

    _listen = field_validator("listen_address")(_check_listen_address)
    _metrics_listen = field_validator("metrics_listen_address")(_check_optional_listen_address)
    _health_listen = field_validator("health_listen_address")(_check_optional_listen_address)


class AuthConfig(ServiceConfig):
    # A default here too, so that setting only some auth.* keys keeps the others' defaults.
    listen_address: str = "127.0.0.1:8101"
    endpoint: str = Field("127.0.0.1:8101", description="where the other services reach auth")
    # No length constraint here: a failed constraint's message would echo the value. The auth
    # service checks it (services/auth/secrets.py).
    encrypt_secret_key: SecretStr | None = Field(
        None, description="encrypts credential secrets at rest; required by the auth service"
    )
    cache_ttl_seconds: float = Field(5.0, ge=0, description="how long key lookups and decisions are cached")
    max_clock_skew_seconds: float = Field(300.0, gt=0, description="accepted age of a signed call")
    session_ttl_seconds: float = Field(
        12 * 3600.0, gt=0, le=7 * 86400, description="lifetime of a REST API login session token"
    )

    _endpoint = field_validator("endpoint")(_check_endpoint)


class CommittedCacheConfig(_Section):
    memory_bytes: int = Field(256 * 1024 * 1024, ge=0, description="decoded ranges and metaranges kept in memory")
    disk_dir: str | None = Field(None, description="where ranges fetched from a remote object store are kept")
    disk_bytes: int = Field(4 * 1024 * 1024 * 1024, ge=0)


class HistoryEventsConfig(_Section):
    """History events (docs/design/journal.md, "History events")."""

    enabled: bool = Field(
        True, description="whether the gateway, the REST API and graveler emit history events (off: none are recorded)"
    )
    retention_days: float = Field(30.0, gt=0, description="hours of history events older than this are deleted")
    retention_interval_seconds: float = Field(
        3600.0, gt=0, description="how often each repository's history is pruned (by one graveler replica)"
    )
    # WatchEvents streams (services/graveler/events/streams.py, docs/security.md "Event streams").
    max_streams: int = Field(8, ge=1, le=24, description="WatchEvents streams open at once per graveler process")
    max_streams_per_caller: int = Field(2, ge=1, le=24, description="WatchEvents streams open at once per caller")
    stream_admin_reserve: int = Field(
        2, ge=0, le=23, description="of max_streams, how many only administrators (iam:DeleteUser on users/*) may take"
    )
    stream_reauthorize_seconds: float = Field(
        2.0, gt=0, le=300, description="how old an open stream's decision that its caller may still read can be"
    )

    @model_validator(mode="after")
    def _reserve_below_total(self) -> HistoryEventsConfig:
        if self.stream_admin_reserve >= self.max_streams:
            raise ValueError("stream_admin_reserve must be below max_streams: other callers need one stream at least")
        return self


class JournalConfig(_Section):
    enabled: bool = Field(
        True,
        description="journal every graveler KV mutation in its own partition (docs/design/journal.md); "
        "off only to measure what journaling costs",
    )
    # No length constraint here: a failed constraint's message would echo the value.
    hmac_key: SecretStr | None = Field(
        None,
        description="signs shipped journal batches (HMAC-SHA256), checked by rebuild; unset: derived from "
        "auth.encrypt_secret_key",
    )


class DialableServiceConfig(ServiceConfig):
    """A service other processes call: listen_address is where it binds, endpoint where the
    others dial it (in Kubernetes, its Service name). Unset endpoint: the listen address,
    with a wildcard host read as this machine (single-host installs only)."""

    endpoint: str | None = Field(None, description="where the other processes reach this service")

    _endpoint = field_validator("endpoint")(_check_optional_endpoint)

    @model_validator(mode="after")
    def _default_endpoint(self) -> DialableServiceConfig:
        if self.endpoint is None:
            self.endpoint = dialable_address(self.listen_address)
        return self

    @property
    def dial_address(self) -> str:
        return self.endpoint or dialable_address(self.listen_address)


class CompactorConfig(DialableServiceConfig):
    # A default here too, so that setting only some compactor.* keys keeps the others' defaults.
    listen_address: str = "127.0.0.1:8103"
    # The sensor runs in graveler and triggers the compactor (docs/design/compaction.md).
    sensor_enabled: bool = Field(True, description="graveler watches staged deletes and triggers compactions")
    tombstone_threshold: int = Field(10_000, ge=1, description="staged deletes on a branch that trigger a compaction")
    sealed_tokens_threshold: int = Field(
        20, ge=1, description="sealed staging tokens on a branch that trigger a compaction"
    )
    claim_minutes: float = Field(
        5.0, ge=0, description="a branch claimed for compaction this recently is not claimed again"
    )
    trigger_timeout_seconds: float = Field(2.0, gt=0, le=60, description="how long the sensor's trigger call may take")
    compaction_timeout_seconds: float = Field(600.0, gt=0, description="how long one compaction may run")
    journal_ship_interval_seconds: float = Field(
        60.0,
        ge=0,
        description="the compactor ships every repository's journal to its namespace this often; 0: only on demand",
    )


class GravelerConfig(DialableServiceConfig):
    listen_address: str = "127.0.0.1:8102"
    cache: CommittedCacheConfig = Field(default_factory=CommittedCacheConfig)
    history: HistoryEventsConfig = Field(default_factory=HistoryEventsConfig)
    journal: JournalConfig = Field(default_factory=JournalConfig)
    # Commits build their metaranges in this many worker processes (not with the mem driver).
    commit_workers: int = Field(2, ge=1)
    # CPUs the commit workers may run on: "auto" (the upper half of this process's CPUs, so a
    # large commit never runs on the CPU that is answering a staging write), "all", or a list
    # such as "2,3" or "4-7".
    commit_worker_cpus: str = "auto"
    allowed_import_prefixes: list[str] = Field(
        default_factory=list,
        description="absolute URIs (e.g. s3://landing/exports) that staged entries may name besides "
        "their repository's storage namespace",
    )
    # Unset resolves by blockstore.type (services/graveler/wiring.py: namespace_roots): local://
    # (the local adapter's whole root) for the local store, nothing for S3, whose bucket is the
    # operator's to name. Nothing allowed means every CreateRepository is refused.
    allowed_namespace_roots: list[str] | None = Field(
        None,
        description="URIs under which repositories' storage namespaces must lie (e.g. local://, "
        "s3://bucket/prefix/); the first is where unnamed namespaces go. Unset: local:// with the "
        "local blockstore, none with s3",
    )

    @field_validator("commit_worker_cpus")
    @classmethod
    def _cpu_list(cls, value: str) -> str:
        parse_cpu_list(value)
        return value

    @field_validator("allowed_namespace_roots")
    @classmethod
    def _namespace_roots(cls, value: list[str] | None) -> list[str] | None:
        if value is not None:
            try:
                parse_roots(value)
            except InvalidArgument as exc:
                raise ValueError(str(exc)) from None
        return value


def parse_cpu_list(spec: str) -> set[int] | None:
    """CPU ids of "3", "0,2", "4-7" (or a mix); None for "auto" and "all"."""
    spec = spec.strip()
    if spec in ("auto", "all"):
        return None
    cpus: set[int] = set()
    for part in spec.split(","):
        first, sep, last = part.strip().partition("-")
        if not (first.isdigit() and (not sep or last.isdigit())) or (sep and int(last) < int(first)):
            raise ValueError('expected "auto", "all" or CPU ids such as "1" or "2,3" or "4-7"')
        cpus.update(range(int(first), int(last if sep else first) + 1))
    return cpus


class CredentialsConfig(_Section):
    """The access key this process signs its calls to other Silt services with."""

    access_key_id: str | None = None
    secret_access_key: SecretStr | None = None


class ApiConfig(_Section):
    """lakeFS's REST API (services/api). It answers on the S3 gateway's port (requests without
    an AWS signature under /api/v1/) and, run as `python -m services.api.server`, on its own."""

    enabled: bool = Field(True, description="serve the REST API on the S3 gateway's listen address too")
    listen_address: str = Field("127.0.0.1:8001", description="where `python -m services.api.server` listens")
    metrics_listen_address: str | None = Field(None, description=_METRICS_ADDRESS_HELP)
    max_body_bytes: int = Field(
        1024 * 1024, ge=1024, le=64 * 1024 * 1024, description="largest JSON request body of the REST API"
    )
    # Behind a proxy that ends TLS the API sees http: set true there so the cookie is still Secure.
    secure_cookies: bool | None = Field(
        None, description="mark the session cookie Secure; unset: when the request's scheme is https"
    )
    # The API signs its calls to auth and graveler with its own service user (svc-api) when
    # these are set, else with the process's `credentials` (its own process sets those).
    credentials: CredentialsConfig = Field(default_factory=lambda: CredentialsConfig())
    # The live feed (GET .../branches/{branch}/events): open streams per process and per user,
    # and how often an open stream checks its caller's credential and permission again.
    max_live_feeds: int = Field(64, ge=1, le=10_000, description="open live-feed streams per API process")
    max_live_feeds_per_user: int = Field(4, ge=1, le=1000, description="open live-feed streams per user")
    live_feed_reauthorize_seconds: float = Field(
        5.0, ge=0.1, le=3600, description="how often an open live feed re-checks its caller's access"
    )
    live_feed_admin_reserve: int = Field(
        8,
        ge=0,
        le=9_999,
        description="of max_live_feeds, how many only administrators (iam:DeleteUser on users/*) may take",
    )

    @model_validator(mode="after")
    def _feed_reserve_below_total(self) -> ApiConfig:
        if self.live_feed_admin_reserve >= self.max_live_feeds:
            raise ValueError("live_feed_admin_reserve must be below max_live_feeds: other users need one feed at least")
        return self

    _listen = field_validator("listen_address")(_check_listen_address)
    _metrics_listen = field_validator("metrics_listen_address")(_check_optional_listen_address)


class TelemetryConfig(_Section):
    """Traces and health checks. Tracing itself is configured by the standard OTEL_* variables
    (OTEL_TRACES_EXPORTER, OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_TRACES_SAMPLER, ...); this switch
    turns it on."""

    tracing: bool = Field(False, description="emit OpenTelemetry traces (exporter and sampler from OTEL_*)")
    trace_storage_calls: bool = Field(
        False, description="with tracing, also a span per KV and object-store call (several per request)"
    )
    health_check_interval_seconds: float = Field(5.0, gt=0, description="how often KV and object store are probed")
    health_check_timeout_seconds: float = Field(2.0, gt=0, description="a probe slower than this means NOT_SERVING")


class Config(_Section):
    logging: LoggingConfig = Field(default_factory=LoggingConfig)
    telemetry: TelemetryConfig = Field(default_factory=TelemetryConfig)
    database: DatabaseConfig = Field(default_factory=DatabaseConfig)
    blockstore: BlockstoreConfig = Field(default_factory=BlockstoreConfig)
    gateways: GatewaysConfig = Field(default_factory=GatewaysConfig)
    auth: AuthConfig = Field(default_factory=lambda: AuthConfig(listen_address="127.0.0.1:8101"))
    graveler: GravelerConfig = Field(default_factory=GravelerConfig)
    compactor: CompactorConfig = Field(default_factory=lambda: CompactorConfig())
    credentials: CredentialsConfig = Field(default_factory=CredentialsConfig)
    tls: TLSConfig = Field(default_factory=TLSConfig)
    api: ApiConfig = Field(default_factory=ApiConfig)


# --- environment overrides -------------------------------------------------------------


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _leaf_paths(model: type[BaseModel], prefix: tuple[str, ...] = ()) -> dict[str, tuple[tuple[str, ...], Any]]:
    """Map every leaf key's environment variable name to (path, annotation)."""
    out: dict[str, tuple[tuple[str, ...], Any]] = {}
    for name, field in model.model_fields.items():
        path = (*prefix, name)
        if _is_model(field.annotation):
            out.update(_leaf_paths(field.annotation, path))  # type: ignore[arg-type]
        else:
            out[ENV_PREFIX + "_".join(path).upper()] = (path, field.annotation)
    return out


def _container_kind(annotation: Any) -> type | None:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            kind = _container_kind(arg)
            if kind is not None:
                return kind
        return None
    return origin if origin in (list, dict) else None


def _parse_env_value(raw: str, annotation: Any) -> Any:
    kind = _container_kind(annotation)
    if kind is list:
        return [item.strip() for item in raw.split(",") if item.strip()]
    if kind is dict:
        pairs: dict[str, str] = {}
        for item in filter(None, (part.strip() for part in raw.split(","))):
            key, sep, value = item.partition(":")
            if not sep:
                raise ValueError(f"expected key:value pairs separated by commas, got {raw!r}")
            pairs[key.strip()] = value.strip()
        return pairs
    return raw


_ENV_KEYS = _leaf_paths(Config)


def _apply_env(data: dict[str, Any], env: Mapping[str, str]) -> dict[str, str]:
    """Write SILT_* overrides into data; return {dotted key: variable name} of those applied."""
    applied: dict[str, str] = {}
    for var, (path, annotation) in _ENV_KEYS.items():
        if var not in env:
            continue
        try:
            value = _parse_env_value(env[var], annotation)
        except ValueError as exc:
            raise ConfigError(f"invalid configuration: {'.'.join(path)} (from {var}): {exc}") from None
        node = data
        for part in path[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = {}
                node[part] = child
            node = child
        node[path[-1]] = value
        applied[".".join(path)] = var
    return applied


# --- loading ---------------------------------------------------------------------------


# A rejected value is echoed to help the user, except where it may be a secret.
_SECRET_WORDS = ("password", "secret", "token")


def _format_error(exc: ValidationError, source: str, applied: dict[str, str]) -> str:
    err = exc.errors()[0]
    key = ".".join(str(p) for p in err["loc"])
    origin = f" (from {applied[key]})" if key in applied else f" (in {source})"
    if err["type"] == "extra_forbidden":
        return f"invalid configuration: {key}{origin}: unknown key"
    got = err.get("input")
    secret = any(word in key for word in _SECRET_WORDS)
    shown = "" if secret or isinstance(got, dict) or got is None else f", got {got!r}"
    more = f" (and {len(exc.errors()) - 1} more)" if len(exc.errors()) > 1 else ""
    return f"invalid configuration: {key}{origin}: {err['msg']}{shown}{more}"


def load_config(path: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None) -> Config:
    """Read the YAML file at path (or $SILT_CONFIG, or none), apply SILT_* overrides, validate."""
    env = os.environ if env is None else env
    path = path if path is not None else env.get(CONFIG_PATH_ENV)
    data: dict[str, Any] = {}
    source = "defaults"
    if path:
        source = str(path)
        try:
            text = Path(path).expanduser().read_text()
        except OSError as exc:
            raise ConfigError(f"cannot read configuration file {path}: {exc.strerror}") from None
        try:
            loaded = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}" if mark is not None else ""
            raise ConfigError(f"configuration file {path} is not valid YAML{where}") from None
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"configuration file {path} must hold a mapping at the top level")
        data = loaded
    applied = _apply_env(data, env)
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_format_error(exc, source, applied)) from None


def env_keys() -> dict[str, str]:
    """Every configuration key (dotted) and its environment variable, for documentation."""
    return {".".join(path): var for var, (path, _) in _ENV_KEYS.items()}
