"""The shape of an access key id, checked before anything looks a key up or caches an answer.

Auth issues ids shaped like AWS's (services/auth/secrets.py): 20 upper-case letters and
digits. A request names its key id itself, so every verifier (the gRPC interceptor, the S3
gateway, auth) refuses any other shape first: a made-up id of any length then costs no
lookup, no call to auth and no cache entry.
"""

from __future__ import annotations

import re

from silt.errors import InvalidArgument

ACCESS_KEY_ID_LENGTH = 20
# fullmatch, not `^...$`: `$` also matches before a trailing newline.
_ACCESS_KEY_ID_RE = re.compile(r"[A-Z0-9]{20}")


def is_access_key_id(value: str) -> bool:
    return len(value) == ACCESS_KEY_ID_LENGTH and _ACCESS_KEY_ID_RE.fullmatch(value) is not None


def check_access_key_id(value: str) -> str:
    """value, if it has the shape of an issued access key id; InvalidArgument otherwise."""
    if not is_access_key_id(value or ""):
        raise InvalidArgument(f"invalid access key id {value[:32]!r}: 20 upper-case letters and digits")
    return value
