"""Session tokens of the REST API's login (`POST /auth/login`), issued and checked only here.

A token is `v2.<access key id>.<user id>.<epoch>.<expiry>.<mac>`: the MAC is HMAC-SHA256 under
a key derived (HKDF) from `auth.encrypt_secret_key`, which only auth holds, so no other service
can forge one, and tokens outlive a restart of auth. A token names the access key it was issued
for: deleting that key (or its user) ends every session it opened. There is no per-session
state: logout only drops the client's cookie, and a copied token stays valid until it expires
(`auth.session_ttl_seconds`) unless its user's sessions are revoked. The user record holds a
session epoch, and a token is valid only while it names the current one, so raising the epoch
(RevokeSessions, "sign out everywhere") ends every session of that user at the cost of nothing
more than the user read that verifying already does. `v1` tokens (before epochs) count as
epoch 0.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import time
from dataclasses import dataclass

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from pydantic import SecretStr

from silt.access_keys import is_access_key_id

_HKDF_INFO = b"silt/auth/session-tokens/hmac-sha256"
_VERSION = "v2"
_V1 = "v1"
# Tokens arrive in headers and cookies: anything longer is not one of ours.
MAX_TOKEN_LENGTH = 1024


@dataclass(frozen=True)
class Session:
    access_key_id: str
    user_id: str
    expires: int  # Unix seconds
    epoch: int = 0  # the user's session epoch when it was opened


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


class SessionTokens:
    """Issues and checks tokens; holds only the derived MAC key."""

    def __init__(self, key: bytes, ttl_seconds: float) -> None:
        self._key = key
        self.ttl_seconds = ttl_seconds

    @classmethod
    def from_encrypt_key(cls, encrypt_secret_key: SecretStr, ttl_seconds: float) -> SessionTokens:
        derive = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_HKDF_INFO)
        return cls(derive.derive(encrypt_secret_key.get_secret_value().encode()), ttl_seconds)

    @classmethod
    def ephemeral(cls, ttl_seconds: float = 3600.0) -> SessionTokens:
        """A random key: tokens die with the process (an auth server started without a key, in tests)."""
        return cls(os.urandom(32), ttl_seconds)

    def _mac(self, body: str) -> str:
        return _b64(hmac.new(self._key, body.encode(), hashlib.sha256).digest())

    def issue(self, access_key_id: str, user_id: str, now: float | None = None, epoch: int = 0) -> tuple[str, int]:
        expires = int((time.time() if now is None else now) + self.ttl_seconds)
        body = f"{_VERSION}.{access_key_id}.{_b64(user_id.encode())}.{epoch}.{expires}"
        return f"{body}.{self._mac(body)}", expires

    def check(self, token: str, now: float | None = None) -> Session | None:
        """The session of a token this auth issued and that has not expired; None otherwise."""
        if len(token) > MAX_TOKEN_LENGTH:
            return None
        body, _, mac = token.rpartition(".")
        parts = body.split(".")
        if parts[0] == _V1 and len(parts) == 4:
            parts.insert(3, "0")
        elif len(parts) != 5 or parts[0] != _VERSION:
            return None
        if not hmac.compare_digest(self._mac(body).encode(), mac.encode()):
            return None
        _, access_key_id, user_b64, epoch_text, expires_text = parts
        # Bounded: the epoch and expiry come from this auth, but int() of a long digit run is slow.
        if not (
            expires_text.isdigit()
            and epoch_text.isdigit()
            and len(epoch_text) <= 19
            and len(expires_text) <= 19
            and is_access_key_id(access_key_id)
        ):
            return None
        expires = int(expires_text)
        if expires <= (time.time() if now is None else now):
            return None
        user_id = base64.urlsafe_b64decode(user_b64 + "=" * (-len(user_b64) % 4)).decode()
        return Session(access_key_id, user_id, expires, int(epoch_text))


def secrets_match(expected: SecretStr, given: str) -> bool:
    """Constant time in the secret's content: a mismatch says nothing about where it differs."""
    return hmac.compare_digest(expected.get_secret_value().encode(), given.encode("utf-8", "surrogatepass"))
