"""Access keys shaped like AWS's; secrets sealed with AES-GCM under the configured key."""

from __future__ import annotations

import re

import pytest
from pydantic import SecretStr

from services.auth.secrets import SecretBox, check_access_key_id, new_access_key_id, new_secret
from silt.errors import ConfigError, FailedPrecondition, InvalidArgument

KEY = SecretStr("unit-test-encryption-key")


def test_shapes_s3_clients_accept() -> None:
    ids = {new_access_key_id() for _ in range(200)}
    secrets = {new_secret().get_secret_value() for _ in range(200)}
    assert len(ids) == 200 and len(secrets) == 200
    assert all(re.fullmatch(r"AKIA[A-Z2-7]{16}", i) for i in ids)
    assert all(re.fullmatch(r"[A-Za-z0-9+/]{40}", s) for s in secrets)
    for i in ids:
        assert check_access_key_id(i) == i
    with pytest.raises(InvalidArgument):
        check_access_key_id("akia-lower-case-0000")


def test_seal_and_open() -> None:
    box = SecretBox(KEY)
    secret = new_secret()
    sealed = box.seal("AKIAAAAAAAAAAAAAAAAA", secret)
    assert secret.get_secret_value().encode() not in sealed
    assert box.seal("AKIAAAAAAAAAAAAAAAAA", secret) != sealed, "a fresh nonce each time"
    assert box.open("AKIAAAAAAAAAAAAAAAAA", sealed) == secret
    assert SecretBox(SecretStr(KEY.get_secret_value())).open("AKIAAAAAAAAAAAAAAAAA", sealed) == secret


def test_tampering_other_keys_and_other_records_fail() -> None:
    box = SecretBox(KEY)
    sealed = box.seal("AKIAAAAAAAAAAAAAAAAA", new_secret())
    with pytest.raises(FailedPrecondition):
        SecretBox(SecretStr("a-different-key-entirely")).open("AKIAAAAAAAAAAAAAAAAA", sealed)
    with pytest.raises(FailedPrecondition):
        box.open("AKIABBBBBBBBBBBBBBBB", sealed)  # moved to another key's record
    flipped = sealed[:-1] + bytes([sealed[-1] ^ 1])
    with pytest.raises(FailedPrecondition):
        box.open("AKIAAAAAAAAAAAAAAAAA", flipped)
    with pytest.raises(FailedPrecondition):
        box.open("AKIAAAAAAAAAAAAAAAAA", b"short")


def test_the_encryption_key_is_required_and_not_trivial() -> None:
    with pytest.raises(ConfigError, match="must be set"):
        SecretBox(None)
    with pytest.raises(ConfigError, match="at least 16"):
        SecretBox(SecretStr("short"))
    assert KEY.get_secret_value() not in repr(SecretBox(KEY))
