"""Access keys shaped like AWS's; secrets sealed with AES-GCM under the configured key."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import SecretStr

from services.auth.secrets import SecretBox, new_access_key_id, new_secret
from silt.access_keys import check_access_key_id
from silt.errors import ConfigError, FailedPrecondition, InvalidArgument
from silt.launcher import Stack

KEY = SecretStr("uk6YKhHOADCnfgXyj3u/u6rNVni5ZyffU0ubSHfHXJ0=")  # `openssl rand -base64 32`
OTHER_KEY = SecretStr("HQg+1A96j3CSJzyOeWVoVlMl+ODbGmjKAyOtOOeEvLw=")
ACCESS_KEY_ID = "AKIAAAAAAAAAAAAAAAAA"
SECRET = SecretStr("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
# Sealed by the release before key formats were enforced (HKDF over the key's text), under a
# strong key and under a passphrase: what existing deployments have stored.
SEALED_BEFORE_UNDER_STRONG_KEY = bytes.fromhex(
    "b5705b4d9dcd8e9f27e56393f87af808bf664be4397fe79690e48c8cfee718a3f86acded6d8c719466e47001596786b7941e277c1d44d49307b6cb0c33959ea1e8e04630"
)
STRONG_KEY_BEFORE = SecretStr("h-Ha9f77tfRzLv484y7UIHGuADgj68xfXqzGMjS3srM")  # `silt run`'s secret.key
SEALED_BEFORE_UNDER_PASSPHRASE = bytes.fromhex(
    "9303e22d12a54f875795f955d2f3c3ef83efd8a562820b183bb8691d7cecb561527ba9acd5eef223860c5cec4837cb591b68858fe56168feb244cdbdb9c1df476ed81224"
)
PASSPHRASE_BEFORE = SecretStr("a-passphrase-of-old")


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
        SecretBox(OTHER_KEY).open("AKIAAAAAAAAAAAAAAAAA", sealed)
    with pytest.raises(FailedPrecondition):
        box.open("AKIABBBBBBBBBBBBBBBB", sealed)  # moved to another key's record
    flipped = sealed[:-1] + bytes([sealed[-1] ^ 1])
    with pytest.raises(FailedPrecondition):
        box.open("AKIAAAAAAAAAAAAAAAAA", flipped)
    with pytest.raises(FailedPrecondition):
        box.open("AKIAAAAAAAAAAAAAAAAA", b"short")


def test_the_encryption_key_is_required() -> None:
    with pytest.raises(ConfigError, match="must be set"):
        SecretBox(None)
    with pytest.raises(ConfigError, match="must be set"):
        SecretBox(SecretStr(""))
    assert KEY.get_secret_value() not in repr(SecretBox(KEY))


@pytest.mark.parametrize(
    "weak",
    [
        "0123456789abcdef",  # 16 characters: what was enough before
        "correct-horse-battery-staple-and-more-words",  # a long passphrase
        "dev-only-encryption-key-change-me",  # the dev overlay's old value
        "A" * 44,  # base64 of 32 bytes, all the same
        "00" * 32,  # hex of 32 zero bytes
        "0123456789abcdef0123456789abcdef",  # hex of 16 bytes: too short
        "uk6YKhHOADCnfgXyj3u/u6rNVni5ZyffU0ubSHfHXA==",  # base64 of 31 bytes
        "uk6YKhHOADCnfgXyj3u/u6rNVni5ZyffU0ubSHfHXJ0=!",  # not base64
    ],
)
def test_a_weak_encryption_key_is_refused_naming_the_key(weak: str) -> None:
    with pytest.raises(ConfigError) as err:
        SecretBox(SecretStr(weak))
    message = str(err.value)
    assert "auth.encrypt_secret_key" in message and "openssl rand -base64 32" in message
    assert weak not in message, "the refused key is a secret too"


@pytest.mark.parametrize(
    "strong",
    [
        KEY.get_secret_value(),  # `openssl rand -base64 32`: standard base64, padded
        "uk6YKhHOADCnfgXyj3u/u6rNVni5ZyffU0ubSHfHXJ0",  # unpadded
        STRONG_KEY_BEFORE.get_secret_value(),  # secrets.token_urlsafe(32): URL-safe base64
        "b9a1ee22d36b0a5ff1e4b3bf36c0e3a7d7be8a6a60e8c1df4a3ba5b5a22e3d91",  # `openssl rand -hex 32`
        "uk6YKhHOADCnfgXyj3u/u6rNVni5ZyffU0ubSHfHXJ0=\n",  # read from a file, newline and all
    ],
)
def test_random_key_material_is_accepted(strong: str) -> None:
    box = SecretBox(SecretStr(strong))
    assert box.open(ACCESS_KEY_ID, box.seal(ACCESS_KEY_ID, SECRET)) == SECRET


def test_secrets_stored_before_stay_readable() -> None:
    # A strong key from before needs nothing: the derivation is unchanged.
    assert SecretBox(STRONG_KEY_BEFORE).open(ACCESS_KEY_ID, SEALED_BEFORE_UNDER_STRONG_KEY) == SECRET
    # Under a passphrase: auth refuses to start with it, and `rekey` opens them with it once.
    with pytest.raises(ConfigError):
        SecretBox(PASSPHRASE_BEFORE)
    assert SecretBox.previous(PASSPHRASE_BEFORE).open(ACCESS_KEY_ID, SEALED_BEFORE_UNDER_PASSPHRASE) == SECRET


def test_make_run_generates_a_strong_key(tmp_path: Path) -> None:
    stack = Stack(tmp_path)
    key = stack._encrypt_key()
    SecretBox(SecretStr(key))
    assert stack._encrypt_key() == key, "kept: the secrets sealed under it stay readable"
    assert (tmp_path / "secret.key").stat().st_mode & 0o777 == 0o600
