"""Access keys shaped like AWS's, and their secrets encrypted at rest.

S3 clients check the shape of credentials before sending anything: a 20-character
upper-case access key id and a 40-character secret from the base64 alphabet, as AWS issues.
Secrets are sealed with AES-256-GCM under a key derived (HKDF-SHA256) from
``auth.encrypt_secret_key``, with the access key id as associated data. Secrets travel as
pydantic ``SecretStr`` so that no repr, log line or exception shows them.

``auth.encrypt_secret_key`` is 32 or more random bytes written as base64 (standard or
URL-safe, padding optional) or hex, as ``openssl rand -base64 32`` and ``silt run`` make it.
HKDF does not stretch its input, so a passphrase would be only as strong as a guess at it:
anything else is refused when auth starts (``services.auth.rekey`` moves secrets sealed under
such a key to a new one).
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import secrets
import string

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from pydantic import SecretStr

from silt.access_keys import ACCESS_KEY_ID_LENGTH
from silt.errors import ConfigError, FailedPrecondition

ACCESS_KEY_ID_PREFIX = "AKIA"
SECRET_LENGTH = 40
# Base32's alphabet (A-Z, 2-7), as AWS's own key ids use.
_KEY_ID_ALPHABET = string.ascii_uppercase + "234567"
_SECRET_ALPHABET = string.ascii_letters + string.digits + "+/"
_NONCE_BYTES = 12
MIN_ENCRYPT_KEY_BYTES = 32
# 32 random bytes hold about 30 distinct values; a placeholder (AAAA..., 0000...) holds a few.
_MIN_DISTINCT_KEY_BYTES = 16
# The 43 characters of 32 random bytes in base64 use about 31 of its 64 symbols; fewer than 20
# happens once in 50 million keys, and in most passphrases.
_MIN_DISTINCT_BASE64_SYMBOLS = 20
_HEX_RE = re.compile(r"(?:[0-9a-fA-F]{2})+")
_BASE64_RE = re.compile(r"[A-Za-z0-9+/_-]+={0,2}")
GENERATE_KEY = "openssl rand -base64 32"
# Changing it makes every stored secret undecryptable: it names the derivation, not a version.
_HKDF_INFO = b"silt/auth/credential-secrets/aes-256-gcm"


def new_access_key_id() -> str:
    tail = ACCESS_KEY_ID_LENGTH - len(ACCESS_KEY_ID_PREFIX)
    return ACCESS_KEY_ID_PREFIX + "".join(secrets.choice(_KEY_ID_ALPHABET) for _ in range(tail))


def new_secret() -> SecretStr:
    return SecretStr("".join(secrets.choice(_SECRET_ALPHABET) for _ in range(SECRET_LENGTH)))


def _random_enough(raw: bytes) -> bool:
    return len(raw) >= MIN_ENCRYPT_KEY_BYTES and len(set(raw)) >= _MIN_DISTINCT_KEY_BYTES


def is_strong_key(encoded: str) -> bool:
    """Whether encoded reads as 32 or more random bytes, in hex or in base64.

    A format check, not a proof of randomness: it refuses what people type instead of a key
    (passphrases, placeholders such as AAAA... or 0000...). Words and hyphens happen to be
    URL-safe base64, so base64 text must also use as many of its symbols as random text does.
    """
    text = encoded.strip()
    if _HEX_RE.fullmatch(text) and _random_enough(bytes.fromhex(text)):
        return True
    if not _BASE64_RE.fullmatch(text):
        return False
    unpadded = text.rstrip("=")
    if len(set(unpadded)) < _MIN_DISTINCT_BASE64_SYMBOLS:
        return False
    standard = unpadded.replace("-", "+").replace("_", "/")
    try:
        raw = base64.b64decode(standard + "=" * (-len(standard) % 4), validate=True)
    except binascii.Error:  # a length no base64 text has
        return False
    return _random_enough(raw)


def check_encrypt_key(encrypt_secret_key: SecretStr | None) -> str:
    """The configured key, if it is strong enough; ConfigError naming the key otherwise."""
    if encrypt_secret_key is None or not encrypt_secret_key.get_secret_value():
        raise ConfigError("auth.encrypt_secret_key must be set: it encrypts credential secrets at rest")
    if not is_strong_key(encrypt_secret_key.get_secret_value()):
        raise ConfigError(
            f"auth.encrypt_secret_key (SILT_AUTH_ENCRYPT_SECRET_KEY) is not a strong key: it must be "
            f"{MIN_ENCRYPT_KEY_BYTES} or more random bytes written as base64 or hex (`{GENERATE_KEY}`), "
            "not a passphrase; to move existing secrets to a new key, see `python -m services.auth.rekey --help`"
        )
    return encrypt_secret_key.get_secret_value()


def _cipher(key: str) -> AESGCM:
    # The key's text, not its decoded bytes, goes into HKDF: secrets sealed before the format
    # was enforced stay readable, and the text of 32 random bytes carries all 256 bits.
    return AESGCM(HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_HKDF_INFO).derive(key.encode()))


class SecretBox:
    """Seals and opens credential secrets; holds only the derived cipher, never the key."""

    def __init__(self, encrypt_secret_key: SecretStr | None) -> None:
        self._aead = _cipher(check_encrypt_key(encrypt_secret_key))

    @classmethod
    def previous(cls, encrypt_secret_key: SecretStr) -> SecretBox:
        """A box under a key of any form, weak ones included: only for opening secrets sealed
        under it before moving them to a strong key (services.auth.rekey)."""
        box = cls.__new__(cls)
        box._aead = _cipher(encrypt_secret_key.get_secret_value())
        return box

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
