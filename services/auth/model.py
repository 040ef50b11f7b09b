"""Users, groups, policies and credentials on the KV store (key schema in keys.py).

Consistency without transactions (docs/design/auth.md):

* an entity's relations (memberships, attachments, credentials) are removed before the
  entity, and a credential's own record (what grants access) before its index entry, so an
  interrupted delete never leaves a grant pointing at nothing;
* a relation is written only after both ends were seen, and both are re-read after the
  write; if one vanished meanwhile the relation is removed again;
* creating an entity first sweeps relations left under its id by an earlier entity of the
  same name, so a re-created user never inherits the old one's groups or keys.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple, TypeVar

from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp
from pydantic import SecretStr

from services.auth import keys
from services.auth.keys import check_id, key, last_part, prefix
from services.auth.policies import check_statements
from services.auth.principals import MAX_PRINCIPALS_PER_USER, check_principal_id, check_settings
from services.auth.secrets import SecretBox, new_access_key_id, new_secret
from silt.access_keys import check_access_key_id
from silt.auth.v1 import model_pb2 as pb
from silt.errors import (
    Aborted,
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    NotFoundKind,
    PredicateFailed,
)
from silt.kv.conditional import delete_current
from silt.kv.store import Predicate, Store
from silt.paging import take_page

_M = TypeVar("_M", bound=Message)
# Tries of one compare-and-set (a user record, a principal link) before giving up (Aborted).
_CAS_ATTEMPTS = 20
# How old a claim of the first admin (create_first_admin) must be for another user to take it over.
CLAIM_SECONDS = 60.0


class IssuedCredential(NamedTuple):
    credential: pb.Credential
    secret: SecretStr


class KeyOwner(NamedTuple):
    """Who holds an access key, and its secret: never leaves the auth service (services
    get signing keys derived from it, services/auth/signatures.py)."""

    user_id: str
    secret: SecretStr


def _now() -> Timestamp:
    stamp = Timestamp()
    stamp.GetCurrentTime()
    return stamp


def _without_secret(credential: pb.Credential) -> pb.Credential:
    return pb.Credential(
        access_key_id=credential.access_key_id, user_id=credential.user_id, creation_date=credential.creation_date
    )


# The kind of entity stored under a key's collection, for NotFound.what. Relations
# (user_groups, attachments) are not entities: a missing one names no kind.
_KIND_OF: dict[bytes, NotFoundKind] = {
    b"users": "user",
    b"groups": "group",
    b"policies": "policy",
    b"credentials": "credential",
}


def _kind(entity_key: bytes) -> NotFoundKind | None:
    parts = entity_key.split(b"/", 2)
    return _KIND_OF.get(parts[1]) if len(parts) > 2 else None


class IamModel:
    def __init__(self, store: Store, box: SecretBox, partition: bytes = keys.PARTITION) -> None:
        self.kv = store
        self.box = box
        self.partition = partition

    # --- primitives ---------------------------------------------------------------------

    def _get(self, k: bytes, cls: type[_M], what: str) -> _M:
        try:
            value, _ = self.kv.get(self.partition, k)
        except NotFound:
            raise NotFound(f"{what} not found", what=_kind(k)) from None
        return cls.FromString(value)

    def _exists(self, k: bytes) -> bool:
        try:
            self.kv.get(self.partition, k)
        except NotFound:
            return False
        return True

    def _create(self, k: bytes, message: Message, what: str) -> None:
        try:
            self.kv.set_if(self.partition, k, message.SerializeToString(), None)
        except PredicateFailed:
            raise AlreadyExists(f"{what} already exists") from None

    def _delete_all(self, entry_keys: Iterable[bytes]) -> None:
        # Materialized first: deleting under a live scan is not something every driver promises.
        for k in list(entry_keys):
            self.kv.delete(self.partition, k)

    def _scan(self, under: bytes) -> Iterator[tuple[bytes, bytes]]:
        for entry in keys.scan_all(self.kv, self.partition, under):
            yield entry.key, entry.value

    def _relate(self, k: bytes, message: Message, ends: Iterable[tuple[bytes, str]]) -> None:
        ends = list(ends)
        for end, what in ends:
            if not self._exists(end):
                raise NotFound(f"{what} not found", what=_kind(end))
        self.kv.set(self.partition, k, message.SerializeToString())
        for end, what in ends:
            if not self._exists(end):
                self.kv.delete(self.partition, k)
                raise NotFound(f"{what} not found", what=_kind(end))

    def _unrelate(self, k: bytes, what: str) -> None:
        if not self._exists(k):
            raise NotFound(f"{what} not found")
        self.kv.delete(self.partition, k)

    def _create_entity(
        self, kind: str, collection: str, entity_id: str, record: _M, remove_relations: Callable[[str], None]
    ) -> _M:
        """Store a new user, group or policy, first sweeping relations an earlier one of its id left."""
        entity_key = key(collection, entity_id)
        if self._exists(entity_key):
            raise AlreadyExists(f"{kind} {entity_id!r} already exists")
        remove_relations(entity_id)
        self._create(entity_key, record, f"{kind} {entity_id!r}")
        return record

    def _delete_entity(
        self, collection: str, entity_id: str, get: Callable[[str], Message], remove_relations: Callable[[str], None]
    ) -> None:
        """Delete a user, group or policy (NotFound if there is none), its relations first."""
        get(entity_id)
        remove_relations(entity_id)
        # Entities are created (and policies updated) by compare-and-set, so deleted by one.
        delete_current(self.kv, self.partition, key(collection, entity_id))

    def _entity_page(self, under: bytes, cls: type[_M], after: str, amount: int) -> tuple[list[_M], bool]:
        """A page of the records stored under a collection, after the id `after`."""
        entries = keys.scan_after(self.kv, self.partition, under, after)
        return take_page((cls.FromString(e.value) for e in entries), amount)

    def _related_page(
        self, under: bytes, after: str, amount: int, collection: str, cls: type[_M]
    ) -> tuple[list[_M], bool]:
        """A page of the records a relation prefix names by the last part of its keys."""
        entries = keys.scan_after(self.kv, self.partition, under, after)
        ids, more = take_page((last_part(e.key) for e in entries), amount)
        return self._records(ids, collection, cls), more

    def _records(self, ids: Iterable[str], collection: str, cls: type[_M]) -> list[_M]:
        """The records of ids that still exist (relations may outlive a concurrent delete briefly)."""
        out: list[_M] = []
        for entity_id in ids:
            try:
                out.append(self._get(key(collection, entity_id), cls, collection))
            except NotFound:
                continue
        return out

    # --- users --------------------------------------------------------------------------

    def create_user(self, user_id: str, description: str = "") -> pb.User:
        check_id("user", user_id)
        user = pb.User(id=user_id, creation_date=_now(), description=description)
        return self._create_entity("user", "users", user_id, user, self._remove_user_relations)

    def get_user(self, user_id: str) -> pb.User:
        return self._get(key("users", check_id("user", user_id)), pb.User, f"user {user_id!r}")

    def list_users(self, after: str = "", amount: int = 0) -> tuple[list[pb.User], bool]:
        return self._entity_page(keys.USERS, pb.User, after, amount)

    def delete_user(self, user_id: str) -> None:
        self._delete_entity("users", user_id, self.get_user, self._remove_user_relations)

    def revoke_sessions(self, user_id: str) -> int:
        """Raise the user's session epoch (every session opened before ends); the new epoch.

        Compare-and-set on the user record, so a concurrent delete or re-creation is never
        overwritten with the old record; retried while other writers get in between."""
        k = key("users", check_id("user", user_id))
        for _ in range(_CAS_ATTEMPTS):
            try:
                value, predicate = self.kv.get(self.partition, k)
            except NotFound:
                raise NotFound(f"user {user_id!r} not found", what="user") from None
            user = pb.User.FromString(value)
            user.session_epoch += 1
            try:
                self.kv.set_if(self.partition, k, user.SerializeToString(), predicate)
            except PredicateFailed:
                continue
            return user.session_epoch
        raise Aborted(f"user {user_id!r} kept changing; try again")

    def _remove_user_relations(self, user_id: str) -> None:
        for index_key, _ in list(self._scan(prefix("user_credentials", user_id))):
            delete_current(self.kv, self.partition, key("credentials", last_part(index_key)))
            self.kv.delete(self.partition, index_key)
        self._delete_all(k for k, _ in self._scan(prefix("user_groups", user_id)))
        self._delete_all(k for k, _ in self._scan(prefix("user_policies", user_id)))
        for _, value in list(self._scan(prefix("user_external_principals", user_id))):
            self._unlink_principal(user_id, pb.UserExternalPrincipal.FromString(value).principal_id)

    # --- groups -------------------------------------------------------------------------

    def create_group(self, group_id: str, description: str = "") -> pb.Group:
        check_id("group", group_id)
        group = pb.Group(id=group_id, creation_date=_now(), description=description)
        return self._create_entity("group", "groups", group_id, group, self._remove_group_relations)

    def get_group(self, group_id: str) -> pb.Group:
        return self._get(key("groups", check_id("group", group_id)), pb.Group, f"group {group_id!r}")

    def list_groups(self, after: str = "", amount: int = 0) -> tuple[list[pb.Group], bool]:
        return self._entity_page(keys.GROUPS, pb.Group, after, amount)

    def delete_group(self, group_id: str) -> None:
        self._delete_entity("groups", group_id, self.get_group, self._remove_group_relations)

    def _remove_group_relations(self, group_id: str) -> None:
        self._delete_all(k for k, _ in self._scan(prefix("group_policies", group_id)))
        self._delete_all(k for k, v in self._scan(keys.USER_GROUPS) if pb.Membership.FromString(v).group_id == group_id)

    def add_member(self, group_id: str, user_id: str) -> None:
        check_id("group", group_id)
        check_id("user", user_id)
        self._relate(
            key("user_groups", user_id, group_id),
            pb.Membership(user_id=user_id, group_id=group_id),
            [(key("users", user_id), f"user {user_id!r}"), (key("groups", group_id), f"group {group_id!r}")],
        )

    def remove_member(self, group_id: str, user_id: str) -> None:
        check_id("group", group_id)
        check_id("user", user_id)
        self._unrelate(key("user_groups", user_id, group_id), f"user {user_id!r} in group {group_id!r}")

    def list_members(self, group_id: str, after: str = "", amount: int = 0) -> tuple[list[pb.User], bool]:
        self.get_group(group_id)
        entries = keys.scan_relations_after(self.kv, self.partition, keys.USER_GROUPS, after)
        members = (m.user_id for m in (pb.Membership.FromString(e.value) for e in entries) if m.group_id == group_id)
        ids, more = take_page(members, amount)
        return self._records(ids, "users", pb.User), more

    def group_ids_of(self, user_id: str) -> list[str]:
        return [last_part(k) for k, _ in self._scan(prefix("user_groups", check_id("user", user_id)))]

    def list_user_groups(self, user_id: str, after: str = "", amount: int = 0) -> tuple[list[pb.Group], bool]:
        self.get_user(user_id)
        return self._related_page(prefix("user_groups", user_id), after, amount, "groups", pb.Group)

    # --- policies -----------------------------------------------------------------------

    def create_policy(self, policy_id: str, statements: Iterable[pb.Statement], description: str = "") -> pb.Policy:
        check_id("policy", policy_id)
        statements = list(statements)
        check_statements(statements)
        policy = pb.Policy(id=policy_id, creation_date=_now(), description=description, statements=statements)
        return self._create_entity("policy", "policies", policy_id, policy, self._remove_policy_relations)

    def put_preset_policy(self, policy_id: str, statements: Iterable[pb.Statement], description: str = "") -> bool:
        """Create the policy, or rewrite its statements and description to these; True if written.

        For setup's presets only: Silt owns them, so an upgrade can change what they hold. The
        record keeps its creation date and its attachments (it is the same policy).
        """
        check_id("policy", policy_id)
        statements = list(statements)
        check_statements(statements)
        k = key("policies", policy_id)
        try:
            value, predicate = self.kv.get(self.partition, k)
        except NotFound:
            self.create_policy(policy_id, statements, description)
            return True
        current = pb.Policy.FromString(value)
        if list(current.statements) == statements and current.description == description:
            return False
        updated = pb.Policy(
            id=policy_id, creation_date=current.creation_date, description=description, statements=statements
        )
        self.kv.set_if(self.partition, k, updated.SerializeToString(), predicate)
        return True

    def read_policy(self, policy_id: str) -> tuple[pb.Policy, Predicate]:
        """The policy and its KV version, for a change decided on what was read (update_policy)."""
        check_id("policy", policy_id)
        try:
            value, predicate = self.kv.get(self.partition, key("policies", policy_id))
        except NotFound:
            raise NotFound(f"policy {policy_id!r} not found", what="policy") from None
        return pb.Policy.FromString(value), predicate

    def update_policy(
        self,
        policy_id: str,
        statements: Iterable[pb.Statement],
        description: str | None = None,
        read: tuple[pb.Policy, Predicate] | None = None,
    ) -> pb.Policy:
        """Replace an existing policy's statements (NotFound if there is none); its creation
        date and attachments stay, so whoever holds it gets the new statements. The description
        stays unless one is given.

        `read` is what read_policy returned when the caller made its decision (the grants
        checks): the write is conditional on that version, so a change since then (another
        edit adding a Deny, a delete) makes it fail with Aborted rather than be overwritten
        unchecked.
        """
        check_id("policy", policy_id)
        statements = list(statements)
        check_statements(statements)
        current, predicate = read if read is not None else self.read_policy(policy_id)
        if current.id != policy_id:
            raise InvalidArgument(f"read policy {current.id!r} for an update of {policy_id!r}")
        updated = pb.Policy(
            id=policy_id,
            creation_date=current.creation_date,
            description=current.description if description is None else description,
            statements=statements,
        )
        try:
            self.kv.set_if(self.partition, key("policies", policy_id), updated.SerializeToString(), predicate)
        except PredicateFailed:
            # Another update or a delete got in between: the caller decided on what it read.
            raise Aborted(f"policy {policy_id!r} changed meanwhile; read it again and retry") from None
        return updated

    def policy_principals(self, policy_id: str) -> tuple[list[str], list[str]]:
        """The users and the groups the policy is attached to (directly), each sorted."""
        check_id("policy", policy_id)
        found: dict[bytes, list[str]] = {keys.USER_POLICIES: [], keys.GROUP_POLICIES: []}
        for under, ids in found.items():
            for _, v in self._scan(under):
                attachment = pb.Attachment.FromString(v)
                if attachment.policy_id == policy_id:
                    ids.append(attachment.principal_id)
        return sorted(found[keys.USER_POLICIES]), sorted(found[keys.GROUP_POLICIES])

    def get_policy(self, policy_id: str) -> pb.Policy:
        return self._get(key("policies", check_id("policy", policy_id)), pb.Policy, f"policy {policy_id!r}")

    def list_policies(self, after: str = "", amount: int = 0) -> tuple[list[pb.Policy], bool]:
        return self._entity_page(keys.POLICIES, pb.Policy, after, amount)

    def delete_policy(self, policy_id: str) -> None:
        self._delete_entity("policies", policy_id, self.get_policy, self._remove_policy_relations)

    def _remove_policy_relations(self, policy_id: str) -> None:
        for under in (keys.USER_POLICIES, keys.GROUP_POLICIES):
            self._delete_all(k for k, v in self._scan(under) if pb.Attachment.FromString(v).policy_id == policy_id)

    def _attachment_key(self, policy_id: str, user_id: str, group_id: str) -> tuple[bytes, bytes, str]:
        check_id("policy", policy_id)
        if bool(user_id) == bool(group_id):
            raise InvalidArgument("name exactly one of user_id and group_id")
        if user_id:
            check_id("user", user_id)
            return key("user_policies", user_id, policy_id), key("users", user_id), f"user {user_id!r}"
        return (
            key("group_policies", check_id("group", group_id), policy_id),
            key("groups", group_id),
            f"group {group_id!r}",
        )

    def attach_policy(self, policy_id: str, user_id: str = "", group_id: str = "") -> None:
        attachment_key, principal_key, what = self._attachment_key(policy_id, user_id, group_id)
        self._relate(
            attachment_key,
            pb.Attachment(principal_id=user_id or group_id, policy_id=policy_id),
            [(principal_key, what), (key("policies", policy_id), f"policy {policy_id!r}")],
        )

    def detach_policy(self, policy_id: str, user_id: str = "", group_id: str = "") -> None:
        attachment_key, _, what = self._attachment_key(policy_id, user_id, group_id)
        self._unrelate(attachment_key, f"policy {policy_id!r} attached to {what}")

    def _policy_ids(self, under: bytes) -> list[str]:
        return [last_part(k) for k, _ in self._scan(under)]

    def group_policies(self, group_id: str) -> list[pb.Policy]:
        """Every policy attached to the group (what each member gains through it)."""
        ids = self._policy_ids(prefix("group_policies", check_id("group", group_id)))
        return self._records(ids, "policies", pb.Policy)

    def effective_policy_ids(self, user_id: str) -> list[str]:
        ids = set(self._policy_ids(prefix("user_policies", check_id("user", user_id))))
        for group_id in self.group_ids_of(user_id):
            ids.update(self._policy_ids(prefix("group_policies", group_id)))
        return sorted(ids)

    def effective_policies(self, user_id: str) -> list[pb.Policy]:
        """Every policy that applies to the user: attached directly or through a group."""
        return self._records(self.effective_policy_ids(user_id), "policies", pb.Policy)

    def list_user_policies(
        self, user_id: str, effective: bool = False, after: str = "", amount: int = 0
    ) -> tuple[list[pb.Policy], bool]:
        self.get_user(user_id)
        if not effective:
            return self._related_page(prefix("user_policies", user_id), after, amount, "policies", pb.Policy)
        ids, more = take_page((p for p in self.effective_policy_ids(user_id) if p > after), amount)
        return self._records(ids, "policies", pb.Policy), more

    def list_group_policies(self, group_id: str, after: str = "", amount: int = 0) -> tuple[list[pb.Policy], bool]:
        self.get_group(group_id)
        return self._related_page(prefix("group_policies", group_id), after, amount, "policies", pb.Policy)

    # --- credentials --------------------------------------------------------------------

    def create_credentials(self, user_id: str) -> IssuedCredential:
        self.get_user(user_id)
        access_key_id = new_access_key_id()
        secret = new_secret()
        credential = pb.Credential(
            access_key_id=access_key_id,
            user_id=user_id,
            creation_date=_now(),
            encrypted_secret=self.box.seal(access_key_id, secret),
        )
        # Index first: every credential record is then reachable from its user for deletion.
        index = pb.UserCredential(user_id=user_id, access_key_id=access_key_id)
        self.kv.set(self.partition, key("user_credentials", user_id, access_key_id), index.SerializeToString())
        self._create(key("credentials", access_key_id), credential, f"access key {access_key_id}")
        if not self._exists(key("users", user_id)):
            self._delete_credential(user_id, access_key_id)
            raise NotFound(f"user {user_id!r} not found", what="user")
        return IssuedCredential(_without_secret(credential), secret)

    def list_credentials(self, user_id: str, after: str = "", amount: int = 0) -> tuple[list[pb.Credential], bool]:
        self.get_user(user_id)
        page, more = self._related_page(
            prefix("user_credentials", user_id), after, amount, "credentials", pb.Credential
        )
        # Never hand out the sealed secret, not even encrypted.
        return [_without_secret(c) for c in page], more

    def delete_credentials(self, user_id: str, access_key_id: str) -> None:
        check_id("user", user_id)
        credential = self._credential(access_key_id)
        if credential.user_id != user_id:
            raise NotFound(f"access key {access_key_id} of user {user_id!r} not found", what="credential")
        self._delete_credential(user_id, access_key_id)

    def _delete_credential(self, user_id: str, access_key_id: str) -> None:
        # Created and re-sealed (rekey) by compare-and-set; its index entry is written plainly.
        delete_current(self.kv, self.partition, key("credentials", access_key_id))
        self.kv.delete(self.partition, key("user_credentials", user_id, access_key_id))

    def _credential(self, access_key_id: str) -> pb.Credential:
        check_access_key_id(access_key_id)
        return self._get(key("credentials", access_key_id), pb.Credential, f"access key {access_key_id}")

    def key_owner(self, access_key_id: str) -> KeyOwner:
        """Who holds an access key, and its secret (decrypted) for checking a signature."""
        credential = self._credential(access_key_id)
        if not self._exists(key("users", credential.user_id)):
            raise NotFound(f"access key {access_key_id} not found", what="credential")
        return KeyOwner(credential.user_id, self.box.open(access_key_id, credential.encrypted_secret))

    # --- external principals ------------------------------------------------------------
    # A principal's record and its user's index entry are written and deleted together (one
    # atomic KV batch, conditional on the record), so neither outlives the other.

    def create_external_principal(
        self, user_id: str, principal_id: str, settings: Iterable[pb.PrincipalSettings] = ()
    ) -> pb.ExternalPrincipal:
        """Link a principal to a user: AlreadyExists if it is linked to any user already."""
        check_id("user", user_id)
        check_principal_id(principal_id)
        settings = list(settings)
        check_settings(settings)
        self.get_user(user_id)
        linked = sum(1 for _ in self._scan(prefix("user_external_principals", user_id)))
        if linked >= MAX_PRINCIPALS_PER_USER:
            raise FailedPrecondition(f"user {user_id!r} has {linked} external principals, the most one user may have")
        record = pb.ExternalPrincipal(id=principal_id, user_id=user_id, creation_date=_now(), settings=settings)
        index = pb.UserExternalPrincipal(user_id=user_id, principal_id=principal_id)
        record_key = key("external_principals", principal_id)
        puts = [
            (record_key, record.SerializeToString()),
            (key("user_external_principals", user_id, principal_id), index.SerializeToString()),
        ]
        try:
            self.kv.apply(self.partition, puts, condition=(record_key, None))
        except PredicateFailed:
            raise AlreadyExists(f"external principal {principal_id!r} is already linked to a user") from None
        if not self._exists(key("users", user_id)):
            # The user was deleted meanwhile, after its sweep: nothing may stay linked to its id.
            self._unlink_principal(user_id, principal_id)
            raise NotFound(f"user {user_id!r} not found", what="user")
        return record

    def get_external_principal(self, principal_id: str) -> pb.ExternalPrincipal:
        check_principal_id(principal_id)
        record = self._get(
            key("external_principals", principal_id), pb.ExternalPrincipal, f"external principal {principal_id!r}"
        )
        if not self._exists(key("users", record.user_id)):
            raise NotFound(f"external principal {principal_id!r} not found")
        return record

    def delete_external_principal(self, user_id: str, principal_id: str) -> None:
        check_id("user", user_id)
        check_principal_id(principal_id)
        if not self._unlink_principal(user_id, principal_id):
            raise NotFound(f"external principal {principal_id!r} of user {user_id!r} not found")

    def list_external_principals(
        self, user_id: str, after: str = "", amount: int = 0
    ) -> tuple[list[pb.ExternalPrincipal], bool]:
        self.get_user(user_id)
        entries = keys.scan_after(self.kv, self.partition, prefix("user_external_principals", user_id), after)
        ids, more = take_page((pb.UserExternalPrincipal.FromString(e.value).principal_id for e in entries), amount)
        found = self._records(ids, "external_principals", pb.ExternalPrincipal)
        return [p for p in found if p.user_id == user_id], more

    def _unlink_principal(self, user_id: str, principal_id: str) -> bool:
        """Remove the principal's link to this user (never to another); whether there was one."""
        record_key = key("external_principals", principal_id)
        index_key = key("user_external_principals", user_id, principal_id)
        for _ in range(_CAS_ATTEMPTS):
            try:
                value, predicate = self.kv.get(self.partition, record_key)
            except NotFound:
                self.kv.delete(self.partition, index_key)
                return False
            if pb.ExternalPrincipal.FromString(value).user_id != user_id:
                self.kv.delete(self.partition, index_key)  # a stale entry, if any: the link is another's
                return False
            try:
                self.kv.apply(self.partition, [], [record_key, index_key], condition=(record_key, predicate))
            except PredicateFailed:
                continue
            return True
        raise Aborted(f"external principal {principal_id!r} kept changing; try again")

    # --- setup --------------------------------------------------------------------------

    def setup_record(self) -> pb.SetupRecord | None:
        """The record of a completed setup; None before, and while the first admin is only
        claimed (create_first_admin)."""
        claim = self._setup_claim()
        return claim[0] if claim is not None and claim[0].HasField("completed") else None

    def _setup_claim(self) -> tuple[pb.SetupRecord, Predicate] | None:
        try:
            value, predicate = self.kv.get(self.partition, keys.SETUP)
        except NotFound:
            return None
        return pb.SetupRecord.FromString(value), predicate

    def mark_setup_done(self, admin_user_id: str) -> None:
        record = pb.SetupRecord(admin_user_id=admin_user_id, completed=_now())
        self._create(keys.SETUP, record, "setup record")

    def services_setup_record(self) -> pb.SetupRecord | None:
        """Present once a setup with the admin deferred has issued the service users' keys."""
        try:
            return self._get(keys.SERVICES_SETUP, pb.SetupRecord, "services setup record")
        except NotFound:
            return None

    def mark_services_setup_done(self) -> None:
        self._create(keys.SERVICES_SETUP, pb.SetupRecord(completed=_now()), "services setup record")

    def create_first_admin(self, user_id: str, admins_group: str) -> tuple[pb.User, IssuedCredential]:
        """The first admin, once (AlreadyExists after setup, to the loser of a race, and while
        another setup is under way).

        The user is created first (a taken id fails here, before anything is claimed), then the
        setup record is written as a *claim* naming it (no `completed`) by conditional write:
        the one call that writes it goes on to add its user to the admins group and issue the
        key, and completes the record by a conditional write over its claim; any other deletes
        the user it created. So two racing setups never make two admins, whatever their user ids.

        A setup that died after its claim (auth stopped before the key was issued, or before
        it was shown) leaves setup not done, and retryable once the claim is CLAIM_SECONDS old
        (abandoned): a call naming the claimed user then finishes it, with a new key (keys
        issued by the attempt that died, never shown, are removed); a call naming another user
        takes the claim over (the claimed user, who never had a key shown, is removed). A
        younger claim is a setup under way, whatever name a call gives: no one but its caller
        may finish it, as the setup request carries nothing but a user name, so a racer naming
        the same user can neither take its key nor remove it. Completion is conditional on the
        claim as read, so of two calls finishing one abandoned claim, exactly one answers its
        key; the other removes its own key and answers AlreadyExists."""
        claim = self._setup_claim()
        if claim is not None:
            record, predicate = claim
            if record.HasField("completed"):
                raise AlreadyExists("setup has completed already")
            if not self._claim_abandoned(record):
                raise AlreadyExists(f"setup of admin {record.admin_user_id!r} is under way")
            if record.admin_user_id == user_id:
                return self._finish_first_admin(user_id, admins_group, predicate)
        self.create_user(user_id, "administrator created by setup")
        pending = pb.SetupRecord(admin_user_id=user_id).SerializeToString()
        try:
            self.kv.set_if(self.partition, keys.SETUP, pending, None if claim is None else claim[1])
        except PredicateFailed:
            self.delete_user(user_id)
            raise AlreadyExists("setup has completed already") from None
        if claim is not None:
            # The abandoned claim's user: never shown a key, and no longer the admin to be.
            with contextlib.suppress(NotFound):
                self.delete_user(claim[0].admin_user_id)
        got = self._setup_claim()
        if got is None or got[0].admin_user_id != user_id or got[0].HasField("completed"):
            raise AlreadyExists("setup has completed already")
        return self._finish_first_admin(user_id, admins_group, got[1])

    def _claim_abandoned(self, record: pb.SetupRecord) -> bool:
        """A claim whose setup died: its user (created just before the claim) gone, or created
        CLAIM_SECONDS ago or more; a setup finishes in milliseconds."""
        try:
            created = self.get_user(record.admin_user_id).creation_date.ToNanoseconds() / 1e9
        except NotFound:
            return True
        return time.time() - created >= CLAIM_SECONDS

    def _finish_first_admin(
        self, user_id: str, admins_group: str, claim: Predicate
    ) -> tuple[pb.User, IssuedCredential]:
        """Add the claimed user to the admins group, issue its key and complete the setup record
        over the claim as read (claim: its predicate)."""
        user = self.get_user(user_id)
        self.add_member(admins_group, user_id)
        issued = self.create_credentials(user_id)
        done = pb.SetupRecord(admin_user_id=user_id, completed=_now())
        try:
            self.kv.set_if(self.partition, keys.SETUP, done.SerializeToString(), claim)
        except PredicateFailed:
            self._delete_credential(user_id, issued.credential.access_key_id)
            raise AlreadyExists("setup has completed already") from None
        # Keys an earlier attempt issued died unseen: no one holds them, and none should stand.
        after = ""
        while True:
            page, more = self.list_credentials(user_id, after)
            for credential in page:
                if credential.access_key_id != issued.credential.access_key_id:
                    self._delete_credential(user_id, credential.access_key_id)
            if not more or not page:
                break
            after = page[-1].access_key_id
        return user, issued
