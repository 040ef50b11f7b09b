"""lakeFS's configuration keys, read by Silt: a lakeFS team brings its config.yaml and LAKEFS_* variables.

KEYS maps every key of lakeFS's configuration (the 201 leaf keys of pkg/config's structs at the
lakeFS commit whose API Silt serves, 71a45ee) to the Silt key with the same meaning, or says why
there is none. load_config
(silt/config.py) calls translate_file and translate_env before it validates:

- a lakeFS key in the YAML file that is not also a Silt key, and a ``LAKEFS_*`` variable, are read
  as their Silt key, with a warning (logged once per process) naming both. Silt's own key in the
  same place (the file, or a ``SILT_*`` variable) wins over lakeFS's. Across places the usual order
  holds: a variable (``LAKEFS_*``, then ``SILT_*``) overrides the file.
- a lakeFS key with no counterpart is refused (ConfigError naming it and why), unless ignoring it
  is harmless (telemetry opt-outs, caches Silt sizes its own way, a feature switched off): then it
  is logged and dropped.
- a key both schemas have with different meanings (``tls.*``) is Silt's in the file; its
  ``LAKEFS_*`` variable is lakeFS's meaning and translates to the Silt key that has it.

Messages name keys and variables, never a value of a secret. docs/lakefs-settings.md is generated
from KEYS by silt/lakefs_settings_reference.py.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from silt.errors import ConfigError

log = logging.getLogger(__name__)

LAKEFS_ENV_PREFIX = "LAKEFS_"
SILT_ENV_PREFIX = "SILT_"  # silt/config.py's ENV_PREFIX (tests/unit/test_lakefs_settings.py checks they agree)


class _Skip:
    """What a conversion returns when lakeFS's value asks for what Silt does anyway."""

    def __repr__(self) -> str:
        return "SKIP"


SKIP = _Skip()


def _off(value: Any) -> bool:
    """A value that turns nothing on: false, zero, empty or unset (as a YAML value or a variable)."""
    if isinstance(value, str):
        return value.strip().lower() in ("", "false", "f", "0", "no")
    return value in (None, False, 0, "", [], {})


def _on(value: Any) -> bool:
    return not _off(value)


@dataclass(frozen=True)
class LakeFSKey:
    """One key of lakeFS's configuration and what Silt makes of it.

    silt: the Silt key with the same meaning (None: no counterpart). convert: lakeFS's value to
    Silt's, raising ValueError for a value with no counterpart, SKIP for one asking for Silt's own
    behaviour. Without a counterpart: ignore, when dropping the key is harmless whatever its value;
    else harmless(value) says which values may be dropped (by default those that turn nothing on),
    and any other value is refused. note: one line for the manual and the messages."""

    key: str
    silt: str | None
    note: str
    convert: Callable[[Any], Any] | None = None
    ignore: bool = False
    harmless: Callable[[Any], bool] = _off
    secret: bool = False

    @property
    def variable(self) -> str:
        return LAKEFS_ENV_PREFIX + self.key.upper().replace(".", "_")

    @property
    def silt_variable(self) -> str | None:
        return None if self.silt is None else SILT_ENV_PREFIX + self.silt.upper().replace(".", "_")


# --- value conversions -------------------------------------------------------------------

_DURATION_PART = re.compile(r"([0-9]*\.?[0-9]+)(ns|us|µs|ms|s|m|h)")
_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def seconds(value: Any) -> float | int:
    """A Go duration ("15m", "1h30m", "250ms"; a bare integer counts nanoseconds) in seconds."""
    if isinstance(value, bool):
        raise ValueError("expected a duration such as 15m or 30s")
    if isinstance(value, int | float):
        total = value / 1e9
    else:
        text = str(value).strip()
        if text == "0":
            return 0
        parts = _DURATION_PART.findall(text)
        if not parts or "".join(number + unit for number, unit in parts) != text:
            raise ValueError(f"expected a duration such as 15m or 30s, got {text!r}")
        total = sum(float(number) * _DURATION_UNITS[unit] for number, unit in parts)
    return int(total) if float(total).is_integer() else total


def _bool(value: Any) -> bool:
    # Go's strconv.ParseBool, which lakeFS's variables go through.
    if isinstance(value, bool):
        return value
    text = str(value).strip()
    if text in ("1", "t", "T", "true", "TRUE", "True"):
        return True
    if text in ("0", "f", "F", "false", "FALSE", "False"):
        return False
    raise ValueError(f"expected true or false, got {text!r}")


def _items(value: Any) -> list[str]:
    # lakeFS's lists arrive as YAML lists, or comma-separated from a variable.
    if isinstance(value, list | tuple):
        return [str(item).strip() for item in value if str(item).strip()]
    return [item.strip() for item in str(value).split(",") if item.strip()]


_LOG_LEVELS = {"TRACE": "DEBUG", "DEBUG": "DEBUG", "INFO": "INFO", "WARN": "WARN", "WARNING": "WARN"}
_LOG_LEVELS |= {"ERROR": "ERROR", "FATAL": "ERROR", "PANIC": "ERROR", "NONE": "NONE"}


def _log_level(value: Any) -> str:
    level = str(value).strip().upper()
    if level not in _LOG_LEVELS:
        raise ValueError(f"expected one of {', '.join(_LOG_LEVELS)}, got {value!r}")
    return _LOG_LEVELS[level]


def _log_output(value: Any) -> str:
    outputs = _items(value)
    if len(outputs) != 1:
        raise ValueError(
            "more than one output has no counterpart in Silt: Silt logs to one place, stdout (`-`) or a file"
        )
    if outputs[0] == "=":
        raise ValueError("stderr (`=`) has no counterpart in Silt: Silt logs to stdout (`-`) or a file")
    return outputs[0]


def _one_domain(value: Any) -> str:
    domains = _items(value)
    if len(domains) != 1:
        raise ValueError(
            "several domains have no counterpart in Silt: its gateway answers virtual-host-style requests under one"
        )
    return domains[0]


def _database_type(value: Any) -> str:
    kind = str(value).strip()
    if kind in ("postgres", "dynamodb", "cosmosdb", "redis"):
        raise ValueError(
            f"{kind} has no counterpart in Silt: its KV runs on Cassandra (`cassandra`) or SQLite (`local`)"
        )
    return kind


def _blockstore_type(value: Any) -> str:
    kind = str(value).strip()
    if kind in ("mem", "transient"):
        raise ValueError(f"{kind} has no counterpart in Silt: its object stores are local, s3, azure and gs")
    return kind


def _sync_writes(value: Any) -> str:
    return "FULL" if _bool(value) else "NORMAL"


def _cache_enabled(value: Any) -> Any:
    return SKIP if _bool(value) else 0


def _china_cloud(value: Any) -> Any:
    return "blob.core.chinacloudapi.cn" if _bool(value) else SKIP


def _gs_endpoint(value: Any) -> Any:
    endpoint = str(value).strip().rstrip("/")
    return SKIP if endpoint in ("", "https://storage.googleapis.com") else endpoint


def _sensor_threshold(value: Any) -> int:
    threshold = int(value)
    if threshold <= 0:
        raise ValueError("0 (no sensor) has no counterpart in Silt's threshold: set `compactor.sensor_enabled: false`")
    return threshold


# --- the mapping -------------------------------------------------------------------------


def _same(key: str, silt: str | None = None, note: str = "", **kw: Any) -> LakeFSKey:
    return LakeFSKey(key, silt or key, note or "same meaning", **kw)


def _ignored(key: str, note: str, **kw: Any) -> LakeFSKey:
    return LakeFSKey(key, None, note, ignore=True, **kw)


def _refused(key: str, note: str, **kw: Any) -> LakeFSKey:
    return LakeFSKey(key, None, note, **kw)


_NO_SQL_KV = "Silt's KV runs on Cassandra or SQLite (`database.type: cassandra` or `local`)"
_EXTERNAL_AUTH = "Silt authenticates with its own auth service only (access keys and login sessions)"
_NO_CALL_HOME = "Silt sends no usage statistics, version checks or audit checks anywhere"
_LOGIN_UI = "Silt's web UI has one login page, of its own"
_PRESIGNED_SECONDS = "a Go duration (`15m`) read as seconds"


def _no_sql_kv(store: str, names: str, secrets: str = "") -> list[LakeFSKey]:
    """The keys of one of lakeFS's KV stores Silt does not have (names, secrets: space-separated)."""
    hidden = secrets.split()
    return [_refused(f"database.{store}.{n}", _NO_SQL_KV, secret=n in hidden) for n in names.split()]


_POSTGRES = _no_sql_kv(
    "postgres",
    "connection_string max_open_connections max_idle_connections connection_max_lifetime scan_page_size metrics",
    secrets="connection_string",
)
_DYNAMODB = _no_sql_kv(
    "dynamodb",
    "table_name scan_limit endpoint aws_region aws_profile aws_access_key_id aws_secret_access_key"
    " health_check_interval max_attempts max_connections credentials_cache_expiry_window"
    " credentials_cache_expiry_window_jitter_fraction",
    secrets="aws_access_key_id aws_secret_access_key",
)
_COSMOSDB = _no_sql_kv("cosmosdb", "key endpoint database container throughput autoscale", secrets="key")
_REDIS = _no_sql_kv(
    "redis",
    "endpoint username password database pool_size min_idle_conns dial_timeout read_timeout write_timeout"
    " namespace enable_tls tls_skip_verify aws_region aws_profile aws_access_key_id aws_secret_access_key"
    " use_iam_auth cluster_mode batch_size",
    secrets="password aws_access_key_id aws_secret_access_key",
)


def _presigned(store: str) -> list[LakeFSKey]:
    base = f"blockstore.{store}"
    return [
        _same(f"{base}.pre_signed_expiry", f"{base}.pre_signed_expiry_seconds", _PRESIGNED_SECONDS, convert=seconds),
        _same(f"{base}.disable_pre_signed"),
        _same(f"{base}.disable_pre_signed_ui"),
    ]


KEYS: tuple[LakeFSKey, ...] = (
    _same(
        "listen_address",
        "gateways.s3.listen_address",
        "lakeFS's one port (API, UI, S3 gateway) is Silt's S3 gateway port, which also answers the API and UI",
    ),
    _same(
        "tls.enabled",
        "gateways.s3.tls.enabled",
        "HTTPS on that port; Silt's own `tls.*` is gRPC TLS between its services",
    ),
    _same("tls.cert_file", "gateways.s3.tls.cert_file", "as `tls.enabled`"),
    _same("tls.key_file", "gateways.s3.tls.key_file", "as `tls.enabled`"),
    _same("actions.enabled"),
    _refused("actions.lua.net_http_enabled", "Silt's Lua hooks have no `net/http` module (webhooks can call out)"),
    _same("actions.env.enabled"),
    _same(
        "actions.env.prefix",
        note="same meaning; Silt's default is `SILTACTION_`, and each variable is granted to repositories "
        "(`actions.env.repositories`)",
    ),
    _same("logging.format"),
    _same("logging.level", note="`TRACE` is `DEBUG`, `FATAL` and `PANIC` are `ERROR`", convert=_log_level),
    _same(
        "logging.output", note="one place only: `-` (stdout) or a file; stderr (`=`) is refused", convert=_log_output
    ),
    _refused("logging.file_max_size_mb", "Silt does not rotate its log file (use logrotate or the platform's logs)"),
    _refused("logging.files_keep", "Silt does not rotate its log file (use logrotate or the platform's logs)"),
    _ignored("logging.audit_log_level", "Silt has no separate audit log level; access lines are logged at INFO"),
    _ignored("logging.trace_request_headers", "Silt never logs request headers"),
    _ignored("database.drop_tables", "a lakeFS development flag of its SQL-to-KV migration"),
    _same(
        "database.type", note="`local` and `mem` as in lakeFS, plus `cassandra`; " + _NO_SQL_KV, convert=_database_type
    ),
    _refused(
        "database.local.path",
        "lakeFS's is a directory of its own store's files; Silt's `database.local.path` is one SQLite file, "
        "never lakeFS's data (bring repositories with `silt migrate lakefs`)",
    ),
    _same(
        "database.local.sync_writes",
        "database.local.synchronous",
        "`true` is `FULL` (fsync per commit), `false` is `NORMAL`",
        convert=_sync_writes,
    ),
    _same("database.local.prefetch_size", "database.local.scan_page_size", "entries read ahead per scan"),
    _ignored("database.local.enable_logging", "debug logging of lakeFS's embedded store"),
    *_POSTGRES,
    *_DYNAMODB,
    *_COSMOSDB,
    *_REDIS,
    _ignored(
        "blockstore.signing.secret_key",
        "Silt signs its presigned URLs with a key derived from its API service secret",
        secret=True,
    ),
    _same(
        "blockstore.type",
        note="`local`, `s3`, `gs`, `azure`; lakeFS's test stores `mem` and `transient` are refused",
        convert=_blockstore_type,
    ),
    _refused(
        "blockstore.default_namespace_prefix",
        "Silt's `graveler.allowed_namespace_roots` both gives the default (its first root) and restricts where "
        "namespaces may go: set it yourself",
    ),
    _same("blockstore.local.path"),
    _same("blockstore.local.import_enabled"),
    _ignored(
        "blockstore.local.import_hidden",
        "cosmetic: Silt's web UI has no switch to hide its import page; `import_enabled` is what allows imports",
    ),
    _same("blockstore.local.allowed_external_prefixes"),
    _same("blockstore.s3.credentials_file"),
    _same("blockstore.s3.profile"),
    _same("blockstore.s3.credentials.access_key_id", secret=True),
    _same("blockstore.s3.credentials.secret_access_key", secret=True),
    _same("blockstore.s3.credentials.session_token", secret=True),
    _same("blockstore.s3.region"),
    _same("blockstore.s3.endpoint", "blockstore.s3.endpoint_url", "the S3-compatible store's URL"),
    _same("blockstore.s3.max_retries"),
    _same("blockstore.s3.force_path_style"),
    _ignored("blockstore.s3.discover_bucket_region", "boto3 follows S3's redirects to a bucket's own region"),
    _refused(
        "blockstore.s3.skip_verify_certificate_test_only",
        "Silt always verifies the store's certificate (give its CA with `AWS_CA_BUNDLE`)",
    ),
    _refused("blockstore.s3.server_side_encryption", "Silt sends no SSE headers: use the bucket's default encryption"),
    _refused(
        "blockstore.s3.server_side_encryption_kms_key_id",
        "Silt sends no SSE headers: use the bucket's default encryption",
    ),
    *_presigned("s3"),
    _same("blockstore.s3.pre_signed_endpoint"),
    _same("blockstore.s3.disable_pre_signed_multipart"),
    _ignored("blockstore.s3.client_log_retries", "debug logging of lakeFS's S3 client"),
    _ignored("blockstore.s3.client_log_request", "debug logging of lakeFS's S3 client"),
    _ignored(
        "blockstore.s3.web_identity.session_duration",
        "boto3 assumes a web identity (`AWS_WEB_IDENTITY_TOKEN_FILE`, `AWS_ROLE_ARN`) with its own session length",
    ),
    _ignored(
        "blockstore.s3.web_identity.session_expiry_window",
        "boto3 refreshes web identity credentials on its own schedule",
    ),
    _same(
        "blockstore.azure.try_timeout",
        "blockstore.azure.try_timeout_seconds",
        "a Go duration read as seconds",
        convert=seconds,
    ),
    _same("blockstore.azure.storage_account"),
    _same("blockstore.azure.storage_access_key", secret=True),
    _ignored("blockstore.azure.auth_method", "deprecated and ignored by lakeFS too"),
    *_presigned("azure"),
    _same(
        "blockstore.azure.china_cloud",
        "blockstore.azure.domain",
        "`true` is `blob.core.chinacloudapi.cn`, as lakeFS does",
        convert=_china_cloud,
    ),
    _same("blockstore.azure.test_endpoint_url"),
    _same("blockstore.azure.domain"),
    _same(
        "blockstore.gs.s3_endpoint",
        "blockstore.gs.endpoint_url",
        "Google's own (lakeFS's default) needs nothing; another is an emulator's",
        convert=_gs_endpoint,
    ),
    _same("blockstore.gs.credentials_file"),
    _same("blockstore.gs.credentials_json", secret=True),
    *_presigned("gs"),
    _refused(
        "blockstore.gs.server_side_encryption_customer_supplied",
        "Silt sends no encryption keys: use the bucket's default encryption",
        secret=True,
    ),
    _refused(
        "blockstore.gs.server_side_encryption_kms_key_id",
        "Silt sends no encryption keys: use the bucket's default encryption",
    ),
    _refused("blockstore.gs.data_credentials_file", "Silt reads and writes data with one set of credentials"),
    _refused(
        "blockstore.gs.data_credentials_json", "Silt reads and writes data with one set of credentials", secret=True
    ),
    _same("committed.local_cache.size_bytes", "graveler.cache.disk_bytes", "the disk cache of ranges"),
    _same("committed.local_cache.dir", "graveler.cache.disk_dir", "the disk cache of ranges"),
    _ignored("committed.local_cache.max_uploaders_per_writer", "Silt writes a commit's ranges from its commit workers"),
    _ignored("committed.local_cache.range_proportion", "Silt's cache holds ranges and metaranges together"),
    _ignored("committed.local_cache.metarange_proportion", "Silt's cache holds ranges and metaranges together"),
    _ignored(
        "committed.block_storage_prefix",
        "where lakeFS keeps its metadata in a namespace; Silt's committed data is its own Parquet, not lakeFS's",
    ),
    _ignored("committed.permanent.min_range_size_bytes", "Silt chooses range boundaries from the keys themselves"),
    _ignored("committed.permanent.max_range_size_bytes", "Silt chooses range boundaries from the keys themselves"),
    _ignored("committed.permanent.range_raggedness_entries", "Silt chooses range boundaries from the keys themselves"),
    _same(
        "committed.sstable.memory.cache_size_bytes",
        "graveler.cache.memory_bytes",
        "decoded ranges and metaranges kept in memory",
    ),
    _ignored("ugc.prepare_max_file_size", "Silt's GC job exports uncommitted entries itself"),
    _ignored("ugc.prepare_interval", "Silt's GC job exports uncommitted entries itself"),
    _ignored(
        "graveler.ensure_readable_root_namespace",
        "Silt checks a new repository's namespace against `graveler.allowed_namespace_roots` and other repositories",
    ),
    _ignored("graveler.batch_dbio_transaction_markers", "a tuning of lakeFS's KV batching"),
    _same(
        "graveler.compaction_sensor_threshold",
        "compactor.tombstone_threshold",
        "staged deletes that trigger a compaction; `0` (no sensor) is `compactor.sensor_enabled: false`",
        convert=_sensor_threshold,
    ),
    _ignored("graveler.repository_cache.size", "Silt's services cache repositories their own way"),
    _ignored("graveler.repository_cache.expiry", "Silt's services cache repositories their own way"),
    _ignored("graveler.repository_cache.jitter", "Silt's services cache repositories their own way"),
    _ignored("graveler.commit_cache.size", "commits are immutable; Silt's services cache them their own way"),
    _ignored("graveler.commit_cache.expiry", "commits are immutable; Silt's services cache them their own way"),
    _ignored("graveler.commit_cache.jitter", "commits are immutable; Silt's services cache them their own way"),
    _ignored("graveler.background.rate_limit", "a limit of lakeFS's background KV work"),
    _ignored("graveler.max_batch_delay", "a tuning of lakeFS's KV batching"),
    _ignored("graveler.branch_ownership.enabled", "Silt takes no branch lock: writes are never blocked by a commit"),
    _ignored("graveler.branch_ownership.refresh", "Silt takes no branch lock: writes are never blocked by a commit"),
    _ignored("graveler.branch_ownership.acquire", "Silt takes no branch lock: writes are never blocked by a commit"),
    _same("gateways.s3.domain_name", note="one domain (lakeFS takes a list)", convert=_one_domain),
    _same("gateways.s3.region"),
    _refused("gateways.s3.fallback_url", "Silt's gateway does not pass unknown buckets on to another S3 endpoint"),
    _ignored(
        "gateways.s3.verify_unsupported", "Silt's gateway answers an S3 request it does not support with an error"
    ),
    _ignored("stats.enabled", _NO_CALL_HOME),
    _ignored("stats.address", _NO_CALL_HOME),
    _ignored("stats.flush_interval", _NO_CALL_HOME),
    _ignored("stats.flush_size", _NO_CALL_HOME),
    _ignored("stats.extended", _NO_CALL_HOME),
    _ignored("email_subscription.enabled", _NO_CALL_HOME),
    _ignored("installation.fixed_id", "an id lakeFS reports in its usage statistics"),
    _refused(
        "installation.user_name",
        "Silt issues the first admin's key itself at setup (`silt run`, `python -m services.auth.setup --admin NAME`)",
    ),
    _refused(
        "installation.access_key_id",
        "Silt issues the first admin's key itself at setup and prints it once",
        secret=True,
    ),
    _refused(
        "installation.secret_access_key",
        "Silt issues the first admin's key itself at setup and prints it once",
        secret=True,
    ),
    _refused(
        "installation.allow_inter_region_storage",
        "`false` (refuse a bucket in another region): Silt does not compare regions",
        harmless=_on,
    ),
    _ignored("security.check_latest_version", _NO_CALL_HOME),
    _ignored("security.check_latest_version_cache", _NO_CALL_HOME),
    _ignored("security.audit_check_interval", _NO_CALL_HOME),
    _ignored("security.audit_check_url", _NO_CALL_HOME),
    _ignored("usage_report.enabled", _NO_CALL_HOME),
    _ignored("usage_report.flush_interval", _NO_CALL_HOME),
    _same("auth.cache.ttl", "auth.cache_ttl_seconds", "a Go duration read as seconds", convert=seconds),
    _same("auth.cache.enabled", "auth.cache_ttl_seconds", "`false` is a TTL of `0` (no cache)", convert=_cache_enabled),
    _ignored(
        "auth.cache.size", "Silt's auth cache has no size setting; `auth.cache_ttl_seconds` bounds how long it keeps"
    ),
    _ignored("auth.cache.jitter", "Silt's auth cache expires entries after `auth.cache_ttl_seconds`, without jitter"),
    _same(
        "auth.encrypt.secret_key",
        "auth.encrypt_secret_key",
        "Silt wants 32 or more random bytes as base64 or hex, and refuses a weaker key at start",
        secret=True,
    ),
    _refused("auth.api.endpoint", _EXTERNAL_AUTH),
    _refused("auth.api.token", _EXTERNAL_AUTH, secret=True),
    _refused("auth.api.supports_invites", _EXTERNAL_AUTH),
    _refused("auth.api.health_check_timeout", _EXTERNAL_AUTH),
    _refused("auth.api.skip_health_check", _EXTERNAL_AUTH),
    _refused("auth.authentication_api.endpoint", _EXTERNAL_AUTH),
    _refused("auth.authentication_api.external_principals_enabled", _EXTERNAL_AUTH),
    _refused("auth.remote_authenticator.enabled", _EXTERNAL_AUTH),
    _refused("auth.remote_authenticator.endpoint", _EXTERNAL_AUTH),
    _ignored("auth.remote_authenticator.default_user_group", "only used by a remote authenticator"),
    _ignored("auth.remote_authenticator.request_timeout", "only used by a remote authenticator"),
    *(
        _refused(f"auth.oidc.{n}", _EXTERNAL_AUTH)
        for n in (
            "validate_id_token_claims",
            "default_initial_groups",
            "initial_groups_claim_name",
            "friendly_name_claim_name",
            "persist_friendly_name",
        )
    ),
    *(
        _refused(f"auth.cookie_auth_verification.{n}", _EXTERNAL_AUTH)
        for n in (
            "validate_id_token_claims",
            "default_initial_groups",
            "initial_groups_claim_name",
            "friendly_name_claim_name",
            "external_user_id_claim_name",
            "auth_source",
            "persist_friendly_name",
        )
    ),
    _ignored("auth.logout_redirect_url", _LOGIN_UI),
    _same(
        "auth.login_duration",
        "auth.session_ttl_seconds",
        "a Go duration read as seconds (at most 7 days)",
        convert=seconds,
    ),
    _ignored("auth.login_max_duration", "Silt's login sessions are not extended"),
    _ignored("auth.ui_config.rbac", "Silt always enforces its full RBAC, whatever the UI shows"),
    _refused("auth.ui_config.login_url", _LOGIN_UI),
    _ignored("auth.ui_config.login_failed_message", _LOGIN_UI),
    _refused("auth.ui_config.fallback_login_url", _LOGIN_UI),
    _ignored("auth.ui_config.fallback_login_label", _LOGIN_UI),
    _ignored("auth.ui_config.login_cookie_names", _LOGIN_UI),
    _refused("auth.ui_config.logout_url", _LOGIN_UI),
    _ignored("auth.ui_config.use_login_placeholders", _LOGIN_UI),
    _refused(
        "ui.enabled",
        "`false`: Silt serves its web UI wherever it serves the API (`api.enabled`)",
        harmless=_on,
    ),
    _ignored("ui.snippets", "Silt's web UI shows no custom snippets"),
)

BY_KEY: dict[str, LakeFSKey] = {entry.key: entry for entry in KEYS}


def _sections(keys: Collection[str]) -> frozenset[str]:
    """Every dotted prefix of keys that is not itself a key: the sections holding them."""
    return frozenset(".".join(key.split(".")[:i]) for key in keys for i in range(1, key.count(".") + 1))


_LAKEFS_SECTIONS = _sections(BY_KEY)


class SiltSchema:
    """Silt's keys as translation needs them. silt/config.py hands them over (this module imports
    nothing of it: config.py calls this one): every leaf key (dotted) with its type, and how a
    variable's text becomes a value of that type."""

    def __init__(self, annotations: Mapping[str, Any], parse_env_value: Callable[[str, Any], Any]) -> None:
        self.annotations = dict(annotations)
        self.parse_env_value = parse_env_value
        self.sections = _sections(self.annotations)


def shadowed(entry: LakeFSKey, schema: SiltSchema) -> bool:
    """Whether Silt has a key of lakeFS's name with another meaning (the file's is then Silt's)."""
    return entry.key in schema.annotations and entry.silt != entry.key


# --- logging once ------------------------------------------------------------------------

_logged: set[str] = set()


def _log_once(message: str) -> None:
    # load_config runs more than once in some processes (the launcher, then each service).
    if message not in _logged:
        _logged.add(message)
        log.warning(message)


# --- translation -------------------------------------------------------------------------


def _get(data: Mapping[str, Any], key: str) -> tuple[bool, Any]:
    node: Any = data
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return False, None
        node = node[part]
    return True, node


def _set(data: dict[str, Any], key: str, value: Any) -> None:
    *parents, last = key.split(".")
    node = data
    for part in parents:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[last] = value


def _refuse(entry: LakeFSKey, origin: str, reason: str) -> ConfigError:
    return ConfigError(f"invalid configuration: {entry.key} (lakeFS's key, {origin}): no counterpart in Silt: {reason}")


def _drop(entry: LakeFSKey, value: Any, origin: str) -> None:
    """A key without counterpart: logged and dropped when harmless, else refused."""
    if entry.ignore or entry.harmless(value):
        _log_once(f"configuration: {entry.key} (lakeFS's key, {origin}) ignored: {entry.note}")
        return
    raise _refuse(entry, origin, entry.note)


def _converted(entry: LakeFSKey, value: Any, where: str) -> Any:
    """lakeFS's value as Silt's; where: the message's words for where it came from."""
    if entry.convert is None:
        return value
    try:
        return entry.convert(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"invalid configuration: {entry.key} ({where}): {exc}") from None


def _collect(
    node: dict[str, Any],
    prefix: str,
    source: str,
    schema: SiltSchema,
    found: list[tuple[LakeFSKey, Any]],
    shared: list[str],
) -> None:
    """Move lakeFS-only keys out of node (the file's mapping) into found; note in shared the keys
    both schemas have. What neither schema knows is refused: in a lakeFS-only section here, where
    its whole name is known, elsewhere by validation."""
    for name in list(node):
        key = f"{prefix}{name}"
        value = node[name]
        if key in schema.annotations:
            if key in BY_KEY:
                shared.append(key)
        elif key in BY_KEY:
            found.append((BY_KEY[key], node.pop(name)))
        elif isinstance(value, dict) and (key in schema.sections or key in _LAKEFS_SECTIONS):
            _collect(value, key + ".", source, schema, found, shared)
            if key not in schema.sections:
                if value:
                    raise ConfigError(f"invalid configuration: {key}.{next(iter(value))} (in {source}): unknown key")
                del node[name]


def _outside(entry: LakeFSKey, sections: Collection[str] | None) -> bool:
    """Whether entry is none of a client's business: no Silt key in the sections it reads."""
    return sections is not None and (entry.silt is None or entry.silt.split(".", 1)[0] not in sections)


def translate_file(
    data: dict[str, Any], source: str, schema: SiltSchema, sections: Collection[str] | None = None
) -> dict[str, str]:
    """Rewrite the file's mapping in place: lakeFS's keys become Silt's (the file's own Silt key
    wins), harmless ones without counterpart are dropped, others refused. Returns
    {Silt key: where its value came from}, for validation's messages.

    With sections (a client's, load_client_config): lakeFS's keys are still taken out of the
    file, but only those whose Silt key lies in sections are read; the rest are the services'
    to translate or refuse, as their values are the services' to check."""
    found: list[tuple[LakeFSKey, Any]] = []
    shared: list[str] = []
    _collect(data, "", source, schema, found, shared)
    found = [(entry, value) for entry, value in found if not _outside(entry, sections)]
    shared = [key for key in shared if not _outside(BY_KEY[key], sections)]
    origins: dict[str, str] = {}
    origin = f"in {source}"
    for key in shared:
        entry = BY_KEY[key]
        if shadowed(entry, schema):
            if found:  # a lakeFS file: say which meaning its key gets
                elsewhere = f"; lakeFS's meaning is Silt's {entry.silt}" if entry.silt else ""
                _log_once(
                    f"configuration: {key} in {source} is read as Silt's own key, not lakeFS's: {entry.note}{elsewhere}"
                )
        elif entry.convert is not None:
            _, value = _get(data, key)
            converted = _converted(entry, value, origin)  # Silt's key too: no "lakeFS's key" here
            if converted is SKIP:
                continue
            if converted != value:
                _set(data, key, converted)
                shown = "lakeFS's value translated" if entry.secret else f"lakeFS's {value!r} read as {converted!r}"
                _log_once(f"configuration: {key} in {source}: {shown}")
    # Silt's own keys in the file, before any translation adds one.
    present = {entry.silt for entry, _ in found if entry.silt and _get(data, entry.silt)[0]}
    for entry, value in sorted(found, key=lambda item: KEYS.index(item[0])):
        if entry.silt is None:
            _drop(entry, value, origin)
            continue
        if entry.silt in present:
            _log_once(f"configuration: {entry.key} and {entry.silt} are both in {source}: Silt's {entry.silt} is used")
            continue
        converted = _converted(entry, value, f"lakeFS's key, {origin}")
        if converted is SKIP:
            _log_once(f"configuration: {entry.key} (lakeFS's key, in {source}) asks for Silt's default; nothing to set")
            continue
        _set(data, entry.silt, converted)
        origins[entry.silt] = f"{entry.key} in {source}"
        _log_once(
            f"configuration: {entry.key} in {source} is lakeFS's key, read as Silt's {entry.silt}: write that instead"
        )
    return origins


def translate_env(
    data: dict[str, Any], env: Mapping[str, str], schema: SiltSchema, sections: Collection[str] | None = None
) -> dict[str, str]:
    """Apply the LAKEFS_* variables of lakeFS's keys to data, as their Silt keys (a SILT_*
    variable for the same key wins). Returns {Silt key: variable}. A LAKEFS_* variable that is no
    lakeFS configuration key is left alone: other tools have variables of that prefix. With
    sections, only variables of Silt keys in those sections are read (see translate_file)."""
    origins: dict[str, str] = {}
    for entry in KEYS:
        var = entry.variable
        if var not in env or _outside(entry, sections):
            continue
        raw = env[var]
        origin = f"from {var}"
        if entry.silt is None:
            _drop(entry, raw, origin)
            continue
        silt_var = entry.silt_variable
        if silt_var in env:
            _log_once(f"configuration: {var} and {silt_var} are both set: Silt's {silt_var} is used")
            continue
        value = _converted(entry, raw, f"lakeFS's key, {origin}")
        if value is SKIP:
            _log_once(f"configuration: {var} (lakeFS's {entry.key}) asks for Silt's default; nothing to set")
            continue
        if isinstance(value, str):
            try:
                value = schema.parse_env_value(value, schema.annotations[entry.silt])
            except ValueError as exc:
                raise ConfigError(f"invalid configuration: {entry.silt} (from {var}): {exc}") from None
        _set(data, entry.silt, value)
        origins[entry.silt] = var
        _log_once(f"configuration: {var} is lakeFS's variable, read as Silt's {silt_var}: set that instead")
    return origins
