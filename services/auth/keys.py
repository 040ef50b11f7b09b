"""The IAM key schema in the `auth` KV partition (docs/design/kv.md, "Key schema").

    iam/users/<user>                          User
    iam/groups/<group>                        Group
    iam/policies/<policy>                     Policy
    iam/user_groups/<user>/<group>            Membership
    iam/user_policies/<user>/<policy>         Attachment
    iam/group_policies/<group>/<policy>       Attachment
    iam/credentials/<access key id>           Credential (secret encrypted)
    iam/user_credentials/<user>/<key id>      UserCredential
    iam/external_principals/<principal id>    ExternalPrincipal
    iam/user_external_principals/<user>/<principal id>   UserExternalPrincipal
    iam/setup                                 SetupRecord

User, group and policy ids never contain `/`, so every relation of one entity is one contiguous
prefix. External principal ids may (`arn:aws:iam::123:role/x`): they only ever end a key, and
the index records carry them whole, so nothing splits them. Reverse
lookups (a group's members, a policy's attachments) scan and filter: the IAM keyspace is
small (thousands of ids, not millions), and one index per relation keeps writes single-key.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from silt.errors import InvalidArgument
from silt.kv.store import Entry, Store, scan_prefix

PARTITION = b"auth"

_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@+=-]{0,127}$")


def check_id(kind: str, value: str) -> str:
    if not _ID_RE.match(value or ""):
        raise InvalidArgument(
            f"invalid {kind} id {value[:64]!r}: 1 to 128 letters, digits and _.@+=-, starting with a letter or digit"
        )
    return value


def key(*parts: str) -> bytes:
    return "/".join(("iam", *parts)).encode()


def prefix(*parts: str) -> bytes:
    return key(*parts) + b"/"


USERS = prefix("users")
GROUPS = prefix("groups")
POLICIES = prefix("policies")
USER_GROUPS = prefix("user_groups")
USER_POLICIES = prefix("user_policies")
GROUP_POLICIES = prefix("group_policies")
CREDENTIALS = prefix("credentials")
USER_CREDENTIALS = prefix("user_credentials")
EXTERNAL_PRINCIPALS = prefix("external_principals")
USER_EXTERNAL_PRINCIPALS = prefix("user_external_principals")
SETUP = key("setup")
# Written by a setup that issued the service users' keys but left the admin to the REST API
# (--defer-admin): a later setup run must not issue those keys again.
SERVICES_SETUP = key("setup_services")


def last_part(entry_key: bytes) -> str:
    return entry_key.rsplit(b"/", 1)[1].decode()


def scan_after(store: Store, partition: bytes, under: bytes, after: str) -> Iterator[Entry]:
    """Entries whose key starts with `under`, strictly after the id `after` (last path element)."""
    start = under + after.encode() + b"\x00" if after else under
    for entry in store.scan(partition, start):
        if not entry.key.startswith(under):
            return
        yield entry


def scan_relations_after(store: Store, partition: bytes, under: bytes, after: str) -> Iterator[Entry]:
    """Two-level keys `under<first>/<second>`: entries after every key of first id `after`.

    `0` is the byte after `/`, so `under + after + "0"` is the smallest key beyond all of
    `under + after + "/..."`.
    """
    start = under + after.encode() + b"0" if after else under
    for entry in store.scan(partition, start):
        if not entry.key.startswith(under):
            return
        yield entry


def scan_all(store: Store, partition: bytes, under: bytes) -> Iterator[Entry]:
    return scan_prefix(store, partition, under)
