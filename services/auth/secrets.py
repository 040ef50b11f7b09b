"""Access keys shaped like AWS's, and their secrets encrypted at rest.

S3 clients check the shape of credentials before sending anything: a 20-character
upper-case access key id and a 40-character secret from the base64 alphabet, as AWS issues.
Secrets are sealed with AES-256-GCM under a key derived (HKDF-SHA256) from
``auth.encrypt_secret_key``, with the access key id as associated data. Secrets travel as
pydantic ``SecretStr`` so that no repr, log line or exception shows them.
"""

from __future__ import annotations

import os
import re
import secrets
import string

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from pydantic import SecretStr

from silt.errors import ConfigError, FailedPrecondition, InvalidArgument

ACCESS_KEY_ID_PREFIX = "AKIA"
ACCESS_KEY_ID_LENGTH = 20
SECRET_LENGTH = 40
# Base32's alphabet (A-Z, 2-7), as AWS's own key ids use.
_KEY_ID_ALPHABET = string.ascii_uppercase + "234567"
_SECRET_ALPHABET = string.ascii_letters + string.digits + "+/"
_ACCESS_KEY_ID_RE = re.compile(r"^[A-Z0-9]{20}$")
_NONCE_BYTES = 12
MIN_ENCRYPT_KEY_CHARS = 16
# Changing it makes every stored secret undecryptable: it names the derivation, not a version.
_HKDF_INFO = b"silt/auth/credential-secrets/aes-256-gcm"


def new_access_key_id() -> str:
    tail = ACCESS_KEY_ID_LENGTH - len(ACCESS_KEY_ID_PREFIX)
    return ACCESS_KEY_ID_PREFIX + "".join(secrets.choice(_KEY_ID_ALPHABET) for _ in range(tail))


def new_secret() -> SecretStr:
    return SecretStr("".join(secrets.choice(_SECRET_ALPHABET) for _ in range(SECRET_LENGTH)))


def check_access_key_id(access_key_id: str) -> str:
    if not _ACCESS_KEY_ID_RE.match(access_key_id or ""):
        raise InvalidArgument(f"invalid access key id {access_key_id[:32]!r}: 20 upper-case letters and digits")
    return access_key_id


class SecretBox:
    """Seals and opens credential secrets; holds only the derived cipher, never the passphrase."""

    def __init__(self, encrypt_secret_key: SecretStr | None) -> None:
        if encrypt_secret_key is None or not encrypt_secret_key.get_secret_value():
            raise ConfigError("auth.encrypt_secret_key must be set: it encrypts credential secrets at rest")
        if len(encrypt_secret_key.get_secret_value()) < MIN_ENCRYPT_KEY_CHARS:
            raise ConfigError(f"auth.encrypt_secret_key must be at least {MIN_ENCRYPT_KEY_CHARS} characters long")
        derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_HKDF_INFO).derive(
            encrypt_secret_key.get_secret_value().encode()
        )
        self._aead = AESGCM(derived)

    def seal(self, access_key_id: str, secret: SecretStr) -> bytes:
        nonce = os.urandom(_NONCE_BYTES)
        return nonce + self._aead.encrypt(nonce, secret.get_secret_value().encode(), access_key_id.encode())

    def open(self, access_key_id: str, sealed: bytes) -> SecretStr:
        try:
            plain = self._aead.decrypt(sealed[:_NONCE_BYTES], sealed[_NONCE_BYTES:], access_key_id.encode())
        except (InvalidTag, ValueError):
            raise FailedPrecondition(
                f"cannot decrypt the secret of access key {access_key_id}: "
                "auth.encrypt_secret_key differs from the key it was stored with"
            ) from None
        return SecretStr(plain.decode())

    def __repr__(self) -> str:
        return "SecretBox(<key hidden>)"
