"""Journal batch integrity: an HMAC-SHA256 the services compute with a key only they hold.

Whoever may write the storage namespace may write a batch there; rebuild replays batches into
the KV raw, so a batch it accepts must be one a shipper wrote. The MAC of a batch is over its
object key and its bytes (a signed batch moved to another hour or name does not verify), and
is stored next to it as ``_<batch id>.parquet.hmac``: the leading underscore keeps it out of the
batch listing and out of Spark's reads of the folder.
"""

from __future__ import annotations

import hashlib
import hmac

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from silt.config import Config

MAC_SUFFIX = ".hmac"
_DOMAIN = b"silt.journal.v1.batch\x00"
_HKDF_INFO = b"silt journal batch hmac v1"
MIN_KEY_BYTES = 16


def mac_key_of(batch_key: str) -> str:
    """The object key of a batch's MAC."""
    folder, _, name = batch_key.rpartition("/")
    return f"{folder}/_{name}{MAC_SUFFIX}" if folder else f"_{name}{MAC_SUFFIX}"


def signer(key: bytes, batch_key: str) -> hmac.HMAC:
    """The MAC of a batch, to be fed its bytes (as they are read)."""
    return hmac.new(key, _DOMAIN + batch_key.encode() + b"\x00", hashlib.sha256)


def sign(key: bytes, batch_key: str, data: bytes) -> bytes:
    digest = signer(key, batch_key)
    digest.update(data)
    return digest.hexdigest().encode()


def matches(digest: hmac.HMAC, mac: bytes) -> bool:
    return hmac.compare_digest(digest.hexdigest().encode(), mac.strip())


def journal_key(config: Config) -> bytes | None:
    """The services' journal MAC key: graveler.journal.hmac_key, else one derived (HKDF-SHA256)
    from auth.encrypt_secret_key so an install that has the one needs no new secret; None if
    neither is set."""
    configured = config.graveler.journal.hmac_key
    if configured is not None:
        return configured.get_secret_value().encode()
    secret = config.auth.encrypt_secret_key
    if secret is None:
        return None
    hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_HKDF_INFO)
    return hkdf.derive(secret.get_secret_value().encode())
