"""lakeFS's configuration keys and LAKEFS_* variables, read by load_config as their Silt keys."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from silt import lakefs_settings, lakefs_settings_reference
from silt.config import ENV_PREFIX, Config, env_keys, load_client_config, load_config
from silt.errors import ConfigError
from silt.lakefs_settings import BY_KEY, KEYS, seconds

LOGGER = "silt.lakefs_settings"

# A lakeFS deployment's config.yaml on an S3-compatible store, as lakeFS's docs shape one.
LAKEFS_CONFIG = """
listen_address: "0.0.0.0:8000"
logging:
  format: json
  level: INFO
  output: ["-"]
database:
  type: local
auth:
  encrypt:
    secret_key: "4d8f1c0b9a7e6d5c4b3a29181716151413121110ffeeddccbbaa998877665544"
  cache:
    ttl: 30s
blockstore:
  type: s3
  s3:
    region: eu-west-1
    endpoint: http://minio.storage.svc:9000
    force_path_style: true
    discover_bucket_region: false
    pre_signed_expiry: 30m
    credentials:
      access_key_id: AKIAMINIOEXAMPLE
      secret_access_key: minio-secret-do-not-log
gateways:
  s3:
    domain_name: s3.lakefs.example.com
    region: eu-west-1
committed:
  local_cache:
    dir: /var/cache/lakefs
    size_bytes: 2147483648
stats:
  enabled: false
security:
  check_latest_version: false
"""

# The Silt file with the same meaning.
SILT_CONFIG = """
logging:
  format: json
  level: INFO
  output: "-"
database:
  type: local
auth:
  encrypt_secret_key: "4d8f1c0b9a7e6d5c4b3a29181716151413121110ffeeddccbbaa998877665544"
  cache_ttl_seconds: 30
blockstore:
  type: s3
  s3:
    region: eu-west-1
    endpoint_url: http://minio.storage.svc:9000
    force_path_style: true
    pre_signed_expiry_seconds: 1800
    credentials:
      access_key_id: AKIAMINIOEXAMPLE
      secret_access_key: minio-secret-do-not-log
gateways:
  s3:
    listen_address: "0.0.0.0:8000"
    domain_name: s3.lakefs.example.com
    region: eu-west-1
graveler:
  cache:
    disk_dir: /var/cache/lakefs
    disk_bytes: 2147483648
"""


@pytest.fixture(autouse=True)
def _fresh_log_once() -> Iterator[None]:
    # Each test sees its own warnings: the module logs a message once per process.
    lakefs_settings._logged.clear()
    yield
    lakefs_settings._logged.clear()


def write(tmp_path: Path, text: str, name: str = "config.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name == LOGGER]


def refusal(tmp_path: Path, text: str = "", env: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, text) if text else None, env=env or {})
    message = str(err.value)
    assert "\n" not in message
    return message


# --- the mapping -------------------------------------------------------------------------


def test_every_mapped_silt_key_exists_in_silts_schema() -> None:
    assert lakefs_settings.SILT_ENV_PREFIX == ENV_PREFIX
    silt_keys = env_keys()
    missing = [(entry.key, entry.silt) for entry in KEYS if entry.silt and entry.silt not in silt_keys]
    assert not missing, f"lakeFS keys mapped to Silt keys the schema does not have: {missing}"
    for entry in KEYS:
        if entry.silt:
            assert entry.silt_variable == silt_keys[entry.silt]


def test_each_lakefs_key_once_with_lakefs_variable_and_a_note() -> None:
    assert len(BY_KEY) == len(KEYS)
    assert BY_KEY["auth.encrypt.secret_key"].variable == "LAKEFS_AUTH_ENCRYPT_SECRET_KEY"
    assert BY_KEY["blockstore.s3.force_path_style"].variable == "LAKEFS_BLOCKSTORE_S3_FORCE_PATH_STYLE"
    assert BY_KEY["listen_address"].variable == "LAKEFS_LISTEN_ADDRESS"
    for entry in KEYS:
        assert entry.note.strip(), entry.key
        assert entry.silt is None or not entry.ignore, entry.key


def test_the_page_is_generated_from_the_mapping() -> None:
    assert lakefs_settings_reference.OUTPUT.read_text() == lakefs_settings_reference.render(), (
        "docs/lakefs-settings.md is stale: run `python -m silt.lakefs_settings_reference --write`"
    )


def test_the_page_lists_every_key_with_both_variables() -> None:
    page = lakefs_settings_reference.OUTPUT.read_text()
    for entry in KEYS:
        assert f"| `{entry.key}` | `{entry.variable}` |" in page
    assert "| `blockstore.s3.endpoint` | `LAKEFS_BLOCKSTORE_S3_ENDPOINT` | `blockstore.s3.endpoint_url` | " in page
    assert "`SILT_BLOCKSTORE_S3_ENDPOINT_URL`" in page


def test_go_durations_become_seconds() -> None:
    assert seconds("15m") == 900
    assert seconds("1h30m") == 5400
    assert seconds("250ms") == 0.25
    assert seconds("0") == 0
    assert seconds(900_000_000_000) == 900  # a bare integer counts nanoseconds, as in lakeFS
    for bad in ("15 minutes", "m", "10", True):
        with pytest.raises(ValueError):
            seconds(bad)


# --- a whole lakeFS configuration ----------------------------------------------------------


def test_a_lakefs_config_file_gives_the_equivalent_silt_config(tmp_path: Path) -> None:
    from_lakefs = load_config(write(tmp_path, LAKEFS_CONFIG, "lakefs.yaml"), env={})
    from_silt = load_config(write(tmp_path, SILT_CONFIG, "silt.yaml"), env={})
    assert from_lakefs == from_silt
    assert from_lakefs != Config()  # not both defaults
    assert from_lakefs.blockstore.s3.endpoint_url == "http://minio.storage.svc:9000"
    assert from_lakefs.blockstore.s3.force_path_style is True
    assert from_lakefs.gateways.s3.domain_name == "s3.lakefs.example.com"
    secret = from_lakefs.blockstore.s3.credentials.secret_access_key
    assert secret is not None and secret.get_secret_value() == "minio-secret-do-not-log"


def test_the_pages_example_holds(tmp_path: Path) -> None:
    from_lakefs = load_config(write(tmp_path, lakefs_settings_reference.EXAMPLE_LAKEFS, "lakefs.yaml"), env={})
    from_silt = load_config(write(tmp_path, lakefs_settings_reference.EXAMPLE_SILT, "silt.yaml"), env={})
    assert from_lakefs == from_silt
    assert from_lakefs.gateways.s3.listen_address == "0.0.0.0:8000"


# --- file keys ---------------------------------------------------------------------------


def test_a_file_key_is_translated_with_one_warning_naming_both(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = write(tmp_path, "blockstore:\n  s3:\n    endpoint: http://minio:9000\n")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert load_config(path, env={}).blockstore.s3.endpoint_url == "http://minio:9000"
        load_config(path, env={})  # a second load in the same process warns no more
    warnings = [m for m in messages(caplog) if "blockstore.s3.endpoint " in m]
    assert len(warnings) == 1
    assert "blockstore.s3.endpoint_url" in warnings[0]


def test_silts_key_in_the_file_wins_over_lakefs_key(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    text = "blockstore:\n  s3:\n    endpoint: http://lakefs-one:9000\n    endpoint_url: http://silt-one:9000\n"
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        config = load_config(write(tmp_path, text), env={})
    assert config.blockstore.s3.endpoint_url == "http://silt-one:9000"
    assert any("both" in m and "blockstore.s3.endpoint_url is used" in m for m in messages(caplog))


def test_values_lakefs_writes_differently_are_converted(tmp_path: Path) -> None:
    text = """
logging:
  level: trace
database:
  local:
    sync_writes: true
blockstore:
  type: azure
  azure:
    try_timeout: 2m
    china_cloud: true
auth:
  cache:
    ttl: 1m
    enabled: false
  login_duration: 24h
graveler:
  compaction_sensor_threshold: 500
"""
    config = load_config(write(tmp_path, text), env={})
    assert config.logging.level == "DEBUG"
    assert config.database.local.synchronous == "FULL"
    assert config.blockstore.azure.try_timeout_seconds == 120
    assert config.blockstore.azure.domain == "blob.core.chinacloudapi.cn"
    assert config.auth.cache_ttl_seconds == 0  # cache off wins over its TTL
    assert config.auth.session_ttl_seconds == 86400
    assert config.compactor.tombstone_threshold == 500


def test_a_translated_value_that_fails_validation_names_the_lakefs_key(tmp_path: Path) -> None:
    message = refusal(tmp_path, 'listen_address: "nowhere"\n')
    assert "gateways.s3.listen_address (from listen_address in " in message


# --- environment variables -------------------------------------------------------------------


def test_lakefs_variables_are_translated(caplog: pytest.LogCaptureFixture) -> None:
    env = {
        "LAKEFS_BLOCKSTORE_TYPE": "local",
        "LAKEFS_BLOCKSTORE_LOCAL_IMPORT_ENABLED": "true",
        "LAKEFS_BLOCKSTORE_LOCAL_ALLOWED_EXTERNAL_PREFIXES": "/mnt/landing,/mnt/exports",
        "LAKEFS_BLOCKSTORE_S3_ENDPOINT": "http://minio:9000",
        "LAKEFS_BLOCKSTORE_S3_FORCE_PATH_STYLE": "true",
        "LAKEFS_AUTH_CACHE_TTL": "45s",
        "LAKEFS_GATEWAYS_S3_DOMAIN_NAME": "s3.example.com",
        "LAKEFS_LISTEN_ADDRESS": "0.0.0.0:9000",
        "LAKEFS_ENDPOINT": "http://not-a-config-key",  # other tools' LAKEFS_ variables are left alone
    }
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        config = load_config(env=env)
    assert config.blockstore.local.import_enabled is True
    assert config.blockstore.local.allowed_external_prefixes == ["/mnt/landing", "/mnt/exports"]
    assert config.blockstore.s3.endpoint_url == "http://minio:9000"
    assert config.blockstore.s3.force_path_style is True
    assert config.auth.cache_ttl_seconds == 45
    assert config.gateways.s3.domain_name == "s3.example.com"
    assert config.gateways.s3.listen_address == "0.0.0.0:9000"
    assert any(
        "LAKEFS_BLOCKSTORE_S3_ENDPOINT" in m and "SILT_BLOCKSTORE_S3_ENDPOINT_URL" in m for m in messages(caplog)
    )


def test_silt_variable_wins_over_lakefs_variable(caplog: pytest.LogCaptureFixture) -> None:
    env = {"LAKEFS_GATEWAYS_S3_REGION": "eu-west-1", "SILT_GATEWAYS_S3_REGION": "ap-south-1"}
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert load_config(env=env).gateways.s3.region == "ap-south-1"
    assert any("SILT_GATEWAYS_S3_REGION is used" in m for m in messages(caplog))


def test_a_lakefs_variable_overrides_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "gateways:\n  s3:\n    region: us-east-2\n")
    assert load_config(path, env={"LAKEFS_GATEWAYS_S3_REGION": "eu-west-1"}).gateways.s3.region == "eu-west-1"


def test_tls_in_the_file_is_silts_and_lakefs_tls_variables_are_the_gateways(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    text = 'listen_address: "0.0.0.0:8000"\ntls:\n  enabled: false\n'
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        load_config(write(tmp_path, text), env={})
    assert any("tls.enabled in" in m and "gateways.s3.tls.enabled" in m for m in messages(caplog))
    env = {
        "LAKEFS_TLS_ENABLED": "true",
        "LAKEFS_TLS_CERT_FILE": "/etc/lakefs/tls.crt",
        "LAKEFS_TLS_KEY_FILE": "/etc/lakefs/tls.key",
    }
    config = load_config(env=env)
    assert config.gateways.s3.tls.enabled is True
    assert config.gateways.s3.tls.cert_file == "/etc/lakefs/tls.crt"
    assert config.tls.enabled is False


def test_the_cli_reads_a_lakefs_file_leaving_other_sections_to_the_services(tmp_path: Path) -> None:
    # The CLI reads the gateway's address and region; what it does not read is not its to refuse.
    text = LAKEFS_CONFIG + "database:\n  postgres:\n    connection_string: postgres://db/lake\n"
    path = write(tmp_path, text.replace("database:\n  type: local\n", ""))
    client = load_client_config(path, env={"LAKEFS_GATEWAYS_S3_REGION": "eu-central-1"})
    assert client.gateways.s3.listen_address == "0.0.0.0:8000"
    assert client.gateways.s3.domain_name == "s3.lakefs.example.com"
    assert client.gateways.s3.region == "eu-central-1"
    assert client.auth.encrypt_secret_key is not None
    with pytest.raises(ConfigError, match=r"database\.postgres\.connection_string"):
        load_config(path, env={})


# --- refusals and what is ignored -------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "env", "expected"),
    [
        ("database:\n  type: postgres\n", {}, "database.type (in "),
        ("database:\n  type: dynamodb\n", {}, "dynamodb has no counterpart in Silt: its KV runs on Cassandra"),
        ("", {"LAKEFS_DATABASE_TYPE": "cosmosdb"}, "database.type (lakeFS's key, from LAKEFS_DATABASE_TYPE)"),
        ("database:\n  dynamodb:\n    table_name: kvstore\n", {}, "database.dynamodb.table_name (lakeFS's key, in "),
        ("blockstore:\n  type: mem\n", {}, "mem has no counterpart"),
        ("blockstore:\n  s3:\n    server_side_encryption: AES256\n", {}, "bucket's default encryption"),
        ("gateways:\n  s3:\n    fallback_url: https://s3.amazonaws.com\n", {}, "gateways.s3.fallback_url"),
        ("ui:\n  enabled: false\n", {}, "Silt serves its web UI wherever it serves the API"),
        ("logging:\n  output: ['-', /var/log/lakefs.log]\n", {}, "Silt logs to one place"),
        ("actions:\n  lua:\n    net_http_enabled: true\n", {}, "no `net/http` module"),
        ("graveler:\n  compaction_sensor_threshold: 0\n", {}, "compactor.sensor_enabled: false"),
        ("", {"LAKEFS_DATABASE_LOCAL_PATH": "/var/lib/lakefs"}, "one SQLite file"),
        ("", {"LAKEFS_AUTH_OIDC_DEFAULT_INITIAL_GROUPS": "Developers"}, "its own auth service only"),
    ],
)
def test_a_key_without_counterpart_is_refused_naming_it_and_why(
    tmp_path: Path, text: str, env: dict[str, str], expected: str
) -> None:
    message = refusal(tmp_path, text, env)
    assert "no counterpart in Silt" in message
    assert expected in message


def test_harmless_keys_are_logged_and_ignored(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    text = """
stats:
  enabled: false
  address: https://stats.lakefs.io
security:
  check_latest_version: false
ui:
  enabled: true
auth:
  remote_authenticator:
    enabled: false
graveler:
  repository_cache:
    size: 1000
"""
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        config = load_config(write(tmp_path, text), env={"LAKEFS_STATS_ENABLED": "false"})
    assert config.graveler.listen_address == "127.0.0.1:8102"  # the graveler section is still Silt's
    logged = messages(caplog)
    for key in (
        "stats.enabled",
        "stats.address",
        "security.check_latest_version",
        "ui.enabled",
        "auth.remote_authenticator.enabled",
        "graveler.repository_cache.size",
        "LAKEFS_STATS_ENABLED",
    ):
        assert any(key in m and "ignored" in m for m in logged), key


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("blockstore:\n  s3:\n    endpoit: http://typo\n", "blockstore.s3.endpoit"),  # in a Silt section
        ("stats:\n  enabled: false\n  enabeld: false\n", "stats.enabeld"),  # in a lakeFS-only section
        ("committed:\n  local_cache:\n    size: 1\n", "committed.local_cache.size"),
    ],
)
def test_a_key_neither_knows_is_refused_by_its_whole_name(tmp_path: Path, text: str, key: str) -> None:
    message = refusal(tmp_path, text)
    assert f"{key} (in " in message
    assert message.endswith("unknown key")


# --- secrets -------------------------------------------------------------------------------


def test_secrets_are_never_logged_nor_shown(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    secrets = ["enc-secret-7f3a9", "s3-secret-41c2", "sign-secret-88d0", "env-secret-90be", "pg-secret-5521"]
    text = f"""
auth:
  encrypt:
    secret_key: {secrets[0]}
blockstore:
  signing:
    secret_key: {secrets[2]}
  s3:
    credentials:
      secret_access_key: {secrets[1]}
"""
    env = {"LAKEFS_BLOCKSTORE_S3_CREDENTIALS_SESSION_TOKEN": secrets[3]}
    with caplog.at_level(logging.DEBUG):
        config = load_config(write(tmp_path, text), env=env)
        assert config.auth.encrypt_secret_key is not None
        assert config.auth.encrypt_secret_key.get_secret_value() == secrets[0]
        refused = [
            refusal(tmp_path, f"database:\n  postgres:\n    connection_string: postgres://u:{secrets[4]}@db/lake\n"),
            refusal(tmp_path, f"installation:\n  secret_access_key: {secrets[4]}\n"),
            refusal(tmp_path, "", {"LAKEFS_DATABASE_REDIS_PASSWORD": secrets[4]}),
        ]
    shown = "\n".join([record.getMessage() for record in caplog.records] + refused + [repr(config)])
    assert "auth.encrypt.secret_key" in shown and "installation.secret_access_key" in shown
    for secret in secrets:
        assert secret not in shown
