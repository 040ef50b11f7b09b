"""External principals' bounds: what auth accepts as a principal id and as its settings.

A principal id names an identity of another provider (`arn:aws:iam::123456789012:role/x`, an
OIDC subject), so it is not held to user ids' alphabet: any printable ASCII but spaces, up to
MAX_PRINCIPAL_ID characters, which keeps its resource (`external_principals/<id>`) within the
longest resource a decision is asked about. Settings are lakeFS's free-form string maps for
the provider; they are stored as given, within bounds far above any real use.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from silt.auth.v1 import model_pb2 as pb
from silt.errors import InvalidArgument

MAX_PRINCIPAL_ID = 512
MAX_SETTINGS_MAPS = 16
MAX_SETTINGS_ENTRIES = 32  # over all maps
MAX_SETTING_KEY = 128
MAX_SETTING_VALUE = 1024
# Principals linked to one user: a few roles per person in practice.
MAX_PRINCIPALS_PER_USER = 100

_PRINCIPAL_ID_RE = re.compile(rf"^[\x21-\x7e]{{1,{MAX_PRINCIPAL_ID}}}$")


def check_principal_id(value: str) -> str:
    if not _PRINCIPAL_ID_RE.match(value or ""):
        raise InvalidArgument(
            f"invalid external principal id {value[:64]!r}: 1 to {MAX_PRINCIPAL_ID} printable ASCII characters, "
            "no spaces"
        )
    return value


def check_settings(settings: Sequence[pb.PrincipalSettings]) -> None:
    if len(settings) > MAX_SETTINGS_MAPS:
        raise InvalidArgument(f"an external principal has at most {MAX_SETTINGS_MAPS} settings maps")
    entries = sum(len(one.values) for one in settings)
    if entries > MAX_SETTINGS_ENTRIES:
        raise InvalidArgument(f"an external principal's settings have at most {MAX_SETTINGS_ENTRIES} entries in all")
    for one in settings:
        for k, v in one.values.items():
            if not 1 <= len(k) <= MAX_SETTING_KEY:
                raise InvalidArgument(f"a setting's key is 1 to {MAX_SETTING_KEY} characters")
            if len(v) > MAX_SETTING_VALUE:
                raise InvalidArgument(f"setting {k[:64]!r}: a value is at most {MAX_SETTING_VALUE} characters")
