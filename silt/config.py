"""Silt's configuration: one YAML file, every key overridable by an environment variable.

The keys, their variables, defaults and descriptions (each field's docstring) are rendered into
docs/configuration.md by silt/config_reference.py. A key's environment variable is ``SILT_``
followed by its path in upper case joined by ``_``: ``database.cassandra.port`` is
``SILT_DATABASE_CASSANDRA_PORT``. Lists are written comma-separated
(``SILT_DATABASE_CASSANDRA_CONTACT_POINTS=10.0.0.1,10.0.0.2``) and maps as
``key:value`` pairs (``SILT_DATABASE_CASSANDRA_DATACENTERS=dc1:3,dc2:3``).

Validation happens once, at start-up; an invalid file or value raises ConfigError with a
one-line message naming the key, where it came from, and what was expected.
"""

from __future__ import annotations

import ipaddress
import os
import types
import typing
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator, model_validator

from silt import lakefs_settings
from silt.errors import ConfigError, InvalidArgument

# Defined without pydantic, for the `silt` CLI; importable from here as they always were.
from silt.listen_addresses import WILDCARD_HOSTS as WILDCARD_HOSTS
from silt.listen_addresses import dialable_address as dialable_address
from silt.listen_addresses import dialable_host as dialable_host
from silt.namespaces import parse_roots

ENV_PREFIX = "SILT_"
CONFIG_PATH_ENV = "SILT_CONFIG"


class _Section(BaseModel):
    # A field's docstring is its description: the configuration reference (silt/config_reference.py,
    # docs/configuration.md) is generated from them. Read from this file's source there, not here
    # (pydantic's use_attribute_docstrings): reading and parsing it made every model cost twice as
    # much to build, at every start of every process that loads the configuration, `silt` included.
    # defer_build: a model's validator is built when it first validates, not when its class is
    # defined, so the `silt` CLI (load_client_config) pays only for the sections it reads.
    model_config = ConfigDict(extra="forbid", validate_default=True, defer_build=True)


def _check_listen_address(value: str) -> str:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"expected <host>:<port> with a port from 0 to 65535, got {value!r}")
    return value


def _check_optional_listen_address(value: str | None) -> str | None:
    return None if value is None or value == "" else _check_listen_address(value)


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


def _check_optional_url(value: str | None) -> str | None:
    """An http(s) URL a client dials (a host, a port and no more than a base path)."""
    if value is None:
        return None
    scheme, sep, rest = value.partition("://")
    host = rest.split("/", 1)[0]
    if not sep or scheme not in ("http", "https") or not host or "?" in value or "#" in value:
        raise ValueError("expected an http:// or https:// URL, e.g. http://gateway.silt.svc.cluster.local:8000")
    return value.rstrip("/")


class LoggingConfig(_Section):
    format: Literal["text", "json"] = "text"
    """log lines as plain text, or one JSON object per line"""
    level: Literal["DEBUG", "INFO", "WARN", "ERROR", "NONE"] = "INFO"
    """the lowest level logged; `NONE` logs nothing"""
    output: str = "-"
    """`-` for stdout, else a file path"""


class LocalDatabaseConfig(_Section):
    path: str = "~/silt/metadata.db"
    """the SQLite file (created with its directory)"""
    # NORMAL survives a crash of any process; FULL also survives power loss (fsync per commit).
    synchronous: Literal["NORMAL", "FULL"] = "NORMAL"
    """`NORMAL` survives process crashes; `FULL` also power loss"""
    # Bounds every KV call: a writer waits this long for another process's write, then the
    # request fails Unavailable instead of hanging.
    busy_timeout_ms: int = Field(5_000, ge=0)
    """how long a writer waits for another process's write; then the request fails (503 ServiceUnavailable /
    gRPC `UNAVAILABLE`) instead of hanging
    """
    scan_page_size: int = Field(1000, ge=1)
    """keys fetched per scan page"""


# CQL's speculative_retry values that Cassandra 2.1 to 5.0 all accept: a delay, a percentile, or
# ALWAYS / NONE. The value is written into the CREATE TABLE statement, so nothing else may pass.
_SPECULATIVE_RETRY = r"^(?i:[0-9]{1,5}ms|[0-9]{1,2}(\.[0-9]{1,3})?percentile|always|none)$"


class CassandraConfig(_Section):
    contact_points: list[str] = Field(default_factory=lambda: ["127.0.0.1"], min_length=1)
    """hosts to bootstrap from"""
    port: int = Field(9042, ge=1, le=65535)
    """CQL native port"""
    keyspace: str = Field("silt", pattern=r"^[A-Za-z][A-Za-z0-9_]{0,47}$")
    """keyspace holding the `kv` table"""
    replication_strategy: Literal["SimpleStrategy", "NetworkTopologyStrategy"] = "SimpleStrategy"
    """replication of the keyspace Silt creates (`create_schema`)"""
    replication_factor: int = Field(1, ge=1)
    """replicas, with `SimpleStrategy`"""
    datacenters: dict[str, int] = Field(default_factory=dict)
    """datacenter → replicas, with `NetworkTopologyStrategy`"""
    local_datacenter: str | None = None
    """datacenter to route requests to"""
    consistency: Literal["ONE", "TWO", "THREE", "QUORUM", "LOCAL_QUORUM", "EACH_QUORUM", "ALL", "LOCAL_ONE"] = (
        "LOCAL_QUORUM"
    )
    """reads and writes"""
    serial_consistency: Literal["SERIAL", "LOCAL_SERIAL"] = "LOCAL_SERIAL"
    """`set_if` (lightweight transactions)"""
    username: str | None = None
    """with `password`: PasswordAuthenticator login"""
    password: SecretStr | None = None
    """never logged"""
    protocol_version: int | None = Field(None, ge=3, le=5)
    """pin the protocol (3 to 5); negotiated when unset"""
    connect_timeout_s: float = Field(5.0, gt=0)
    """per connection attempt"""
    # Bounds every write and LWT (retries included; reads have read_timeout_s): a frozen node
    # fails the request Unavailable after this long instead of hanging it.
    request_timeout_s: float = Field(3.0, gt=0)
    """bounds every write and LWT, retries included (reads: `read_timeout_s`): a frozen or overloaded node fails the
    request (gateway 503 `ServiceUnavailable`, graveler `UNAVAILABLE`) after this long, never hangs it
    """
    read_timeout_s: float = Field(7.0, gt=0)
    """bounds every read (a point read, each page of a scan), retries included; an LWT's read-back at SERIAL keeps
    the LWT's bound. Keep it at least 1 s above the server's `read_request_timeout_in_ms` (5 s by default): a
    coordinator whose read repair waits on a replica that died and that gossip does not yet know is dead then answers
    ReadTimeout, and the read is sent to another coordinator, which by then usually reads around the dead node; with a
    shorter bound the client gives up first and the request fails. Reads also go to other replicas after
    `speculative_delay_s`, so a healthy read never waits this long
    """
    lwt_timeout_s: float | None = Field(None, gt=0)
    """bounds every send of a lightweight transaction (unset: `request_timeout_s`), the first one's patience
    included. One not answered in time (a frozen coordinator) is read back at SERIAL through another node and sent
    again only when that read proves it did not apply. Measured on the test cluster, a fixed 1 s made a paused node's
    p99 worse than unset, where `lwt_patience_factor` follows the load: leave it unset
    """
    lwt_patience_factor: float = Field(3.0, ge=0, le=100)
    """a first send of a lightweight transaction still unanswered after this many times the p99 of the store's recent
    sends (at least `lwt_patience_floor_s`, at most `lwt_timeout_s`) is read back at SERIAL through another node while
    it goes on waiting: found applied, it is done; found not applied, it is sent again when its conditions are on
    values or on the absence of rows never absent again while in use (staging's guards), never on other absences. A
    coordinator that froze mid-round then costs about this much, not the ~2 s the heartbeat takes to find it. 0: no
    read-back
    """
    lwt_patience_floor_s: float = Field(0.3, gt=0)
    """the least a first LWT send is waited for, however fast recent rounds were"""
    speculative_delay_s: float = Field(0.2, gt=0)
    """a read, or a write whose timestamp is fixed before it is sent, not answered within this long is also sent to
    the next replica (and again after as long, up to `speculative_executions` copies); the first answer wins. Never
    lightweight transactions, nor writes the coordinator timestamps
    """
    speculative_executions: int = Field(2, ge=0, le=4)
    """extra copies of such a statement at most (0: none); 2 reaches every replica of RF 3"""
    retries: int = Field(2, ge=0, le=5)
    """sends of one statement to the next replica after an error that allows it (a server timeout, a lost
    connection), within the statement's timeout; a read may also be sent again once for each of its speculative copies
    """
    heartbeat_interval_s: float = Field(0.5, gt=0)
    """a connection that received nothing for this long is sent a heartbeat"""
    heartbeat_timeout_s: float = Field(1.5, gt=0)
    """a heartbeat not answered within this long closes the connection and marks its node down: a frozen node is
    left after about `heartbeat_interval_s` + this, where gossip takes ~18 s
    """
    page_size: int = Field(1000, ge=1)
    """rows per scan page, and keys per `get_many` request"""
    create_schema: bool = True
    """create keyspace and table if missing"""
    speculative_retry: str = Field("ALWAYS", pattern=_SPECULATIVE_RETRY)
    """the `kv` table's `speculative_retry`, set when Silt creates it. `ALWAYS`: a coordinator asks one replica more
    than the consistency level needs, at once, so a replica that froze or died before gossip noticed costs a read
    nothing; a fixed delay (`50ms`) costs such a read that delay, and a percentile (Cassandra's default) grows with the
    stalled reads until it can exceed the request timeout
    """

    @property
    def lwt_bound_s(self) -> float:
        """What bounds each send of a lightweight transaction, and its read-back at SERIAL."""
        return self.lwt_timeout_s or self.request_timeout_s


class DatabaseConfig(_Section):
    type: Literal["local", "mem", "cassandra"] = "local"
    """KV driver: `local` (an embedded SQLite file), `mem` (one process's memory, tests), `cassandra`"""
    local: LocalDatabaseConfig = Field(default_factory=LocalDatabaseConfig)
    cassandra: CassandraConfig = Field(default_factory=CassandraConfig)


def _check_optional_base_url(value: str | None) -> str | None:
    if value is None or value == "":
        return None
    scheme, sep, rest = value.partition("://")
    if scheme not in ("http", "https") or not sep or not rest or any(c in rest for c in "?#@ \\"):
        raise ValueError(f"expected an http:// or https:// URL without query, fragment or user info, got {value!r}")
    return value.rstrip("/")


class PreSignedConfig(_Section):
    """Presigned URLs of a blockstore (lakeFS's keys): REST API clients read and write object bytes
    straight at the store with them (docs/clients/lakefs.md, "Presigned URLs and the staging API")."""

    disable_pre_signed: bool = False
    """refuse `presign=true` (400) and report `pre_sign_support: false` in `/config`"""
    disable_pre_signed_ui: bool = False
    """report `pre_sign_support_ui: false` in `/config`"""
    pre_signed_expiry_seconds: int = Field(900, ge=1, le=7 * 24 * 3600)
    """how long a presigned URL stays valid (at most 7 days)"""
    pre_signed_endpoint: str | None = None
    """base URL put in presigned URLs when clients reach the store (`s3`) or Silt (`local`) at another address than
    the one configured (`https://silt.example.com`); unset: `endpoint_url` (`s3`), or the scheme and host of the
    request asking for the URL (`local`)
    """

    _endpoint = field_validator("pre_signed_endpoint")(_check_optional_base_url)


class LocalBlockstoreConfig(PreSignedConfig):
    path: str = "~/silt/data"
    """root directory of `local://` namespaces"""
    sync: Literal["fsync", "group_fsync", "group_syncfs"] = "fsync"
    """how a put is made durable before it is acknowledged: `fsync` each put's file and directory; `group_fsync`
    concurrent puts batched, one fsync per file and per directory of a batch; `group_syncfs` one `syncfs` per
    batch (Linux 5.8 or later, else `group_fsync`): fastest when fsyncs are contended, but it also waits for
    every other unsynced write on that file system, so only for a file system of its own (see docs/architecture.md)
    """
    disable_pre_signed_multipart: bool = False
    """refuse lakeFS's presigned multipart uploads (501) and report `pre_sign_multipart_upload: false` in `/config`
    (they are offered while presigned URLs are on)
    """
    import_enabled: bool = False
    """allow importing files in place from `allowed_external_prefixes` (lakeFS's key; see docs/import.md)"""
    allowed_external_prefixes: list[str] = Field(default_factory=list)
    """absolute directories (e.g. `/mnt/landing`) whose files may be imported as `local:///mnt/landing/...` when
    `import_enabled`; none may overlap `path`
    """

    @field_validator("allowed_external_prefixes")
    @classmethod
    def _external_prefixes(cls, value: list[str]) -> list[str]:
        # Compared as paths, component by component: an unnormalised spelling ("/a/../b", "//a")
        # would let two checks disagree about where a file is.
        for prefix in value:
            trimmed = prefix.rstrip("/") or "/"
            if not os.path.isabs(prefix) or os.path.normpath(trimmed) != trimmed or trimmed.startswith("//"):
                raise ValueError(f"{prefix!r} is not an absolute, normalised directory path")
            if trimmed == "/" or any(ord(c) < 0x20 or c in "\\\x7f" for c in trimmed):
                raise ValueError(f"{prefix!r} is the whole file system or holds a control character or a backslash")
        return [prefix.rstrip("/") for prefix in value]


class S3CredentialsConfig(_Section):
    access_key_id: str | None = None
    """static credentials"""
    secret_access_key: SecretStr | None = None
    """never logged"""
    session_token: SecretStr | None = None
    """never logged"""


class S3BlockstoreConfig(PreSignedConfig):
    region: str = "us-east-1"
    """region of the object store's S3 requests"""
    endpoint_url: str | None = None
    """for S3-compatible stores"""
    profile: str | None = None
    """named AWS credentials profile"""
    credentials_file: str | None = None
    """AWS shared credentials file"""
    credentials: S3CredentialsConfig = Field(default_factory=S3CredentialsConfig)
    force_path_style: bool = False
    """path-style addressing"""
    max_retries: int = Field(5, ge=0)
    """attempts per request"""
    disable_pre_signed_multipart: bool = False
    """refuse lakeFS's presigned multipart uploads (501) and report `pre_sign_multipart_upload: false` in `/config`
    (they are offered while presigned URLs are on)
    """
    pre_signed_put_write_once: bool = False
    """sign `If-None-Match: *` into presigned PUT URLs: an upload URL then writes once (412 after) and an upload
    without the header is refused. lakeFS's clients (lakectl, lakefs-sdk, lakefs-spec) never send it: turn on only
    when every uploader is Silt's CLI or sends the headers a URL signs. Off or on, reads of a linked upload are pinned
    to what the link checked (docs/security.md)
    """


class AzureBlockstoreConfig(PreSignedConfig):
    """Azure Blob Storage (lakeFS's keys). Credentials, first that is set: `connection_string`,
    `storage_account` with `storage_access_key`, else Azure's default credential chain
    (environment, workload or managed identity, Azure CLI login) for `storage_account`."""

    storage_account: str | None = None
    """the storage account namespaces name (`https://<storage_account>.blob.core.windows.net/...`)"""
    storage_access_key: SecretStr | None = None
    """the account's shared key; also signs presigned (SAS) URLs; never logged"""
    connection_string: SecretStr | None = None
    """an Azure Storage connection string, instead of the two keys above; never logged"""
    domain: str = "blob.core.windows.net"
    """the blob service's domain (another Azure cloud: `blob.core.chinacloudapi.cn`)"""
    test_endpoint_url: str | None = None
    """an emulator's blob endpoint (Azurite: `http://127.0.0.1:10000`); namespaces are then
    `<test_endpoint_url>/<storage_account>/<container>[/<prefix>]`
    """
    try_timeout_seconds: float = Field(600.0, gt=0)
    """deadline of one request to the store, retries included"""

    _test_endpoint = field_validator("test_endpoint_url")(_check_optional_base_url)


class GSBlockstoreConfig(PreSignedConfig):
    """Google Cloud Storage (lakeFS's keys). Credentials, first that is set: `credentials_json`,
    `credentials_file`, else application default credentials."""

    credentials_file: str | None = None
    """a service account key file (JSON)"""
    credentials_json: SecretStr | None = None
    """the service account key itself (JSON text); never logged"""
    project: str | None = None
    """the project requests are billed to; unset: the credentials' own"""
    endpoint_url: str | None = None
    """an emulator's endpoint (fake-gcs-server: `http://127.0.0.1:4443`) instead of Google's"""
    max_retries: int = Field(5, ge=0)
    """attempts per request"""
    pre_signed_put_write_once: bool = False
    """sign `x-goog-if-generation-match: 0` into presigned PUT URLs: an upload URL then writes once (412 after) and
    an upload without the header is refused. lakeFS's clients never send it: turn on only when every uploader is
    Silt's CLI or sends the headers a URL signs. Off or on, reads of a linked upload are pinned to what the link
    checked (docs/security.md)
    """

    _endpoint_url = field_validator("endpoint_url")(_check_optional_base_url)


class BlockstoreConfig(_Section):
    type: Literal["local", "s3", "azure", "gs"] = "local"
    """object store adapter: `local` (a directory), `s3` (S3 or an S3-compatible store), `azure` (Azure Blob
    Storage) or `gs` (Google Cloud Storage)
    """
    local: LocalBlockstoreConfig = Field(default_factory=LocalBlockstoreConfig)
    s3: S3BlockstoreConfig = Field(default_factory=S3BlockstoreConfig)
    azure: AzureBlockstoreConfig = Field(default_factory=AzureBlockstoreConfig)
    gs: GSBlockstoreConfig = Field(default_factory=GSBlockstoreConfig)


def _check_pem_pair(enabled: bool, cert_file: str | None, key_file: str | None, section: str) -> None:
    if enabled and bool(cert_file) != bool(key_file):
        raise ValueError(f"{section}.cert_file and {section}.key_file go together: set both or neither")


class HttpTLSConfig(_Section):
    """HTTPS on the S3 gateway's listener. Its clients are S3 clients, which present no
    certificate: this is server-side TLS only. The certificate may come from a public CA
    (what S3 clients trust by default) or from Silt's own (clients then need ca_file)."""

    enabled: bool = False
    """serve HTTPS instead of HTTP on `gateways.s3.listen_address`"""
    cert_file: str | None = None
    """PEM certificate chain of the gateway (required when enabled)"""
    key_file: str | None = None
    """PEM private key of it (required when enabled)"""
    ca_file: str | None = None
    """for Silt's own clients (CLI, `silt run`'s `AWS_CA_BUNDLE`): the CA bundle that verifies the gateway; unset:
    the system trust store
    """

    @model_validator(mode="after")
    def _pair(self) -> HttpTLSConfig:
        _check_pem_pair(self.enabled, self.cert_file, self.key_file, "gateways.s3.tls")
        if self.enabled and not self.cert_file:
            raise ValueError("gateways.s3.tls.cert_file and key_file must be set when gateways.s3.tls.enabled")
        return self


class TLSConfig(_Section):
    """TLS on every gRPC connection between Silt's processes: servers (auth, graveler,
    compactor) and clients (every service, the CLI, the GC job) alike. See silt/rpc/channels.py."""

    enabled: bool = False
    """gRPC over TLS for every server (auth, graveler, compactor) and every client (services, CLI, GC job)"""
    cert_file: str | None = None
    """PEM certificate chain this process presents, as a server and as a client to servers requiring client
    certificates
    """
    key_file: str | None = None
    """PEM private key of `tls.cert_file` (both or neither)"""
    ca_file: str | None = None
    """PEM CA bundle verifying servers' certificates and, on servers, clients' certificates; unset: the system trust
    store (clients only)
    """
    require_client_cert: bool = True
    """servers accept only clients presenting a certificate signed by `tls.ca_file` (mutual TLS)"""
    server_name: str | None = None
    """name expected in servers' certificates instead of the endpoint's host"""

    @model_validator(mode="after")
    def _pair(self) -> TLSConfig:
        _check_pem_pair(self.enabled, self.cert_file, self.key_file, "tls")
        return self


class S3GatewayConfig(_Section):
    listen_address: str = "0.0.0.0:8000"
    """S3 endpoint"""
    endpoint: str | None = None
    """the URL clients dial for the gateway and the REST API beside it (the `silt` CLI's user commands), e.g.
    `http://gateway.silt.svc.cluster.local:8000` in a cluster; unset: `http(s)://` and the listen address
    """
    domain_name: str = "s3.local"
    """for virtual-host-style requests"""
    region: str = "us-east-1"
    """region the gateway answers as"""
    workers: int = Field(1, ge=1, le=64)
    """gateway processes sharing the listen address (uvicorn workers); `make bench-gateway` uses 2 on a 2-core
    machine
    """
    max_header_bytes: int = Field(64 * 1024, ge=8 * 1024, le=1024 * 1024)
    """request line plus headers; more is refused with 400 `RequestHeaderSectionTooLarge` before it is buffered"""
    max_header_line_bytes: int = Field(8 * 1024, ge=1024, le=64 * 1024)
    """one header (name and value) or the URL, S3's own limit"""
    header_timeout_seconds: float = Field(20.0, gt=0, le=600)
    """time a client has to send a request's head, from connecting or from the request's first byte; then 400
    `RequestTimeout` and the connection closes
    """
    max_connections: int = Field(4096, ge=1)
    """open connections per gateway process; beyond it a new connection gets 503 `SlowDown` and is closed"""
    max_connections_per_client: int = Field(512, ge=0)
    """open connections per client address (an IPv6 address counts as its /64) and gateway process; beyond it that
    address's new connections get 503 `SlowDown` and are closed, while other addresses are served; `0`: no cap.
    Behind a proxy or NAT clients share one address: raise it (docs/security.md, "S3 gateway connections")
    """
    idle_timeout_seconds: float = Field(15.0, gt=0, le=3600)
    """a connection that sends no byte of a request for this long (new, or kept alive after an answer) is closed
    without an answer
    """
    body_idle_timeout_seconds: float = Field(60.0, gt=0, le=3600)
    """longest pause inside a request body; then 400 `RequestTimeout`, and nothing of the upload is kept"""
    storage_namespace_template: str | None = None
    """storage namespace of repositories created by S3 CreateBucket, e.g. `local://{repo}`; unset: CreateBucket
    answers NotImplemented
    """
    metrics_listen_address: str | None = None
    """`host:port` of the gateway's Prometheus `/metrics`; unset: none"""
    tls: HttpTLSConfig = Field(default_factory=HttpTLSConfig)
    multipart_upload_max_age_seconds: int = Field(7 * 24 * 3600, ge=1)
    """a multipart upload neither completed nor aborted by this age answers `NoSuchUpload` and is aborted by the
    sweep
    """
    multipart_expiry_interval_seconds: float = Field(3600.0, gt=0, le=86400)
    """how often each gateway process aborts expired multipart uploads (oldest first, 1,000 per step, until none is
    left)
    """
    # On by default, as lakeFS and MinIO have it: boto3's and the AWS CLI's presigned URLs are SigV2
    # unless configured otherwise. Off refuses HMAC-SHA1 and URLs that carry no signing time.
    sigv2_enabled: bool = True
    """accept AWS Signature Version 2 (header `AWS key:sig` and presigned `?AWSAccessKeyId=&Signature=&Expires=`,
    at most 7 days ahead) besides SigV4; `false`: a SigV2 request gets 400 `InvalidRequest` asking for
    AWS4-HMAC-SHA256 and naming this key
    """

    direct_reads: bool = True
    """HEAD, GET and LIST of objects (S3, and the REST API on the same port) answered in the edge process from the
    KV store and the committed ranges, with graveler's own reader flow, instead of by a call to graveler; writes
    and ref changes always go through graveler. Off, or with the `mem` KV driver: every read is a graveler call
    """
    inline_local_reads: bool = True
    """with direct reads, the `local` KV driver and the `local` blockstore without imports (no
    `blockstore.local.allowed_external_prefixes` and no `graveler.allowed_import_prefixes`): a point read of an
    entry (HEAD, GET, a copy's source; the REST API's stat and get of an object) and a small object's bytes (never
    an imported or linked object's), read on the request's event loop instead of in a worker thread, which costs two
    thread wake-ups a request (a 4 KiB GET's CPU 12-26 % lower); a read that would wait (a branch changing under it,
    a committed range not in memory, an ancestor to walk to) goes to a thread as before. `false` where the disk can
    stall for long (a network volume): every read then runs in a thread
    """
    graveler_keyspace: str | None = Field(None, pattern=r"^[A-Za-z][A-Za-z0-9_]{0,47}$")
    """on Cassandra, graveler's keyspace, which direct reads query with the edge's own login (granted SELECT there
    and nothing more by `silt.kv.cassandra_roles --role NAME:KEYSPACE:VARIABLE:READ_KEYSPACE`); unset:
    `database.cassandra.keyspace`, for an edge that shares graveler's keyspace
    """
    committed_cache_bytes: int = Field(64 * 1024 * 1024, ge=0)
    """decoded ranges and metaranges each edge process keeps in memory for direct reads"""

    _listen = field_validator("listen_address")(_check_listen_address)
    _endpoint = field_validator("endpoint")(_check_optional_url)
    _metrics_listen = field_validator("metrics_listen_address")(_check_optional_listen_address)


def _check_trusted_proxies(values: list[str]) -> list[str]:
    """Each an address or CIDR block, written canonically (`10.1.2.3/8` is `10.0.0.0/8`)."""
    blocks = []
    for value in values:
        try:
            blocks.append(str(ipaddress.ip_network(value.strip(), strict=False)))
        except ValueError:
            raise ValueError(f"{value[:64]!r} is not an IPv4 or IPv6 address or CIDR block") from None
    return blocks


class GatewaysConfig(_Section):
    s3: S3GatewayConfig = Field(default_factory=S3GatewayConfig)
    trusted_proxies: list[str] = Field(default_factory=list, max_length=100)
    """addresses or CIDR blocks of the HTTP proxies in front of the edge (the S3 gateway's port, with the REST API on
    it, and the REST API's own port): a request from one of them has its client read from `X-Forwarded-For` (the
    nearest address not in this list, read from the right) and its scheme from `X-Forwarded-Proto`; from any other
    peer both headers are ignored and the TCP peer is the client. The client's address is what policy conditions
    (`IpAddress`, `NotIpAddress`) see (docs/security.md, "Policy conditions"). List the proxies' exact addresses: any
    host inside a listed block can name any client. An IPv4 entry also covers its `::ffff:` form, as a dual-stack
    listener sees an IPv4 peer. Empty: no proxy is trusted
    """

    _trusted_proxies = field_validator("trusted_proxies")(_check_trusted_proxies)


class ServiceConfig(_Section):
    listen_address: str
    metrics_listen_address: str | None = None
    """`host:port` of this service's Prometheus `/metrics`; unset: none"""
    # Kubernetes' native gRPC probe speaks plaintext only, so with tls.enabled it needs a port
    # of its own; that port answers grpc.health.v1.Health/Check and nothing else.
    health_listen_address: str | None = None
    """`host:port` of a plaintext port answering only gRPC health `Check` (Kubernetes' gRPC probe when TLS is on);
    unset: none
    """

    _listen = field_validator("listen_address")(_check_listen_address)
    _metrics_listen = field_validator("metrics_listen_address")(_check_optional_listen_address)
    _health_listen = field_validator("health_listen_address")(_check_optional_listen_address)


class AuthConfig(ServiceConfig):
    # A default here too, so that setting only some auth.* keys keeps the others' defaults.
    listen_address: str = "127.0.0.1:8101"
    """auth gRPC service"""
    endpoint: str = "127.0.0.1:8101"
    """where graveler, compactor and the gateway reach auth"""
    # No length constraint here: a failed constraint's message would echo the value. The auth
    # service checks it (services/auth/secrets.py).
    encrypt_secret_key: SecretStr | None = None
    """encrypts credential secrets at rest (AES-256-GCM); required by auth and its setup: 32 or more random bytes
    written as base64 or hex (`openssl rand -base64 32`), anything weaker is refused at start; never logged
    """
    cache_ttl_seconds: float = Field(5.0, ge=0)
    """how long key lookups and decisions are cached; IAM changes take effect within this time (`0`: no cache)"""
    max_clock_skew_seconds: float = Field(300.0, gt=0)
    """how far a signed call's date may be from the server's clock"""
    session_ttl_seconds: float = Field(12 * 3600.0, gt=0, le=7 * 86400)
    """lifetime of a REST API login session token (`POST /api/v1/auth/login`); tokens are signed by auth and cannot
    be revoked before they expire, except by deleting their access key
    """

    _endpoint = field_validator("endpoint")(_check_endpoint)


class CommittedCacheConfig(_Section):
    memory_bytes: int = Field(256 * 1024 * 1024, ge=0)
    """decoded ranges and metaranges kept in memory"""
    disk_dir: str | None = None
    """where ranges fetched from a remote object store are cached on disk"""
    disk_bytes: int = Field(4 * 1024 * 1024 * 1024, ge=0)
    """size bound of that disk cache"""


class HistoryEventsConfig(_Section):
    """History events (docs/design/journal.md, "History events")."""

    enabled: bool = True
    """whether the gateway, the REST API and graveler emit history events"""
    retention_days: float = Field(30.0, gt=0)
    """hours of history events older than this are deleted"""
    retention_interval_seconds: float = Field(3600.0, gt=0)
    """how often each repository's history is pruned (by one graveler replica)"""
    # WatchEvents streams (engine/features/history_events/streams.py, docs/security.md "Event streams").
    max_streams: int = Field(8, ge=1, le=24)
    """`WatchEvents` streams open at once per graveler process (more: `RESOURCE_EXHAUSTED`)"""
    max_streams_per_caller: int = Field(2, ge=1, le=24)
    """`WatchEvents` streams open at once per caller"""
    stream_admin_reserve: int = Field(2, ge=0, le=23)
    """of `max_streams`, how many only administrators (`iam:DeleteUser` on `users/*`) may take; must be below
    `max_streams`
    """
    stream_reauthorize_seconds: float = Field(2.0, gt=0, le=300)
    """the most an open stream's ReadRepo decision can age (asked of auth, checked before every event and poll); a
    lost right ends the stream with `PERMISSION_DENIED`
    """
    stream_write_timeout_seconds: float = Field(10.0, gt=0, le=300)
    """a `WatchEvents` stream whose client takes no event for this long is cancelled, freeing its slot and thread"""

    @model_validator(mode="after")
    def _reserve_below_total(self) -> HistoryEventsConfig:
        if self.stream_admin_reserve >= self.max_streams:
            raise ValueError("stream_admin_reserve must be below max_streams: other callers need one stream at least")
        return self


class JournalConfig(_Section):
    enabled: bool = Field(
        True,
    )
    """journal every graveler KV mutation (`docs/design/journal.md`); `false` only to measure what journaling costs —
    nothing written meanwhile can be rebuilt from the bucket
    """
    # No length constraint here: a failed constraint's message would echo the value.
    hmac_key: SecretStr | None = Field(
        None,
    )
    """signs every shipped journal batch (HMAC-SHA256, a `_<batch>.parquet.hmac` object next to it); `silt admin
    rebuild` refuses a batch without a valid MAC. Unset: derived (HKDF-SHA256) from `auth.encrypt_secret_key`; the
    compactor, `silt admin journal ship` and `silt admin rebuild` need one of the two; never logged
    """


class DialableServiceConfig(ServiceConfig):
    """A service other processes call: listen_address is where it binds, endpoint where the
    others dial it (in Kubernetes, its Service name). Unset endpoint: the listen address,
    with a wildcard host read as this machine (single-host installs only)."""

    endpoint: str | None = None
    """where other processes (the gateway, the CLI, graveler, the compactor) dial this service; in a cluster its
    Service name (`graveler.silt.svc.cluster.local:8102`). Unset: the listen address, a wildcard host read as
    `127.0.0.1`. A wildcard host (`0.0.0.0`, `::`, empty) is refused
    """

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
    """compactor gRPC service"""
    # The sensor runs in graveler and triggers the compactor (docs/design/compaction.md).
    sensor_enabled: bool = True
    """graveler counts staged deletes per branch and triggers compactions (needs graveler's `credentials.*`)"""
    tombstone_threshold: int = Field(10_000, ge=1)
    """staged deletes on a branch (since its last commit, reset or triggered compaction) that trigger a compaction"""
    sealed_tokens_threshold: int = Field(20, ge=1)
    """sealed staging tokens a write sees on its branch that trigger a compaction"""
    claim_minutes: float = Field(5.0, ge=0)
    """a branch whose `compaction_start_time` is younger than this is not claimed again (replicas rarely compact the
    same branch)
    """
    trigger_timeout_seconds: float = Field(2.0, gt=0, le=60)
    """the sensor's trigger call to the compactor (in the background, never on a write)"""
    compaction_timeout_seconds: float = Field(600.0, gt=0)
    """how long one triggered compaction may run"""
    journal_ship_interval_seconds: float = Field(
        60.0,
        ge=0,
    )
    """the compactor ships every repository's journal to its namespace this often; 0: only on demand (`silt admin
    journal ship`)
    """


class GravelerConfig(DialableServiceConfig):
    listen_address: str = "127.0.0.1:8102"
    """graveler gRPC service"""
    cache: CommittedCacheConfig = Field(default_factory=CommittedCacheConfig)
    history: HistoryEventsConfig = Field(default_factory=HistoryEventsConfig)
    journal: JournalConfig = Field(default_factory=JournalConfig)
    # Commits build their metaranges in this many worker processes (not with the mem driver).
    commit_workers: int = Field(2, ge=1)
    """worker processes that build commits, at a lower CPU priority (not with `mem`)"""
    # CPUs the commit workers may run on: "auto" (the upper half of this process's CPUs, so a
    # large commit never runs on the CPU that is answering a staging write), "all", or a list
    # such as "2,3" or "4-7".
    commit_worker_cpus: str = "auto"
    """CPUs the commit workers are pinned to: `auto` (the upper half of the CPUs; none on a 1-CPU machine), `all`, or
    ids such as `2,3` or `4-7`
    """
    allowed_import_prefixes: list[str] = Field(
        default_factory=list,
    )
    """absolute URIs (e.g. `s3://landing/exports/`) that staged entries may name besides their repository's storage
    namespace
    """
    # Unset resolves by blockstore.type (engine/open.py: namespace_roots): local://
    # (the local adapter's whole root) for the local store, nothing for S3, whose bucket is the
    # operator's to name. Nothing allowed means every CreateRepository is refused.
    allowed_namespace_roots: list[str] | None = Field(
        None,
    )
    """URIs under which repositories' storage namespaces must lie (e.g. `s3://bucket/prefix/`); the first is where a
    namespace goes when CreateRepository names none. With `s3` it must be set, or every CreateRepository is
    refused. An `allowed_import_prefixes` entry overlapping a root stops graveler at start-up. Unset:
    `['local://']` with `blockstore.type: local`, none with `s3`
    """

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
    """the access key this process signs its calls to other Silt services with"""
    secret_access_key: SecretStr | None = None
    """its secret; never logged"""


class ApiCredentialsConfig(CredentialsConfig):
    """The REST API's own service user, svc-api, when the API runs inside another process."""

    access_key_id: str | None = None
    """the key of the API's service user `svc-api` when the API runs inside another process (the gateway); unset:
    `credentials.*`
    """
    secret_access_key: SecretStr | None = None
    """its secret; never logged"""


class IcebergConfig(_Section):
    """The Iceberg REST catalog the API serves at /iceberg/api (docs/iceberg.md)."""

    commit_per_change: bool = False
    """commit each catalog change on its branch (only the keys it touched: a namespace's marker, a table's directory),
    committed by the caller with `iceberg_operation` in its metadata; false: changes are staged, as in lakeFS
    """


class ApiConfig(_Section):
    """lakeFS's REST API (edge/api). It answers on the S3 gateway's port (requests without
    an AWS signature under /api/v1/) and, run as `python -m edge.api.server`, on its own."""

    enabled: bool = True
    """serve lakeFS's REST API on the S3 gateway's port too: a request with an AWS signature is S3, any other under
    `/api/v1/` is the API
    """
    listen_address: str = "127.0.0.1:8001"
    """where the API listens when run as its own process (`python -m edge.api.server`)"""
    metrics_listen_address: str | None = None
    """`host:port` of the API process's Prometheus `/metrics`; unset: none (on the gateway's port the gateway's
    endpoint serves the API's metrics)
    """
    max_body_bytes: int = Field(1024 * 1024, ge=1024, le=64 * 1024 * 1024)
    """largest JSON request body (larger: 413)"""
    # Behind a proxy that ends TLS the API sees http: set true there so the cookie is still Secure.
    secure_cookies: bool | None = None
    """mark the login session cookie `Secure`; unset: only when the request came over https (set `true` behind a
    proxy that ends TLS)
    """
    # The API signs its calls to auth and graveler with its own service user (svc-api) when
    # these are set, else with the process's `credentials` (its own process sets those).
    credentials: ApiCredentialsConfig = Field(default_factory=lambda: ApiCredentialsConfig())
    iceberg: IcebergConfig = Field(default_factory=IcebergConfig)
    # The live feed (GET .../branches/{branch}/events): open streams per process and per user,
    # and how often an open stream checks its caller's credential and permission again.
    max_live_feeds: int = Field(64, ge=1, le=10_000)
    """open live-feed streams per API process (more: 503)"""
    max_live_feeds_per_user: int = Field(4, ge=1, le=1000)
    """open live-feed streams per user (more: 429)"""
    live_feed_reauthorize_seconds: float = Field(5.0, ge=0.1, le=3600)
    """how often an open live feed re-checks its caller's credential, and the most its ReadRepo decision can age
    (checked before every fetch; a lost right ends the feed with `event: error`)
    """
    live_feed_admin_reserve: int = Field(
        8,
        ge=0,
        le=9_999,
    )
    """of `api.max_live_feeds`, how many only administrators (`iam:DeleteUser` on `users/*`) may take; must be below
    `api.max_live_feeds`
    """

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

    tracing: bool = False
    """emit OpenTelemetry traces; exporter, endpoint and sampler from the standard `OTEL_*` variables
    (see "Running Silt" in the manual)
    """
    trace_storage_calls: bool = False
    """with tracing, also one span per KV and object-store call (`kv.*`, `block.*`): several per request, for finding
    a slow store
    """
    health_check_interval_seconds: float = Field(5.0, gt=0)
    """how often each service probes its KV and object store for gRPC health"""
    health_check_timeout_seconds: float = Field(2.0, gt=0)
    """a probe slower than this means NOT_SERVING (gateway readiness: per dependency)"""


class ActionsEnvConfig(_Section):
    enabled: bool = True
    """whether hooks' secure strings (`{{ ENV.NAME }}` in webhook query params and headers) read graveler's
    environment"""
    prefix: str = Field("SILTACTION_", min_length=1, max_length=64)
    """only environment variables with this prefix can be read by hooks"""
    repositories: dict[str, list[str]] = Field(default_factory=dict, max_length=1000)
    """which repositories' hooks may read each variable: its name (with the prefix) to repository name patterns
    (`*` any run of characters), e.g. `{SILTACTION_CI_TOKEN: [ci-*, data]}` (from the environment:
    `SILTACTION_CI_TOKEN:ci-*|data`); a variable not listed is read by no repository (the value is a secret any
    writer of a repository could send to a URL of their choice)"""

    @field_validator("repositories", mode="before")
    @classmethod
    def _split_patterns(cls, value: object) -> object:
        # A map from the environment has string values: patterns joined by `|`.
        if isinstance(value, dict):
            return {k: v.split("|") if isinstance(v, str) else v for k, v in value.items()}
        return value

    @model_validator(mode="after")
    def _check_repositories(self) -> ActionsEnvConfig:
        for name, patterns in self.repositories.items():
            if not name.startswith(self.prefix):
                raise ValueError(f"repositories: {name!r} does not start with the prefix {self.prefix!r}")
            if len(patterns) > 1000 or not all(0 < len(p) <= 256 for p in patterns):
                raise ValueError(f"repositories.{name}: 1 to 256 characters per pattern, at most 1000 patterns")
        return self


class ActionsWebhookConfig(_Section):
    """Where webhooks may go (engine/actions/webhook.py). Link-local addresses and cloud metadata
    endpoints are always refused."""

    allowed_hosts: list[str] = Field(default_factory=list, max_length=1000)
    """when set (with `allowed_cidrs`), webhooks may go only to these host names"""
    allowed_cidrs: list[str] = Field(default_factory=list, max_length=1000)
    """when set (with `allowed_hosts`), webhooks may go only to addresses in these networks (e.g. `10.0.0.0/8`)"""
    denied_cidrs: list[str] = Field(default_factory=list, max_length=1000)
    """networks webhooks may never reach, besides link-local and metadata addresses"""
    allow_private: bool = False
    """whether webhooks may reach private (RFC 1918, unique local, carrier-grade NAT) and loopback addresses;
    off by default (any writer could otherwise reach the server's own network), on for a deployment whose webhook
    receivers live there"""


class ActionsLuaConfig(_Section):
    max_memory_bytes: int = Field(64 * 1024 * 1024, ge=1024 * 1024, le=1024 * 1024 * 1024)
    """memory one Lua hook may allocate"""
    max_instructions: int = Field(200_000_000, ge=1000)
    """Lua VM instructions one Lua hook may run"""
    timeout_seconds: float = Field(30.0, gt=0, le=3600)
    """wall-clock time one Lua hook may run (within the run's own timeout)"""


class ActionsConfig(_Section):
    """lakeFS Actions: hooks on repository events and pull request checks (docs/actions.md)."""

    enabled: bool = True
    """whether action files run hooks at all (off: they are plain objects, as before)"""
    run_timeout_seconds: float = Field(60.0, gt=0, le=3600)
    """a pre-event run (all its hooks) ends by then, refusing the operation if a hook has not finished"""
    max_runs_per_repository: int = Field(4, ge=1, le=16)
    """pre-event runs one repository may have at once; more are refused with 429 (each holds a graveler thread)"""
    background_workers: int = Field(4, ge=1, le=64)
    """threads running post-event hooks and pull request checks, shared fairly by repositories"""
    background_queue_per_repository: int = Field(100, ge=1, le=100_000)
    """post-event runs and checks a repository may have queued; more are dropped (and logged)"""
    max_file_bytes: int = Field(64 * 1024, ge=1024, le=256 * 1024)
    """bytes one action file may have; a larger one fails the run that would read it"""
    max_total_bytes: int = Field(256 * 1024, ge=1024, le=25 * 1024 * 1024)
    """bytes the action files of one ref may have together; more fail the run that would read them"""
    env: ActionsEnvConfig = Field(default_factory=ActionsEnvConfig)
    webhook: ActionsWebhookConfig = Field(default_factory=ActionsWebhookConfig)
    lua: ActionsLuaConfig = Field(default_factory=ActionsLuaConfig)


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
    actions: ActionsConfig = Field(default_factory=ActionsConfig)


class ClientConfig(_Section):
    """The sections of Config a client of the services reads (the `silt` CLI, silt/client.py:
    where to dial graveler, auth and the compactor, the S3 gateway's address and region, TLS),
    each field exactly Config's (tests/unit/test_config.py checks it). load_client_config
    validates these alone: the other sections' models are never built, nor their values checked.
    """

    gateways: GatewaysConfig = Field(default_factory=GatewaysConfig)
    auth: AuthConfig = Field(default_factory=lambda: AuthConfig(listen_address="127.0.0.1:8101"))
    graveler: GravelerConfig = Field(default_factory=GravelerConfig)
    compactor: CompactorConfig = Field(default_factory=lambda: CompactorConfig())
    tls: TLSConfig = Field(default_factory=TLSConfig)


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
# What silt/lakefs_settings.py needs to read lakeFS's keys as Silt's.
_LAKEFS_SCHEMA = lakefs_settings.SiltSchema(
    {".".join(path): kind for path, kind in _ENV_KEYS.values()}, _parse_env_value
)


def _apply_env(data: dict[str, Any], env: Mapping[str, str], sections: Collection[str] | None = None) -> dict[str, str]:
    """Write SILT_* overrides into data (only those of sections, when given); return
    {dotted key: variable name} of those applied."""
    applied: dict[str, str] = {}
    for var, (path, annotation) in _ENV_KEYS.items():
        if var not in env or (sections is not None and path[0] not in sections):
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


def _read_file(path: str | os.PathLike[str] | None) -> tuple[dict[str, Any], str]:
    """The mapping the YAML file at path holds ({} without a file), and where it came from."""
    if not path:
        return {}, "defaults"
    import yaml  # only where a file is read: `silt --version` and the like never get here

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
    return loaded, str(path)


def load_config(path: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None) -> Config:
    """Read the YAML file at path (or $SILT_CONFIG, or none), apply SILT_* overrides, validate.

    lakeFS's keys in the file and LAKEFS_* variables are read as their Silt keys first
    (silt/lakefs_settings.py): a team moving from lakeFS brings its configuration as it is."""
    env = os.environ if env is None else env
    data, source = _read_file(path if path is not None else env.get(CONFIG_PATH_ENV))
    applied = lakefs_settings.translate_file(data, source, _LAKEFS_SCHEMA)
    applied.update(lakefs_settings.translate_env(data, env, _LAKEFS_SCHEMA))
    applied.update(_apply_env(data, env))
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_format_error(exc, source, applied)) from None


def load_client_config(
    path: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None
) -> ClientConfig:
    """load_config for a client: the same file, overrides and messages, but only ClientConfig's
    sections are validated. An unknown top-level key is still refused; a bad value (file or
    SILT_* variable) in a section the client does not read is not its to report: the services
    validate the whole file when they start. lakeFS's keys and LAKEFS_* variables are read as in
    load_config, those of the client's sections only."""
    env = os.environ if env is None else env
    data, source = _read_file(path if path is not None else env.get(CONFIG_PATH_ENV))
    applied = lakefs_settings.translate_file(data, source, _LAKEFS_SCHEMA, ClientConfig.model_fields)
    unknown = [key for key in data if key not in Config.model_fields]
    if unknown:
        raise ConfigError(f"invalid configuration: {unknown[0]} (in {source}): unknown key")
    applied.update(lakefs_settings.translate_env(data, env, _LAKEFS_SCHEMA, ClientConfig.model_fields))
    applied.update(_apply_env(data, env, ClientConfig.model_fields))
    try:
        return ClientConfig.model_validate(
            _with_sections(ClientConfig, {k: data[k] for k in ClientConfig.model_fields if k in data})
        )
    except ValidationError as exc:
        raise ConfigError(_format_error(exc, source, applied)) from None


def _with_sections(model: type[BaseModel], data: dict[str, Any]) -> dict[str, Any]:
    """data with an empty mapping for every section (nested model) it leaves out, at any depth.

    The same values as the sections' defaults (each is its model built with no argument), but
    validated by model's own validator: a default factory would build the nested model's
    validator too, once per model, at a start of the CLI."""
    out = dict(data)
    for name, field in model.model_fields.items():
        if _is_model(field.annotation):
            value = out.get(name, {})
            out[name] = _with_sections(field.annotation, value) if isinstance(value, dict) else value  # type: ignore[arg-type]
    return out


def env_keys() -> dict[str, str]:
    """Every configuration key (dotted) and its environment variable, for documentation."""
    return {".".join(path): var for var, (path, _) in _ENV_KEYS.items()}
