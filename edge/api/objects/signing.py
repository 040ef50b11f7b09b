"""The edge's signing key: what the REST API hands out and later takes back unchanged (the local
blockstore's presigned URLs, getPhysicalAddress's addresses) carries an HMAC made with it.

Where the key lives (docs/clients/lakefs.md, "Presigned URLs and the staging API"): nowhere of
its own. It is derived from the secret the API already signs its calls to graveler and auth with
(`api.credentials.secret_access_key`, else `credentials.secret_access_key`), so every edge process
and API replica of one installation holds the same key with no file or setting to share, it is as
well kept as that secret (never logged, never sent), and rotating svc-api's credentials rotates it
(what was signed before then is refused). Each use has its own key, derived from this one, so a
signature made for one purpose never passes as another.
"""

from __future__ import annotations

import hashlib
import hmac

from edge.api.backend import service_credentials
from silt.config import Config

_KEY_LABEL = b"silt edge signing key v1"


def edge_signing_key(config: Config) -> bytes:
    secret = service_credentials(config).secret_access_key.get_secret_value()
    return hmac.new(secret.encode("utf-8", "surrogatepass"), _KEY_LABEL, hashlib.sha256).digest()


def purpose_key(key: bytes, purpose: str) -> bytes:
    """The key for one use of the edge's key ("presigned-url", "link-address")."""
    return hmac.new(key, purpose.encode("ascii"), hashlib.sha256).digest()


def mac(key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, hashlib.sha256).digest()
