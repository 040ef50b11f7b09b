"""The check of the keys a merge, revert, cherry-pick, reset or import changes, for the users it
is made by and for (silt/changed_keys.py decides, engine/core/key_changes.py computes the
changes).

Both the caller and the user it names are checked: the REST API calls as its own service user,
which holds every key, for a user whose policies may name keys. A user holding every key of
the repository (no object Deny about it) costs two cached key-scope lookups and no per-key
work; only when some user is narrowed is a check built at all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import grpc

from silt.changed_keys import ChangeCheck, ChangeScope, narrowed
from silt.iam_actions import DELETE_OBJECT, READ_OBJECT, WRITE_OBJECT
from silt.key_scope import KeyScope
from silt.rpc.interceptor import AuthInterceptor

# (user, object action, repository) -> the keys of repository the user may do the action on.
KeyScopeFn = Callable[[str, str, str], KeyScope]


def key_scopes(interceptors: Sequence[grpc.ServerInterceptor]) -> KeyScopeFn | None:
    """Auth's key scopes, cached, as the auth interceptor asks them; None served without auth
    (embedded use, tests), where nothing is checked per key, as nothing is per repository."""
    auth = next((i for i in interceptors if isinstance(i, AuthInterceptor)), None)
    return None if auth is None else auth.authority.key_scope


class KeyChecks:
    def __init__(self, scopes: KeyScopeFn | None) -> None:
        self._scopes = scopes

    def for_users(self, repository: str, users: Iterable[str]) -> ChangeCheck | None:
        """The check for users (duplicates counted once) on repository; None when every one of
        them holds every key."""
        scope_of = self._scopes
        if scope_of is None:
            return None
        scopes = [
            ChangeScope(user, scope_of(user, WRITE_OBJECT, repository), scope_of(user, DELETE_OBJECT, repository))
            for user in dict.fromkeys(users)
        ]

        def may_read(user: str, key: str) -> bool:
            return scope_of(user, READ_OBJECT, repository).allows(key)

        return narrowed(repository, scopes, may_read)
