"""What a hook's `lakefs` calls may read: what the user who fired the event may read.

lakeFS's Lua client calls lakeFS's API as the user who triggered the action, so a hook sees of
the repository what that user would see through the API. Here the calls are answered by the
engine (reads.ScopedCalls), which asks auth, through the HookAuthority the graveler service
hands it, for that user's key scope on the repository (silt/key_scope.py, the scope the edges
and graveler's per-key checks use) from the address their request came from, and answers as
the REST API answers that user:

* a key the user may not read (get, stat): 403, whether the key exists or not (no oracle);
* an object listing: 403 when no key of the repository may be read; otherwise the keys the
  user may not read are left out (common prefixes shown where a readable key may lie below);
* a diff (of refs, of a branch's uncommitted changes): 403 without ReadRepo; otherwise changes
  to keys the user may not read are left out;
* create_tag: 403 without WriteRepo on the repository.

An event that names no user (HookRecord.user is None) reads nothing: every call is 403. Served
without auth (embedded use, tests) there is no authority and nothing is checked per key, as
nowhere else in graveler is.

The scope is asked once per hook, at its first call, and kept for the hook (auth's answers
are cached for auth.cache_ttl_seconds anyway).
"""

from __future__ import annotations

from typing import Protocol

from engine.core.hooks import EventUser
from silt.errors import PermissionDenied
from silt.iam_actions import READ_OBJECT, READ_REPO, WRITE_REPO
from silt.key_scope import KeyScope, whole


class HookAuthority(Protocol):
    """Auth's answers for a named user, as graveler's service has them (its cached authority)."""

    def key_scope(self, user_id: str, action: str, repository: str, branch: str = "", source_ip: str = "") -> KeyScope:
        """Which keys of repository user_id may do the object action on, for a request from
        source_ip ("" unknown)."""
        ...

    def allowed(self, user_id: str, action: str, resource: str, source_ip: str = "") -> bool:
        """Whether user_id holds action on resource, for a request from source_ip."""
        ...


NO_USER = "no user is known for the event that ran this hook: a hook reads nothing then"


class ReadAccess:
    """One hook run's reads of one repository, as `user` may make them."""

    def __init__(self, authority: HookAuthority | None, user: EventUser | None, repository: str) -> None:
        self._authority = authority
        self._user = user
        self._repository = repository
        self._scope: KeyScope | None = None

    @property
    def user_id(self) -> str:
        return self._user.user_id if self._user is not None else ""

    def _who(self) -> EventUser:
        if self._user is None or not self._user.user_id:
            raise PermissionDenied(NO_USER)
        return self._user

    def scope(self) -> KeyScope:
        """The keys the user may read (every key without an authority); PermissionDenied for a
        hook of an event with no user."""
        if self._authority is None:
            return whole(self._repository)
        if self._scope is None:
            user = self._who()
            self._scope = self._authority.key_scope(
                user.user_id, READ_OBJECT, self._repository, source_ip=user.source_ip
            )
        return self._scope

    def check_key(self, key: str) -> None:
        """PermissionDenied unless the user may read key (a get or a stat)."""
        if not self.scope().allows(key):
            raise PermissionDenied(f"user {self.user_id} may not {READ_OBJECT} on {self._repository}/{key}")

    def listing_scope(self) -> KeyScope:
        """The scope an object listing is filtered by; PermissionDenied when it holds no key."""
        scope = self.scope()
        if scope.nothing:
            raise PermissionDenied(f"user {self.user_id} may not {READ_OBJECT} on {self._repository}")
        return scope

    def diff_scope(self) -> KeyScope:
        """The scope a diff is filtered by; PermissionDenied without ReadRepo (the repository's
        action: every key but those an object Deny takes)."""
        scope = self.scope()
        if not scope.every_key:
            raise PermissionDenied(f"user {self.user_id} may not {READ_REPO} on {self._repository}")
        return scope

    def check_write_repo(self) -> None:
        """PermissionDenied unless the user holds WriteRepo (what the REST API's tag creation asks)."""
        if self._authority is None:
            return
        user = self._who()
        if not self._authority.allowed(user.user_id, WRITE_REPO, self._repository, user.source_ip):
            raise PermissionDenied(f"user {user.user_id} may not {WRITE_REPO} on {self._repository}")
